//! An SSE response written from messages' pieces (`SseBody`): each
//! `message` event is its `Message`'s pieces between `event: message\ndata: `
//! and the blank line, a large result among them a frame of its own as it
//! lies (axum's `Sse` copies every event's data into a buffer of its own:
//! a large result was copied once more there, and once before into the
//! line it was given). Keep-alive comments after a quiet interval, as
//! axum's `KeepAlive` writes them.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use futures_util::Stream;
use hyper::body::Frame;
use tokio::time::{Instant, Sleep};

use super::message::Message;

/// One event of an SSE answer.
pub(crate) enum Event {
    /// `event: message`, a JSON-RPC message its data.
    Message(Message),
    /// `event: NAME`, its data one line.
    Named(&'static str, String),
    /// A comment line (`: TEXT`), which clients skip.
    Comment(&'static str),
}

impl From<Message> for Event {
    fn from(message: Message) -> Event {
        Event::Message(message)
    }
}

impl Event {
    /// The frames it is written as, last first.
    fn frames(self) -> Vec<Bytes> {
        let mut frames = match self {
            Event::Message(m) => m.written(b"event: message\ndata: ", b"\n\n"),
            Event::Named(name, data) => {
                vec![Bytes::from(format!("event: {name}\ndata: {data}\n\n"))]
            }
            Event::Comment(text) => vec![Bytes::from(format!(": {text}\n\n"))],
        };
        frames.reverse();
        frames
    }
}

/// An SSE response of `events` (`text/event-stream`, not cached, not
/// buffered by proxies), with a keep-alive comment after each `keep_alive`
/// without an event, if set.
pub(crate) fn response<S>(events: S, keep_alive: Option<Duration>) -> Response
where
    S: Stream<Item = Event> + Send + 'static,
{
    let quiet = keep_alive.map(|every| (Box::pin(tokio::time::sleep(every)), every));
    let body = SseBody {
        events: Box::pin(events),
        frames: Vec::new(),
        quiet,
    };
    let mut response = Response::new(Body::new(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// The body: the events' frames as each is polled.
struct SseBody<S> {
    events: Pin<Box<S>>,
    /// The frames of the event being written, last first.
    frames: Vec<Bytes>,
    /// When a keep-alive is due, and how long after the last event.
    quiet: Option<(Pin<Box<Sleep>>, Duration)>,
}

/// The keep-alive comment axum writes.
const KEEP_ALIVE: &[u8] = b":\n\n";

impl<S: Stream<Item = Event>> HttpBody for SseBody<S> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if let Some(frame) = this.frames.pop() {
            return Poll::Ready(Some(Ok(Frame::data(frame))));
        }
        match this.events.as_mut().poll_next(cx) {
            Poll::Ready(Some(event)) => {
                if let Some((sleep, every)) = &mut this.quiet {
                    sleep.as_mut().reset(Instant::now() + *every);
                }
                this.frames = event.frames();
                let first = this.frames.pop().unwrap_or_default();
                Poll::Ready(Some(Ok(Frame::data(first))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                let Some((sleep, every)) = &mut this.quiet else {
                    return Poll::Pending;
                };
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                sleep.as_mut().reset(Instant::now() + *every);
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(KEEP_ALIVE)))))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::{StreamExt, stream};

    use super::*;
    use crate::jsonrpc::{self, Outcome};

    #[tokio::test(start_paused = true)]
    async fn events_are_written_as_axum_writes_them_and_a_result_apart() {
        let id = jsonrpc::raw(&1);
        let big = format!("\"{}\"", "z".repeat(super::super::message::WRITTEN_APART));
        let big = serde_json::value::RawValue::from_string(big).unwrap();
        let events = stream::iter([
            Event::Named("endpoint", "/messages?sessionId=a".into()),
            Event::Message(Message::line("{\"a\":\n1}".into())),
            Event::Comment("keep-alive"),
            Event::Message(Message::response(&id, Outcome::Result(big.into()))),
        ])
        .chain(stream::pending());
        let body = response(events, Some(Duration::from_secs(15))).into_body();
        let mut body = std::pin::pin!(body);
        let mut frames = Vec::new();
        // Four events, the large one in three frames, then a keep-alive.
        for _ in 0..7 {
            let frame = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await;
            frames.push(frame.unwrap().unwrap().into_data().unwrap());
        }
        let text: Vec<String> = frames
            .iter()
            .map(|f| String::from_utf8_lossy(f).chars().take(60).collect())
            .collect();
        assert_eq!(text[0], "event: endpoint\ndata: /messages?sessionId=a\n\n");
        assert_eq!(text[1], "event: message\ndata: {\"a\": 1}\n\n");
        assert_eq!(text[2], ": keep-alive\n\n");
        assert_eq!(
            text[3],
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":"
        );
        assert_eq!(frames[4].len(), super::super::message::WRITTEN_APART + 2);
        assert_eq!(text[5], "}\n\n");
        assert_eq!(text[6], ":\n\n");
    }
}
