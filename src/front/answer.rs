//! What a `POST /mcp` handler answers. The common answer, one JSON body,
//! stays its bytes and status: the connection (`conn`) writes its head
//! itself, so it costs no `HeaderMap` (two allocations and a hash per
//! header) and no boxed body. Anything else is an HTTP response, and so is
//! every answer that leaves through hyper (`IntoResponse`); a stream of
//! JSON-RPC lines is one made by `sse`.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::stream::{Stream, StreamExt};
use hyper::body::{Frame, SizeHint};

use super::message::Message;
use super::sse_body::{self, Event};
use crate::jsonrpc::Framed;
use crate::vocab::SessionId;

pub(crate) enum Answer {
    Json(Json),
    Http(Response),
}

/// An `application/json` answer.
pub(crate) struct Json {
    pub(crate) status: StatusCode,
    pub(crate) body: JsonBody,
    /// `Mcp-Session-Id`, on the answer to `initialize`.
    pub(crate) session: Option<SessionId>,
}

/// A JSON answer's bytes: one line, or a large result as it lies between
/// the head and tail made for it (`jsonrpc::Framed`), so that it is never
/// copied into a line; it holds its share of the body budget until the
/// answer has been written.
pub(crate) enum JsonBody {
    Line(String),
    Framed(Framed),
}

impl JsonBody {
    pub(crate) fn len(&self) -> usize {
        match self {
            JsonBody::Line(line) => line.len(),
            JsonBody::Framed(framed) => framed.len(),
        }
    }
}

impl From<String> for JsonBody {
    fn from(line: String) -> JsonBody {
        JsonBody::Line(line)
    }
}

impl From<Result<Framed, String>> for JsonBody {
    fn from(made: Result<Framed, String>) -> JsonBody {
        match made {
            Ok(framed) => JsonBody::Framed(framed),
            Err(line) => JsonBody::Line(line),
        }
    }
}

impl Answer {
    /// A JSON-RPC line, answered with 200.
    pub(crate) fn json(body: String) -> Answer {
        Answer::Json(Json {
            status: StatusCode::OK,
            body: body.into(),
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
pub(super) fn json_response(body: impl Into<JsonBody>, session_id: Option<&str>) -> Response {
    let body = match body.into() {
        JsonBody::Line(line) => Body::from(line),
        JsonBody::Framed(framed) => framed_body(framed),
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, JSON);
    if let Some(id) = session_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        headers.insert(crate::protocol::SESSION_HEADER, id);
    }
    response
}

/// A framed answer's pieces, none of them copied, under its length (so
/// hyper frames it by `Content-Length` as the own path does); the budget
/// its result holds goes with the result's piece, given back when that has
/// been sent (or dropped). On one line, as `sluice stdio`'s relay of it
/// must be (`Payload::into_line`).
fn framed_body(framed: Framed) -> Body {
    let length = framed.len() as u64;
    Body::new(Pieces {
        pieces: vec![
            Bytes::from_static(Framed::TAIL.as_bytes()),
            framed.result.into_line(),
            Bytes::from(framed.head),
        ],
        left: length,
    })
}

/// A body of pieces known in advance (in reverse order), of `left` bytes.
struct Pieces {
    pieces: Vec<Bytes>,
    left: u64,
}

impl HttpBody for Pieces {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let piece = self.pieces.pop();
        if let Some(piece) = &piece {
            self.left -= piece.len() as u64;
        }
        std::task::Poll::Ready(piece.map(|piece| Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.pieces.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

pub(super) const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// How often an idle SSE response writes a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// An SSE response of JSON-RPC messages, with keep-alives, unbuffered by
/// proxies; a large result among them written as it lies.
pub(super) fn sse(messages: impl Stream<Item = Message> + Send + 'static) -> Response {
    sse_body::response(messages.map(Event::Message), Some(KEEP_ALIVE))
}
