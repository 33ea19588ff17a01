//! The stdio client's requests, made as a conforming Streamable HTTP
//! client would make them and served by the front's own router in the
//! process (no socket): so every check, era rule, session and route is
//! the one HTTP clients meet. Answers become lines: a JSON body is one, an
//! event stream's events are one each, as they come.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::response::Response;

use std::sync::Arc;

use crate::front::{Front, MAX_ANSWER};
use crate::vocab::Principal;

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
    front: Arc<Front>,
    namespace: Arc<str>,
}

impl Client {
    /// `metrics_path`: the router's, unused here but part of it.
    pub(super) fn new(
        front: Arc<Front>,
        namespace: &str,
        path: axum::http::Uri,
        metrics_path: &str,
    ) -> Client {
        let router = crate::front::router(front.clone(), metrics_path);
        Client {
            router,
            path,
            front,
            namespace: namespace.into(),
        }
    }

    /// A POST of one line: a 2026-07-28 request with the headers its
    /// revision requires, anything else with the session's (if any).
    pub(super) async fn post(&self, line: bytes::Bytes, session: Option<&Session>) -> Response {
        let modern = crate::front::client_headers(
            &self.front,
            &self.namespace,
            &Principal::Anonymous,
            &line,
        )
        .await;
        let mut headers = match (modern, session) {
            (Some(modern), _) => modern,
            (None, Some(s)) => session_headers(s),
            (None, None) => HeaderMap::new(),
        };
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

/// A successful JSON answer's body, read whole; any other answer as it
/// came (for `relay`).
pub(super) async fn json_body(response: Response) -> Result<bytes::Bytes, Response> {
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(json && response.status().is_success()) {
        return Err(response);
    }
    Ok(axum::body::to_bytes(response.into_body(), MAX_ANSWER)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "an answer could not be read");
            bytes::Bytes::new()
        }))
}
