//! Upstream: one `Backend` per configured server. It owns the transport,
//! every backend session (a "link"), the list cache, health and restarts.
//! Callers see `call`, `list` and `answer`; which link serves them is the
//! backend's business.
//!
//! `Backend` is defined here; its work is split by verb: started from its
//! config (`start.rs`), which session a call goes over (`links.rs`), the
//! call itself (`calls.rs`), its lists (`lists.rs`, `catalog.rs`), its
//! health (`health.rs`), what it announces (`notice.rs`). Who a request is
//! for is a `Caller` (`caller.rs`); what every session of a backend shares,
//! a `LinkCtx` (`link_ctx.rs`).

mod answer;
mod cache;
mod caller;
mod calls;
mod catalog;
mod child;
mod conn;
mod deadline;
mod error;
pub(crate) mod event_stream;
pub(crate) mod events;
mod exit;
mod headers;
mod health;
mod http;
mod init_info;
mod legacy_sse;
mod line_reader;
mod link;
mod link_ctx;
mod links;
mod lists;
pub(crate) mod meta;
mod notice;
pub(crate) mod oauth;
mod polling;
mod pool;
mod principals;
mod sandbox;
mod start;
mod stdio;
mod supervisor;
mod throttle;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{Notify, broadcast, watch};

pub use caller::Caller;
pub use catalog::Listing;
pub use conn::Answered;
pub use error::UpstreamError;
pub use events::{Event, EventSink};
pub(crate) use headers::AccessToken;
pub use init_info::InitInfo;
pub use link::SharedSession;
pub use notice::Notice;
pub use pool::Records;
pub use sandbox::report as sandbox_report;
pub use start::check;

/// For `fuzzing`: the SSE parser backend streams go through.
pub fn parse_events<S, E>(body: S) -> impl futures_util::Stream<Item = ()>
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    use futures_util::StreamExt;
    event_stream::events(body).map(|_| ())
}

use crate::vocab::{BackendName, ClientKey};
use health::{Health, HealthHistory};
use link::Link;
use link_ctx::LinkCtx;
use pool::PerSession;

/// Hands what a backend announces to the other replicas (cluster mode).
pub type Relay = Arc<dyn Fn(&Notice) + Send + Sync>;

/// How long a call waits for a backend that is restarting after its
/// session ended (at most the backend's request timeout).
const RESTART_WAIT: Duration = Duration::from_secs(5);

enum TransportSpec {
    Stdio(child::StdioSpec),
    Http(Arc<http::HttpSpec>),
    Sse(Arc<http::HttpSpec>),
}

enum Pool {
    Shared(Mutex<Option<Arc<Link>>>),
    PerSession(Arc<PerSession>),
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
    /// `[backends.NAME.principals]`: each principal's own credentials and
    /// links (None: every caller reaches it with the backend's own).
    principals: Option<principals::Principals>,
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
