//! What a connection makes of a client's bytes arriving in pieces, for
//! the fuzz target that holds the own path's reading equal to hyper's.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, HttpBody};
use bytes::BytesMut;

use super::feed::Feed;
use super::take::{Take, take};

/// What the connection makes of `wire` arriving in pieces of `cut`
/// bytes (for the fuzz target and its seeds): each request taken (its
/// headers, its body as far as it came, whether it asked to close), then,
/// if a request of another kind came, where in `wire` hyper takes over and
/// the bytes it is handed (those that had arrived).
pub(crate) fn read_whole(wire: &[u8], cut: usize) -> (Vec<Seen>, Option<(usize, Vec<u8>)>) {
    let mut arrived = 0;
    let mut buf = BytesMut::new();
    let mut taken: Vec<Seen> = Vec::new();
    let mut feeding: Option<(Feed, Body)> = None;
    // What a body has now; it never waits here.
    let drain = |body: &mut Body, into: &mut Vec<u8>| {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        while let Poll::Ready(Some(Ok(frame))) = Pin::new(&mut *body).poll_frame(&mut cx) {
            into.extend_from_slice(&frame.into_data().unwrap_or_default());
        }
    };
    for piece in wire.chunks(cut.max(1)) {
        buf.extend_from_slice(piece);
        arrived += piece.len();
        loop {
            if let Some((feed, body)) = &mut feeding {
                let n = feed.left().min(buf.len());
                feed.push(buf.split_to(n).freeze());
                let last = taken.last_mut().expect("a request is fed");
                drain(body, &mut last.body);
                if !feed.is_whole() {
                    break;
                }
                feeding = None;
            }
            if buf.is_empty() {
                break;
            }
            match take(&mut buf) {
                Take::Ready(t) => {
                    let mut body = t.body;
                    let mut read = Seen {
                        target: String::from_utf8_lossy(t.head.target()).into_owned(),
                        length: body.size_hint().exact().unwrap_or_default(),
                        headers: t
                            .head
                            .iter()
                            .map(|(k, v)| (k.to_ascii_lowercase(), v.to_vec()))
                            .map(|(k, v)| (String::from_utf8(k).unwrap_or_default(), v))
                            .collect(),
                        body: Vec::new(),
                        close: t.close,
                        namespace: t.namespace.into_owned(),
                    };
                    drain(&mut body, &mut read.body);
                    taken.push(read);
                    feeding = t.feed.map(|f| (f, body));
                }
                // Refused as hyper refuses it: not compared further.
                Take::Other | Take::TooLarge => {
                    return (taken, Some((arrived - buf.len(), buf.to_vec())));
                }
                Take::Partial => break,
            }
        }
    }
    (taken, None)
}

/// A request as `read_whole` saw it (its method is `POST`, its version
/// HTTP/1.1).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) target: String,
    /// Names in lower case, in the order they came.
    pub(crate) headers: Vec<(String, Vec<u8>)>,
    /// Its `Content-Length`.
    pub(crate) length: u64,
    /// As much of the body as came.
    pub(crate) body: Vec<u8>,
    pub(crate) close: bool,
    pub(crate) namespace: String,
}
