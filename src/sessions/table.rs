//! The bounded client-session table.
//!
//! Invariants: every entry is in `map` and exactly once in `by_use` (keyed by
//! its last-use stamp), so the least recently used session is the first key of
//! `by_use`. Touching a session is O(log n); eviction and the idle sweep walk
//! `by_use` from the oldest end and stop at the first entry they keep, so no
//! request ever scans the table.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tokio::time::Instant;

use super::Session;
use super::id::{Principal, SessionId};
use crate::metrics::CloseReason;

pub(super) struct Table {
    map: HashMap<SessionId, Entry>,
    by_use: BTreeMap<u64, SessionId>,
    per_principal: HashMap<Principal, usize>,
    next_stamp: u64,
}

struct Entry {
    session: Arc<Session>,
    stamp: u64,
    last_used: Instant,
    in_flight: usize,
}

/// What `insert` had to end to make room.
pub(super) type Evicted = Vec<(Arc<Session>, CloseReason)>;

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Full {
    /// Every session of the table (or of the principal) has a request in flight.
    AllBusy,
}

impl Table {
    pub(super) fn new() -> Table {
        Table {
            map: HashMap::new(),
            by_use: BTreeMap::new(),
            per_principal: HashMap::new(),
            next_stamp: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    fn stamp(&mut self) -> u64 {
        self.next_stamp += 1;
        self.next_stamp
    }

    /// Inserts a new session, first evicting the least recently used idle
    /// session of its principal (at the per-principal cap) or of the table
    /// (at capacity).
    pub(super) fn insert(
        &mut self,
        session: Arc<Session>,
        max: usize,
        max_per_principal: usize,
        now: Instant,
    ) -> Result<Evicted, Full> {
        let owned = self
            .per_principal
            .get(&session.principal)
            .copied()
            .unwrap_or(0);
        // Evicting one of the principal's own sessions also frees a table slot.
        let (victim, reason) = if owned >= max_per_principal {
            let victim = self.oldest_idle(|s| s.principal == session.principal);
            (
                Some(victim.ok_or(Full::AllBusy)?),
                CloseReason::principal_cap,
            )
        } else if self.map.len() >= max {
            (
                Some(self.oldest_idle(|_| true).ok_or(Full::AllBusy)?),
                CloseReason::capacity,
            )
        } else {
            (None, CloseReason::capacity)
        };
        let evicted = victim
            .and_then(|id| self.remove(&id))
            .map(|s| vec![(s, reason)])
            .unwrap_or_default();
        let stamp = self.stamp();
        let id = session.id.clone();
        *self
            .per_principal
            .entry(session.principal.clone())
            .or_insert(0) += 1;
        self.by_use.insert(stamp, id.clone());
        self.map.insert(
            id,
            Entry {
                session,
                stamp,
                last_used: now,
                in_flight: 0,
            },
        );
        Ok(evicted)
    }

    /// Walks from the least recently used end. Busy sessions are skipped;
    /// there are at most as many as requests in flight.
    fn oldest_idle(&self, pred: impl Fn(&Session) -> bool) -> Option<SessionId> {
        self.by_use.values().find_map(|id| {
            let e = self.map.get(id)?;
            (e.in_flight == 0 && pred(&e.session)).then(|| id.clone())
        })
    }

    pub(super) fn remove(&mut self, id: &SessionId) -> Option<Arc<Session>> {
        let entry = self.map.remove(id)?;
        self.by_use.remove(&entry.stamp);
        if let Some(n) = self.per_principal.get_mut(&entry.session.principal) {
            *n -= 1;
            if *n == 0 {
                self.per_principal.remove(&entry.session.principal);
            }
        }
        Some(entry.session)
    }

    /// Looks a session up without counting it as used.
    pub(super) fn owner(&self, id: &SessionId) -> Option<&Principal> {
        self.map.get(id).map(|e| &e.session.principal)
    }

    /// Marks a session used now; `busy` adds (+1) or ends (-1) a request in flight.
    pub(super) fn touch(
        &mut self,
        id: &SessionId,
        now: Instant,
        busy: isize,
    ) -> Option<Arc<Session>> {
        let stamp = self.stamp();
        let entry = self.map.get_mut(id)?;
        self.by_use.remove(&entry.stamp);
        entry.stamp = stamp;
        entry.last_used = now;
        entry.in_flight = entry.in_flight.saturating_add_signed(busy);
        self.by_use.insert(stamp, id.clone());
        Some(entry.session.clone())
    }

    /// Removes up to `limit` sessions idle since before `deadline`.
    pub(super) fn expire(&mut self, deadline: Instant, limit: usize) -> Vec<Arc<Session>> {
        let mut expired = Vec::new();
        let mut cursor = 0;
        while let Some((&stamp, id)) = self.by_use.range(cursor..).next() {
            let Some(entry) = self.map.get(id) else { break };
            if entry.last_used >= deadline || expired.len() >= limit {
                break;
            }
            cursor = stamp + 1;
            // A busy session is not idle, however old its last touch.
            if entry.in_flight > 0 {
                continue;
            }
            let id = id.clone();
            if let Some(s) = self.remove(&id) {
                expired.push(s);
            }
        }
        expired
    }

    /// Gives back the map's spare room once most sessions are gone: a
    /// burst of abandoned sessions must not hold its peak memory forever.
    pub(super) fn shrink(&mut self) {
        let (len, cap) = (self.map.len(), self.map.capacity());
        if cap > 64 && len * 4 < cap {
            self.map.shrink_to(len * 2);
            self.per_principal.shrink_to(self.per_principal.len() * 2);
        }
    }

    pub(super) fn drain(&mut self) -> Vec<Arc<Session>> {
        self.by_use.clear();
        self.per_principal.clear();
        self.map.drain().map(|(_, e)| e.session).collect()
    }

    #[cfg(test)]
    pub(super) fn assert_consistent(&self) {
        assert_eq!(self.map.len(), self.by_use.len());
        for (stamp, id) in &self.by_use {
            assert_eq!(self.map[id].stamp, *stamp);
        }
        let owned: usize = self.per_principal.values().sum();
        assert_eq!(owned, self.map.len());
    }
}
