//! What a `POST /mcp` handler answers. The common answer, one JSON body,
//! stays its bytes and status: the connection (`conn`) writes its head
//! itself, so it costs no `HeaderMap` (two allocations and a hash per
//! header) and no boxed body. Anything else is an HTTP response, and so is
//! every answer that leaves through hyper (`IntoResponse`); a stream of
//! JSON-RPC lines is one made by `sse`.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{Stream, StreamExt};

use crate::vocab::SessionId;

pub(crate) enum Answer {
    Json(Json),
    Http(Response),
}

/// An `application/json` answer.
pub(crate) struct Json {
    pub(crate) status: StatusCode,
    pub(crate) body: String,
    /// `Mcp-Session-Id`, on the answer to `initialize`.
    pub(crate) session: Option<SessionId>,
}

impl Answer {
    /// A JSON-RPC line, answered with 200.
    pub(crate) fn json(body: String) -> Answer {
        Answer::Json(Json {
            status: StatusCode::OK,
            body,
            session: None,
        })
    }
}

impl From<Response> for Answer {
    fn from(response: Response) -> Answer {
        Answer::Http(response)
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        match self {
            Answer::Http(response) => response,
            Answer::Json(json) => {
                let mut response =
                    json_response(json.body, json.session.as_ref().map(SessionId::as_str));
                *response.status_mut() = json.status;
                response
            }
        }
    }
}

/// A JSON body as an HTTP response. Built by hand: axum's tuple form checks
/// the header value again and inserts a `text/plain` content type before
/// replacing it.
pub(super) fn json_response(body: String, session_id: Option<&str>) -> Response {
    let mut response = Response::new(Body::from(body));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, JSON);
    if let Some(id) = session_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        headers.insert(crate::protocol::SESSION_HEADER, id);
    }
    response
}

pub(super) const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// How often an idle SSE response writes a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// An SSE response of JSON-RPC lines, with keep-alives, unbuffered by proxies.
pub(super) fn sse(lines: impl Stream<Item = String> + Send + 'static) -> Response {
    let events =
        lines.map(|line| Ok::<_, Infallible>(Event::default().event("message").data(line)));
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
