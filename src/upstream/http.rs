//! Streamable HTTP backend sessions (legacy revisions, `Mcp-Session-Id`).
//!
//! Each message is its own POST; a request's answer (and the progress and
//! server requests it causes) come back on that POST's response, so they
//! are routed to exactly the request that caused them. A GET stream carries
//! the rest (list changes). A 404 for our session means the backend forgot
//! it: the request was not executed, so we re-initialize once and retry.

use std::sync::Arc;
use std::time::Duration;

use ::http::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use ::http::{Method, StatusCode};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use parking_lot::Mutex;
use serde_json::json;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::conn::{Conn, Frame, Writes};
use super::deadline::Deadline;
use super::event_stream;
use super::link::{self, EndReason, Link, SharedSession};
use super::meta;
use super::{InitInfo, LinkCtx, Notice, UpstreamError};
use crate::http1::client::{self as http_client, RequestBuilder, Response};
use crate::jsonrpc::{self, Message, Outcome};
use crate::protocol::{SESSION_HEADER, VERSION_HEADER};

const WRITE_QUEUE: usize = 1024;
/// POSTs one link has in flight at once; more wait their turn.
const MAX_POSTS: usize = 256;
/// The largest response body taken from a backend (the bound stdio lines
/// and SSE events have too): a backend cannot make the gateway buffer
/// without limit.
const MAX_BODY: usize = 64 * 1024 * 1024;
const JSON: HeaderValue = HeaderValue::from_static("application/json");
const JSON_OR_SSE: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");
/// DELETE is a courtesy: never let a dead backend hold up a close.
const DELETE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub(super) struct HttpSpec {
    /// As configured (the legacy SSE transport resolves against it).
    pub(super) url: url::Url,
    /// The same, prepared for requests.
    pub(super) target: http_client::Target,
    /// From the config (and the gateway's own token); never anything of
    /// the client's.
    pub(super) headers: Arc<super::headers::Headers>,
    pub(super) client: http_client::Client,
}

#[derive(Clone)]
struct Session {
    id: Option<HeaderValue>,
    version: HeaderValue,
    /// Bumped by each (re-)initialize, so concurrent 404s re-initialize once.
    generation: u64,
}

/// The names a session's headers go under, where a request can lend them
/// (a `const` `HeaderName` is a new value at each use).
static VERSION_NAME: HeaderName = VERSION_HEADER;
static SESSION_NAME: HeaderName = SESSION_HEADER;

/// What every JSON-RPC POST says it sends and takes.
static POSTING: [(HeaderName, HeaderValue); 2] = [(CONTENT_TYPE, JSON), (ACCEPT, JSON_OR_SSE)];

impl Session {
    /// Its headers, lent to a request (a clone of a `HeaderValue` made at
    /// run time counts a reference, and another when it drops).
    fn headers(&self) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
        std::iter::once((&VERSION_NAME, &self.version))
            .chain(self.id.as_ref().map(|id| (&SESSION_NAME, id)))
    }
}

/// `req` with `session`'s headers, owned (a request that outlives the
/// session's lock; a call lends them instead).
fn with_session(req: RequestBuilder, session: &Session) -> RequestBuilder {
    session.headers().fold(req, |req, (name, value)| {
        req.header(name.clone(), value.clone())
    })
}

struct Endpoint {
    /// A 2026-07-28 backend: no session, metadata on every request.
    modern: bool,
    ctx: LinkCtx,
    spec: Arc<HttpSpec>,
    /// Replaced whole by each (re-)initialize; every call reads it.
    session: Mutex<Arc<Session>>,
    /// Held while (re-)initializing, and by the owner while it ends the
    /// session, so that no re-initialize races the DELETE.
    reinit: tokio::sync::Mutex<()>,
    /// Cancelled when the backend cannot be reached: the link is dead.
    fatal: CancellationToken,
    /// Cancelled once the owner ends the session: a late 404 must not
    /// open a new backend session that nobody would close.
    closing: CancellationToken,
    /// `MAX_POSTS`: requests past it wait (within their deadline).
    posts: tokio::sync::Semaphore,
}

/// A request is its own POST, sent from the caller's task.
impl super::conn::Post for Endpoint {
    fn post<'a>(&'a self, conn: &'a Conn, frame: Frame) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // Closed only with the endpoint, never while it is in use. A
            // permit is nearly always free: taken without a waiter.
            let _permit = match self.posts.try_acquire() {
                Ok(permit) => permit,
                Err(tokio::sync::TryAcquireError::NoPermits) => match self.posts.acquire().await {
                    Ok(permit) => permit,
                    Err(_) => return,
                },
                Err(tokio::sync::TryAcquireError::Closed) => return,
            };
            send(self, conn, frame).await;
        })
    }
}

/// Opens a link in the backend's era: probed on every open, so a backend
/// that changed is found.
pub(super) async fn open(ctx: &LinkCtx, spec: &Arc<HttpSpec>) -> Result<Arc<Link>, UpstreamError> {
    match discover(ctx, spec).await? {
        Some(info) => connect(ctx, spec, Start::Modern(info)).await,
        None => connect(ctx, spec, Start::Initialize).await,
    }
}

/// A legacy session, for the legacy clients of a dual-era backend.
pub(super) async fn open_legacy(
    ctx: &LinkCtx,
    spec: &Arc<HttpSpec>,
) -> Result<Arc<Link>, UpstreamError> {
    connect(ctx, spec, Start::Initialize).await
}

/// A session another replica opened (cluster mode): used as recorded, with
/// no handshake. Should the backend have forgotten it, its first 404
/// re-initializes, as for any session.
pub(super) async fn adopt(
    ctx: &LinkCtx,
    spec: &Arc<HttpSpec>,
    shared: SharedSession,
) -> Result<Arc<Link>, UpstreamError> {
    connect(ctx, spec, Start::Adopt(shared)).await
}

enum Start {
    Modern(InitInfo),
    Initialize,
    Adopt(SharedSession),
}

async fn connect(
    ctx: &LinkCtx,
    spec: &Arc<HttpSpec>,
    start: Start,
) -> Result<Arc<Link>, UpstreamError> {
    let _ = Deadline::after(ctx.timeout)
        .run(&ctx.name, spec.headers.ready())
        .await;
    let mut session = Session {
        id: None,
        version: HeaderValue::from_static(crate::protocol::LegacyVersion::LATEST.as_str()),
        generation: 0,
    };
    if let Start::Adopt(shared) = &start {
        let bad = || UpstreamError::protocol(&ctx.name, "unusable shared session record");
        session.id = Some(HeaderValue::from_str(&shared.session).map_err(|_| bad())?);
        session.version = HeaderValue::from_str(&shared.version).map_err(|_| bad())?;
    }
    let wire = Arc::new(Endpoint {
        modern: matches!(start, Start::Modern(_)),
        ctx: ctx.clone(),
        spec: spec.clone(),
        session: Mutex::new(Arc::new(session)),
        reinit: tokio::sync::Mutex::new(()),
        fatal: CancellationToken::new(),
        closing: CancellationToken::new(),
        posts: tokio::sync::Semaphore::new(MAX_POSTS),
    });
    let info = match start {
        Start::Modern(info) => info,
        Start::Initialize => wire.initialize().await?,
        Start::Adopt(shared) => {
            // Counted as opened here: each replica's gauge counts its links.
            ctx.metrics.backend_session_opened(&ctx.name);
            shared.info
        }
    };
    let (tx, rx) = mpsc::channel(WRITE_QUEUE);
    let conn = ctx.conn(tx, Writes::Untracked);
    conn.post_directly(wire.clone());
    let link = Link::new(conn.clone(), info);
    let endpoint = Arc::downgrade(&wire);
    link.set_remote(Box::new(move || {
        let endpoint = endpoint.upgrade()?;
        let session = endpoint.session.lock();
        let id = session.id.as_ref()?.to_str().ok()?.to_owned();
        let version = session.version.to_str().ok()?.to_owned();
        Some((id, version))
    }));
    let writer = tokio::spawn(write_frames(wire.clone(), conn.clone(), rx));
    let listener = tokio::spawn(listen(wire.clone(), conn));
    link.own(tokio::spawn(own(link.clone(), wire, writer, listener)));
    Ok(link)
}

async fn own(
    link: Arc<Link>,
    wire: Arc<Endpoint>,
    writer: tokio::task::JoinHandle<()>,
    listener: tokio::task::JoinHandle<()>,
) {
    tokio::select! {
        _ = link.close_requested().cancelled() => {}
        _ = wire.fatal.cancelled() => {
            tracing::warn!(backend = %wire.ctx.name, "backend unreachable; session dropped");
        }
    }
    wire.closing.cancel();
    // Callers waiting for answers are failed now (and drop their POSTs),
    // not once the DELETE below is done; dropping the writer drops the
    // notifications and responses in flight.
    link.conn.fail_all();
    writer.abort();
    listener.abort();
    let _ = writer.await;
    let _one = wire.reinit.lock().await;
    if link.reason() != EndReason::Failed && !link.is_detached() {
        wire.delete().await;
    }
    let reason = link.ended();
    if !wire.modern {
        wire.ctx
            .metrics
            .backend_session_closed(&wire.ctx.name, reason.label());
    }
}

/// The era probe: `server/discover` in the 2026-07-28 form. A result means
/// a modern backend (no session will be opened); a refusal without a modern
/// answer means a legacy one (`S/2026-07-28/basic/versioning.mdx`).
async fn discover(ctx: &LinkCtx, spec: &HttpSpec) -> Result<Option<InitInfo>, UpstreamError> {
    let deadline = Deadline::after(ctx.timeout);
    // A backend that takes the gateway's token gets none before it has one.
    let _ = deadline.run(&ctx.name, spec.headers.ready()).await;
    let id = jsonrpc::raw(&"sluice-discover");
    let (params, _) = meta::ensure_modern("server/discover", None);
    let body = jsonrpc::request(&id, "server/discover", Some(&params));
    let send = spec
        .client
        .request(Method::POST, &spec.target)
        .headers(&spec.headers.current())
        .header(CONTENT_TYPE, JSON)
        .header(ACCEPT, JSON_OR_SSE)
        .header(VERSION_HEADER, crate::protocol::MODERN_FIRST)
        .header("mcp-method", "server/discover")
        .body(body)
        .send();
    let resp = deadline
        .run(&ctx.name, send)
        .await?
        .map_err(|e| UpstreamError::from_http(&ctx.name, e))?;
    if !resp.status().is_success() {
        return Ok(None);
    }
    match deadline
        .run(&ctx.name, answer_of(&ctx.name, resp, &id))
        .await?
    {
        Ok(Outcome::Result(r)) => Ok(Some(InitInfo::from_discover(&ctx.name, &r)?)),
        _ => Ok(None),
    }
}

impl Endpoint {
    /// A request with the configured headers and its session's.
    fn request(&self, method: Method, session: &Session) -> RequestBuilder {
        with_session(self.unsessioned(method), session)
    }

    /// A request with the configured headers only.
    fn unsessioned(&self, method: Method) -> RequestBuilder {
        self.spec
            .client
            .request(method, &self.spec.target)
            .headers(&self.spec.headers.current())
    }

    fn post(&self, session: &Session, body: impl Into<Bytes>) -> RequestBuilder {
        with_session(self.posting(), session).body(body)
    }

    /// A JSON-RPC POST without its body or a session's headers: a call
    /// lends those (`send_lent_with`).
    fn posting(&self) -> RequestBuilder {
        POSTING
            .iter()
            .fold(self.unsessioned(Method::POST), |req, (name, value)| {
                req.header(name, value)
            })
    }

    /// A legacy call's POST, every header lent: the configured ones, then
    /// `posting`'s, then `session`'s (what `posting` and `send_lent_with`
    /// would send, without a builder).
    async fn post_lent(
        &self,
        session: &Session,
        body: &[u8],
    ) -> Result<Response, http_client::SendError> {
        let configured = self.spec.headers.current();
        let headers = configured
            .iter()
            .chain(POSTING.iter().map(|(k, v)| (k, v)))
            .chain(session.headers());
        self.spec
            .client
            .send(&Method::POST, &self.spec.target, headers, body)
            .await
    }

    /// A modern request: metadata in the body, mirrored in the headers.
    fn post_modern(&self, line: &str, extra: &[(String, String)]) -> RequestBuilder {
        let mut req = self
            .posting()
            .header(VERSION_HEADER, crate::protocol::MODERN_FIRST);
        req = req.header_pairs(extra);
        let body = match Message::parse(line.as_bytes()) {
            Ok(Message::Request(r)) => {
                let (params, name) = meta::ensure_modern(&r.method, r.params.as_deref());
                req = req.header("mcp-method", r.method.as_str());
                if let Some(n) = name {
                    req = req.header("mcp-name", crate::mirror::encode(&n));
                }
                jsonrpc::request(&r.id, &r.method, Some(&params))
            }
            Ok(Message::Notification(n)) => {
                req = req.header("mcp-method", n.method.as_str());
                line.to_owned()
            }
            _ => line.to_owned(),
        };
        req.body(body)
    }

    /// Opens a session: initialize, remember its id and version, initialized.
    /// One deadline covers it all; from the moment the backend names a
    /// session, a failure or a cancellation at any await ends that session.
    async fn initialize(&self) -> Result<InitInfo, UpstreamError> {
        let name = &self.ctx.name;
        let deadline = Deadline::after(self.ctx.timeout);
        let fresh = Session {
            id: None,
            ..(**self.session.lock()).clone()
        };
        let id = jsonrpc::raw(&"sluice-initialize");
        let body = jsonrpc::request(
            &id,
            "initialize",
            Some(&link::initialize_params(&self.ctx.offer)),
        );
        let resp = deadline
            .run(name, self.post(&fresh, body).send())
            .await?
            .map_err(|e| UpstreamError::from_http(name, e))?;
        if !resp.status().is_success() {
            // Reachable, but refusing sessions (a modern-only server).
            return Err(UpstreamError::protocol(
                name,
                format!("initialize answered HTTP {}", resp.status()),
            ));
        }
        let opened = Session {
            id: resp.headers().get(&SESSION_HEADER),
            ..fresh
        };
        let mut unfinished = Unfinished::new(self, &opened);
        let outcome = deadline.try_run(name, answer_of(name, resp, &id)).await?;
        let info = InitInfo::from_outcome(name, &outcome)?;
        let version = HeaderValue::from_str(&info.protocol_version)
            .map_err(|_| UpstreamError::protocol(name, "bad protocolVersion"))?;
        let session = Session {
            version,
            generation: self.session.lock().generation + 1,
            ..opened
        };
        unfinished.session = session.clone();
        let note = jsonrpc::notification("notifications/initialized", None);
        let resp = deadline
            .run(name, self.post(&session, note).send())
            .await?
            .map_err(|e| UpstreamError::from_http(name, e))?;
        if !resp.status().is_success() {
            return Err(UpstreamError::protocol(
                name,
                format!("notifications/initialized answered HTTP {}", resp.status()),
            ));
        }
        unfinished.disarm();
        *self.session.lock() = Arc::new(session);
        self.ctx.metrics.backend_session_opened(name);
        Ok(info)
    }

    /// After a 404: re-initialize, unless a concurrent caller already did.
    async fn reinitialize(&self, seen: u64) -> Result<(), UpstreamError> {
        let _one = self.reinit.lock().await;
        if self.closing.is_cancelled() {
            return Err(UpstreamError::unavailable(
                &self.ctx.name,
                "session closing",
            ));
        }
        if self.session.lock().generation != seen {
            return Ok(());
        }
        tracing::info!(backend = %self.ctx.name, "backend forgot our session; re-initializing");
        self.ctx
            .metrics
            .backend_session_closed(&self.ctx.name, EndReason::Expired.label());
        self.initialize().await.map(|_| ())
    }

    async fn delete(&self) {
        let session = self.session.lock().clone();
        if session.id.is_none() {
            return;
        }
        let req = self.request(Method::DELETE, &session).send();
        if let Ok(Ok(resp)) = tokio::time::timeout(DELETE_TIMEOUT, req).await {
            tracing::debug!(backend = %self.ctx.name, status = %resp.status(), "backend session deleted");
        }
    }
}

/// A backend session whose opening has not finished. Nobody else knows its
/// id, so unless disarmed it is ended on drop (an error, or a cancellation
/// at any await of the opening): the DELETE runs on its own task.
struct Unfinished {
    delete: Option<RequestBuilder>,
    session: Session,
    ctx_name: crate::vocab::BackendName,
}

impl Unfinished {
    fn new(endpoint: &Endpoint, session: &Session) -> Unfinished {
        Unfinished {
            delete: session
                .id
                .is_some()
                .then(|| endpoint.request(Method::DELETE, session)),
            session: session.clone(),
            ctx_name: endpoint.ctx.name.clone(),
        }
    }

    fn disarm(&mut self) {
        self.delete = None;
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        let Some(req) = self.delete.take() else {
            return;
        };
        // The version header may have been settled since the request was
        // built; the session id is what the backend needs.
        let req = match &self.session.id {
            Some(id) => req.header(SESSION_HEADER, id.clone()),
            None => return,
        };
        let name = self.ctx_name.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = tokio::time::timeout(DELETE_TIMEOUT, req.send()).await;
                tracing::debug!(backend = %name, "unfinished backend session ended");
            });
        }
    }
}

/// Sends each queued frame (notifications and responses; requests are
/// posted by their callers) as its own POST, concurrently, all owned by
/// this one task: when the link ends, the task is dropped and every POST in
/// flight with it (no detached task can outlive its backend session).
async fn write_frames(wire: Arc<Endpoint>, conn: Arc<Conn>, mut rx: mpsc::Receiver<Frame>) {
    // Bounded like the call itself; a stream nobody waits for ends.
    let limit = wire.ctx.timeout + Duration::from_secs(1);
    let mut in_flight = FuturesUnordered::new();
    loop {
        tokio::select! {
            frame = rx.recv(), if in_flight.len() < MAX_POSTS => match frame {
                Some(frame) => in_flight.push(tokio::time::timeout(limit, send(&wire, &conn, frame))),
                None => break,
            },
            Some(_) = in_flight.next(), if !in_flight.is_empty() => {}
        }
    }
    while in_flight.next().await.is_some() {}
}

async fn send(wire: &Endpoint, conn: &Conn, frame: Frame) {
    let name = &wire.ctx.name;
    if wire.modern && frame.call.is_none() {
        // 2026-07-28 has no client notifications or responses over HTTP.
        return;
    }
    for attempt in 0..2 {
        let session = wire.session.lock().clone();
        // The legacy body is lent to both attempts: no copy, no sharing.
        let sent = if wire.modern {
            wire.post_modern(&frame.line, &frame.headers).send().await
        } else if frame.headers.is_empty() {
            wire.post_lent(&session, frame.line.as_bytes()).await
        } else {
            // A call's own headers replace configured ones: the builder's
            // `header_pairs` does that.
            wire.posting()
                .header_pairs(&frame.headers)
                .send_lent_with(session.headers(), frame.line.as_bytes())
                .await
        };
        let resp = match sent {
            Ok(r) => r,
            // A request that could not even be built (a header value the
            // backend's schema led to) fails that call, not the link.
            Err(e) if e.is_builder() => {
                if let Some(id) = frame.call {
                    conn.fail(
                        id,
                        UpstreamError::protocol(name, "request could not be built"),
                    );
                }
                return;
            }
            Err(e) => {
                if let Some(id) = frame.call {
                    conn.fail(id, UpstreamError::from_http(&wire.ctx.name, e));
                }
                wire.fatal.cancel();
                return;
            }
        };
        let status = resp.status();
        if status == StatusCode::NOT_FOUND
            && session.id.is_some()
            && attempt == 0
            && !wire.closing.is_cancelled()
        {
            // The request was not executed: re-initialize, then retry it.
            // (Boxed: the handshake's future would make every call's large.)
            if let Err(e) = Box::pin(wire.reinitialize(session.generation)).await {
                if let Some(id) = frame.call {
                    conn.fail(id, e);
                }
                wire.fatal.cancel();
                return;
            }
            continue;
        }
        if !status.is_success() {
            // A JSON-RPC error riding on a 4xx (-32021, -32602, ...) is the
            // backend's answer: it passes through, its data intact.
            if is_json(&resp)
                && let Ok(body) = resp.bytes(MAX_BODY).await
                && let Ok(Message::Response(_)) = Message::parse(&body)
            {
                dispatch(wire, conn, &body, frame.call);
                return;
            }
            if let Some(id) = frame.call {
                conn.fail(
                    id,
                    UpstreamError::protocol(name, format!("answered HTTP {status}")),
                );
            }
            return;
        }
        deliver(wire, conn, resp, frame.call).await;
        return;
    }
}

/// Feeds a POST's response (one JSON message, a batch, or an SSE stream)
/// to the connection, tagged with the request it answers.
async fn deliver(wire: &Endpoint, conn: &Conn, resp: Response, origin: Option<u64>) {
    let mut answered = false;
    if is_event_stream(&resp) {
        let mut stream = std::pin::pin!(event_stream::of_response(resp));
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) if !ev.data.is_empty() => {
                    answered |= dispatch(wire, conn, ev.data.as_bytes(), origin);
                }
                Ok(_) => {}
                Err(e) => {
                    if wire.ctx.warnings.admit().is_some() {
                        tracing::warn!(backend = %wire.ctx.name, error = %e, "response stream broke");
                    }
                    break;
                }
            }
        }
    } else {
        let body = match resp.bytes(MAX_BODY).await {
            Ok(body) => body,
            Err(e) => {
                if wire.ctx.warnings.admit().is_some() {
                    tracing::warn!(backend = %wire.ctx.name, error = %e, "response body refused");
                }
                bytes::Bytes::new()
            }
        };
        // One object is the common case: a batch only when it starts with '['.
        match body.iter().find(|b| !b.is_ascii_whitespace()) {
            None => {}
            Some(b'[') => match serde_json::from_slice::<Vec<Box<RawValue>>>(&body) {
                Ok(batch) => {
                    for m in &batch {
                        answered |= dispatch(wire, conn, m.get().as_bytes(), origin);
                    }
                }
                Err(e) => tracing::warn!(backend = %wire.ctx.name, error = %e, "unparseable batch"),
            },
            // Not UTF-8 is not JSON: refused as unparseable, never mangled.
            Some(_) => answered = dispatch(wire, conn, &body, origin),
        }
    }
    if let Some(id) = origin
        && !answered
    {
        // A response stream that ended without the answer: fail, don't hang.
        conn.fail_with(id, || {
            UpstreamError::protocol(&wire.ctx.name, "response ended without an answer")
        });
    }
}

/// Hands one message to the connection; true if it answered `origin`.
fn dispatch(wire: &Endpoint, conn: &Conn, data: &[u8], origin: Option<u64>) -> bool {
    let (notice, answered) = conn.dispatch_answering(data, origin);
    if let Some(notice) = notice {
        wire.ctx.notice(notice);
    }
    answered
}

fn is_json(resp: &Response) -> bool {
    resp.headers()
        .get_str(&CONTENT_TYPE)
        .is_some_and(|v| v.starts_with("application/json"))
}

fn is_event_stream(resp: &Response) -> bool {
    resp.headers()
        .get_str(&CONTENT_TYPE)
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// The answer to one request (initialize), from JSON or an SSE stream.
async fn answer_of(
    name: &crate::vocab::BackendName,
    resp: Response,
    id: &RawValue,
) -> Result<Outcome, UpstreamError> {
    let matches = |text: &str| match Message::parse(text.as_bytes()) {
        Ok(Message::Response(r)) if r.id.get() == id.get() => Some(r.outcome),
        _ => None,
    };
    if is_event_stream(&resp) {
        let mut stream = std::pin::pin!(event_stream::of_response(resp));
        while let Some(Ok(ev)) = stream.next().await {
            if let Some(o) = matches(&ev.data) {
                return Ok(o);
            }
        }
    } else if let Ok(body) = resp.bytes(MAX_BODY).await
        && let Some(o) = matches(&String::from_utf8_lossy(&body))
    {
        return Ok(o);
    }
    Err(UpstreamError::protocol(name, "initialize got no answer"))
}

/// The standalone GET stream (legacy) or `subscriptions/listen` (modern):
/// list changes and other unsolicited messages. Reconnects with backoff
/// while the link lives; a 405 means there is none.
async fn listen(wire: Arc<Endpoint>, conn: Arc<Conn>) {
    let mut backoff = Duration::from_millis(500);
    loop {
        let session = wire.session.lock().clone();
        let resp = if wire.modern {
            let all = json!({ "notifications": {
                "toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true } });
            let line = jsonrpc::request(
                &jsonrpc::raw(&"sluice-listen"),
                "subscriptions/listen",
                Some(&jsonrpc::raw(&all)),
            );
            wire.post_modern(&line, &[]).send()
        } else {
            wire.request(Method::GET, &session)
                .header(ACCEPT, "text/event-stream")
                .send()
        };
        // Until the headers come: a backend that accepts and never answers
        // is retried like one that refused.
        let resp = match tokio::time::timeout(wire.ctx.timeout, resp).await {
            Ok(r) => r,
            Err(_) => {
                tracing::debug!(backend = %wire.ctx.name, "GET stream not answered in time");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        match resp {
            Ok(r) if r.status() == StatusCode::METHOD_NOT_ALLOWED => return,
            Ok(r) if r.status() == StatusCode::NOT_FOUND && session.id.is_some() => {
                if wire.reinitialize(session.generation).await.is_err() {
                    wire.fatal.cancel();
                    return;
                }
                continue;
            }
            Ok(r) if r.status().is_success() && is_event_stream(&r) => {
                backoff = Duration::from_millis(500);
                let mut stream = std::pin::pin!(event_stream::of_response(r));
                while let Some(Ok(ev)) = stream.next().await {
                    if wire.modern && wire.ctx.watched.acknowledged(&ev.data) {
                        continue;
                    }
                    if !ev.data.is_empty() {
                        dispatch(&wire, &conn, ev.data.as_bytes(), None);
                    }
                }
                // Changes from now on would go unseen: what was kept for
                // lack of them is dropped, and clients told to list again.
                for kind in wire.ctx.watched.end() {
                    wire.ctx.notice(Notice::ListChanged(kind));
                }
            }
            Ok(r) => {
                tracing::debug!(backend = %wire.ctx.name, status = %r.status(), "no GET stream");
            }
            // Nothing listens where the backend was: it is gone, and the
            // link with it (health turns down now, not at the next call).
            Err(e) if e.is_connect() => {
                tracing::debug!(backend = %wire.ctx.name, error = %e, "backend refused the GET stream");
                wire.fatal.cancel();
                return;
            }
            Err(e) => {
                tracing::debug!(backend = %wire.ctx.name, error = %e, "GET stream failed");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

/// Ends a backend session by its id alone, for a session whose link is
/// gone (its replica died): the same DELETE the link's owner would send.
pub(super) async fn delete_session(spec: &HttpSpec, session: &str) {
    let Ok(id) = HeaderValue::from_str(session) else {
        return;
    };
    let req = spec
        .client
        .request(Method::DELETE, &spec.target)
        .headers(&spec.headers.current())
        .header(SESSION_HEADER, id)
        .send();
    let _ = tokio::time::timeout(DELETE_TIMEOUT, req).await;
}

#[cfg(test)]
mod tests {
    /// The POST of every call is a future moved into a box whole
    /// (`Endpoint::post`): re-initializing inline once made it 5 KiB.
    #[test]
    #[allow(unreachable_code, clippy::diverging_sub_expression)]
    fn a_post_future_stays_small() {
        fn future_size<F: std::future::Future>(_make: impl FnOnce() -> F) -> usize {
            std::mem::size_of::<F>()
        }
        // 1,736 bytes when this was written (the same in release).
        let send = future_size(|| super::send(todo!(), todo!(), todo!()));
        assert!(send <= 2 * 1024, "http::send: {send} bytes");
    }
}
