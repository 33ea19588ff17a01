//! One of the front's answers, as the messages a client that holds one
//! channel is sent one by one (`sluice stdio`'s lines, the HTTP+SSE
//! transport's events): a JSON body is one, an event stream's events are
//! one each, as they come; a refusal becomes the JSON-RPC error `/mcp`
//! answered, under the id of the request it refused.

use axum::http::{StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::value::RawValue;

use super::event_pieces::EventPieces;
use super::message::Message;
use crate::jsonrpc::{self, Skim};

/// The largest answer read (a JSON body whole, an event of a stream).
pub(crate) const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// Where the messages go, in order.
pub(crate) trait Sink {
    /// Queues one message; false once the client is gone.
    fn send(&self, message: Message) -> impl Future<Output = bool> + Send;
}

/// Sends an answer to `out` message by message, each in the pieces the
/// answer's body came in: a large result, one piece as it lies, is never
/// copied, and the share of the body budget it holds goes with it until
/// it has been written. `request` is the id of the request it answers: a
/// refusal names no id (it refuses the HTTP request), so the line written
/// for it takes the request's, and an answer that carries no response at
/// all (a failed stream) is answered with an error, so no request is left
/// waiting. Without `request`, a refusal is written only when
/// `answer_refusals` (a line that was no message at all). Returns once
/// the answer has ended (or the client has gone).
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
    let mut frames = response.into_body().into_data_stream();
    if streamed {
        let mut answered = false;
        let mut events = EventPieces::new(MAX_ANSWER);
        let mut ready = Vec::new();
        loop {
            let frame = frames.next().await;
            let last = frame.is_none();
            let ended = match frame {
                Some(Ok(frame)) => events.feed(frame, &mut ready).map_err(|e| e.to_string()),
                Some(Err(e)) => Err(e.to_string()),
                None => {
                    std::mem::take(&mut events).end(&mut ready);
                    Ok(())
                }
            };
            for message in ready.drain(..).filter(|m| !m.is_empty()) {
                answered |= request.is_some_and(|id| answers(&message, id));
                if !out.send(message).await {
                    return;
                }
            }
            if let Err(e) = ended {
                tracing::warn!(error = %e, "an answer's stream failed");
                break;
            }
            if last {
                break;
            }
        }
        if let Some(id) = request.filter(|_| !answered) {
            let line = jsonrpc::error_response(
                Some(id),
                jsonrpc::INTERNAL_ERROR,
                "the gateway's answer ended before the response",
            );
            out.send(Message::line(line)).await;
        }
        return;
    }
    let mut pieces = Vec::new();
    let mut length = 0;
    while let Some(frame) = frames.next().await {
        let why = match frame {
            Ok(frame) if length + frame.len() <= MAX_ANSWER => {
                length += frame.len();
                pieces.push(frame);
                continue;
            }
            Ok(_) => format!("longer than {MAX_ANSWER} bytes"),
            Err(e) => e.to_string(),
        };
        tracing::warn!(error = %why, "an answer could not be read");
        pieces.clear();
        break;
    }
    let message = Message::of_pieces(pieces);
    let message = match (status.is_success(), request) {
        (true, _) if message.is_empty() => None,
        (true, _) => Some(message),
        (false, Some(id)) => Some(Message::line(refusal(&message.to_vec(), status, id))),
        (false, None) => {
            tracing::warn!(%status, body = %String::from_utf8_lossy(&message.to_vec()), "a message was refused");
            answer_refusals.then_some(message)
        }
    };
    if let Some(message) = message {
        out.send(message).await;
    }
}

/// Whether `message` is the response to the request `id` (read in
/// passing, however large it is).
fn answers(message: &Message, id: &RawValue) -> bool {
    let mut skim = Skim::new();
    for piece in message.pieces() {
        skim.feed(piece);
    }
    let said = skim.finish();
    !said.method && said.id.as_deref() == Some(id.get())
}

/// A refused request's line: the refusal's JSON-RPC error under the
/// request's id, or one made from the status when the body has none.
fn refusal(body: &[u8], status: StatusCode, id: &RawValue) -> String {
    #[derive(serde::Deserialize)]
    struct Refusal {
        error: Box<RawValue>,
    }
    match serde_json::from_slice::<Refusal>(body) {
        Ok(r) => jsonrpc::response(id, &jsonrpc::Outcome::Error(r.error)),
        Err(_) => jsonrpc::error_response(
            Some(id),
            jsonrpc::INTERNAL_ERROR,
            &format!("the gateway refused the request ({status})"),
        ),
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
        let line: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(line["id"], 7);
        assert_eq!(line["error"]["code"], -32001);
        let line = refusal(b"", StatusCode::BAD_GATEWAY, &id);
        let line: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(line["error"]["code"], jsonrpc::INTERNAL_ERROR);
    }
}
