//! Per-session backend sessions: one link per client (session or
//! principal), opened lazily, bounded by the backend's `max_sessions`,
//! closed when its client session ends or when idle past `idle_ttl`.
//!
//! Every open runs on its own task, which owns the link from the first
//! byte to the close: a caller that gives up while the backend is still
//! starting (client gone, DELETE, eviction) cancels nothing, and the slot,
//! the child or the HTTP session is ended by that task, not leaked.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::link::{EndReason, Link, SharedSession};
use super::{Caller, ClientKey, UpstreamError};
use crate::vocab::BackendName;

/// Where per-session HTTP backend sessions are shared between replicas
/// (cluster mode), by client session (`client` is a digest of its id): any
/// replica serving the client uses the one backend session, and the last
/// to use it ends it; if every replica using it dies, a survivor does.
pub trait Records: Send + Sync {
    /// The backend session recorded for this client, if any.
    fn find(&self, backend: &str, client: &str) -> BoxFuture<'static, Option<SharedSession>>;
    /// Records `ours` unless one is recorded already: then returns that
    /// one, to be used instead (and ours ended).
    fn claim(
        &self,
        backend: &str,
        client: &str,
        ours: SharedSession,
        idle_ttl: Duration,
    ) -> BoxFuture<'static, Option<SharedSession>>;
    /// Used here at `used` (unix ms): the record is fresh again, and names
    /// the session as it is now (a backend that forgot it was re-initialized).
    fn keep(&self, backend: &str, client: &str, now: SharedSession, used: u64, idle_ttl: Duration);
    /// This replica, which last used it at `used` (unix ms), is done with
    /// it: true unless another replica used it since (and within its TTL);
    /// then the record is dropped and the caller ends the backend session.
    /// False leaves it to the replica that used it last.
    fn release(&self, backend: &str, client: &str, used: u64) -> BoxFuture<'static, bool>;
    /// Its client session ended on purpose: the record, removed, for the
    /// caller to end.
    fn take(&self, backend: &str, client: &str) -> BoxFuture<'static, Option<SharedSession>>;
}

pub(super) struct PerSession {
    name: BackendName,
    /// Set in cluster mode.
    pub(super) records: std::sync::OnceLock<Arc<dyn Records>>,
    /// Every entry counts against `max`, including ones still opening.
    slots: Mutex<HashMap<ClientKey, Arc<Slot>>>,
    max: usize,
    pub(super) idle_ttl: Duration,
    /// Keyed by principal (a backend's per-principal links, see
    /// `principals`), not by client session: what replicas share them by.
    by_principal: bool,
}

/// One client's backend session, from the start of its opening.
struct Slot {
    state: watch::Sender<State>,
    /// Cluster mode: the client's digest, when its backend session is shared.
    shared: std::sync::OnceLock<String>,
    /// Being handed back (`Records::release`): not again.
    releasing: std::sync::atomic::AtomicBool,
}

#[derive(Clone)]
enum State {
    Opening,
    Open(Arc<Link>),
    Failed(UpstreamError),
}

impl Slot {
    fn link(&self) -> Option<Arc<Link>> {
        match &*self.state.borrow() {
            State::Open(l) if !l.is_dead() => Some(l.clone()),
            _ => None,
        }
    }

    fn is_dead(&self) -> bool {
        match &*self.state.borrow() {
            State::Open(l) => l.is_dead(),
            State::Failed(_) => true,
            State::Opening => false,
        }
    }

    /// The outcome of the opening, once it has one.
    async fn ready(&self, backend: &BackendName) -> Result<Arc<Link>, UpstreamError> {
        let mut rx = self.state.subscribe();
        let state = rx
            .wait_for(|s| !matches!(s, State::Opening))
            .await
            .map(|s| s.clone());
        match state {
            Ok(State::Open(link)) => Ok(link),
            Ok(State::Failed(e)) => Err(e),
            // The opener is gone without a word: only at runtime shutdown.
            Ok(State::Opening) | Err(_) => Err(UpstreamError::unavailable(backend, "stopping")),
        }
    }
}

/// When a link was last used, in unix milliseconds (what replicas compare).
fn used_at(link: &Link) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(now.saturating_sub(link.idle_for()).as_millis()).unwrap_or(u64::MAX)
}

impl PerSession {
    pub(super) fn new(name: BackendName, max: usize, idle_ttl: Duration) -> Arc<PerSession> {
        Self::make(name, max, idle_ttl, false)
    }

    /// A pool of one link per principal (`principals`, shared isolation).
    pub(super) fn by_principal(name: BackendName, max: usize, idle_ttl: Duration) -> Arc<Self> {
        Self::make(name, max, idle_ttl, true)
    }

    fn make(name: BackendName, max: usize, idle_ttl: Duration, by_principal: bool) -> Arc<Self> {
        Arc::new(PerSession {
            name,
            records: std::sync::OnceLock::new(),
            slots: Mutex::new(HashMap::new()),
            max,
            idle_ttl,
            by_principal,
        })
    }

    /// What replicas know this client's link by (cluster mode).
    pub(super) fn tag_of(&self, key: &ClientKey) -> Option<String> {
        match self.by_principal {
            true => key.principal_tag(),
            false => key.shared_tag(),
        }
    }

    pub(super) fn live(&self, key: &ClientKey) -> Option<Arc<Link>> {
        self.slots.lock().get(key)?.link()
    }

    /// The caller's own link, or else any live one told the same client
    /// capabilities (a backend may list differently for different ones):
    /// for lists, so that none is opened for them.
    pub(super) fn any_for(&self, caller: &Caller) -> Option<Arc<Link>> {
        self.live(&caller.key).or_else(|| {
            self.slots
                .lock()
                .values()
                .filter_map(|s| s.link())
                .find(|l| l.conn.offer() == Some(caller.caps))
        })
    }

    pub(super) fn existing(&self, caller: &Caller) -> Option<Arc<Link>> {
        self.live(&caller.key)
    }

    /// How many slots are taken (opening or open).
    pub(super) fn len(&self) -> usize {
        self.slots.lock().len()
    }

    /// Every live link.
    pub(super) fn links(&self) -> Vec<Arc<Link>> {
        self.slots
            .lock()
            .values()
            .filter_map(|s| s.link())
            .collect()
    }

    /// The caller's link, opened by `open` on a task of its own if it has
    /// none. At `max` a new one is refused, never opened anyway.
    pub(super) async fn get_or_open<F, Fut>(
        self: &Arc<Self>,
        caller: &Caller,
        open: F,
    ) -> Result<Arc<Link>, UpstreamError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Arc<Link>, UpstreamError>> + Send + 'static,
    {
        let slot = {
            let mut slots = self.slots.lock();
            // A dead link's slot is free again.
            if slots.get(&caller.key).is_some_and(|s| s.is_dead()) {
                slots.remove(&caller.key);
            }
            match slots.get(&caller.key) {
                Some(s) => s.clone(),
                None if slots.len() >= self.max => {
                    return Err(UpstreamError::at_capacity(&self.name, self.max));
                }
                None => {
                    let slot = Arc::new(Slot {
                        state: watch::channel(State::Opening).0,
                        shared: std::sync::OnceLock::new(),
                        releasing: std::sync::atomic::AtomicBool::new(false),
                    });
                    slots.insert(caller.key.clone(), slot.clone());
                    tokio::spawn(self.clone().own(caller.clone(), slot.clone(), open));
                    slot
                }
            }
        };
        slot.ready(&self.name).await
    }

    /// The owner of one slot: opens the link, ends it with its client
    /// session (even one that ended while the link was opening), and frees
    /// the slot when the link is over, for whatever reason.
    async fn own<F, Fut>(self: Arc<Self>, caller: Caller, slot: Arc<Slot>, open: F)
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Arc<Link>, UpstreamError>>,
    {
        let link = match open().await {
            Ok(link) => link,
            Err(e) => {
                slot.state.send_replace(State::Failed(e));
                self.forget(&caller.key, &slot);
                return;
            }
        };
        slot.state.send_replace(State::Open(link.clone()));
        if self.records.get().is_some()
            && link.shared().is_some()
            && let Some(tag) = self.tag_of(&caller.key)
        {
            let _ = slot.shared.set(tag);
            self.record(&slot, &link);
        }
        let ended = caller
            .session
            .as_ref()
            .map(|s| s.ended().clone())
            .unwrap_or_default();
        tokio::select! {
            _ = ended.cancelled() => self.end(&slot, &link, EndReason::ClientClosed).await,
            _ = link.dead().cancelled() => {}
        }
        // The slot stays taken until the session is really over, so a
        // shutdown waiting on the pool also waits for this one.
        link.closed().await;
        self.forget(&caller.key, &slot);
    }

    /// Refreshes a shared backend session's record (cluster mode).
    fn record(&self, slot: &Slot, link: &Link) {
        if let (Some(records), Some(tag), Some(now)) =
            (self.records.get(), slot.shared.get(), link.shared())
        {
            records.keep(self.name.as_str(), tag, now, used_at(link), self.idle_ttl);
        }
    }

    /// Closes a link; a shared backend session another replica still uses
    /// is left open at the backend.
    async fn end(&self, slot: &Slot, link: &Link, reason: EndReason) {
        if let (Some(records), Some(tag)) = (self.records.get(), slot.shared.get()) {
            if slot
                .releasing
                .swap(true, std::sync::atomic::Ordering::AcqRel)
            {
                return; // already being handed back; that one closes it
            }
            if !records
                .release(self.name.as_str(), tag, used_at(link))
                .await
            {
                link.detach();
            }
        }
        link.close(reason);
    }

    fn forget(&self, key: &ClientKey, slot: &Arc<Slot>) {
        let mut slots = self.slots.lock();
        if slots.get(key).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            slots.remove(key);
        }
    }

    /// Closes links unused for longer than the idle TTL. A link with a
    /// request in flight is in use, however long that request takes.
    pub(super) fn reap_idle(self: &Arc<Self>) {
        let links: Vec<_> = self
            .slots
            .lock()
            .values()
            .filter_map(|s| Some((s.clone(), s.link()?)))
            .collect();
        for (slot, link) in links {
            let idle = link.idle_for();
            if idle > self.idle_ttl {
                if slot.shared.get().is_some() {
                    // Asks Redis first: on its own task.
                    let me = self.clone();
                    tokio::spawn(async move { me.end(&slot, &link, EndReason::Idle).await });
                } else {
                    link.close(EndReason::Idle);
                }
            } else if idle < self.idle_ttl / 4 {
                // In use since the last pass: its record is fresh again.
                self.record(&slot, &link);
            }
        }
    }

    /// Closes every link and waits until each session is ended; links
    /// still opening are ended by their owners as soon as they open.
    pub(super) async fn close_all(&self, reason: EndReason) {
        let slots: Vec<_> = self.slots.lock().drain().map(|(_, s)| s).collect();
        let opening = slots.iter().map(|s| async move {
            if let Ok(link) = s.ready(&self.name).await {
                self.end(s, &link, reason).await;
                link.closed().await;
            }
        });
        futures_util::future::join_all(opening).await;
    }
}
