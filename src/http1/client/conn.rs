//! One HTTP/1.1 connection: its socket, read into one buffer kept across
//! requests, and a request written whole.

use std::future::poll_fn;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use bytes::BytesMut;
use http::Method;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWrite;

use super::SendError;
use super::h1;
use super::target::Origin;

/// The connector's stream (hyper's I/O traits), seen through tokio's.
pub(super) type Io = TokioIo<hyper_rustls::MaybeHttpsStream<super::dial::Dialed>>;

/// What a read asks the socket for at least: a response of the common size
/// arrives in one read.
const READ_BUF: usize = 8 * 1024;

/// The TCP stream under a plain-HTTP connection (None under TLS): read and
/// written by system call (`raw_io`).
fn plain(io: &Io) -> Option<&tokio::net::TcpStream> {
    match io.inner() {
        hyper_rustls::MaybeHttpsStream::Http(dialed) => Some(dialed.tcp.inner()),
        hyper_rustls::MaybeHttpsStream::Https(_) => None,
    }
}

/// One HTTP/1.1 connection, and what has been read from it and not yet
/// taken (the buffer is kept across requests).
pub(super) struct Conn {
    pub(super) origin: Origin,
    /// Boxed: a TLS stream is kilobytes, and a connection moves in and out
    /// of the pool and lives in every call's future.
    pub(super) io: Pin<Box<Io>>,
    pub(super) buf: BytesMut,
}

impl Conn {
    /// Reads what has arrived; `Ok(0)` once the backend has closed.
    pub(super) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        if self.buf.capacity() - self.buf.len() < READ_BUF / 2 {
            // In place when the last response's bytes are all dropped.
            self.buf.reserve(READ_BUF);
        }
        let Some(tcp) = plain(&self.io) else {
            return tokio_util::io::poll_read_buf(self.io.as_mut(), cx, &mut self.buf);
        };
        let spare = self.buf.spare_capacity_mut();
        let mut read = tokio::io::ReadBuf::uninit(spare);
        ready!(crate::raw_io::poll_read(tcp, cx, &mut read))?;
        let n = read.filled().len();
        // SAFETY: `poll_read` filled (initialised) `n` bytes of the spare
        // capacity, from its start.
        unsafe { self.buf.set_len(self.buf.len() + n) };
        Poll::Ready(Ok(n))
    }

    /// Open, with nothing unasked-for arrived. A socket whose readiness is
    /// not set answers without a system call (tokio clears it on a short
    /// read); a backend's close, once seen by the reactor, is noticed here.
    pub(super) fn reusable(&mut self) -> bool {
        self.buf.is_empty()
            && self
                .poll_fill(&mut Context::from_waker(Waker::noop()))
                .is_pending()
    }

    /// Writes a request whole. An error says whether nothing of it left,
    /// so that it may be sent again elsewhere.
    pub(super) async fn write(&mut self, head: &[u8], body: &[u8]) -> Result<(), Unsent> {
        let mut written = 0;
        while written < head.len() + body.len() {
            let slices = if written < head.len() {
                [IoSlice::new(&head[written..]), IoSlice::new(body)]
            } else {
                [
                    IoSlice::new(&body[written - head.len()..]),
                    IoSlice::new(&[]),
                ]
            };
            let wrote = poll_fn(|cx| {
                if let Some(tcp) = plain(&self.io) {
                    return crate::raw_io::poll_write_vectored(tcp, cx, &slices);
                }
                self.io.as_mut().poll_write_vectored(cx, &slices)
            });
            match wrote.await {
                Ok(0) => return Err(Unsent::new(std::io::ErrorKind::WriteZero.into(), written)),
                Ok(n) => written += n,
                Err(e) => return Err(Unsent::new(e, written)),
            }
        }
        // TLS holds records until flushed; a plain socket has nothing to do.
        poll_fn(|cx| self.io.as_mut().poll_flush(cx))
            .await
            .map_err(|e| Unsent::new(e, written))
    }

    pub(super) async fn read_head(&mut self, method: &Method) -> Result<h1::Head, SendError> {
        poll_fn(|cx| {
            loop {
                if let Some(head) = h1::read_response_head(&mut self.buf, method)? {
                    return Poll::Ready(Ok(head));
                }
                match ready!(self.poll_fill(cx)) {
                    Ok(0) => return Poll::Ready(Err(SendError::Response(h1::Error::Incomplete))),
                    Ok(_) => {}
                    Err(e) => return Poll::Ready(Err(SendError::Io(e))),
                }
            }
        })
        .await
    }
}

impl Conn {
    /// `e`, from `read_head`, is the connection found closed or reset
    /// before any byte of an answer.
    pub(super) fn closed_unanswered(&self, e: &SendError) -> bool {
        self.buf.is_empty()
            && match e {
                SendError::Response(h1::Error::Incomplete) => true,
                SendError::Io(e) => is_closed(e),
                _ => false,
            }
    }
}

/// A socket's error that says the peer closed or reset the connection
/// (under TLS, closed without its `close_notify`).
pub(super) fn is_closed(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
    )
}

/// A write that failed.
pub(super) struct Unsent {
    pub(super) error: std::io::Error,
    /// Not a byte of the request left: it may go on another connection.
    pub(super) whole: bool,
}

impl Unsent {
    fn new(error: std::io::Error, written: usize) -> Self {
        Unsent {
            error,
            whole: written == 0,
        }
    }
}
