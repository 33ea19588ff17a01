//! Streamable HTTP backend sessions (legacy revisions, `Mcp-Session-Id`).
//!
//! Each message is its own POST; a request's answer (and the progress and
//! server requests it causes) come back on that POST's response, so they
//! are routed to exactly the request that caused them. A GET stream carries
//! the rest (list changes). A 404 for our session means the backend forgot
//! it: the request was not executed, so we re-initialize once and retry.
//!
//! Here: the endpoint and how a link on it is opened and owned. Its
//! session's life (`session.rs`), its POSTs and what comes back on them
//! (`post.rs`), the stream of everything else (`listen.rs`).

mod listen;
mod post;
mod session;

use std::sync::Arc;
use std::time::Duration;

use ::http::Method;
use ::http::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use bytes::Bytes;
use futures_util::StreamExt;
use parking_lot::Mutex;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::conn::Writes;
use super::deadline::Deadline;
use super::event_stream;
use super::exit::Exit;
use super::link::{EndReason, Link, SharedSession};
use super::meta;
use super::{InitInfo, LinkCtx, UpstreamError};
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
    let writer = tokio::spawn(post::write_frames(wire.clone(), conn.clone(), rx));
    let listener = tokio::spawn(listen::listen(wire.clone(), conn));
    link.own(tokio::spawn(own(link.clone(), wire, writer, listener)));
    Ok(link)
}

async fn own(
    link: Arc<Link>,
    wire: Arc<Endpoint>,
    writer: tokio::task::JoinHandle<()>,
    listener: tokio::task::JoinHandle<()>,
) {
    let lost = tokio::select! {
        _ = link.close_requested().cancelled() => false,
        _ = wire.fatal.cancelled() => {
            tracing::warn!(backend = %wire.ctx.name, "backend unreachable; session dropped");
            true
        }
    };
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
    if reason == EndReason::Failed {
        wire.ctx
            .ended_on_its_own(if lost { Exit::Closed } else { Exit::Unhealthy });
    }
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
