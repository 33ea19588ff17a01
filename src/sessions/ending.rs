//! How sessions end: at the client's request, revoked, forgotten after
//! another replica ended them, idle past the TTL (one reaper for the
//! table), at shutdown; and the memory they held given back.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use super::session::digest;
use super::{Ids, NotFound, Session, Sessions};
use crate::metrics::CloseReason;
use crate::vocab::{Principal, SessionId};

/// Most sessions ended (and records moved, `Table::expire`) under one lock
/// acquisition.
const SWEEP_BATCH: usize = 1024;
/// Once this many sessions ended (or the table emptied), freed memory goes
/// back to the OS.
const RETURN_MEMORY_AFTER: usize = 1024;

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
    /// Drops a session another replica ended (DELETE, principal cap) from
    /// memory; its id is revoked in Redis already.
    pub fn forget(&self, id: &SessionId) {
        let removed = self.table.lock().remove(id);
        if let Some(session) = removed {
            self.finish(&session, CloseReason::delete);
        }
    }

    /// Ends a session found past its absolute end.
    pub(super) fn end(&self, session: &Session, reason: CloseReason) {
        if self.table.lock().remove(&session.id).is_some() {
            self.finish(session, reason);
        }
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

    pub(super) fn finish(&self, session: &Session, reason: CloseReason) {
        session.ended.cancel();
        session.state.lock().in_flight.end();
        self.counts_of(session.namespace)
            .live
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        self.metrics
            .session_closed(reason, session.version.as_str(), session.lived());
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
}
