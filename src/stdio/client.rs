//! The stdio client's requests, made as a conforming Streamable HTTP
//! client would make them and served by the front's own router in the
//! process (no socket): so every check, era rule, session and route is
//! the one HTTP clients meet. Answers become lines: a JSON body is one, an
//! event stream's events are one each, as they come.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::value::RawValue;

use super::lines::Out;
use crate::jsonrpc;
use crate::upstream::event_stream;

/// The largest JSON answer read whole (an event stream's events have
/// their own bound, `event_stream`).
const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// The session a 2025 revision's `initialize` opened.
#[derive(Clone)]
pub(super) struct Session {
    pub(super) id: HeaderValue,
    pub(super) version: HeaderValue,
}

/// Requests to one namespace's endpoint.
#[derive(Clone)]
pub(super) struct Client {
    router: axum::Router,
    path: axum::http::Uri,
}

impl Client {
    pub(super) fn new(router: axum::Router, path: axum::http::Uri) -> Client {
        Client { router, path }
    }

    /// A POST of one line: with `modern`'s headers for a 2026-07-28
    /// request, else the session's (if any).
    pub(super) async fn post(
        &self,
        line: bytes::Bytes,
        modern: Option<HeaderMap>,
        session: Option<&Session>,
    ) -> Response {
        let mut headers = modern.unwrap_or_default();
        if !headers.contains_key("mcp-protocol-version")
            && let Some(s) = session
        {
            headers.insert("mcp-session-id", s.id.clone());
            headers.insert("mcp-protocol-version", s.version.clone());
        }
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        self.send(Method::POST, headers, Body::from(line)).await
    }

    /// The session's GET stream: what its backends send unasked.
    pub(super) async fn listen(&self, session: &Session) -> Response {
        let mut headers = session_headers(session);
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        self.send(Method::GET, headers, Body::empty()).await
    }

    /// Ends the session (and so its per-session backend sessions).
    pub(super) async fn delete(&self, session: &Session) -> StatusCode {
        self.send(Method::DELETE, session_headers(session), Body::empty())
            .await
            .status()
    }

    async fn send(&self, method: Method, mut headers: HeaderMap, body: Body) -> Response {
        // Loopback, as the policy `stdio` builds demands.
        headers.insert(header::HOST, HeaderValue::from_static("localhost"));
        let mut req = Request::new(body);
        *req.method_mut() = method;
        *req.uri_mut() = self.path.clone();
        *req.headers_mut() = headers;
        match tower::ServiceExt::oneshot(self.router.clone(), req).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

fn session_headers(session: &Session) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("mcp-session-id", session.id.clone());
    headers.insert("mcp-protocol-version", session.version.clone());
    headers
}

/// What a relayed answer held.
#[derive(Default)]
pub(super) struct Relayed {
    /// The JSON body, when the answer was one (an initialize result).
    pub(super) body: Option<bytes::Bytes>,
    /// The client went away while it was written.
    pub(super) client_gone: bool,
}

/// Writes an answer to `out` as lines. `request` is the id of the request
/// it answers: a refusal names no id (it refuses the HTTP request), so the
/// line written for it takes the request's, and an answer that carries no
/// response at all (a failed stream) is answered with an error, so no
/// request is left waiting. Without `request`, a refusal is written only
/// when `answer_refusals` (a line that was no message at all).
pub(super) async fn relay(
    response: Response,
    out: &Out,
    request: Option<&RawValue>,
    answer_refusals: bool,
) -> Relayed {
    let status = response.status();
    let streamed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body = response.into_body();
    let mut relayed = Relayed::default();
    if streamed {
        let mut answered = false;
        let mut events = std::pin::pin!(event_stream::events(body.into_data_stream()));
        while let Some(event) = events.next().await {
            let data = match event {
                Ok(e) if e.data.is_empty() => continue,
                Ok(e) => e.data,
                Err(e) => {
                    tracing::warn!(error = %e, "an answer's stream failed");
                    break;
                }
            };
            answered |= request.is_some_and(|id| answers(data.as_bytes(), id));
            if !out.send(data).await {
                relayed.client_gone = true;
                return relayed;
            }
        }
        if let Some(id) = request.filter(|_| !answered) {
            let line = jsonrpc::error_response(
                Some(id),
                jsonrpc::INTERNAL_ERROR,
                "the gateway's answer ended before the response",
            );
            relayed.client_gone = !out.send(line).await;
        }
        return relayed;
    }
    let bytes = match axum::body::to_bytes(body, MAX_ANSWER).await {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "an answer could not be read");
            bytes::Bytes::new()
        }
    };
    let line = match (status.is_success(), request) {
        (true, _) if bytes.is_empty() => None,
        (true, _) => Some(bytes.to_vec()),
        (false, Some(id)) => Some(refusal(&bytes, status, id)),
        (false, None) => {
            tracing::warn!(%status, body = %String::from_utf8_lossy(&bytes), "a message was refused");
            answer_refusals.then(|| bytes.to_vec())
        }
    };
    if let Some(line) = line {
        relayed.client_gone = !out.send(line).await;
    }
    if status.is_success() {
        relayed.body = Some(bytes);
    }
    relayed
}

/// Whether `data` is the response to the request `id`.
fn answers(data: &[u8], id: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
        method: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Envelope>(data)
        .is_ok_and(|e| e.method.is_none() && e.id.is_some_and(|i| i.get() == id.get()))
}

/// A refused request's line: the refusal's JSON-RPC error under the
/// request's id, or one made from the status when the body has none.
fn refusal(body: &[u8], status: StatusCode, id: &RawValue) -> Vec<u8> {
    #[derive(serde::Deserialize)]
    struct Refusal {
        error: Box<RawValue>,
    }
    match serde_json::from_slice::<Refusal>(body) {
        Ok(r) => jsonrpc::response(id, &jsonrpc::Outcome::Error(r.error)).into_bytes(),
        Err(_) => jsonrpc::error_response(
            Some(id),
            jsonrpc::INTERNAL_ERROR,
            &format!("the gateway refused the request ({status})"),
        )
        .into_bytes(),
    }
}
