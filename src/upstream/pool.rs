//! Per-session backend sessions: one link per client (session or
//! principal), opened lazily, bounded by the backend's `max_sessions`,
//! closed when its client session ends or when idle past `idle_ttl`.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::OnceCell;

use super::link::{EndReason, Link};
use super::{Caller, ClientKey, UpstreamError};
use crate::config::BackendName;

pub(super) struct PerSession {
    name: BackendName,
    /// Every entry counts against `max`, including ones still opening.
    slots: Mutex<HashMap<ClientKey, Arc<OnceCell<Arc<Link>>>>>,
    max: usize,
    pub(super) idle_ttl: Duration,
}

impl PerSession {
    pub(super) fn new(name: BackendName, max: usize, idle_ttl: Duration) -> Arc<PerSession> {
        Arc::new(PerSession {
            name,
            slots: Mutex::new(HashMap::new()),
            max,
            idle_ttl,
        })
    }

    fn live(&self, key: &ClientKey) -> Option<Arc<Link>> {
        let cell = self.slots.lock().get(key).cloned()?;
        cell.get().filter(|l| !l.is_dead()).cloned()
    }

    /// The caller's own link, or else any live one: for calls that any
    /// backend session can answer (lists), so that none is opened for them.
    pub(super) fn any_for(&self, caller: &Caller) -> Option<Arc<Link>> {
        self.live(&caller.key).or_else(|| {
            let cells: Vec<_> = self.slots.lock().values().cloned().collect();
            cells
                .iter()
                .find_map(|c| c.get().filter(|l| !l.is_dead()).cloned())
        })
    }

    pub(super) fn existing(&self, caller: &Caller) -> Option<Arc<Link>> {
        self.live(&caller.key)
    }

    /// The caller's link, opened with `open` if it has none. At `max` a new
    /// one is refused, never opened anyway.
    pub(super) async fn get_or_open<F, Fut>(
        self: &Arc<Self>,
        caller: &Caller,
        open: F,
    ) -> Result<Arc<Link>, UpstreamError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Arc<Link>, UpstreamError>>,
    {
        let cell = {
            let mut slots = self.slots.lock();
            // A dead link's slot is free again.
            if slots
                .get(&caller.key)
                .is_some_and(|c| c.get().is_some_and(|l| l.is_dead()))
            {
                slots.remove(&caller.key);
            }
            match slots.get(&caller.key) {
                Some(c) => c.clone(),
                None if slots.len() >= self.max => {
                    return Err(UpstreamError::at_capacity(&self.name, self.max));
                }
                None => {
                    let c = Arc::new(OnceCell::new());
                    slots.insert(caller.key.clone(), c.clone());
                    c
                }
            }
        };
        let mut fresh = false;
        let result = cell
            .get_or_try_init(|| {
                fresh = true;
                open()
            })
            .await
            .cloned();
        match result {
            Ok(link) => {
                if fresh {
                    self.watch(caller, &cell, link.clone());
                }
                Ok(link)
            }
            Err(e) => {
                self.forget(&caller.key, &cell);
                Err(e)
            }
        }
    }

    /// Ends the link with its client session, and frees the slot when the
    /// link ends for any reason. One task per link, bounded by `max`.
    fn watch(self: &Arc<Self>, caller: &Caller, cell: &Arc<OnceCell<Arc<Link>>>, link: Arc<Link>) {
        let pool = self.clone();
        let key = caller.key.clone();
        let cell = cell.clone();
        let ended = caller.ended.clone().unwrap_or_default();
        tokio::spawn(async move {
            tokio::select! {
                _ = ended.cancelled() => link.close(EndReason::ClientClosed),
                _ = link.dead().cancelled() => {}
            }
            // The slot stays taken until the session is really over, so a
            // shutdown waiting on the pool also waits for this one.
            link.closed().await;
            pool.forget(&key, &cell);
        });
    }

    fn forget(&self, key: &ClientKey, cell: &Arc<OnceCell<Arc<Link>>>) {
        let mut slots = self.slots.lock();
        if slots.get(key).is_some_and(|c| Arc::ptr_eq(c, cell)) {
            slots.remove(key);
        }
    }

    /// Closes links unused for longer than the idle TTL.
    pub(super) fn reap_idle(&self) {
        let cells: Vec<_> = self.slots.lock().values().cloned().collect();
        for link in cells.iter().filter_map(|c| c.get()) {
            if link.idle_for() > self.idle_ttl {
                link.close(EndReason::Idle);
            }
        }
    }

    /// Closes every link and waits until each session is ended.
    pub(super) async fn close_all(&self, reason: EndReason) {
        let cells: Vec<_> = self.slots.lock().drain().map(|(_, c)| c).collect();
        let links: Vec<_> = cells.iter().filter_map(|c| c.get().cloned()).collect();
        for l in &links {
            l.close(reason);
        }
        futures_util::future::join_all(links.iter().map(|l| l.closed())).await;
    }
}
