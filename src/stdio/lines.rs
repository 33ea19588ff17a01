//! The two pipes: stdin read as lines (each at most `max` bytes; a longer
//! one is dropped whole and reported), stdout written as lines by one task
//! (each message on one line, flushed, a large result among its pieces
//! written where it lies; a client that stops reading for `write_timeout`
//! counts as gone).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::front::Message;

/// Lines read ahead of the loop: the client meets backpressure past them.
const READ_AHEAD: usize = 16;
/// Lines waiting for stdout: producers wait past them.
const WRITE_QUEUE: usize = 64;

/// One line from the client.
pub(super) enum Line {
    Text(bytes::Bytes),
    /// A line longer than the limit, dropped unread (its length so far).
    TooLong(usize),
}

/// Reads `input` as lines into a bounded channel until end of file (or a
/// read error: the client is gone either way), then drops the sender.
pub(super) fn read(
    input: impl AsyncBufRead + Unpin + Send + 'static,
    max: usize,
) -> (mpsc::Receiver<Line>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(READ_AHEAD);
    let task = tokio::spawn(async move {
        let mut input = input;
        loop {
            match next_line(&mut input, max).await {
                Ok(Some(line)) => {
                    if tx.send(line).await.is_err() {
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    tracing::info!(error = %e, "stdin failed; the client is gone");
                    return;
                }
            }
        }
    });
    (rx, task)
}

/// The next line without its end, or None at end of file. Never holds
/// more than `max` bytes of it.
async fn next_line(
    input: &mut (impl AsyncBufRead + Unpin),
    max: usize,
) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut dropped = 0usize;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            // The last line may lack its end.
            return Ok(match (line.is_empty(), dropped) {
                (true, 0) => None,
                (_, 0) => Some(Line::Text(line.into())),
                (_, n) => Some(Line::TooLong(n)),
            });
        }
        let (take, done) = match memchr::memchr(b'\n', buf) {
            Some(at) => (at, true),
            None => (buf.len(), false),
        };
        if dropped == 0 && line.len() + take <= max {
            line.extend_from_slice(&buf[..take]);
        } else {
            dropped = dropped.max(line.len()) + take;
            line = Vec::new();
        }
        input.consume(take + usize::from(done));
        if done {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(Some(match dropped {
                0 => Line::Text(line.into()),
                n => Line::TooLong(n),
            }));
        }
    }
}

/// Where lines for the client go.
#[derive(Clone)]
pub(super) struct Out(mpsc::Sender<Message>);

impl crate::front::Sink for Out {
    fn send(&self, message: Message) -> impl Future<Output = bool> + Send {
        Out::send(self, message)
    }
}

/// A request's share of `Out`: nothing more once the request has been
/// cancelled. Its task may be mid-poll on another worker when it is
/// aborted, and the cancellation ends its answer's stream; the flag, set
/// before the cancellation is posted, is seen by then.
pub(super) struct Unless {
    pub(super) out: Out,
    pub(super) cancelled: Arc<AtomicBool>,
}

impl crate::front::Sink for Unless {
    async fn send(&self, message: Message) -> bool {
        if self.cancelled.load(Ordering::Acquire) {
            return false;
        }
        self.out.send(message).await
    }
}

impl Out {
    /// Queues one message (on one line: a `Message` holds no line end);
    /// false once the client is gone.
    pub(super) async fn send(&self, message: Message) -> bool {
        self.0.send(message).await.is_ok()
    }
}

/// Writes queued lines to `output` until every `Out` is dropped; cancels
/// `gone` if a write fails or stalls past `write_timeout`.
pub(super) fn write(
    output: impl AsyncWrite + Unpin + Send + 'static,
    write_timeout: Duration,
    gone: CancellationToken,
) -> (Out, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<Message>(WRITE_QUEUE);
    let task = tokio::spawn(async move {
        let mut output = output;
        while let Some(message) = rx.recv().await {
            let written = async {
                for piece in message.written(b"", b"\n") {
                    output.write_all(&piece).await?;
                }
                output.flush().await
            };
            match tokio::time::timeout(write_timeout, written).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::info!(error = %e, "stdout failed; the client is gone");
                    break;
                }
                Err(_) => {
                    tracing::warn!("the client read nothing for {write_timeout:?}; ending");
                    break;
                }
            }
        }
        gone.cancel();
    });
    (Out(tx), task)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &'static [u8], max: usize) -> Vec<String> {
        let mut reader = tokio::io::BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        while let Some(line) = next_line(&mut reader, max).await.unwrap() {
            out.push(match line {
                Line::Text(t) => String::from_utf8(t.to_vec()).unwrap(),
                Line::TooLong(n) => format!("too long: {n}"),
            });
        }
        out
    }

    #[tokio::test]
    async fn lines_split_at_their_ends_and_long_ones_are_dropped_whole() {
        assert_eq!(
            lines(b"{\"a\":1}\r\nabcdefghijkl\n\nlast", 10).await,
            ["{\"a\":1}", "too long: 12", "", "last"]
        );
    }
}
