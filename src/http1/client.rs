//! The HTTP client to backends: HTTP/1.1 connections pooled per backend,
//! TLS by rustls with the platform's verifier. A request is written and
//! its response read by the task that makes it (the call's own task, then
//! whoever reads the body), straight off the socket into the connection's
//! one read buffer; an idle connection is read by no one and is checked
//! when it is taken. The wire format is `codec`'s.
//!
//! Not reqwest: its per-request URL handling (a parse for its redirect
//! policy, another for the URI, IDNA included) was a sixth of the gateway's
//! instructions per forwarded call. Not hyper-util's pooled client: its
//! pool key hash, checkout guard and connection task were another 11,500.
//! Not hyper's `client::conn` either: its dispatcher (a channel and a
//! oneshot per request, the request and response moved through it, a
//! `HeaderMap` built for the request, a new read buffer per response) was
//! most of the rest of the client's cost (bench/analysis.md). What a
//! backend needs is one request, one response, in order.
//!
//! With `SLUICE_HTTP=hyper` every exchange goes through hyper-util's
//! pooled client instead (`twin`), the library this is held equal to.

mod conn;
mod dial;
mod pool;
mod response;
mod target;
mod twin;

use super::codec as h1;

use std::sync::Arc;

use bytes::Bytes;
use http::Method;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use parking_lot::Mutex;

use pool::{Connector, IDLE_TIMEOUT, MAX_IDLE, Shared};
use response::{Body, ResponseBody};
pub(crate) use response::{Headers, Response};
use target::Prepared;
pub(crate) use target::Target;

use crate::http1::proxy::Proxy;

/// One per backend: its pooled connections.
#[derive(Clone)]
pub(crate) struct Client {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("idle", &self.shared.idle_count())
            .finish()
    }
}

impl Client {
    /// A client on the HTTP code in force (`http1::Engine`), its targets
    /// reached through the proxies `proxy` picks.
    pub(crate) fn new(proxy: Proxy) -> Result<Client, String> {
        Client::on(super::Engine::current(), proxy)
    }

    /// A client on `engine`'s code: its own, or hyper's.
    fn on(engine: super::Engine, proxy: Proxy) -> Result<Client, String> {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .try_with_platform_verifier()
            .map_err(|e| format!("TLS: {e}"))?
            .https_or_http()
            .enable_http1()
            .wrap_connector(dial::Dialer::new(proxy.clone()));
        let hyper = engine == super::Engine::Hyper;
        Ok(Client {
            shared: Arc::new(Shared {
                proxy,
                twin: hyper.then(|| twin::Twin::new(&connector)),
                connector,
                idle: (0..crate::workers::shards())
                    .map(|_| Mutex::default())
                    .collect(),
            }),
        })
    }

    /// `uri` prepared for this client's requests: whether it goes through
    /// a proxy is decided here, once.
    pub(crate) fn target(&self, uri: &http::Uri) -> Result<Target, String> {
        Target::new(uri, &self.shared.proxy)
    }

    pub(crate) fn request(&self, method: Method, target: &Target) -> RequestBuilder {
        RequestBuilder {
            client: self.clone(),
            target: target.clone(),
            method,
            headers: Vec::new(),
            body: Bytes::new(),
            bad: false,
        }
    }

    /// Connections open and idle, for tests.
    #[cfg(test)]
    fn idle(&self) -> usize {
        self.shared.idle_count()
    }
}

/// A request being built; like `http::request::Builder`, a bad header is
/// kept as an error until `send`.
pub(crate) struct RequestBuilder {
    client: Client,
    target: Target,
    method: Method,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Bytes,
    bad: bool,
}

impl RequestBuilder {
    pub(crate) fn headers(mut self, headers: &HeaderMap) -> Self {
        self.headers.reserve(headers.len());
        for (k, v) in headers {
            self.headers.push((k.clone(), v.clone()));
        }
        self
    }

    pub(crate) fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: TryInto<HeaderName>,
        V: TryInto<HeaderValue>,
    {
        match (name.try_into(), value.try_into()) {
            (Ok(k), Ok(v)) => self.headers.push((k, v)),
            _ => self.bad = true,
        }
        self
    }

    /// A call's own headers (`Mcp-Param-*`, its trace context, its
    /// exchanged token): each replaces a configured one of the same name.
    pub(crate) fn header_pairs(mut self, pairs: &[(String, String)]) -> Self {
        for (k, v) in pairs {
            match (
                HeaderName::try_from(k.as_str()),
                HeaderValue::try_from(v.as_str()),
            ) {
                (Ok(k), Ok(v)) => {
                    self.headers.retain(|(name, _)| *name != k);
                    self.headers.push((k, v));
                }
                _ => self.bad = true,
            }
        }
        self
    }

    pub(crate) fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Sends on an idle connection to the same origin, or a new one. A
    /// request that an idle connection refused before taking a byte (it
    /// had closed meanwhile) is sent again on the next; one that a reused
    /// connection closed on before any byte of an answer, once more on a
    /// new connection (`Client::send`).
    pub(crate) async fn send(mut self) -> Result<Response, SendError> {
        let body = std::mem::take(&mut self.body);
        self.send_lent(&body).await
    }

    /// `send`, with the body lent: a caller that may send it again (a
    /// retry) keeps it whole, where a clone of an owned `Bytes` allocates
    /// its shared form.
    pub(crate) async fn send_lent(self, body: &[u8]) -> Result<Response, SendError> {
        self.send_lent_with(std::iter::empty(), body).await
    }

    /// `send_lent`, with more headers lent (after the builder's own).
    pub(crate) async fn send_lent_with<'h>(
        self,
        lent: impl Iterator<Item = (&'h HeaderName, &'h HeaderValue)>,
        body: &[u8],
    ) -> Result<Response, SendError> {
        if self.bad {
            return Err(SendError::Builder);
        }
        let own = self.headers.iter().map(|(k, v)| (k, v));
        self.client
            .send(
                &self.method,
                &self.target,
                own.chain(lent.map(shorter)),
                body,
            )
            .await
    }
}

impl Client {
    /// Sends `method` to `target` with `headers` and `body`, all lent:
    /// what a builder would hold, without one to fill and drop (the
    /// common call's path). On an idle connection to the same origin, or
    /// a new one; a request that an idle connection refused before taking
    /// a byte (it had closed meanwhile) is sent again on the next.
    ///
    /// A request written on a reused connection that the server closed (or
    /// reset) before any byte of its answer arrived is sent once more, on
    /// a new connection: the server closed an idle connection as the
    /// request went out (uvicorn, every Python MCP server, does after 5 s
    /// idle), and never read it; a server that read a request would have
    /// answered it, or closed the connection with its answer. (One that
    /// read it and crashed before a byte of answer gets it twice: the
    /// trade browsers make; hyper-util retries only requests not yet
    /// written, `twin`.) Never on a new connection, where the close is the
    /// server's answer to the request, so at most once.
    pub(crate) async fn send<'h>(
        &self,
        method: &Method,
        target: &Target,
        headers: impl Iterator<Item = (&'h HeaderName, &'h HeaderValue)>,
        body: &[u8],
    ) -> Result<Response, SendError> {
        let (shared, target) = (&self.shared, &target.0);
        if let Some(twin) = &shared.twin {
            // Boxed: the twin's future stays out of every call's own.
            let (status, headers, content_length, body) =
                Box::pin(twin.send(method, target, headers, body)).await?;
            refused_by_proxy(target, status)?;
            return Ok(Response {
                status,
                headers: Headers::Hyper(headers),
                content_length,
                body: Body::Hyper(body),
            });
        }
        let mut head = Vec::with_capacity(192 + 64 * headers.size_hint().0);
        let proxy_auth = target.forward.as_ref().and_then(|f| f.auth.as_ref());
        h1::write_request_head(
            &mut head,
            method,
            target.request_target(),
            &target.host,
            headers.map(shorter).chain(proxy_auth.map(|(k, v)| (k, v))),
            body.len(),
        );
        // Once a reused connection closed on the request: a new one (which
        // is not `reused`: no second retry).
        let mut fresh = false;
        loop {
            let pooled = if fresh {
                None
            } else {
                shared.checkout(&target.origin)
            };
            let (mut conn, reused) = match pooled {
                Some(conn) => (conn, true),
                // Boxed: the rare arm would make every call's future as big as a
                // TLS handshake's.
                None => (Box::pin(shared.connect(target)).await?, false),
            };
            match conn.write(&head, body).await {
                Ok(()) => {}
                Err(e) if reused && e.whole => continue,
                Err(e) if reused && conn::is_closed(&e.error) => {
                    fresh = true;
                    continue;
                }
                Err(e) => return Err(SendError::Io(e.error)),
            }
            let head = match conn.read_head(method).await {
                Ok(head) => head,
                Err(e) if reused && conn.closed_unanswered(&e) => {
                    tracing::debug!(error = %e, "a reused connection closed on the request; sending it again on a new one");
                    fresh = true;
                    continue;
                }
                Err(e) => return Err(e),
            };
            refused_by_proxy(target, head.status)?;
            // Through a forward proxy, only as long as it says it keeps it.
            let keep_alive = head.keep_alive
                && target.forward.as_ref().is_none_or(|_| {
                    let said = |name| head.headers.options(name);
                    target::proxy_keeps(said("connection"), said("proxy-connection"))
                });
            return Ok(Response {
                status: head.status,
                headers: Headers::Own(head.headers),
                content_length: head.content_length,
                body: Body::Own(ResponseBody {
                    decoder: head.body,
                    keep_alive,
                    conn: Some(conn),
                    shared: shared.clone(),
                }),
            });
        }
    }
}

/// A 407 to a request a proxy forwards is the proxy's own answer: its
/// failure, named as such (a `https` target's tunnel is refused in `dial`).
fn refused_by_proxy(target: &Prepared, status: http::StatusCode) -> Result<(), SendError> {
    match &target.forward {
        Some(f) if status == http::StatusCode::PROXY_AUTHENTICATION_REQUIRED => {
            Err(SendError::Proxy(format!(
                "proxy {} answered {}",
                f.proxy.shown,
                dial::status(status)
            )))
        }
        _ => Ok(()),
    }
}

/// A lent header, for as long as the request's own.
fn shorter<'s, 'l: 's>(
    pair: (&'l HeaderName, &'l HeaderValue),
) -> (&'s HeaderName, &'s HeaderValue) {
    pair
}

/// Why a request got no response. Never names the URL: a configured URL
/// may carry credentials, and these reach clients, logs and /readyz.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    #[error("request could not be built")]
    Builder,
    #[error("connect error: {}", chain(.0.as_ref()))]
    Connect(tower::BoxError),
    #[error("connection error: {0}")]
    Io(std::io::Error),
    #[error("{0}")]
    Response(h1::Error),
    /// The proxy answered for the target (names the proxy, never its
    /// credentials).
    #[error("{0}")]
    Proxy(String),
    /// hyper-util's client failed (`SLUICE_HTTP=hyper`), the cause chained.
    #[error("{0}")]
    Library(String),
}

impl From<h1::Error> for SendError {
    fn from(e: h1::Error) -> Self {
        SendError::Response(e)
    }
}

impl SendError {
    pub(crate) fn is_builder(&self) -> bool {
        matches!(self, SendError::Builder)
    }

    /// Nothing accepted the connection.
    pub(crate) fn is_connect(&self) -> bool {
        matches!(self, SendError::Connect(_))
    }
}

/// "connect error: tcp connect error: Connection refused": the cause is
/// what an operator needs.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests;
