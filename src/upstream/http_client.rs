//! The HTTP client to backends: HTTP/1.1 connections of hyper's own
//! `client::conn`, pooled per backend, TLS by rustls with the platform's
//! verifier. A connection is driven by the task that uses it (the call's
//! own task while it waits for the head, then whoever reads the body), so a
//! call is not handed to a connection task and back; an idle connection is
//! driven by no one and is checked when it is taken.
//!
//! Not reqwest: its per-request URL handling (a parse for its redirect
//! policy, another for the URI, IDNA included) was a sixth of the gateway's
//! instructions per forwarded call. Not hyper-util's pooled client: its
//! pool key hash, checkout guard and connection task were another 11,500
//! (bench/analysis.md). The shape below is the little the backends need.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use futures_util::Stream;
use http::header::{CONTENT_LENGTH, HOST, HeaderMap, HeaderName, HeaderValue};
use http::uri::{Authority, Scheme};
use http::{Method, StatusCode, Uri};
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper::client::conn::http1;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tower::Service;

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;
type Io = hyper_rustls::MaybeHttpsStream<TokioIo<tokio::net::TcpStream>>;
type Driver = http1::Connection<Io, Full<Bytes>>;

/// Idle connections kept per backend: as many as calls a link may have in
/// flight (`conn::MAX_POSTS`), so a steady load reuses every one.
const MAX_IDLE: usize = 256;
/// An idle connection older than this is closed rather than reused.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// One per backend: its pooled connections.
#[derive(Clone)]
pub(crate) struct Client {
    shared: Arc<Shared>,
}

struct Shared {
    connector: Connector,
    /// A pool per worker shard (`crate::workers`): a connection registered
    /// with one runtime's reactor is only ever driven from that runtime.
    idle: Box<[Mutex<Idle>]>,
}

#[derive(Default)]
struct Idle {
    /// Oldest first: expired ones are a prefix, the warmest is at the end.
    conns: Vec<IdleConn>,
    /// A task closes expired connections while any are idle, so a backend
    /// that gets no more calls is not left holding sockets.
    reaping: bool,
}

impl Idle {
    fn expire(&mut self, now: Instant) {
        let expired = self
            .conns
            .partition_point(|i| now.duration_since(i.since) >= IDLE_TIMEOUT);
        drop(self.conns.drain(..expired));
    }
}

struct IdleConn {
    conn: Conn,
    since: Instant,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("idle", &self.shared.idle_count())
            .finish()
    }
}

impl Client {
    pub(crate) fn new() -> Result<Client, String> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(Duration::from_secs(5)));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .try_with_platform_verifier()
            .map_err(|e| format!("TLS: {e}"))?
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Ok(Client {
            shared: Arc::new(Shared {
                connector,
                idle: (0..crate::workers::shards())
                    .map(|_| Mutex::default())
                    .collect(),
            }),
        })
    }

    pub(crate) fn request(&self, method: Method, target: &Target) -> RequestBuilder {
        let mut req = http::Request::new(Full::new(Bytes::new()));
        *req.method_mut() = method;
        *req.uri_mut() = target.0.path.clone();
        req.headers_mut().insert(HOST, target.0.host.clone());
        RequestBuilder {
            client: self.clone(),
            target: target.clone(),
            req,
            bad: false,
        }
    }

    /// Connections open and idle, for tests.
    #[cfg(test)]
    fn idle(&self) -> usize {
        self.shared.idle_count()
    }
}

impl Shared {
    fn idle_count(&self) -> usize {
        self.idle.iter().map(|i| i.lock().conns.len()).sum()
    }

    /// The calling thread's pool: its index in `idle`.
    fn shard(&self) -> usize {
        crate::workers::shard() % self.idle.len()
    }

    /// The warmest idle connection to `origin` that can take a request.
    fn checkout(&self, origin: &Origin) -> Option<Conn> {
        loop {
            let mut conn = {
                let mut idle = self.idle[self.shard()].lock();
                idle.expire(Instant::now());
                let at = idle.conns.iter().rposition(|i| i.conn.origin == *origin)?;
                idle.conns.remove(at).conn
            };
            // Closed sockets are dropped outside the lock.
            if conn.reusable() {
                return Some(conn);
            }
        }
    }

    fn checkin(self: &Arc<Self>, conn: Conn) {
        let shard = self.shard();
        let mut idle = self.idle[shard].lock();
        if idle.conns.len() >= MAX_IDLE {
            return;
        }
        if !idle.reaping {
            // Outside a runtime (dropped at exit) nothing could reap it.
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                return;
            };
            idle.reaping = true;
            runtime.spawn(reap(Arc::downgrade(self), shard));
        }
        idle.conns.push(IdleConn {
            conn,
            since: Instant::now(),
        });
    }

    async fn connect(&self, target: &Prepared) -> Result<Conn, SendError> {
        let mut connector = self.connector.clone();
        poll_fn(|cx| connector.poll_ready(cx))
            .await
            .map_err(SendError::Connect)?;
        let io = connector
            .call(target.uri.clone())
            .await
            .map_err(SendError::Connect)?;
        let (sender, driver) = http1::handshake(io).await.map_err(SendError::Http)?;
        Ok(Conn {
            origin: target.origin.clone(),
            sender,
            driver: Some(Box::pin(driver)),
        })
    }
}

/// Closes idle connections as they expire; ends when none is idle or the
/// client is gone.
async fn reap(shared: std::sync::Weak<Shared>, shard: usize) {
    loop {
        tokio::time::sleep(IDLE_TIMEOUT / 4).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let mut idle = shared.idle[shard].lock();
        idle.expire(Instant::now());
        if idle.conns.is_empty() {
            idle.reaping = false;
            return;
        }
    }
}

/// Where a connection goes: scheme and authority.
#[derive(Clone, PartialEq)]
struct Origin {
    scheme: Option<Scheme>,
    authority: Option<Authority>,
}

/// A URL prepared once for the requests to it (a backend's, with its
/// config): what a connection is opened to, and what each request carries
/// (RFC 9112 §3.2: the path in the request line, the host in `Host`).
#[derive(Clone)]
pub(crate) struct Target(Arc<Prepared>);

/// Never the URL: a configured one may carry credentials.
impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Target")
    }
}

struct Prepared {
    uri: Uri,
    origin: Origin,
    path: Uri,
    host: HeaderValue,
}

impl Target {
    pub(crate) fn new(uri: &Uri) -> Result<Target, String> {
        let host = uri.host().ok_or("the URL has no host")?;
        let host = match uri.port_u16() {
            Some(port) if Some(port) != default_port(uri.scheme()) => {
                HeaderValue::try_from(format!("{host}:{port}"))
            }
            _ => HeaderValue::from_str(host),
        }
        .map_err(|_| "the URL's host is not a valid header value")?;
        let path = uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
        Ok(Target(Arc::new(Prepared {
            uri: uri.clone(),
            origin: Origin {
                scheme: uri.scheme().cloned(),
                authority: uri.authority().cloned(),
            },
            path: Uri::from(path),
            host,
        })))
    }
}

/// One HTTP/1.1 connection: the half that sends requests and the future
/// that does its I/O, polled by whoever waits on the connection.
struct Conn {
    origin: Origin,
    sender: http1::SendRequest<Full<Bytes>>,
    /// `None` once the connection has ended.
    driver: Option<Pin<Box<Driver>>>,
}

impl Conn {
    /// Does the connection's I/O; false once it has ended.
    fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        if let Some(driver) = &mut self.driver
            && driver.as_mut().poll(cx).is_ready()
        {
            self.driver = None;
        }
        self.driver.is_some()
    }

    /// Open and waiting for a request. The last response may not have been
    /// followed up by the connection yet (it reads the end of the message,
    /// then asks for the next request), so it is driven once, with no one
    /// to wake: a closed socket is noticed here too.
    fn reusable(&mut self) -> bool {
        if !self.sender.is_ready() && !self.drive(&mut Context::from_waker(Waker::noop())) {
            return false;
        }
        self.driver.is_some() && self.sender.is_ready()
    }

    async fn send(
        &mut self,
        req: http::Request<Full<Bytes>>,
    ) -> Result<
        http::Response<Incoming>,
        hyper::client::conn::TrySendError<http::Request<Full<Bytes>>>,
    > {
        let mut answer = std::pin::pin!(self.sender.try_send_request(req));
        poll_fn(|cx| {
            // The answer arrives only while this task drives the connection
            // (or drops it): it needs no waker of its own. One would be
            // woken from inside `drive`, and a task woken while it runs is
            // queued again and may wake an idle worker thread for nothing.
            if self.drive(cx) {
                answer
                    .as_mut()
                    .poll(&mut Context::from_waker(Waker::noop()))
            } else {
                answer.as_mut().poll(cx)
            }
        })
        .await
    }
}

/// A request being built; like `http::request::Builder`, a bad header is
/// kept as an error until `send`. Headers go straight into the request
/// (the builder moves a large `Result` through every call).
pub(crate) struct RequestBuilder {
    client: Client,
    target: Target,
    req: http::Request<Full<Bytes>>,
    bad: bool,
}

impl RequestBuilder {
    pub(crate) fn headers(mut self, headers: &HeaderMap) -> Self {
        let own = self.req.headers_mut();
        own.reserve(headers.len());
        for (k, v) in headers {
            own.append(k.clone(), v.clone());
        }
        self
    }

    pub(crate) fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: TryInto<HeaderName>,
        V: TryInto<HeaderValue>,
    {
        match (name.try_into(), value.try_into()) {
            (Ok(k), Ok(v)) => {
                self.req.headers_mut().append(k, v);
            }
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
                (Ok(k), Ok(mut v)) => {
                    v.set_sensitive(k == http::header::AUTHORIZATION);
                    self.req.headers_mut().insert(k, v);
                }
                _ => self.bad = true,
            }
        }
        self
    }

    pub(crate) fn body(mut self, body: impl Into<Bytes>) -> Self {
        *self.req.body_mut() = Full::new(body.into());
        self
    }

    /// Sends on an idle connection to the same origin, or a new one. A
    /// request that an idle connection refused before writing a byte (it
    /// had closed meanwhile) is sent again on the next.
    pub(crate) async fn send(self) -> Result<Response, SendError> {
        if self.bad {
            return Err(SendError::Builder);
        }
        let (shared, target) = (self.client.shared, &self.target.0);
        let mut req = self.req;
        loop {
            let (mut conn, reused) = match shared.checkout(&target.origin) {
                Some(conn) => (conn, true),
                // Boxed: the rare arm would make every call's future as big as a
                // TLS handshake's.
                None => (Box::pin(shared.connect(target)).await?, false),
            };
            match conn.send(req).await {
                Ok(resp) => {
                    let (head, body) = resp.into_parts();
                    return Ok(Response {
                        head,
                        body: ResponseBody {
                            body,
                            ended: false,
                            conn: Some(conn),
                            shared,
                        },
                    });
                }
                Err(mut e) => match e.take_message() {
                    Some(again) if reused => req = again,
                    _ => return Err(SendError::Http(e.into_error())),
                },
            }
        }
    }
}

fn default_port(scheme: Option<&Scheme>) -> Option<u16> {
    match scheme?.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// Why a request got no response. Never names the URL: a configured URL
/// may carry credentials, and these reach clients, logs and /readyz.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    #[error("request could not be built")]
    Builder,
    #[error("connect error: {}", chain(.0.as_ref()))]
    Connect(tower::BoxError),
    #[error("{}", chain(.0))]
    Http(hyper::Error),
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

pub(crate) struct Response {
    head: http::response::Parts,
    body: ResponseBody,
}

impl Response {
    pub(crate) fn status(&self) -> StatusCode {
        self.head.status
    }

    pub(crate) fn headers(&self) -> &HeaderMap {
        &self.head.headers
    }

    pub(crate) fn content_length(&self) -> Option<u64> {
        self.head
            .headers
            .get(CONTENT_LENGTH)?
            .to_str()
            .ok()?
            .parse()
            .ok()
    }

    /// The body as it arrives (trailers skipped).
    pub(crate) fn bytes_stream(self) -> impl Stream<Item = Result<Bytes, String>> + Send {
        self.body
    }

    /// The whole body; one larger than `limit` bytes is refused.
    pub(crate) async fn bytes(self, limit: usize) -> Result<Bytes, String> {
        use futures_util::StreamExt as _;
        let mut body = Vec::new();
        let mut chunks = self.body;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            if body.len() + chunk.len() > limit {
                return Err(format!("a body larger than {limit} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(body))
    }
}

/// A response's body and the connection it arrives on, which reading the
/// body drives. Read to its end (or empty), the connection goes back to
/// the pool when this is dropped; dropped earlier, it is closed.
struct ResponseBody {
    body: Incoming,
    ended: bool,
    conn: Option<Conn>,
    shared: Arc<Shared>,
}

impl ResponseBody {
    fn frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, String>>> {
        loop {
            return match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => Poll::Ready(Some(Ok(data))),
                    Err(_trailers) => continue,
                },
                Poll::Ready(Some(Err(e))) => {
                    self.conn = None;
                    Poll::Ready(Some(Err(chain(&e))))
                }
                Poll::Ready(None) => {
                    self.ended = true;
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            };
        }
    }
}

impl Stream for ResponseBody {
    type Item = Result<Bytes, String>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Poll::Ready(item) = this.frame(cx) {
            return Poll::Ready(item);
        }
        // The body waits on its connection: read what has come, look again.
        match &mut this.conn {
            Some(conn) => {
                conn.drive(cx);
                this.frame(cx)
            }
            None => Poll::Pending,
        }
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && (self.ended || self.body.is_end_stream())
        {
            self.shared.checkin(conn);
        }
    }
}

#[cfg(test)]
mod tests;
