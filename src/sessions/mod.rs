//! Client sessions: who may use which session id, and for how long.
//!
//! Knows nothing of HTTP. Every session is bounded three ways (idle TTL,
//! table capacity, per-principal cap) and ends without the client's help.
//! Ending a session cancels its `ended` token and its requests in flight;
//! whatever a session holds elsewhere (streams, per-session backends)
//! watches that token.

mod ending;
mod found;
mod in_flight;
pub mod sealed;
mod session;
mod table;

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::time::{Duration, Instant};

use session::digest;
use table::{Full, Table};

use crate::metrics::ResumeCause;
pub use sealed::Contents;
pub use sealer::{Ids, Sealer};
pub(crate) use session::Tracked;
pub use session::{MAX_SUBSCRIPTIONS, Session};

mod sealer;

use crate::metrics::{CloseReason, Metrics};
use crate::protocol::{ClientCaps, LegacyVersion};
use crate::vocab::{Principal, SessionId};

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
                // Another principal's id (or one bound elsewhere) must not
                // even refresh the session.
                let entered = table
                    .enter_if(id, |s| {
                        s.principal == *principal && s.binding == digest(bound)
                    })
                    .map_err(|()| NotFound)?;
                if let Some(session) = entered {
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

    /// The key ring of sealed ids, as it is now (None with table ids):
    /// other sealed things (an OAuth flow's state, a grant at rest) use it.
    pub fn key_ring(&self) -> Option<Arc<sealed::KeyRing>> {
        match &self.ids {
            Ids::Sealed(sealer) => Some(sealer.ring()),
            Ids::Table => None,
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

    /// How long a session lasts without activity.
    pub fn idle_ttl(&self) -> Duration {
        self.limits.idle_ttl
    }

    /// Records activity (an open stream that is still writable).
    pub fn touch(&self, id: &SessionId) -> bool {
        self.table.lock().touch(id, Instant::now())
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
