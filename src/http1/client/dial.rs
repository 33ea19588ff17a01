//! A new connection's socket: to the target itself, or to its proxy
//! (`http1::proxy`), through a CONNECT tunnel for an `https` target. TLS,
//! when the target asks for it, is `hyper_rustls`'s, over whatever this
//! dialled: to the origin, whether the tunnel is there or not. Both of the
//! client's engines dial through this, so they reach a target the same
//! way.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use http::{Method, StatusCode, Uri};
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tower::Service;

use super::h1;
use crate::http1::proxy::{Proxy, ProxyUrl};

/// How long a new connection may take to open: the TCP connect (to the
/// target or the proxy) and, through a proxy, its answer to CONNECT.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens sockets for one client, by its proxy policy.
#[derive(Clone)]
pub(super) struct Dialer {
    tcp: HttpConnector,
    proxy: Proxy,
}

impl Dialer {
    pub(super) fn new(proxy: Proxy) -> Dialer {
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(CONNECT_TIMEOUT));
        Dialer { tcp, proxy }
    }
}

/// A dialled socket; says whether requests on it go to a proxy that
/// forwards them (hyper then writes their targets in absolute form).
pub(super) struct Dialed {
    pub(super) tcp: TokioIo<TcpStream>,
    forwarding: bool,
}

impl Service<Uri> for Dialer {
    type Response = Dialed;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Dialed, tower::BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let Some(proxy) = self.proxy.route(&dst).cloned() else {
            let direct = self.tcp.call(dst);
            return Box::pin(async move {
                let tcp = direct.await?;
                Ok(Dialed {
                    tcp,
                    forwarding: false,
                })
            });
        };
        let mut tcp = self.tcp.clone();
        Box::pin(async move {
            let through = async {
                let mut io = tcp
                    .call(proxy.uri.clone())
                    .await
                    .map_err(|e| super::chain(&e))?;
                let forwarding = dst.scheme() != Some(&http::uri::Scheme::HTTPS);
                if !forwarding {
                    tunnel(io.inner_mut(), &proxy, &dst).await?;
                }
                Ok(Dialed {
                    tcp: io,
                    forwarding,
                })
            };
            let why = match tokio::time::timeout(CONNECT_TIMEOUT, through).await {
                Ok(Ok(dialed)) => return Ok(dialed),
                Ok(Err(why)) => why,
                Err(_) => format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()),
            };
            Err(ProxyError(format!("proxy {}: {why}", proxy.shown)).into())
        })
    }
}

/// A proxy that could not be reached or would not take the connection;
/// names the proxy, never its credentials.
#[derive(Debug)]
struct ProxyError(String);

impl std::fmt::Display for ProxyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProxyError {}

/// Asks the proxy for a tunnel to `dst` (RFC 9110 §9.3.6) and reads its
/// answer's head; what follows it is the origin's.
async fn tunnel(tcp: &mut TcpStream, proxy: &ProxyUrl, dst: &Uri) -> Result<(), String> {
    let host = dst.host().ok_or("the URL has no host")?;
    let authority = format!("{host}:{}", dst.port_u16().unwrap_or(443));
    let mut ask = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n").into_bytes();
    if let Some(auth) = &proxy.auth {
        ask.extend_from_slice(b"Proxy-Authorization: ");
        ask.extend_from_slice(auth.as_bytes());
        ask.extend_from_slice(b"\r\n");
    }
    ask.extend_from_slice(b"\r\n");
    let failed = |e: std::io::Error| format!("CONNECT {authority}: {e}");
    tcp.write_all(&ask).await.map_err(failed)?;
    let mut buf = BytesMut::with_capacity(1024);
    let head = loop {
        match h1::read_response_head(&mut buf, &Method::CONNECT) {
            Ok(Some(head)) => break head,
            Ok(None) => {}
            Err(e) => return Err(format!("CONNECT {authority}: bad answer: {e}")),
        }
        if tcp.read_buf(&mut buf).await.map_err(failed)? == 0 {
            return Err(format!("closed the connection on CONNECT {authority}"));
        }
    };
    if !head.status.is_success() {
        return Err(format!(
            "refused CONNECT {authority}: {}",
            status(head.status)
        ));
    }
    if !buf.is_empty() {
        // The origin speaks only after the TLS hello: this is the proxy's.
        return Err(format!(
            "sent bytes after its answer to CONNECT {authority}"
        ));
    }
    Ok(())
}

/// `407 Proxy Authentication Required`.
pub(super) fn status(s: StatusCode) -> String {
    format!("{} {}", s.as_str(), s.canonical_reason().unwrap_or(""))
        .trim_end()
        .to_owned()
}

impl Connection for Dialed {
    fn connected(&self) -> Connected {
        self.tcp.connected().proxy(self.forwarding)
    }
}

impl Read for Dialed {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_read(cx, buf)
    }
}

impl Write for Dialed {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }
}
