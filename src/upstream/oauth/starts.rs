//! Start ids waiting to be opened (`/oauth/start/{id}`), on one node. In
//! cluster mode they live in the store instead (`store::GrantStore::start`),
//! with the same rules.
//!
//! Rules: a principal has at most one unopened id per backend, given again
//! while it has at least half its life left (asking twice gives the same
//! link), so a client polling does not pile ids up; at most
//! `per_principal` unopened ids per principal (its oldest goes first);
//! at most `max` ids in all, opened ones kept until their expiry so a
//! second use is named, the oldest going first when full. Every id lives
//! `FLOW_TTL`, so issue order is expiry order: eviction and expiry pop the
//! front of one ordered index, O(log n), never a scan.

use std::collections::{BTreeMap, HashMap, VecDeque};

use parking_lot::Mutex;

use super::{FLOW_TTL, Refused};
use crate::vocab::{BackendName, Principal};

/// Whom a start id is for, and where.
pub(super) type Started = (Principal, BackendName);

/// Ids kept at once, across backends and principals.
pub(crate) const MAX_STARTS: usize = 100_000;
/// Unopened ids one principal may hold (one per backend with the flow:
/// this bites only past that many such backends).
pub(crate) const MAX_PER_PRINCIPAL: usize = 32;

pub(crate) struct Starts {
    max: usize,
    per_principal: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Id -> its entry.
    by_id: HashMap<String, Entry>,
    /// Issue order -> id: the first is the oldest (and expires first).
    order: BTreeMap<u64, String>,
    /// The unopened id of each (principal, backend).
    pending: HashMap<Started, String>,
    /// Each principal's unopened ids, oldest first.
    per: HashMap<Principal, VecDeque<String>>,
    seq: u64,
}

struct Entry {
    /// None once opened (kept until its expiry, so a second use is named).
    who: Option<Started>,
    /// Unix seconds.
    expires: u64,
    seq: u64,
}

impl Inner {
    /// Forgets `id` entirely.
    fn drop_id(&mut self, id: &str) {
        let Some(entry) = self.by_id.remove(id) else {
            return;
        };
        self.order.remove(&entry.seq);
        if let Some(who) = entry.who {
            self.unpend(&who, id);
        }
    }

    /// `id` is no longer `who`'s unopened one.
    fn unpend(&mut self, who: &Started, id: &str) {
        if self.pending.get(who).is_some_and(|p| p == id) {
            self.pending.remove(who);
        }
        if let Some(ids) = self.per.get_mut(&who.0) {
            ids.retain(|i| i != id);
            if ids.is_empty() {
                self.per.remove(&who.0);
            }
        }
    }

    /// Drops expired ids, oldest first; stops at the first live one.
    fn expire(&mut self, now: u64) {
        while let Some((_, id)) = self.order.first_key_value() {
            if self.by_id.get(id).is_some_and(|e| e.expires > now) {
                return;
            }
            let id = id.clone();
            self.drop_id(&id);
        }
    }
}

impl Starts {
    /// At most `max` ids, `per_principal` unopened ones each (at least 1).
    pub(crate) fn new(max: usize, per_principal: usize) -> Starts {
        Starts {
            max: max.max(1),
            per_principal: per_principal.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// `principal`'s unopened id for `backend` if it has half its life
    /// left, else `fresh` (a new random id) put in at `now`.
    pub(crate) fn issue(
        &self,
        principal: &Principal,
        backend: &BackendName,
        fresh: String,
        now: u64,
    ) -> String {
        let mut t = self.inner.lock();
        t.expire(now);
        let who = (principal.clone(), backend.clone());
        if let Some(id) = t.pending.get(&who).cloned() {
            let left = t
                .by_id
                .get(&id)
                .map_or(0, |e| e.expires.saturating_sub(now));
            if left >= FLOW_TTL.as_secs() / 2 {
                return id;
            }
            t.drop_id(&id);
        }
        while t.per.get(principal).map_or(0, VecDeque::len) >= self.per_principal {
            let Some(oldest) = t.per.get(principal).and_then(|ids| ids.front().cloned()) else {
                break;
            };
            t.drop_id(&oldest);
        }
        while t.by_id.len() >= self.max {
            let Some((_, oldest)) = t.order.first_key_value() else {
                break;
            };
            let oldest = oldest.clone();
            t.drop_id(&oldest);
        }
        t.seq += 1;
        let seq = t.seq;
        t.order.insert(seq, fresh.clone());
        t.pending.insert(who.clone(), fresh.clone());
        t.per
            .entry(principal.clone())
            .or_default()
            .push_back(fresh.clone());
        t.by_id.insert(
            fresh.clone(),
            Entry {
                who: Some(who),
                expires: now + FLOW_TTL.as_secs(),
                seq,
            },
        );
        fresh
    }

    /// Opens `id` once at `now`: whom it is for, and where.
    pub(crate) fn take(&self, id: &str, now: u64) -> Result<Started, Refused> {
        let mut t = self.inner.lock();
        let entry = t.by_id.get_mut(id).ok_or(Refused::UnknownStart)?;
        if now >= entry.expires {
            t.drop_id(id);
            return Err(Refused::ExpiredStart);
        }
        let who = entry.who.take().ok_or(Refused::UsedStart)?;
        t.unpend(&who, id);
        Ok(who)
    }
}

#[cfg(test)]
impl Starts {
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().by_id.len()
    }
}

#[cfg(test)]
mod tests;
