//! One of the front's answers, as the messages a client that holds one
//! channel is sent one by one (`sluice stdio`'s lines, the HTTP+SSE
//! transport's events): a JSON body is one, an event stream's events are
//! one each, as they come; a refusal becomes the JSON-RPC error `/mcp`
//! answered, under the id of the request it refused.

use axum::http::{StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::value::RawValue;

use crate::jsonrpc;
use crate::upstream::event_stream;

/// The largest JSON answer read whole (an event stream's events have
/// their own bound, `event_stream`).
pub(crate) const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// Where the messages go, in order.
pub(crate) trait Sink {
    /// Queues one message; false once the client is gone.
    fn send(&self, message: Vec<u8>) -> impl Future<Output = bool> + Send;
}

/// Sends an answer to `out` message by message. `request` is the id of the request
/// it answers: a refusal names no id (it refuses the HTTP request), so the
/// line written for it takes the request's, and an answer that carries no
/// response at all (a failed stream) is answered with an error, so no
/// request is left waiting. Without `request`, a refusal is written only
/// when `answer_refusals` (a line that was no message at all). Returns
/// once the answer has ended (or the client has gone).
pub(crate) async fn relay(
    response: Response,
    out: &impl Sink,
    request: Option<&RawValue>,
    answer_refusals: bool,
) {
    let status = response.status();
    let streamed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body = response.into_body();
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
            if !out.send(data.into_bytes()).await {
                return;
            }
        }
        if let Some(id) = request.filter(|_| !answered) {
            let line = jsonrpc::error_response(
                Some(id),
                jsonrpc::INTERNAL_ERROR,
                "the gateway's answer ended before the response",
            );
            out.send(line.into_bytes()).await;
        }
        return;
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
        out.send(line).await;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_keeps_its_error_under_the_request_id() {
        let id = jsonrpc::raw(&serde_json::json!(7));
        let body =
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}"#;
        let line = refusal(body, StatusCode::NOT_FOUND, &id);
        let line: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(line["id"], 7);
        assert_eq!(line["error"]["code"], -32001);
        let line = refusal(b"", StatusCode::BAD_GATEWAY, &id);
        let line: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(line["error"]["code"], jsonrpc::INTERNAL_ERROR);
    }
}
