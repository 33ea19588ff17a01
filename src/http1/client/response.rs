//! A response: its head, and its body read off the connection as it is
//! taken, the connection going back to the pool once the body is read.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use http::StatusCode;
use http::header::{HeaderMap, HeaderName, HeaderValue};

use super::conn::Conn;
use super::pool::Shared;
use super::{SendError, h1};

pub(crate) struct Response {
    pub(super) status: StatusCode,
    pub(super) headers: Headers,
    pub(super) content_length: Option<u64>,
    pub(super) body: Body,
}

/// A response's headers, as whichever reader left them.
pub(crate) enum Headers {
    Own(h1::Headers),
    Hyper(HeaderMap),
}

impl Headers {
    /// The first value of `name`.
    pub(crate) fn get(&self, name: &HeaderName) -> Option<HeaderValue> {
        match self {
            Headers::Own(headers) => headers.get(name),
            Headers::Hyper(map) => map.get(name).cloned(),
        }
    }

    /// The first value of `name`, if it is visible ASCII.
    pub(crate) fn get_str(&self, name: &HeaderName) -> Option<&str> {
        match self {
            Headers::Own(headers) => headers.get_str(name),
            Headers::Hyper(map) => {
                crate::http1::header_text::visible_str(map.get(name)?.as_bytes())
            }
        }
    }
}

/// A response's body, as whichever reader reads it.
pub(super) enum Body {
    Own(ResponseBody),
    Hyper(super::twin::Body),
}

impl Stream for Body {
    type Item = Result<Bytes, String>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.get_mut() {
            Body::Own(body) => Pin::new(body).poll_next(cx),
            Body::Hyper(body) => Pin::new(body).poll_next(cx),
        }
    }
}

impl Response {
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    pub(crate) fn headers(&self) -> &Headers {
        &self.headers
    }

    /// The body's length, when the head said it.
    pub(crate) fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// The body as it arrives (trailers skipped).
    pub(crate) fn bytes_stream(self) -> impl Stream<Item = Result<Bytes, String>> + Send {
        self.body
    }

    /// The whole body; one larger than `limit` bytes is refused (by its
    /// length before it is read, when it has one).
    pub(crate) async fn bytes(self, limit: usize) -> Result<Bytes, String> {
        use futures_util::StreamExt as _;
        let too_large = || format!("a body larger than {limit} bytes");
        if self.content_length.is_some_and(|n| n > limit as u64) {
            return Err(too_large());
        }
        let mut chunks = self.body;
        // A body that arrives in one piece (the common case) is that piece,
        // not copied; only a second piece starts a buffer.
        let mut whole = Bytes::new();
        let mut joined: Option<BytesMut> = None;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            let so_far = joined.as_ref().map_or(whole.len(), BytesMut::len);
            if so_far + chunk.len() > limit {
                return Err(too_large());
            }
            match &mut joined {
                None if whole.is_empty() => whole = chunk,
                None => {
                    let mut buf = BytesMut::with_capacity(so_far + chunk.len());
                    buf.extend_from_slice(&whole);
                    buf.extend_from_slice(&chunk);
                    joined = Some(buf);
                }
                Some(buf) => buf.extend_from_slice(&chunk),
            }
        }
        Ok(joined.map_or(whole, BytesMut::freeze))
    }
}

/// A response's body and the connection it arrives on, read as the body
/// is. Read to its end (or empty), the connection goes back to the pool
/// when this is dropped; dropped earlier, or broken, it is closed.
pub(super) struct ResponseBody {
    pub(super) decoder: h1::Decoder,
    /// The backend did not say it would close the connection.
    pub(super) keep_alive: bool,
    /// `None` once the connection broke.
    pub(super) conn: Option<Conn>,
    pub(super) shared: Arc<Shared>,
}

impl Stream for ResponseBody {
    type Item = Result<Bytes, String>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let Some(conn) = &mut this.conn else {
            return Poll::Ready(None);
        };
        let broke = loop {
            match this.decoder.step(&mut conn.buf) {
                Ok(h1::Step::Data(data)) => return Poll::Ready(Some(Ok(data))),
                Ok(h1::Step::Done) => return Poll::Ready(None),
                Ok(h1::Step::More) => {}
                Err(e) => break e.to_string(),
            }
            match ready!(conn.poll_fill(cx)) {
                Ok(0) => match this.decoder.eof() {
                    // Framed by the close: ended, but not reusable.
                    Ok(()) => {
                        this.keep_alive = false;
                        return Poll::Ready(None);
                    }
                    Err(e) => break e.to_string(),
                },
                Ok(_) => {}
                Err(e) => break SendError::Io(e).to_string(),
            }
        };
        this.conn = None;
        Poll::Ready(Some(Err(broke)))
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && self.keep_alive
            && self.decoder.is_done()
            && conn.buf.is_empty()
        {
            self.shared.checkin(conn);
        }
    }
}
