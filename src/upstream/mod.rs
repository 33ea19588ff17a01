//! Upstream: one `Backend` per configured server. It owns the transport,
//! every backend session (a "link"), the list cache, health and restarts.
//! Callers see `call`, `list` and `answer`; which link serves them is the
//! backend's business.

mod answer;
mod cache;
mod catalog;
mod child;
mod conn;
mod deadline;
mod error;
pub(crate) mod event_stream;
pub(crate) mod events;
mod headers;
mod http;
mod legacy_sse;
mod link;
pub(crate) mod meta;
mod notice;
mod polling;
mod pool;
mod stdio;
mod supervisor;
mod throttle;

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::value::RawValue;
use tokio::sync::{Notify, broadcast, watch};
use tokio_util::sync::CancellationToken;

pub use catalog::Listing;
pub use conn::Answered;
pub use error::UpstreamError;
pub use events::{Event, EventSink};
pub(crate) use headers::AccessToken;
pub use link::SharedSession;
pub use notice::Notice;
pub use pool::Records;

/// For `fuzzing`: the SSE parser backend streams go through.
pub fn parse_events<S, E>(body: S) -> impl futures_util::Stream<Item = ()>
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    use futures_util::StreamExt;
    event_stream::events(body).map(|_| ())
}

use crate::config::{BackendConfig, Isolation, Transport};
use crate::jsonrpc::{self, Outcome};
use crate::metrics::Metrics;
use crate::protocol::{ClientCaps, Era};
use crate::traces;
use crate::vocab::{BackendName, ClientKey, ClientSession, Principal, SessionId};
use link::{EndReason, Link};
use pool::PerSession;

/// Who a request is for: the key of per-session isolation, and what the
/// client can be asked.
#[derive(Debug, Clone)]
pub struct Caller {
    key: ClientKey,
    /// The client session, whose end ends the backend sessions it owns
    /// (None: no session to end).
    session: Option<Arc<dyn ClientSession>>,
    /// A dual-era backend serves each client in the client's own era.
    era: Era,
    /// The server-to-client requests it declared it can answer.
    caps: ClientCaps,
    /// Its request's verified OAuth token (None: not scoped).
    token: Option<Arc<AccessToken>>,
}

impl Caller {
    pub fn session(id: SessionId, session: Arc<dyn ClientSession>, caps: ClientCaps) -> Caller {
        Caller {
            key: ClientKey::Session(id),
            session: Some(session),
            era: Era::Legacy,
            caps,
            token: None,
        }
    }

    /// A legacy client without a session (`sessions = "stateless"`): its
    /// `initialize` is not remembered, so it is taken to answer anything.
    pub fn principal(p: Principal) -> Caller {
        Caller {
            key: ClientKey::Principal(p),
            session: None,
            era: Era::Legacy,
            caps: ClientCaps::ALL,
            token: None,
        }
    }

    /// What it declared in its `initialize`, as a 2026-07-28 backend is
    /// told: nothing without a session, whose `initialize` nobody kept
    /// (its questions could reach no stream of its own).
    pub fn declared(&self) -> ClientCaps {
        match self.session {
            Some(_) => self.caps,
            None => ClientCaps::default(),
        }
    }

    /// A legacy client (it can be asked mid-request; a modern one cannot).
    pub fn is_legacy(&self) -> bool {
        self.era == Era::Legacy
    }

    /// What it declared it can be asked.
    pub fn caps(&self) -> ClientCaps {
        self.caps
    }

    /// Which client this is.
    pub fn key(&self) -> &ClientKey {
        &self.key
    }

    /// A caller for an answer relayed from another replica: only its key
    /// matters (answers are matched by client, nothing else).
    pub fn relayed(key: ClientKey) -> Caller {
        Caller {
            key,
            session: None,
            era: Era::Legacy,
            caps: ClientCaps::default(),
            token: None,
        }
    }

    /// The same client (session, or principal without one).
    pub fn is_same_client(&self, other: &Caller) -> bool {
        self.key == other.key
    }

    /// A 2026-07-28 client: no session, so per-session isolation keys on
    /// its principal; its capabilities come with each request.
    pub fn modern(p: Principal, caps: ClientCaps) -> Caller {
        Caller {
            key: ClientKey::Principal(p),
            session: None,
            era: Era::Modern,
            caps,
            token: None,
        }
    }

    /// The same caller, with its request's verified OAuth token.
    pub(crate) fn with_token(mut self, token: Option<Arc<AccessToken>>) -> Caller {
        self.token = token;
        self
    }

    /// The scopes it holds; None when scopes do not restrict it.
    pub fn scopes(&self) -> Option<&[String]> {
        self.token.as_deref().map(|t| &t.scopes[..])
    }
}

/// Hands what a backend announces to the other replicas (cluster mode).
pub type Relay = Arc<dyn Fn(&Notice) + Send + Sync>;

/// How long a call waits for a backend that is restarting after its
/// session ended (at most the backend's request timeout).
const RESTART_WAIT: Duration = Duration::from_secs(5);

/// What the backend told us about itself in `initialize`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InitInfo {
    pub capabilities: serde_json::Map<String, serde_json::Value>,
    pub instructions: Option<String>,
    pub protocol_version: String,
}

impl InitInfo {
    fn from_outcome(backend: &BackendName, outcome: &Outcome) -> Result<InitInfo, UpstreamError> {
        match outcome {
            Outcome::Result(r) => Self::parse(backend, r, "initialize", None),
            Outcome::Error(e) => Err(UpstreamError::protocol(
                backend,
                format!("initialize refused: {}", e.get()),
            )),
        }
    }

    /// From a 2026-07-28 `server/discover` result.
    fn from_discover(backend: &BackendName, result: &RawValue) -> Result<InitInfo, UpstreamError> {
        Self::parse(
            backend,
            result,
            "discover",
            Some(crate::protocol::MODERN_FIRST),
        )
    }

    /// `initialize` names the negotiated version; `server/discover` lists
    /// versions, and the gateway speaks the one it knows (`version`).
    fn parse(
        backend: &BackendName,
        result: &RawValue,
        what: &str,
        version: Option<&str>,
    ) -> Result<InitInfo, UpstreamError> {
        #[derive(serde::Deserialize)]
        struct Wire {
            #[serde(default)]
            capabilities: serde_json::Map<String, serde_json::Value>,
            #[serde(default)]
            instructions: Option<String>,
            #[serde(rename = "protocolVersion", default)]
            protocol_version: Option<String>,
        }
        let w: Wire = serde_json::from_str(result.get())
            .map_err(|e| UpstreamError::protocol(backend, format!("bad {what} result: {e}")))?;
        let protocol_version = version
            .map(str::to_owned)
            .or(w.protocol_version)
            .ok_or_else(|| {
                UpstreamError::protocol(backend, format!("{what} result has no protocolVersion"))
            })?;
        Ok(InitInfo {
            capabilities: w.capabilities,
            instructions: w.instructions,
            protocol_version,
        })
    }

    /// A 2026-07-28 backend: stateless, metadata on every request.
    pub fn is_modern(&self) -> bool {
        crate::protocol::is_modern(&self.protocol_version)
    }

    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.contains_key(capability)
    }

    /// The cheapest list call the backend supports, for the health check.
    fn health_probe(&self) -> &'static str {
        ["tools", "prompts", "resources"]
            .into_iter()
            .zip(["tools/list", "prompts/list", "resources/list"])
            .find(|(cap, _)| self.has(cap))
            .map_or("ping", |(_, m)| m)
    }
}

impl LinkCtx {
    /// Passes on what the link announced, marked with its client if it has one.
    fn notice(&self, mut notice: Notice) {
        if let Notice::ResourceUpdated { client, .. }
        | Notice::Log { client, .. }
        | Notice::Ask { client, .. } = &mut notice
        {
            client.clone_from(&self.client);
        }
        (self.on_notice)(notice);
    }

    /// The context of a link serving one client (None: every client).
    fn for_client(&self, client: Option<(ClientKey, ClientCaps)>) -> LinkCtx {
        match client {
            Some((key, caps)) => LinkCtx {
                client: Some(key),
                offer: caps,
                roots: None,
                ..self.clone()
            },
            None => self.clone(),
        }
    }

    /// The multiplexer of one of this backend's sessions.
    fn conn(
        &self,
        writer: tokio::sync::mpsc::Sender<conn::Frame>,
        writes: conn::Writes,
    ) -> Arc<conn::Conn> {
        let owner = self.client.clone().map(|key| (key, self.offer));
        conn::Conn::for_owner(
            self.name.clone(),
            self.warnings.clone(),
            writer,
            writes,
            owner,
            self.roots.clone(),
        )
    }
}

/// What every link of a backend shares.
#[derive(Clone)]
struct LinkCtx {
    name: BackendName,
    metrics: Arc<Metrics>,
    timeout: Duration,
    /// Called with what any link announces for clients.
    on_notice: Arc<dyn Fn(Notice) + Send + Sync>,
    /// The client of a per-session link (None: shared by all).
    client: Option<ClientKey>,
    /// What the backend session is told its client can answer: for a
    /// shared one what the gateway can route (sampling, elicitation, and
    /// roots when configured); per-session, the client's own declaration.
    offer: ClientCaps,
    /// A shared backend's configured roots, answered by the gateway.
    roots: Option<Arc<[String]>>,
    /// Bounds the backend's repeated warnings (garbage on the wire).
    warnings: Arc<throttle::Throttle>,
    /// Bounds the backend's own stderr lines in the gateway's log.
    stderr: Arc<throttle::Throttle>,
    /// The lists a 2026-07-28 backend announces changes of, now.
    watched: Arc<notice::Watched>,
}

enum TransportSpec {
    Stdio(child::StdioSpec),
    Http(Arc<http::HttpSpec>),
    Sse(Arc<http::HttpSpec>),
}

enum Pool {
    Shared(Mutex<Option<Arc<Link>>>),
    PerSession(Arc<PerSession>),
}

/// Where a caller's link stands (`Backend::find_link`).
enum Found<'a> {
    /// Open: the call goes over it.
    Ready(Arc<Link>),
    /// A legacy client of a dual-era backend: its legacy session is found
    /// or opened, else this modern link serves it statelessly.
    Legacy(Arc<Link>),
    /// The caller's own session (per-session isolation), not open yet.
    Unopened(&'a Arc<PerSession>),
    /// The shared session is gone; its replacement is not there yet.
    Gone,
}

enum Health {
    Starting,
    Up(Arc<InitInfo>),
    /// It was up and its session just ended: the supervisor is reopening it
    /// now. Calls wait for that (bounded by `RESTART_WAIT`) instead of
    /// failing: only the calls in flight when it died see an error.
    Restarting,
    /// Why, as a reason class (`UpstreamError::reason`).
    Down(&'static str),
    Stopped,
}

impl Health {
    /// What went wrong, for the status page's history (starting and
    /// stopping are not problems).
    fn problem(&self) -> Option<&'static str> {
        match self {
            Health::Restarting => Some("restarting"),
            Health::Down(why) => Some(why),
            Health::Up(..) | Health::Starting | Health::Stopped => None,
        }
    }
}

/// Mirrors of a backend's state, each written while its lock is held.
#[derive(Default)]
struct Glance {
    /// `health` is `Up`.
    up: AtomicBool,
    /// `health` is `Up` with a 2026-07-28 `initialize` result.
    up_modern: AtomicBool,
    /// `settled` is true.
    settled: AtomicBool,
    /// `modern` holds a link.
    modern_link: AtomicBool,
}

pub struct Backend {
    pub name: BackendName,
    /// Itself, for opens that run on their own task (see `pool`).
    me: Weak<Backend>,
    ctx: LinkCtx,
    transport: TransportSpec,
    pool: Pool,
    cache: cache::ListCache,
    /// What it lists, by name: calls are checked against it.
    catalogs: catalog::Catalogs,
    health: Mutex<Health>,
    /// What the status page shows of the backend's past.
    history: Mutex<HealthHistory>,
    /// False until the first start attempt has ended, either way.
    settled: watch::Sender<bool>,
    /// When requests stop waiting for `settled` (see `settle`).
    settle_until: tokio::time::Instant,
    /// Bumped on every health change, for calls waiting out a restart.
    health_changed: watch::Sender<()>,
    changes: broadcast::Sender<Notice>,
    /// A call found the backend unreachable: re-check its health now.
    wake: Notify,
    /// A 2026-07-28 backend's stateless link (None for legacy backends).
    modern: Mutex<Option<Arc<Link>>>,
    /// What every call asks of `health`, `settled` and `modern`, read
    /// without their locks (each take and release of a lock is a locked
    /// instruction, and the common call asked five times).
    glance: Glance,
    /// Set when a modern backend refused `initialize`: legacy clients are
    /// then served over the modern link too.
    legacy_refused: std::sync::atomic::AtomicBool,
    /// One legacy session opened at a time for a shared modern backend.
    opening: tokio::sync::Mutex<()>,
    /// How long an HTTP link may sit idle before it is pinged (zero: never;
    /// stdio children are watched by their exit instead).
    health_interval: Duration,
    /// Cluster mode: told what this backend announces (not what other
    /// replicas relayed), so that it reaches every replica.
    relay: std::sync::OnceLock<Relay>,
}

impl Backend {
    /// Starts the backend's supervisor; it runs until `stop` is cancelled
    /// and ends every backend session before it returns.
    pub fn start(
        config: &BackendConfig,
        metrics: Arc<Metrics>,
        settle_until: tokio::time::Instant,
        stop: CancellationToken,
    ) -> Result<(Arc<Backend>, tokio::task::JoinHandle<()>), String> {
        let transport = transport_spec(config)?;
        if let TransportSpec::Http(spec) | TransportSpec::Sse(spec) = &transport {
            // The gateway's own token, while the backend runs.
            tokio::spawn(spec.headers.clone().keep_fresh(
                spec.client.clone(),
                config.name.clone(),
                stop.clone(),
            ));
        }
        let backend = Arc::new_cyclic(|weak: &Weak<Backend>| {
            let me = weak.clone();
            let weak = weak.clone();
            Backend {
                name: config.name.clone(),
                me,
                ctx: LinkCtx {
                    name: config.name.clone(),
                    metrics,
                    timeout: config.request_timeout,
                    on_notice: Arc::new(move |notice: Notice| {
                        if let Some(b) = weak.upgrade() {
                            b.announce(notice);
                        }
                    }),
                    client: None,
                    offer: ClientCaps {
                        sampling: true,
                        elicitation: true,
                        elicitation_url: true,
                        roots: !config.roots.is_empty(),
                        roots_list_changed: false,
                    },
                    roots: (!config.roots.is_empty()).then(|| config.roots.clone().into()),
                    warnings: Arc::new(throttle::Throttle::new(5, Duration::from_secs(10))),
                    stderr: Arc::new(throttle::Throttle::new(100, Duration::from_secs(10))),
                    watched: Arc::default(),
                },
                transport,
                pool: match config.isolation {
                    Isolation::Shared => Pool::Shared(Mutex::new(None)),
                    Isolation::PerSession => Pool::PerSession(PerSession::new(
                        config.name.clone(),
                        config.max_sessions,
                        config.idle_ttl,
                    )),
                },
                cache: cache::ListCache::default(),
                catalogs: catalog::Catalogs::default(),
                health: Mutex::new(Health::Starting),
                history: Mutex::default(),
                settled: watch::channel(false).0,
                settle_until,
                health_changed: watch::channel(()).0,
                changes: broadcast::channel(16).0,
                wake: Notify::new(),
                modern: Mutex::new(None),
                glance: Glance::default(),
                legacy_refused: std::sync::atomic::AtomicBool::new(false),
                opening: tokio::sync::Mutex::new(()),
                relay: std::sync::OnceLock::new(),
                health_interval: match config.transport {
                    Transport::Stdio { .. } => Duration::ZERO,
                    Transport::Http { .. } | Transport::Sse { .. } => config.health_interval,
                },
            }
        });
        backend.ctx.metrics.backend_up(&backend.name, false);
        let task = tokio::spawn(supervisor::run(backend.clone(), stop));
        Ok((backend, task))
    }

    fn set_health(&self, health: Health) {
        let up = matches!(health, Health::Up(..));
        let problem = health.problem();
        let old = {
            let mut current = self.health.lock();
            let modern = matches!(&health, Health::Up(info) if info.is_modern());
            self.glance.up.store(up, Ordering::Release);
            self.glance.up_modern.store(modern, Ordering::Release);
            std::mem::replace(&mut *current, health)
        };
        let was_up = matches!(old, Health::Up(..));
        {
            // A problem is dated from when it began, not from each retry.
            let mut history = self.history.lock();
            if let Some(p) = problem
                && old.problem() != Some(p)
            {
                history.last_problem = Some((p, std::time::SystemTime::now()));
            }
            if up && !was_up {
                if history.ever_up {
                    history.restarts += 1;
                }
                history.ever_up = true;
            }
        }
        self.ctx.metrics.backend_up(&self.name, up);
        self.settled.send_replace(true);
        self.glance.settled.store(true, Ordering::Release);
        self.health_changed.send_replace(());
        if up && !was_up {
            // Clients that listed while it was away have incomplete lists.
            for kind in notice::ListKind::ALL {
                let _ = self.changes.send(Notice::ListChanged(kind));
            }
        }
    }

    /// Waits for the first start attempt to end, so that clients arriving
    /// with the gateway see complete lists; but only until the gateway's
    /// settle window closes. After that nothing ever waits here: a backend
    /// that hangs in its handshake delays no one else's `initialize`.
    pub async fn settle(&self) {
        // Nearly always: settled long ago, no waiter needed.
        if self.glance.settled.load(Ordering::Acquire) {
            return;
        }
        let mut rx = self.settled.subscribe();
        let _ = tokio::time::timeout_at(self.settle_until, rx.wait_for(|s| *s)).await;
    }

    /// Who the supervisor's session is for: everyone (shared), or, for a
    /// per-session backend's probe, a client that declared nothing, the
    /// most common kind, whose lists the probe then caches.
    fn probe_offer(&self) -> Option<(ClientKey, ClientCaps)> {
        match &self.pool {
            Pool::PerSession(_) => Some((
                ClientKey::Principal(Principal::Anonymous),
                ClientCaps::default(),
            )),
            Pool::Shared(_) => None,
        }
    }

    /// The list cache's profile for a caller: a per-session backend is told
    /// each client's own capabilities, and may list by them; every other
    /// backend lists the same for all.
    fn profile(&self, caps: ClientCaps) -> u8 {
        match &self.pool {
            Pool::PerSession(_) if self.modern_link().is_none() => caps.bits(),
            _ => 0,
        }
    }

    /// Whether a warning about this backend may be logged now: repeated
    /// warnings are bounded per backend (see `throttle`).
    pub fn may_warn(&self) -> bool {
        self.ctx.warnings.admit().is_some()
    }

    /// Bumped whenever the backend's lists may have changed.
    pub fn list_version(&self) -> u64 {
        self.cache.version()
    }

    /// The backend's `initialize` result, while it is healthy.
    pub fn info(&self) -> Option<Arc<InitInfo>> {
        match &*self.health.lock() {
            Health::Up(info) => Some(info.clone()),
            _ => None,
        }
    }

    /// Why the backend is not healthy, as a reason class (None when it is).
    pub fn problem(&self) -> Option<&'static str> {
        let health = self.health.lock();
        match &*health {
            Health::Starting => Some("starting"),
            Health::Stopped => Some("stopped"),
            other => other.problem(),
        }
    }

    /// Fails fast while the backend is down: no call waits on a dead peer.
    /// A restart in progress is waited out, briefly.
    async fn check_health(&self) -> Result<(), UpstreamError> {
        let mut changed = self.health_changed.subscribe();
        let until = tokio::time::Instant::now() + RESTART_WAIT.min(self.ctx.timeout);
        loop {
            match self.problem() {
                None => return Ok(()),
                Some("restarting") => {
                    if tokio::time::timeout_at(until, changed.changed())
                        .await
                        .is_err()
                    {
                        return Err(UpstreamError::down(&self.name, "restarting"));
                    }
                }
                Some(why) => return Err(UpstreamError::down(&self.name, why)),
            }
        }
    }

    /// Opens a backend session, for one client or (None) for all.
    async fn open(
        &self,
        client: Option<(ClientKey, ClientCaps)>,
    ) -> Result<Arc<Link>, UpstreamError> {
        let ctx = self.ctx.for_client(client);
        match &self.transport {
            TransportSpec::Stdio(spec) => stdio::open(&ctx, spec).await,
            TransportSpec::Http(spec) => http::open(&ctx, spec).await,
            TransportSpec::Sse(spec) => legacy_sse::open(&ctx, spec).await,
        }
    }

    /// A legacy session on an HTTP backend, skipping the era probe.
    async fn open_legacy(
        &self,
        client: Option<(ClientKey, ClientCaps)>,
    ) -> Result<Arc<Link>, UpstreamError> {
        match &self.transport {
            TransportSpec::Http(spec) => {
                http::open_legacy(&self.ctx.for_client(client), spec).await
            }
            _ => self.open(client).await,
        }
    }

    /// A client's own backend session. In cluster mode an HTTP backend
    /// session that another replica opened for the same client session is
    /// used rather than a second one opened; of two opened at once, the
    /// one recorded first is kept.
    async fn open_for(
        &self,
        client: (ClientKey, ClientCaps),
        legacy: bool,
    ) -> Result<Arc<Link>, UpstreamError> {
        let records = match &self.pool {
            Pool::PerSession(p) => p.records.get().cloned(),
            Pool::Shared(_) => None,
        };
        let (TransportSpec::Http(spec), Some(records), Some(tag)) =
            (&self.transport, records, client.0.shared_tag())
        else {
            return match legacy {
                true => self.open_legacy(Some(client)).await,
                false => self.open(Some(client)).await,
            };
        };
        let ctx = self.ctx.for_client(Some(client));
        let name = self.name.as_str();
        if let Some(theirs) = records.find(name, &tag).await {
            return http::adopt(&ctx, spec, theirs).await;
        }
        let ours = match legacy {
            true => http::open_legacy(&ctx, spec).await?,
            false => http::open(&ctx, spec).await?,
        };
        let Some(mine) = ours.shared() else {
            return Ok(ours); // 2026-07-28: no session to share
        };
        let idle_ttl = match &self.pool {
            Pool::PerSession(p) => p.idle_ttl,
            Pool::Shared(_) => Duration::ZERO,
        };
        match records.claim(name, &tag, mine, idle_ttl).await {
            None => Ok(ours),
            Some(theirs) => {
                ours.close(EndReason::Probe);
                ours.closed().await;
                http::adopt(&ctx, spec, theirs).await
            }
        }
    }

    /// Its client session ended on purpose (cluster mode): the shared
    /// backend session is ended now, whichever replica holds it.
    pub async fn end_shared(&self, client: &ClientKey) {
        let (Pool::PerSession(p), TransportSpec::Http(spec), Some(tag)) =
            (&self.pool, &self.transport, client.shared_tag())
        else {
            return;
        };
        if let Some(records) = p.records.get()
            && let Some(shared) = records.take(self.name.as_str(), &tag).await
        {
            http::delete_session(spec, &shared.session).await;
        }
    }

    /// An owning handle, for work that must outlive the caller's future.
    fn owned(&self) -> Result<Arc<Backend>, UpstreamError> {
        self.me
            .upgrade()
            .ok_or_else(|| UpstreamError::unavailable(&self.name, "stopping"))
    }

    fn modern_link(&self) -> Option<Arc<Link>> {
        if !self.glance.modern_link.load(Ordering::Acquire) {
            return None;
        }
        self.modern.lock().clone().filter(|l| !l.is_dead())
    }

    /// A 2026-07-28 backend's link, or None once it is gone.
    fn set_modern_link(&self, link: Option<Arc<Link>>) {
        let mut modern = self.modern.lock();
        self.glance
            .modern_link
            .store(link.is_some(), Ordering::Release);
        *modern = link;
    }

    /// Where the caller's link stands, as far as can be told without a wait.
    fn find_link(&self, caller: &Caller) -> Found<'_> {
        if let Some(modern) = self.modern_link() {
            use std::sync::atomic::Ordering::Relaxed;
            return if caller.era == Era::Modern || self.legacy_refused.load(Relaxed) {
                Found::Ready(modern)
            } else {
                Found::Legacy(modern)
            };
        }
        match &self.pool {
            Pool::Shared(slot) => slot
                .lock()
                .clone()
                .filter(|l| !l.is_dead())
                .map_or(Found::Gone, Found::Ready),
            Pool::PerSession(p) => p.existing(caller).map_or(Found::Unopened(p), Found::Ready),
        }
    }

    /// The link a call goes over when none has to be waited for or opened:
    /// the backend is up and the caller's session open (else `link_for`).
    fn ready_link(&self, caller: &Caller) -> Option<Arc<Link>> {
        if !self.glance.up.load(Ordering::Acquire) {
            return None;
        }
        match self.find_link(caller) {
            Found::Ready(link) => Some(link),
            Found::Legacy(_) | Found::Unopened(_) | Found::Gone => None,
        }
    }

    /// The link a call goes over. A shared session that just died is waited
    /// for (briefly) while the supervisor replaces it, as a restart is.
    async fn link_for(&self, caller: &Caller) -> Result<Arc<Link>, UpstreamError> {
        let until = tokio::time::Instant::now() + RESTART_WAIT.min(self.ctx.timeout);
        loop {
            // Subscribed before looking: a replacement made meanwhile wakes us.
            let mut changed = self.health_changed.subscribe();
            self.check_health().await?;
            if let Some(link) = self.live_link(caller).await? {
                return Ok(link);
            }
            self.wake.notify_one();
            if tokio::time::timeout_at(until, changed.changed())
                .await
                .is_err()
            {
                return Err(UpstreamError::unavailable(&self.name, "reconnecting"));
            }
        }
    }

    /// None: the shared session is gone and its replacement not yet there.
    async fn live_link(&self, caller: &Caller) -> Result<Option<Arc<Link>>, UpstreamError> {
        match self.find_link(caller) {
            Found::Ready(link) => Ok(Some(link)),
            Found::Gone => Ok(None),
            // A legacy client keeps its legacy semantics (sessions, server
            // requests, logging) when the backend still speaks them.
            Found::Legacy(modern) => match self.legacy_link(caller).await {
                Ok(link) => Ok(Some(link)),
                Err(e) if !e.is_unreachable() => {
                    tracing::info!(backend = %self.name, error = %e, "no legacy sessions; serving legacy clients statelessly");
                    self.legacy_refused
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    Ok(Some(modern))
                }
                Err(e) => Err(e),
            },
            Found::Unopened(p) => {
                let me = self.owned()?;
                let client = (caller.key.clone(), caller.caps);
                let link = p
                    .get_or_open(
                        caller,
                        move || async move { me.open_for(client, false).await },
                    )
                    .await;
                if let Err(e) = &link
                    && e.is_unreachable()
                {
                    self.wake.notify_one();
                }
                link.map(Some)
            }
        }
    }

    /// The legacy session for a legacy client of a dual-era backend.
    async fn legacy_link(&self, caller: &Caller) -> Result<Arc<Link>, UpstreamError> {
        match &self.pool {
            Pool::Shared(slot) => {
                let _one = self.opening.lock().await;
                if let Some(l) = slot.lock().clone().filter(|l| !l.is_dead()) {
                    return Ok(l);
                }
                let link = self.open_legacy(None).await?;
                *slot.lock() = Some(link.clone());
                Ok(link)
            }
            Pool::PerSession(p) => {
                let me = self.owned()?;
                let client = (caller.key.clone(), caller.caps);
                p.get_or_open(
                    caller,
                    move || async move { me.open_for(client, true).await },
                )
                .await
            }
        }
    }

    /// Sends a request. Progress and server-to-client requests caused by it
    /// go to `events`.
    pub async fn call(
        &self,
        caller: &Caller,
        method: &str,
        params: Option<Box<RawValue>>,
        events: Option<&EventSink>,
    ) -> Result<Outcome, UpstreamError> {
        let to = events.map(|events| conn::ListenerRef {
            events,
            client: &caller.key,
            caps: caller.caps,
        });
        // Traced: the backend continues the trace from the gateway's span.
        let span = traces::BackendSpan::start(&self.name, self.transport(), method);
        let trace = span.as_ref().map(traces::BackendSpan::fields);
        let params = match &trace {
            Some(fields) => meta::with_trace(params.as_deref(), fields).or(params),
            None => params,
        };
        let result = self.send(caller, method, params, to, trace).await;
        if let Some(span) = span {
            span.end(&result);
        }
        result
    }

    async fn send(
        &self,
        caller: &Caller,
        method: &str,
        params: Option<Box<RawValue>>,
        to: Option<conn::ListenerRef<'_>>,
        trace: Option<Vec<(&'static str, String)>>,
    ) -> Result<Outcome, UpstreamError> {
        // Boxed: the exchange's future is large, and most backends have none.
        let authorization = match self.exchanges() {
            true => Box::pin(self.authorization(caller)).await?,
            false => None,
        };
        let mut retried = false;
        loop {
            // The rare paths are boxed: their futures (opening a session,
            // reading a tool's schema) would make every call's large.
            let link = match self.ready_link(caller) {
                Some(link) => link,
                None => Box::pin(self.link_for(caller)).await?,
            };
            let _in_use = link.begin();
            let (sent, mut headers) = if link.info.is_modern() {
                let headers = Box::pin(self.param_headers(caller, method, params.as_deref())).await;
                let sent = match caller.is_legacy() {
                    true => {
                        meta::declared_by(params.as_deref(), &caller.declared()).map(Cow::Owned)
                    }
                    false => None,
                };
                (sent.or(params.as_deref().map(Cow::Borrowed)), headers)
            } else {
                (meta::strip_modern(params.as_deref()), Vec::new())
            };
            if let Some(fields) = &trace {
                headers.extend(fields.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
            }
            if let Some(value) = &authorization {
                headers.push(("authorization".to_owned(), value.clone()));
            }
            let result = link
                .conn
                .call_with(method, sent.as_deref(), to, self.ctx.timeout, headers)
                .await;
            match &result {
                // Its session died before the request left (the supervisor
                // may not know yet): never executed, so it goes to the
                // replacement instead of failing.
                Err(e) if e.is_not_sent() && !retried => {
                    retried = true;
                    // Until its owner has seen it end, the dead link is
                    // still the one `link_for` finds.
                    let _ = tokio::time::timeout(RESTART_WAIT, link.dead().cancelled()).await;
                    continue;
                }
                Err(e) if e.is_unreachable() => self.wake.notify_one(),
                _ => {}
            }
            return result;
        }
    }

    /// Whether calls made for a client carry its token exchanged.
    fn exchanges(&self) -> bool {
        match &self.transport {
            TransportSpec::Http(spec) | TransportSpec::Sse(spec) => spec.headers.exchanges(),
            TransportSpec::Stdio(_) => false,
        }
    }

    /// The `Authorization` of a call made for `caller` on a backend that
    /// takes the client's token exchanged (None: the link's own headers).
    async fn authorization(&self, caller: &Caller) -> Result<Option<String>, UpstreamError> {
        let (TransportSpec::Http(spec) | TransportSpec::Sse(spec)) = &self.transport else {
            return Ok(None);
        };
        spec.headers
            .for_client(&spec.client, caller.token.as_deref(), self.ctx.timeout)
            .await
            .map_err(|why| {
                // Bounded: a client without a token may call in a loop.
                if let Some(suppressed) = self.ctx.warnings.admit() {
                    tracing::warn!(backend = %self.name, suppressed, "no token for a client's call: {why}");
                }
                UpstreamError::unauthorized(&self.name, why)
            })
    }

    /// One page of a list, from the cache or fetched over a backend session
    /// that already exists (a per-session backend borrows any client's; only
    /// with none at all is one opened, and closed again, for the fetch).
    pub async fn list(
        &self,
        caller: &Caller,
        method: &'static str,
        cursor: Option<&str>,
    ) -> Result<Outcome, UpstreamError> {
        self.check_health().await?;
        let profile = self.profile(caller.caps);
        if let Some(page) = self.cache.get(method, profile, cursor) {
            return Ok(Outcome::Result(page));
        }
        self.fetch_list(caller, method, cursor).await
    }

    /// One page of a list, fetched (and kept, as the page cache decides)
    /// whatever the cache holds.
    async fn fetch_list(
        &self,
        caller: &Caller,
        method: &'static str,
        cursor: Option<&str>,
    ) -> Result<Outcome, UpstreamError> {
        let profile = self.profile(caller.caps);
        let version = self.cache.version();
        let (link, _transient) = match (&self.pool, self.modern_link()) {
            (_, Some(modern)) => (modern, None),
            (Pool::Shared(_), None) => (self.link_for(caller).await?, None),
            (Pool::PerSession(p), None) => match p.any_for(caller) {
                Some(l) => (l, None),
                None => {
                    // Told this caller's capabilities, as its own would be.
                    let l = self.open(Some((caller.key.clone(), caller.caps))).await?;
                    (l.clone(), Some(link::CloseOnDrop::new(l, EndReason::Probe)))
                }
            },
        };
        let params = cursor.map(|c| jsonrpc::raw(&serde_json::json!({ "cursor": c })));
        let result = link.conn.call(method, params, None, self.ctx.timeout).await;
        let refresh = match &result {
            Ok(Outcome::Result(page)) => {
                let ttl = match link.info.is_modern() {
                    false => None,
                    // Another principal must never be served it from here.
                    true if is_private(page) => Some(Duration::ZERO),
                    true if self.ctx.watched.covers(method) => None,
                    true => Some(ttl_of(page)),
                };
                self.cache.put(version, method, profile, cursor, page, ttl)
            }
            _ => Some("error"),
        };
        if let Some(refresh) = refresh {
            self.ctx.metrics.list_refresh(&self.name, refresh);
        }
        result
    }

    /// The `Mcp-Param-*` headers a modern backend expects on a tools/call,
    /// computed from its own schema (the gateway may have renamed the tool).
    async fn param_headers(
        &self,
        caller: &Caller,
        method: &str,
        params: Option<&RawValue>,
    ) -> Vec<(String, String)> {
        if method != "tools/call" {
            return Vec::new();
        }
        #[derive(serde::Deserialize)]
        struct Call {
            name: String,
            #[serde(default)]
            arguments: Option<serde_json::Value>,
        }
        let Some(call) = params.and_then(|p| serde_json::from_str::<Call>(p.get()).ok()) else {
            return Vec::new();
        };
        match self.tool_schema(caller, &call.name).await {
            Some(schema) => crate::mirror::params(
                &crate::mirror::annotations(&schema),
                call.arguments.as_ref(),
            ),
            None => Vec::new(),
        }
    }

    /// Delivers a client's answer to a request this backend sent it.
    /// Only the client the request was relayed to may answer it; any other
    /// answer is dropped and counted.
    pub fn answer(&self, caller: &Caller, token: &str, outcome: &Outcome) -> Answered {
        let link = match &self.pool {
            Pool::Shared(slot) => slot.lock().clone(),
            Pool::PerSession(p) => p.existing(caller),
        };
        let answered = link.map_or(Answered::Unknown, |l| {
            l.conn.answer(token, &caller.key, outcome)
        });
        if answered == Answered::NotYours {
            tracing::warn!(backend = %self.name, "a client answered a server request relayed to another; dropped");
        }
        answered
    }

    /// Records how full this backend's bounded maps are, for /metrics.
    pub fn census(&self) {
        let mut links: Vec<Arc<Link>> = Vec::new();
        links.extend(self.modern.lock().clone());
        let slots = match &self.pool {
            Pool::Shared(slot) => {
                links.extend(slot.lock().clone());
                0
            }
            Pool::PerSession(p) => {
                links.extend(p.links());
                p.len()
            }
        };
        let (calls, server_requests) = links
            .iter()
            .map(|l| l.conn.census())
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
        let (pages, seen) = self.cache.census();
        let m = &self.ctx.metrics;
        let name = self.name.as_str();
        m.entries("pending_calls", name, calls);
        m.entries("server_requests", name, server_requests);
        m.entries("backend_slots", name, slots);
        m.entries("list_pages", name, pages);
        m.entries("list_hashes", name, seen);
        m.entries("catalogs", name, self.catalogs.census());
    }

    /// What the backend announces for clients (list changes, resource
    /// updates), as it happens.
    pub fn subscribe_changes(&self) -> broadcast::Receiver<Notice> {
        self.changes.subscribe()
    }

    fn announce(&self, notice: Notice) {
        if let Some(relay) = self.relay.get() {
            relay(&notice);
        }
        self.announce_here(notice);
    }

    /// What another replica's session of this backend announced.
    pub fn announce_here(&self, notice: Notice) {
        if let Notice::ListChanged(kind) = &notice {
            self.cache.invalidate(kind.method());
        }
        let _ = self.changes.send(notice);
    }

    /// Cluster mode: what this backend announces is also handed to
    /// `relay`, and its per-session backend sessions to `records`.
    pub fn join_cluster(&self, relay: Relay, records: Arc<dyn Records>) {
        let _ = self.relay.set(relay);
        if let Pool::PerSession(p) = &self.pool {
            let _ = p.records.set(records);
        }
    }

    /// Ends a backend session by its id alone (one a dead replica left).
    pub async fn delete_session(&self, session: &str) {
        if let TransportSpec::Http(spec) = &self.transport {
            http::delete_session(spec, session).await;
        }
    }

    /// Passes a client's notification about itself (its roots changed) to
    /// its own backend session, if it has one here; a shared backend's
    /// roots are the configured ones and do not change with a client.
    pub fn client_notification(&self, caller: &Caller, method: &str) {
        if let Pool::PerSession(p) = &self.pool
            && let Some(link) = p.existing(caller)
        {
            link.conn.send(jsonrpc::notification(method, None));
        }
    }

    /// Whether it speaks 2026-07-28 (answers may be `input_required`).
    pub fn is_modern(&self) -> bool {
        self.glance.up_modern.load(Ordering::Acquire)
    }

    /// Whether every client shares one backend session (so one client's
    /// `resources/unsubscribe` must not end another's subscription).
    pub fn is_shared(&self) -> bool {
        matches!(self.pool, Pool::Shared(_)) || self.modern_link().is_some()
    }

    /// How the backend is reached: `stdio`, `http` or `sse`.
    pub fn transport(&self) -> &'static str {
        match self.transport {
            TransportSpec::Stdio(_) => "stdio",
            TransportSpec::Http(_) => "http",
            TransportSpec::Sse(_) => "sse",
        }
    }

    /// (the last problem and when it began, the times it came back up).
    pub fn history(&self) -> (Option<(&'static str, std::time::SystemTime)>, u64) {
        let h = self.history.lock();
        (h.last_problem, h.restarts)
    }
}

/// A backend's health over its life, for the status page.
#[derive(Default)]
struct HealthHistory {
    ever_up: bool,
    /// Came back up after having been up.
    restarts: u64,
    last_problem: Option<(&'static str, std::time::SystemTime)>,
}

/// Whether a modern result is `cacheScope: "private"`: its authorization
/// context's only.
fn is_private(page: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Scope {
        #[serde(rename = "cacheScope")]
        scope: Option<String>,
    }
    page.get().contains("\"private\"")
        && serde_json::from_str::<Scope>(page.get())
            .is_ok_and(|s| s.scope.as_deref() == Some("private"))
}

/// A modern result's `ttlMs` (missing or negative: 0, per the spec).
fn ttl_of(page: &RawValue) -> Duration {
    #[derive(serde::Deserialize)]
    struct Ttl {
        #[serde(rename = "ttlMs", default)]
        ttl_ms: Option<i64>,
    }
    let ms = serde_json::from_str::<Ttl>(page.get())
        .ok()
        .and_then(|t| t.ttl_ms)
        .unwrap_or(0);
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Whether `start` would accept this backend (a reload checks every new
/// one before it starts any).
pub fn check(config: &BackendConfig) -> Result<(), String> {
    transport_spec(config).map(drop)
}

fn transport_spec(config: &BackendConfig) -> Result<TransportSpec, String> {
    Ok(match &config.transport {
        Transport::Stdio {
            command,
            args,
            env,
            inherit,
            cwd,
        } => TransportSpec::Stdio(child::StdioSpec {
            command: command.clone(),
            args: args.clone(),
            env: env.clone(),
            inherit: inherit.clone(),
            cwd: cwd.clone(),
        }),
        Transport::Http { url, headers } => {
            TransportSpec::Http(Arc::new(http_spec(url, headers, config)?))
        }
        Transport::Sse { url, headers } => {
            TransportSpec::Sse(Arc::new(http_spec(url, headers, config)?))
        }
    })
}

fn http_spec(
    url: &str,
    headers: &[(String, crate::config::Secret)],
    config: &BackendConfig,
) -> Result<http::HttpSpec, String> {
    let mut url = url::Url::parse(url).map_err(|e| format!("bad url: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("bad url: scheme {} (http or https)", url.scheme()));
    }
    // Credentials in the URL (`http://user:pass@host/`) go as Basic auth,
    // as browsers and curl send them, and leave the URL.
    let basic = basic_auth(&url);
    let _ = url.set_username("");
    let _ = url.set_password(None);
    let uri = url
        .as_str()
        .parse::<::http::Uri>()
        .map_err(|e| format!("bad url: {e}"))?;
    let mut map = ::http::HeaderMap::new();
    for (k, v) in headers {
        let name =
            ::http::HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k}: {e}"))?;
        let mut value = ::http::HeaderValue::from_str(v.expose())
            .map_err(|_| format!("header {k}: invalid value"))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    if let Some(mut value) = basic
        && !map.contains_key(::http::header::AUTHORIZATION)
    {
        value.set_sensitive(true);
        map.insert(::http::header::AUTHORIZATION, value);
    }
    // No redirects are followed: one would carry the configured secret
    // headers to wherever the backend points (a 3xx is an error, not a hop).
    let client = crate::http1::client::Client::new().map_err(|e| format!("http client: {e}"))?;
    let target = crate::http1::client::Target::new(&uri).map_err(|e| format!("bad url: {e}"))?;
    Ok(http::HttpSpec {
        url,
        target,
        headers: Arc::new(headers::Headers::new(map, config.credentials.as_ref())?),
        client,
    })
}

/// `Authorization: Basic` from a URL's user and password, if it has them.
fn basic_auth(url: &url::Url) -> Option<::http::HeaderValue> {
    use base64::Engine as _;
    if url.username().is_empty() && url.password().is_none() {
        return None;
    }
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let pair = format!(
        "{}:{}",
        decode(url.username()),
        decode(url.password().unwrap_or(""))
    );
    let token = base64::engine::general_purpose::STANDARD.encode(pair);
    ::http::HeaderValue::from_str(&format!("Basic {token}")).ok()
}
