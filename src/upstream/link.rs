//! A link is one live backend session: a stdio child, or a session on an
//! HTTP backend. It has exactly one owner task, which ends the session
//! (terminates the child, or sends DELETE) when asked or when it dies.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::conn::Conn;
use super::deadline::Deadline;
use super::{InitInfo, UpstreamError};
use crate::jsonrpc::{self, Outcome};
use crate::protocol::ClientCaps;
use crate::vocab::BackendName;

/// Why a backend session ended (the `reason` label of
/// `sluice_backend_sessions_closed_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EndReason {
    /// The gateway is stopping.
    Shutdown,
    /// The client session that owned it ended.
    ClientClosed,
    /// Unused for longer than the backend's idle_ttl.
    Idle,
    /// Opened only to check health or fetch a list.
    Probe,
    /// The process exited or the connection failed.
    Failed,
    /// The backend answered 404: it had forgotten the session.
    Expired,
}

impl EndReason {
    pub(super) fn label(self) -> &'static str {
        match self {
            EndReason::Shutdown => "shutdown",
            EndReason::ClientClosed => "client_closed",
            EndReason::Idle => "idle",
            EndReason::Probe => "probe",
            EndReason::Failed => "exited",
            EndReason::Expired => "expired",
        }
    }
}

pub(super) struct Link {
    pub(super) conn: Arc<Conn>,
    pub(super) info: Arc<InitInfo>,
    /// Cancelled once the session is over, for whatever reason.
    dead: crate::cancel_flag::CancelFlag,
    /// Cancelled to ask the owner task to end the session.
    close: CancellationToken,
    reason: Mutex<EndReason>,
    /// When the link was made, and its last use in nanoseconds since then
    /// (stamped by every call: a store, where a lock is two locked
    /// instructions).
    born: Instant,
    last_used: AtomicU64,
    /// Requests in flight: a link in use is never idle, however long a
    /// call takes (the idle reaper must not close it under the call).
    busy: AtomicUsize,
    /// The backend's id and version for this session (HTTP), as they are now.
    remote: std::sync::OnceLock<RemoteOf>,
    /// Another replica still uses the backend session: closing the link
    /// must leave it open at the backend (cluster mode).
    detached: AtomicBool,
    owner: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Reads an HTTP link's (backend session id, protocol version) as they are
/// now: a 404 re-initializes, and changes both.
pub(super) type RemoteOf = Box<dyn Fn() -> Option<(String, String)> + Send + Sync>;

/// An HTTP backend session as replicas share it (cluster mode): enough to
/// use it without an `initialize` of one's own.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SharedSession {
    pub session: String,
    pub version: String,
    pub info: InitInfo,
}

impl Link {
    pub(super) fn new(conn: Arc<Conn>, info: InitInfo) -> Arc<Link> {
        Arc::new(Link {
            conn,
            info: Arc::new(info),
            dead: crate::cancel_flag::CancelFlag::new(),
            close: CancellationToken::new(),
            reason: Mutex::new(EndReason::Failed),
            born: Instant::now(),
            last_used: AtomicU64::new(0),
            busy: AtomicUsize::new(0),
            remote: std::sync::OnceLock::new(),
            detached: AtomicBool::new(false),
            owner: Mutex::new(None),
        })
    }

    /// Hands the link its owner task, which must end with `ended`.
    pub(super) fn own(&self, task: tokio::task::JoinHandle<()>) {
        *self.owner.lock() = Some(task);
    }

    /// Asks the owner to end the session. The first reason given sticks.
    pub(super) fn close(&self, reason: EndReason) {
        if !self.close.is_cancelled() {
            *self.reason.lock() = reason;
            self.close.cancel();
        }
    }

    /// Waits until the owner task has ended the session.
    pub(super) async fn closed(&self) {
        let task = self.owner.lock().take();
        match task {
            Some(t) => {
                let _ = t.await;
            }
            None => self.dead.cancelled().await,
        }
    }

    /// For the owner task: the signal to end the session.
    pub(super) fn close_requested(&self) -> &CancellationToken {
        &self.close
    }

    /// Why the session is ending (Failed unless someone asked to close it).
    pub(super) fn reason(&self) -> EndReason {
        *self.reason.lock()
    }

    /// For the owner task: the session is over. Fails whoever still waits
    /// and returns why it ended.
    pub(super) fn ended(&self) -> EndReason {
        self.conn.fail_all();
        self.dead.cancel();
        *self.reason.lock()
    }

    pub(super) fn is_dead(&self) -> bool {
        self.dead.is_cancelled()
    }

    pub(super) fn dead(&self) -> &CancellationToken {
        self.dead.token()
    }

    /// Tells the link where to read the backend's id and protocol version
    /// for its session.
    pub(super) fn set_remote(&self, remote: RemoteOf) {
        let _ = self.remote.set(remote);
    }

    /// The backend's session as another replica could use it (HTTP).
    pub(super) fn shared(&self) -> Option<SharedSession> {
        let (session, version) = self.remote.get().and_then(|f| f())?;
        Some(SharedSession {
            session,
            version,
            info: (*self.info).clone(),
        })
    }

    /// Closing will leave the backend session open: another replica uses it.
    pub(super) fn detach(&self) {
        self.detached.store(true, Ordering::Relaxed);
    }

    /// For the owner task: whether to leave the backend session open.
    pub(super) fn is_detached(&self) -> bool {
        self.detached.load(Ordering::Relaxed)
    }

    /// Marks the link in use until the guard drops, which stamps its last
    /// use (while it is in use, it is not idle at all).
    pub(super) fn begin(&self) -> InUse<'_> {
        self.busy.fetch_add(1, Ordering::AcqRel);
        InUse(self)
    }

    /// How long the link has been unused (zero while a call is in flight).
    pub(super) fn idle_for(&self) -> Duration {
        if self.busy.load(Ordering::Acquire) > 0 {
            return Duration::ZERO;
        }
        let used = self.born + Duration::from_nanos(self.last_used.load(Ordering::Acquire));
        used.elapsed()
    }
}

/// A request in flight on a link.
pub(super) struct InUse<'a>(&'a Link);

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        let since = crate::clock::tokio_now().saturating_duration_since(self.0.born);
        let nanos = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX);
        self.0.last_used.store(nanos, Ordering::Release);
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Closes a link opened for one job when the job ends, on any path: its
/// future may be cancelled at any await, and the link's owner task would
/// otherwise keep the session open with nobody left to close it.
pub(super) struct CloseOnDrop {
    link: Option<Arc<Link>>,
    reason: EndReason,
}

impl CloseOnDrop {
    pub(super) fn new(link: Arc<Link>, reason: EndReason) -> CloseOnDrop {
        CloseOnDrop {
            link: Some(link),
            reason,
        }
    }

    /// The job succeeded and someone else owns the link now.
    pub(super) fn disarm(mut self) -> Arc<Link> {
        self.link
            .take()
            .unwrap_or_else(|| unreachable!("armed until disarmed"))
    }
}

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if let Some(link) = &self.link {
            link.close(self.reason);
        }
    }
}

/// Makes a link of a connection whose handshake has run, with its owner
/// task; a failed handshake still ends the session through that owner.
pub(super) async fn establish(
    conn: Arc<Conn>,
    handshake: Result<InitInfo, UpstreamError>,
    owner: impl FnOnce(Arc<Link>) -> tokio::task::JoinHandle<()>,
) -> Result<Arc<Link>, UpstreamError> {
    let info = handshake
        .as_ref()
        .map_or_else(|_| InitInfo::default(), InitInfo::clone);
    let link = Link::new(conn, info);
    link.own(owner(link.clone()));
    match handshake {
        Ok(_) => Ok(link),
        Err(e) => {
            link.close(EndReason::Failed);
            link.closed().await;
            Err(e)
        }
    }
}

/// The legacy handshake over a multiplexed connection (stdio, HTTP+SSE).
pub(super) async fn handshake(
    conn: &Conn,
    timeout: Duration,
    offer: &ClientCaps,
) -> Result<InitInfo, UpstreamError> {
    let b = conn.backend().clone();
    let deadline = Deadline::after(timeout);
    let outcome = conn
        .call("initialize", Some(initialize_params(offer)), None, timeout)
        .await?;
    let info = InitInfo::from_outcome(&b, &outcome)?;
    conn.notify("notifications/initialized", None, deadline)
        .await?;
    Ok(info)
}

/// The gateway's `initialize` to a backend: it declares what the client
/// behind it can be asked (see `LinkCtx::offer`).
pub(super) fn initialize_params(offer: &ClientCaps) -> Box<serde_json::value::RawValue> {
    jsonrpc::raw(&serde_json::json!({
        "protocolVersion": crate::protocol::LegacyVersion::LATEST.as_str(),
        "capabilities": offer.to_json(),
        "clientInfo": { "name": "sluice", "version": env!("CARGO_PKG_VERSION") },
    }))
}

/// Healthy means a list call succeeded, not that a process or socket exists.
/// Returns the first page, so the probe also fills the cache.
pub(super) async fn probe(
    link: &Link,
    timeout: Duration,
) -> Result<(&'static str, Box<serde_json::value::RawValue>), UpstreamError> {
    let method = link.info.health_probe();
    match link.conn.call(method, None, None, timeout).await? {
        Outcome::Result(r) => Ok((method, r.into_raw())),
        Outcome::Error(e) => Err(UpstreamError::protocol(
            &name_of(link),
            format!("{method} refused: {}", e.get()),
        )),
    }
}

fn name_of(link: &Link) -> BackendName {
    link.conn.backend().clone()
}
