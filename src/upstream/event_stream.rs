//! A small server-sent-events reader for backend responses. Bounded: an
//! event larger than `MAX_EVENT` ends the stream with an error rather than
//! growing a buffer without limit.

use bytes::{Buf, BytesMut};
use futures_util::{Stream, StreamExt};

const MAX_EVENT: usize = 64 * 1024 * 1024;

/// A response body as events, with errors that never name the URL.
pub(crate) fn of_response(
    resp: crate::http1::client::Response,
) -> impl Stream<Item = Result<Event, EventError>> {
    events(Box::pin(resp.bytes_stream()))
}

#[derive(Debug, Default, PartialEq)]
pub(crate) struct Event {
    pub(crate) event: Option<String>,
    pub(crate) data: String,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum EventError {
    #[error("event stream failed: {0}")]
    Body(String),
    #[error("event larger than {MAX_EVENT} bytes")]
    TooLarge,
}

/// Turns a byte stream into events. Comments and ids are skipped: the
/// gateway does not resume backend streams.
/// A line at least this long that starts an event's data becomes that
/// data without a copy (`data_in_place`): a large result comes in one.
const LARGE_LINE: usize = 1 << 20;

/// The value of a `data:` line, made of the line's own buffer (its field
/// name and one space dropped by moving the rest down, in place; bytes
/// that are not UTF-8 replaced, as for any line).
fn data_in_place(line: BytesMut) -> String {
    let skip = if line.starts_with(b"data: ") { 6 } else { 5 };
    let mut bytes = Vec::from(line);
    bytes.drain(..skip);
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

pub(crate) fn events<S, E>(body: S) -> impl Stream<Item = Result<Event, EventError>>
where
    S: Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    futures_util::stream::unfold(
        (body, BytesMut::new(), Event::default(), false, 0),
        |(mut body, mut buf, mut current, mut done, mut scanned)| async move {
            loop {
                // Bytes before `scanned` hold no line end: a long line is
                // searched once, not again at each chunk of it.
                let end = memchr::memchr(b'\n', &buf[scanned..]).map(|at| scanned + at);
                scanned = if end.is_some() { 0 } else { buf.len() };
                if let Some(pos) = end {
                    let mut line = buf.split_to(pos + 1);
                    line.truncate(pos);
                    if line.last() == Some(&b'\r') {
                        line.truncate(pos - 1);
                    }
                    if line.len() >= LARGE_LINE
                        && current.data.is_empty()
                        && line.starts_with(b"data:")
                    {
                        // The rest is copied off (it is small), so that
                        // the line holds its buffer alone and becomes the
                        // event's data where it lies.
                        buf = BytesMut::from(&buf[..]);
                        current.data = data_in_place(line);
                        continue;
                    }
                    let line = String::from_utf8_lossy(&line).into_owned();
                    if line.is_empty() {
                        if !current.data.is_empty() || current.event.is_some() {
                            let ev = std::mem::take(&mut current);
                            return Some((Ok(ev), (body, buf, current, done, scanned)));
                        }
                        continue;
                    }
                    let (field, value) = match line.split_once(':') {
                        Some((f, v)) => (f.to_owned(), v.strip_prefix(' ').unwrap_or(v).to_owned()),
                        None => (line, String::new()),
                    };
                    match field.as_str() {
                        "data" => {
                            if !current.data.is_empty() {
                                current.data.push('\n');
                            }
                            current.data.push_str(&value);
                            if current.data.len() > MAX_EVENT {
                                return Some((
                                    Err(EventError::TooLarge),
                                    (body, BytesMut::new(), Event::default(), true, 0),
                                ));
                            }
                        }
                        "event" => current.event = Some(value),
                        _ => {}
                    }
                    continue;
                }
                if done {
                    return None;
                }
                if buf.len() > MAX_EVENT {
                    return Some((
                        Err(EventError::TooLarge),
                        (body, BytesMut::new(), Event::default(), true, 0),
                    ));
                }
                match body.next().await {
                    Some(Ok(chunk)) => buf.extend_from_slice(chunk.chunk()),
                    Some(Err(e)) => {
                        return Some((
                            Err(EventError::Body(e.to_string())),
                            (body, BytesMut::new(), Event::default(), true, 0),
                        ));
                    }
                    None => {
                        done = true;
                        // A final event without its blank line still counts.
                        buf.extend_from_slice(b"\n\n");
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(chunks: &[&str]) -> Vec<Event> {
        let owned: Vec<Result<bytes::Bytes, std::io::Error>> = chunks
            .iter()
            .map(|c| Ok(bytes::Bytes::from(c.to_string())))
            .collect();
        events(futures_util::stream::iter(owned))
            .map(|e| e.unwrap())
            .collect()
            .await
    }

    #[tokio::test]
    async fn parses_split_chunks_multiline_data_and_comments() {
        let got = parse(&[
            ": keep-alive\n\nevent: endpoint\ndata: /mes",
            "sages?s=1\n\ndata: {\"a\":\ndata: 1}\r\n\r\nid: 7\ndata: last",
        ])
        .await;
        assert_eq!(
            got,
            vec![
                Event {
                    event: Some("endpoint".into()),
                    data: "/messages?s=1".into()
                },
                Event {
                    event: None,
                    data: "{\"a\":\n1}".into()
                },
                Event {
                    event: None,
                    data: "last".into()
                },
            ]
        );
    }
}
