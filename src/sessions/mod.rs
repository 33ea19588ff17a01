//! Client sessions: who may use which session id, and for how long.
//!
//! Knows nothing of HTTP. Every session is bounded three ways (idle TTL,
//! table capacity, per-principal cap) and ends without the client's help.
//! Ending a session cancels its `ended` token and its requests in flight;
//! whatever a session holds elsewhere (streams, per-session backends)
//! watches that token.

mod in_flight;
pub mod sealed;
mod table;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use in_flight::InFlight;
use table::{Full, Table};

use crate::cancel_flag::RequestCancel;
use crate::metrics::ResumeCause;
pub use sealed::Contents;
pub use sealer::{Ids, Sealer};

mod sealer;

use crate::metrics::{CloseReason, Metrics};
use crate::protocol::{ClientCaps, LegacyVersion, LogLevel};
use crate::vocab::{Principal, SessionId, unix_now};

/// One legacy client session.
pub struct Session {
    pub id: SessionId,
    pub principal: Principal,
    pub version: LegacyVersion,
    /// What the client declared in `initialize` it can be asked.
    pub caps: ClientCaps,
    /// Sealed ids only: the absolute end (unix seconds) and the serial
    /// its revocation is kept under.
    sealed: Option<Box<(u64, [u8; 16])>>,
    /// A digest of what the id is bound to (principal and namespace, for
    /// sealed ids; nothing for table ids): presented with anything else,
    /// the id is not found, in memory or not.
    binding: u64,
    ended: CancellationToken,
    /// At most one standalone GET stream per session.
    streaming: AtomicBool,
    /// The caller's tag for where the session was opened (the front's
    /// namespace index), for counts by namespace.
    namespace: u16,
    /// What changes while it lives, under one lock (one lock word and its
    /// padding fewer: a smaller allocation class).
    state: Mutex<State>,
}

struct State {
    /// Requests in flight, by the client's raw id, so that the client's
    /// `notifications/cancelled` can reach them. Entries live exactly as
    /// long as their request.
    in_flight: InFlight,
    /// What few sessions use, kept apart so that an idle session stays
    /// small (the table holds hundreds of thousands).
    extras: Option<Box<Extras>>,
}

/// Per-session state most sessions never have.
#[derive(Default)]
struct Extras {
    /// Resource URIs (as the client names them) it subscribed to; at most
    /// `MAX_SUBSCRIPTIONS`.
    subscriptions: HashSet<String>,
    /// The level set by `logging/setLevel` (None: no log messages).
    log_level: Option<LogLevel>,
}

/// Resource subscriptions one session may hold.
pub const MAX_SUBSCRIPTIONS: usize = 1024;

impl Session {
    fn new(
        id: SessionId,
        principal: Principal,
        version: LegacyVersion,
        caps: ClientCaps,
        sealed: Option<(u64, [u8; 16])>,
        bound: &[u8],
        namespace: u16,
    ) -> Arc<Session> {
        Arc::new(Session {
            namespace,
            id,
            principal,
            version,
            caps,
            sealed: sealed.map(Box::new),
            binding: digest(bound),
            ended: CancellationToken::new(),
            streaming: AtomicBool::new(false),
            state: Mutex::new(State {
                in_flight: InFlight::None,
                extras: None,
            }),
        })
    }

    /// Sealed ids: (absolute end in unix seconds, serial).
    pub fn sealed(&self) -> Option<(u64, [u8; 16])> {
        self.sealed.as_deref().copied()
    }

    /// A sealed session lives no longer than its id says, even in memory.
    fn is_past_its_end(&self) -> bool {
        self.sealed
            .as_deref()
            .is_some_and(|(expires, _)| unix_now() >= *expires)
    }

    /// Cancelled when the session ends, by any path.
    pub fn ended(&self) -> &CancellationToken {
        &self.ended
    }

    /// Claims the session's one GET stream; false if one is already open.
    pub fn claim_stream(&self) -> bool {
        !self.streaming.swap(true, Ordering::AcqRel)
    }

    pub fn release_stream(&self) {
        self.streaming.store(false, Ordering::Release);
    }

    /// Registers a request by its raw JSON-RPC id; cancelled by `cancel`
    /// and by the session's end until the guard drops.
    pub(crate) fn track(self: &Arc<Self>, raw_id: &str) -> Tracked {
        let cancel = RequestCancel::new();
        self.state.lock().in_flight.insert(raw_id, cancel.clone());
        Tracked {
            session: self.clone(),
            cancel,
        }
    }

    /// Records a subscription the backend accepted; false when the
    /// session already holds `MAX_SUBSCRIPTIONS`.
    pub fn subscribe(&self, uri: &str) -> bool {
        let mut state = self.state.lock();
        let subs = &mut state.extras.get_or_insert_default().subscriptions;
        if subs.len() >= MAX_SUBSCRIPTIONS && !subs.contains(uri) {
            return false;
        }
        subs.insert(uri.to_owned());
        true
    }

    pub fn unsubscribe(&self, uri: &str) {
        if let Some(extras) = self.state.lock().extras.as_mut() {
            extras.subscriptions.remove(uri);
        }
    }

    pub fn is_subscribed(&self, uri: &str) -> bool {
        self.state
            .lock()
            .extras
            .as_ref()
            .is_some_and(|e| e.subscriptions.contains(uri))
    }

    pub fn set_log_level(&self, level: LogLevel) {
        self.state.lock().extras.get_or_insert_default().log_level = Some(level);
    }

    /// Whether a log message of `level` is for this client (it set a
    /// level, and this one is at or above it).
    pub fn wants_log(&self, level: LogLevel) -> bool {
        self.state
            .lock()
            .extras
            .as_ref()
            .and_then(|e| e.log_level)
            .is_some_and(|l| level >= l)
    }

    /// The client cancelled one of its requests (every one under that id).
    pub fn cancel(&self, raw_id: &str) -> bool {
        self.state.lock().in_flight.cancel(raw_id)
    }
}

/// A request's entry in its session's requests in flight: it leaves when
/// this drops, on whichever path the request ends (answered, cancelled,
/// its future dropped).
pub(crate) struct Tracked {
    session: Arc<Session>,
    cancel: RequestCancel,
}

impl Tracked {
    pub(crate) fn cancel(&self) -> &RequestCancel {
        &self.cancel
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.session.state.lock().in_flight.remove(&self.cancel);
    }
}

impl crate::vocab::ClientSession for Session {
    fn ended(&self) -> &CancellationToken {
        &self.ended
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_sessions: usize,
    pub max_per_principal: usize,
    pub idle_ttl: Duration,
}

/// The table is full and every session in it is busy: retry later.
#[derive(Debug, thiserror::Error)]
#[error("all sessions are busy")]
pub struct Busy;

/// The id is unknown, ended, evicted, or belongs to another principal.
#[derive(Debug, thiserror::Error)]
#[error("session not found")]
pub struct NotFound;

pub struct Sessions {
    table: Mutex<Table>,
    /// Live and opened sessions by namespace tag (see `open_in`); tags past
    /// the end count in the last.
    by_namespace: Vec<NamespaceCounts>,
    /// How ids are made: table keys, or sealed sessions.
    ids: Ids,
    freed_since_trim: std::sync::atomic::AtomicUsize,
    limits: Limits,
    metrics: Arc<Metrics>,
}

#[derive(Default)]
struct NamespaceCounts {
    live: std::sync::atomic::AtomicI64,
    opened: std::sync::atomic::AtomicU64,
}

/// Most sessions ended (and records moved, `Table::expire`) under one lock
/// acquisition.
const SWEEP_BATCH: usize = 1024;
/// Once this many sessions ended (or the table emptied), freed memory goes
/// back to the OS.
const RETURN_MEMORY_AFTER: usize = 1024;

/// What a session is bound to, as a digest kept beside it.
fn digest(bound: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    bound.hash(&mut h);
    h.finish()
}

/// The allocator keeps freed pages for reuse; after a large sweep the
/// operator expects the process to shrink (the seeds' drain test). The
/// binary's allocator is mimalloc (`src/allocator.rs`): a block freed
/// here goes back to the heap of the thread that allocated it, whose free
/// pages return to the OS only on that thread's later allocator work, so
/// every worker collects its own. glibc's heap holds what C code
/// allocated (and everything, in the library's own unit tests).
fn release_free_memory() {
    crate::workers::on_every_worker(|| {
        // SAFETY: mi_collect frees and returns the calling thread's unused
        // pages; it touches no live block.
        unsafe { libmimalloc_sys::mi_collect(true) }
    });
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

impl Sessions {
    pub fn new(limits: Limits, ids: Ids, metrics: Arc<Metrics>) -> Arc<Sessions> {
        Self::with_namespaces(limits, ids, metrics, 1)
    }

    /// Sessions counted by `namespaces` tags (`open_in`, `begin_in`).
    pub fn with_namespaces(
        limits: Limits,
        ids: Ids,
        metrics: Arc<Metrics>,
        namespaces: usize,
    ) -> Arc<Sessions> {
        Arc::new(Sessions {
            by_namespace: (0..namespaces.max(1))
                .map(|_| NamespaceCounts::default())
                .collect(),
            table: Mutex::new(Table::new(limits.max_sessions, limits.max_per_principal)),
            ids,
            freed_since_trim: std::sync::atomic::AtomicUsize::new(0),
            limits,
            metrics,
        })
    }

    /// Opens a session after `initialize` succeeded. `bound` names the
    /// principal and namespace a sealed id is bound to.
    pub fn open(
        &self,
        principal: Principal,
        version: LegacyVersion,
        caps: ClientCaps,
        bound: &[u8],
    ) -> Result<Arc<Session>, Busy> {
        self.open_in(principal, version, caps, bound, 0)
    }

    /// `open`, counted under `namespace`'s tag.
    pub fn open_in(
        &self,
        principal: Principal,
        version: LegacyVersion,
        caps: ClientCaps,
        bound: &[u8],
        namespace: u16,
    ) -> Result<Arc<Session>, Busy> {
        let (id, sealed) = match &self.ids {
            Ids::Table => (SessionId::random(), None),
            Ids::Sealed(sealer) => {
                let contents = sealer.contents(version, caps);
                let sealed = Some((contents.expires, contents.serial));
                (sealer.seal(&contents, bound), sealed)
            }
        };
        let session = Session::new(id, principal, version, caps, sealed, bound, namespace);
        self.insert(session.clone())?;
        self.metrics.session_opened();
        let counts = self.counts_of(namespace);
        counts
            .opened
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(session)
    }

    fn counts_of(&self, namespace: u16) -> &NamespaceCounts {
        let last = self.by_namespace.len() - 1;
        &self.by_namespace[usize::from(namespace).min(last)]
    }

    /// (live, opened) sessions of each namespace tag, in tag order.
    pub fn by_namespace(&self) -> Vec<(i64, u64)> {
        use std::sync::atomic::Ordering::Relaxed;
        self.by_namespace
            .iter()
            .map(|c| (c.live.load(Relaxed), c.opened.load(Relaxed)))
            .collect()
    }

    fn insert(&self, session: Arc<Session>) -> Result<(), Busy> {
        let namespace = session.namespace;
        let evicted = self
            .table
            .lock()
            .insert(session, Instant::now())
            .map_err(|Full::AllBusy| Busy)?;
        self.counts_of(namespace)
            .live
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for (s, reason) in evicted {
            self.finish(&s, reason);
        }
        Ok(())
    }

    /// Starts a request on a session; the session stays busy (never evicted)
    /// until the returned guard drops. A sealed id the table does not hold
    /// (restart, eviction, another replica) is opened and the session
    /// rebuilt, unless it is expired, revoked, or bound elsewhere.
    pub fn begin(
        self: &Arc<Self>,
        id: &SessionId,
        principal: &Principal,
        bound: &[u8],
    ) -> Result<Active, NotFound> {
        self.begin_in(id.as_str(), principal, bound, 0)
    }

    /// `begin`, by the id as the client presented it; a sealed session
    /// rebuilt here is counted under `namespace`.
    pub fn begin_in(
        self: &Arc<Self>,
        id: &str,
        principal: &Principal,
        bound: &[u8],
        namespace: u16,
    ) -> Result<Active, NotFound> {
        loop {
            {
                let mut table = self.table.lock();
                match table.get(id) {
                    // Another principal's id (or one bound elsewhere) must
                    // not even refresh the session.
                    Some(s) if s.principal != *principal || s.binding != digest(bound) => {
                        return Err(NotFound);
                    }
                    Some(_) => {
                        let session = table.enter(id).ok_or(NotFound)?;
                        drop(table);
                        if session.is_past_its_end() {
                            drop(Active {
                                sessions: self.clone(),
                                session: session.clone(),
                            });
                            self.end(&session, CloseReason::idle);
                            return Err(NotFound);
                        }
                        return Ok(Active {
                            sessions: self.clone(),
                            session,
                        });
                    }
                    None => {}
                }
            }
            // Not in memory: only a sealed id can come back, and in cluster
            // mode only after the cluster's checks (see `peek`, `resume`).
            let Ids::Sealed(sealer) = &self.ids else {
                return Err(NotFound);
            };
            if !sealer.local {
                return Err(NotFound);
            }
            let id = &SessionId::from_header(id);
            let contents = sealer.reopen(id, bound).ok_or(NotFound)?;
            let cause = if contents.boot == sealer.boot {
                ResumeCause::evicted
            } else {
                ResumeCause::restart
            };
            self.resume(id, principal, bound, &contents, cause, namespace);
        }
    }

    /// What a sealed id says, if it opens for this binding, is unexpired and
    /// not revoked here (cluster mode checks the rest before `resume`).
    pub fn peek(&self, id: &SessionId, bound: &[u8]) -> Option<Contents> {
        match &self.ids {
            Ids::Sealed(sealer) => sealer.reopen(id, bound),
            Ids::Table => None,
        }
    }

    /// A new key ring for sealed ids (a reload); false with table ids.
    pub fn rotate_keys(&self, ring: sealed::KeyRing) -> bool {
        match &self.ids {
            Ids::Sealed(sealer) => {
                sealer.rotate(ring);
                true
            }
            Ids::Table => false,
        }
    }

    /// This process's boot id (sealed ids issued here carry it).
    pub fn boot(&self) -> Option<u32> {
        match &self.ids {
            Ids::Sealed(sealer) => Some(sealer.boot),
            Ids::Table => None,
        }
    }

    /// Rebuilds a sealed session from its id's contents; a following
    /// `begin` finds it. Two requests may race to rebuild it: the first
    /// insert wins.
    pub fn resume(
        &self,
        id: &SessionId,
        principal: &Principal,
        bound: &[u8],
        contents: &Contents,
        cause: ResumeCause,
        namespace: u16,
    ) {
        let session = Session::new(
            id.clone(),
            principal.clone(),
            contents.version,
            contents.caps,
            Some((contents.expires, contents.serial)),
            bound,
            namespace,
        );
        let absent = self.table.lock().owner(id.as_str()).is_none();
        if absent && self.insert(session).is_ok() {
            self.metrics.session_resumed(cause);
        }
    }

    /// Drops a session another replica ended (DELETE, principal cap) from
    /// memory; its id is revoked in Redis already.
    pub fn forget(&self, id: &SessionId) {
        let removed = self.table.lock().remove(id);
        if let Some(session) = removed {
            self.finish(&session, CloseReason::delete);
        }
    }

    /// Ends a session found past its absolute end.
    fn end(&self, session: &Session, reason: CloseReason) {
        if self.table.lock().remove(&session.id).is_some() {
            self.finish(session, reason);
        }
    }

    /// Records activity (an open stream that is still writable).
    pub fn touch(&self, id: &SessionId) -> bool {
        self.table.lock().touch(id, Instant::now())
    }

    /// Ends a session at the client's request. A sealed id is revoked
    /// until it would have expired, whether or not it was in memory; its
    /// (expiry, serial) is returned for the cluster to revoke everywhere.
    pub fn delete(
        &self,
        id: &SessionId,
        principal: &Principal,
        bound: &[u8],
    ) -> Result<Option<(u64, [u8; 16])>, NotFound> {
        let mut table = self.table.lock();
        let held = match table.get(id.as_str()) {
            Some(s) if s.principal != *principal || s.binding != digest(bound) => {
                return Err(NotFound);
            }
            Some(_) => table.remove(id),
            None => None,
        };
        drop(table);
        let revoke = match (&self.ids, &held) {
            (Ids::Table, None) => return Err(NotFound),
            (Ids::Table, Some(_)) => None,
            (Ids::Sealed(_), Some(s)) => s.sealed.as_deref().copied(),
            (Ids::Sealed(sealer), None) => {
                let c = sealer.reopen(id, bound).ok_or(NotFound)?;
                Some((c.expires, c.serial))
            }
        };
        if let (Ids::Sealed(sealer), Some((expires, serial))) = (&self.ids, revoke)
            && !sealer.revoke(serial, expires)
        {
            self.metrics.revocation_dropped();
        }
        if let Some(session) = held {
            self.finish(&session, CloseReason::delete);
        }
        Ok(revoke)
    }

    /// Revokes a sealed session (another replica's principal cap chose it)
    /// and drops it from memory.
    pub fn revoke(&self, id: &SessionId, serial: [u8; 16], expires: u64) {
        if let Ids::Sealed(sealer) = &self.ids
            && !sealer.revoke(serial, expires)
        {
            self.metrics.revocation_dropped();
        }
        self.forget(id);
    }

    /// Ends every session idle for longer than the TTL; returns how many.
    pub fn sweep(&self) -> usize {
        let mut total = 0;
        loop {
            let deadline = Instant::now()
                .checked_sub(self.limits.idle_ttl)
                .unwrap_or_else(Instant::now);
            let swept = self.table.lock().expire(deadline, SWEEP_BATCH);
            total += swept.expired.len();
            for s in swept.expired {
                self.finish(&s, CloseReason::idle);
            }
            if swept.done {
                break;
            }
        }
        if total > 0 {
            let empty = {
                let mut table = self.table.lock();
                table.shrink();
                table.len() == 0
            };
            let freed = self.freed_since_trim.fetch_add(total, Ordering::Relaxed) + total;
            if empty || freed >= RETURN_MEMORY_AFTER {
                self.freed_since_trim.store(0, Ordering::Relaxed);
                release_free_memory();
            }
        }
        total
    }

    /// Ends every session (gateway shutdown).
    pub fn close_all(&self) {
        let all = self.table.lock().drain();
        for s in all {
            self.finish(&s, CloseReason::shutdown);
        }
    }

    pub fn len(&self) -> usize {
        self.table.lock().len()
    }

    /// Sealed ids revoked and not yet expired.
    pub fn revoked(&self) -> usize {
        match &self.ids {
            Ids::Sealed(s) => s.revoked(),
            Ids::Table => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn finish(&self, session: &Session, reason: CloseReason) {
        session.ended.cancel();
        session.state.lock().in_flight.end();
        self.counts_of(session.namespace)
            .live
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        self.metrics.session_closed(reason);
        tracing::debug!(principal = %session.principal, ?reason, "client session closed");
    }

    /// One reaper for the whole table: no per-session timers.
    pub fn spawn_reaper(self: &Arc<Self>, stop: CancellationToken) {
        let period =
            (self.limits.idle_ttl / 8).clamp(Duration::from_millis(100), Duration::from_secs(5));
        let sessions = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => { sessions.sweep(); }
                }
            }
        });
    }

    #[cfg(test)]
    fn assert_consistent(&self) {
        self.table.lock().assert_consistent();
    }
}

/// A request in flight on a session.
pub struct Active {
    sessions: Arc<Sessions>,
    session: Arc<Session>,
}

impl Active {
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.sessions
            .table
            .lock()
            .leave(&self.session.id, crate::clock::tokio_now());
    }
}

#[cfg(test)]
mod tests;
