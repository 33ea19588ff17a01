//! A connection to a TLS listener: its handshake, then the same serving as
//! a plain one (`conn::run`), the own HTTP/1.1 path and hyper alike, over
//! the TLS stream.
//!
//! The handshake holds the connection's place like any connection waiting
//! for its first request (displaceable, shortened under pressure), and it
//! must end within the header-read timeout, its first byte included: a
//! client that opens connections and never finishes a handshake holds
//! each one no longer than a client that never sends a head.
//!
//! A plain HTTP request sent to the TLS port (its first byte an upper-case
//! letter, a method's, where a handshake opens with 0x16) is answered
//! `400` in clear text, saying to use `https://`, and the connection
//! closed; any other first byte that is not a handshake record is closed
//! on at once, as rustls would refuse it.

use std::future::{Future, poll_fn};
use std::io::IoSlice;
use std::pin::{Pin, pin};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::socket::{Socket, Stream};
use super::{Serve, run};
use crate::timers::Sleep;

/// A TLS record of type handshake: how every TLS connection opens.
const HANDSHAKE: u8 = 0x16;
/// What the first read asks for: a ClientHello, whole or in part (the rest
/// is read by rustls).
const FIRST_READ: usize = 2048;
/// The answer to a plain HTTP request: small enough for one write.
const PLAIN_REFUSAL: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
Content-Type: text/plain\r\nContent-Length: 46\r\nConnection: close\r\n\r\n\
This port speaks HTTPS: use an https:// URL.\r\n";

/// Serves a connection to the TLS listener to its end.
pub(super) async fn serve(mut tcp: Socket, serve: Serve, tls: TlsAcceptor) {
    let mut deadline = crate::timers::sleep_until(crate::clock::now() + serve.header_read_timeout);
    let mut first = BytesMut::with_capacity(FIRST_READ);
    match within(&mut deadline, tcp.read_buf(&mut first)).await {
        Some(Ok(n)) if n > 0 => {}
        _ => return,
    }
    match first[0] {
        HANDSHAKE => {}
        b if b.is_ascii_uppercase() => {
            let refuse = async {
                tcp.write_all(PLAIN_REFUSAL).await?;
                tcp.shutdown().await
            };
            let _ = within(&mut deadline, refuse).await;
            tracing::debug!("plain HTTP on the TLS listener: answered 400 and closed");
            return;
        }
        _ => return,
    }
    let accepted = within(&mut deadline, tls.accept(tcp.replaying(first.freeze()))).await;
    match accepted {
        Some(Ok(stream)) => run(stream, serve).await,
        Some(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
        None => tracing::debug!("TLS handshake not done within header_read_timeout"),
    }
}

/// `fut`, or None once `deadline` passes.
async fn within<F: Future>(deadline: &mut Sleep, fut: F) -> Option<F::Output> {
    let mut fut = pin!(fut);
    poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        Pin::new(&mut *deadline).poll(cx).map(|()| None)
    })
    .await
}

impl Stream for TlsStream<Socket> {
    const HOLDS_WRITES: bool = true;
    type Replaying = Replay<TlsStream<Socket>>;

    fn socket(&self) -> &Socket {
        self.get_ref().0
    }

    fn replaying(self, read: Bytes) -> Replay<TlsStream<Socket>> {
        Replay { read, inner: self }
    }
}

/// A stream whose reads return `read` first: what the own path had read
/// of a TLS connection before handing it to hyper (the socket's own
/// replay is of bytes on the wire, still encrypted here).
pub(super) struct Replay<S> {
    read: Bytes,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Replay<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.read.is_empty() {
            return Pin::new(&mut self.inner).poll_read(cx, buf);
        }
        super::socket::replay(&mut self.read, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replay<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
