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

use super::codec as h1;

use std::future::poll_fn;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;

use tokio::io::AsyncWrite;
use tokio::time::Instant;

use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Method, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tower::Service;

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;
/// The connector's stream (hyper's I/O traits), seen through tokio's.
type Io = TokioIo<hyper_rustls::MaybeHttpsStream<TokioIo<tokio::net::TcpStream>>>;

/// What a read asks the socket for at least: a response of the common size
/// arrives in one read.
const READ_BUF: usize = 8 * 1024;
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
    /// Set with `SLUICE_HTTP=hyper`: every request goes through it.
    twin: Option<twin::Twin>,
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
        // One subtraction, then comparisons: the list is in idle order.
        let Some(cutoff) = now.checked_sub(IDLE_TIMEOUT) else {
            return;
        };
        let expired = self.conns.partition_point(|i| i.since <= cutoff);
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
    /// A client on the HTTP code in force (`http1::Engine`).
    pub(crate) fn new() -> Result<Client, String> {
        Client::on(super::Engine::current())
    }

    /// A client on `engine`'s code: its own, or hyper's.
    fn on(engine: super::Engine) -> Result<Client, String> {
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
        let hyper = engine == super::Engine::Hyper;
        Ok(Client {
            shared: Arc::new(Shared {
                twin: hyper.then(|| twin::Twin::new(&connector)),
                connector,
                idle: (0..crate::workers::shards())
                    .map(|_| Mutex::default())
                    .collect(),
            }),
        })
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
                idle.expire(crate::clock::tokio_now());
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
            since: crate::clock::tokio_now(),
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
        Ok(Conn {
            origin: target.origin.clone(),
            io: Box::pin(TokioIo::new(io)),
            buf: BytesMut::new(),
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

/// Where a connection goes: scheme and authority, in lower case, in one
/// string (compared at every checkout; `Authority`'s own comparison folds
/// case byte by byte).
#[derive(Clone, PartialEq)]
struct Origin(Arc<str>);

impl Origin {
    fn of(uri: &Uri) -> Origin {
        let scheme = uri.scheme_str().unwrap_or_default();
        let authority = uri.authority().map_or("", Authority::as_str);
        Origin(
            format!("{scheme}://{authority}")
                .to_ascii_lowercase()
                .into(),
        )
    }
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
    path: PathAndQuery,
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
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        Ok(Target(Arc::new(Prepared {
            uri: uri.clone(),
            origin: Origin::of(uri),
            path,
            host,
        })))
    }
}

/// The TCP stream under a plain-HTTP connection (None under TLS): read and
/// written by system call (`raw_io`).
fn plain(io: &Io) -> Option<&tokio::net::TcpStream> {
    match io.inner() {
        hyper_rustls::MaybeHttpsStream::Http(tcp) => Some(tcp.inner()),
        hyper_rustls::MaybeHttpsStream::Https(_) => None,
    }
}

/// One HTTP/1.1 connection, and what has been read from it and not yet
/// taken (the buffer is kept across requests).
struct Conn {
    origin: Origin,
    /// Boxed: a TLS stream is kilobytes, and a connection moves in and out
    /// of the pool and lives in every call's future.
    io: Pin<Box<Io>>,
    buf: BytesMut,
}

impl Conn {
    /// Reads what has arrived; `Ok(0)` once the backend has closed.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
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
    fn reusable(&mut self) -> bool {
        self.buf.is_empty()
            && self
                .poll_fill(&mut Context::from_waker(Waker::noop()))
                .is_pending()
    }

    /// Writes a request whole. An error says whether nothing of it left,
    /// so that it may be sent again elsewhere.
    async fn write(&mut self, head: &[u8], body: &[u8]) -> Result<(), Unsent> {
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

    async fn read_head(&mut self, method: &Method) -> Result<h1::Head, SendError> {
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

/// A write that failed.
struct Unsent {
    error: std::io::Error,
    /// Not a byte of the request left: it may go on another connection.
    whole: bool,
}

impl Unsent {
    fn new(error: std::io::Error, written: usize) -> Self {
        Unsent {
            error,
            whole: written == 0,
        }
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
    /// had closed meanwhile) is sent again on the next.
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
            return Ok(Response {
                status,
                headers: Headers::Hyper(headers),
                content_length,
                body: Body::Hyper(body),
            });
        }
        let mut head = Vec::with_capacity(192 + 64 * headers.size_hint().0);
        h1::write_request_head(
            &mut head,
            method,
            target.path.as_str(),
            &target.host,
            headers,
            body.len(),
        );
        loop {
            let (mut conn, reused) = match shared.checkout(&target.origin) {
                Some(conn) => (conn, true),
                // Boxed: the rare arm would make every call's future as big as a
                // TLS handshake's.
                None => (Box::pin(shared.connect(target)).await?, false),
            };
            match conn.write(&head, body).await {
                Ok(()) => {}
                Err(e) if reused && e.whole => continue,
                Err(e) => return Err(SendError::Io(e.error)),
            }
            let head = conn.read_head(method).await?;
            return Ok(Response {
                status: head.status,
                headers: Headers::Own(head.headers),
                content_length: head.content_length,
                body: Body::Own(ResponseBody {
                    decoder: head.body,
                    keep_alive: head.keep_alive,
                    conn: Some(conn),
                    shared: shared.clone(),
                }),
            });
        }
    }
}

/// A lent header, for as long as the request's own.
fn shorter<'s, 'l: 's>(
    pair: (&'l HeaderName, &'l HeaderValue),
) -> (&'s HeaderName, &'s HeaderValue) {
    pair
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
    #[error("connection error: {0}")]
    Io(std::io::Error),
    #[error("{0}")]
    Response(h1::Error),
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

pub(crate) struct Response {
    status: StatusCode,
    headers: Headers,
    content_length: Option<u64>,
    body: Body,
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
            Headers::Hyper(map) => super::header_text::visible_str(map.get(name)?.as_bytes()),
        }
    }
}

/// A response's body, as whichever reader reads it.
enum Body {
    Own(ResponseBody),
    Hyper(twin::Body),
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
struct ResponseBody {
    decoder: h1::Decoder,
    /// The backend did not say it would close the connection.
    keep_alive: bool,
    /// `None` once the connection broke.
    conn: Option<Conn>,
    shared: Arc<Shared>,
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

#[cfg(test)]
mod tests;
mod twin;
