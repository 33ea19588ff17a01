//! A connection to a TLS listener: its handshake, then hyper serves it
//! over the TLS stream from its first request, with either engine. The
//! own HTTP/1.1 path (`conn::serve`) is the plain socket's alone: made
//! generic over the stream, its plain copy cost 2.2% more instructions a
//! forwarded call (inlining moved), and the plain path's cost is held to
//! a budget. hyper flushes what TLS holds back of its writes itself, an
//! SSE event included.
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
use std::pin::{Pin, pin};
use std::task::Poll;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::socket::Socket;
use super::{Serve, hyper_serves};
use crate::front::places::Place;
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

/// Serves one connection to the TLS listener, which holds `place`, to its
/// end.
pub(in crate::front) async fn serve(tcp: TcpStream, serve: Serve, place: Place, tls: TlsAcceptor) {
    let mut tcp = Socket::new(tcp, serve.write_timeout, Some(place));
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
    let phase = tcp.phase();
    let accepted = within(&mut deadline, tls.accept(tcp.replaying(first.freeze()))).await;
    match accepted {
        Some(Ok(stream)) => hyper_serves(stream, phase, serve).await,
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
