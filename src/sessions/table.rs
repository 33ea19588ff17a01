//! The bounded client-session table.
//!
//! Invariants: every entry is in `map` and exactly once in `by_use`, keyed
//! by where it was placed: the stamp of one of its uses, its last or an
//! earlier one (`Entry::since` says how much earlier). When a per-principal
//! cap can bind (it is below the table's capacity), each entry's key is also
//! in its principal's set.
//!
//! A use only notes its stamp in the entry: O(1), no tree touched on the
//! path of every request. Eviction and the idle sweep walk from the oldest
//! key; a record placed before its entry's last use is moved there (once per
//! use, at most) and the walk goes on. The first record that is up to date
//! and idle is then the least recently used idle session: every entry's
//! record lies at or before its last use, so none older can come later.
//! The walks skip busy sessions (at most as many as requests in flight);
//! the sweep's moves count toward its batch, so no lock is held for a walk
//! over the whole table. An eviction's walk moves as many records as it
//! meets before an idle up-to-date one: each move is paid for by a use
//! since the record last moved, and the sweep (every `idle_ttl / 8`, at
//! most 5 s) keeps the oldest end up to date.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::fast_map::FastMap;
use std::sync::Arc;

use tokio::time::Instant;

use super::Session;
use crate::metrics::CloseReason;
use crate::vocab::{Principal, SessionId};

pub(super) struct Table {
    /// Only ids the gateway issued (or sealed) are ever inserted.
    map: FastMap<SessionId, Entry>,
    by_use: BTreeMap<u64, SessionId>,
    /// Each principal's keys in `by_use`; None when no per-principal cap can bind
    /// (then it costs nothing per session).
    by_principal: Option<HashMap<Principal, BTreeSet<u64>>>,
    max: usize,
    max_per_principal: usize,
    next_stamp: u64,
    /// What `Entry::last_used` counts from.
    origin: Instant,
}

/// 32 bytes, so that a bucket of `map` is 48 with its 16-byte key (an
/// `Instant` of 16 bytes made it 56: 10 bytes more per session at 100,000).
struct Entry {
    session: Arc<Session>,
    /// Its key in `by_use`.
    placed: u64,
    /// Nanoseconds since `Table::origin` (a u64 of them lasts 584 years).
    last_used: u64,
    in_flight: u32,
    /// Its last use's stamp is `placed + since` (0: its record is up to
    /// date).
    since: u32,
}

impl Entry {
    fn last_stamp(&self) -> u64 {
        self.placed + u64::from(self.since)
    }
}

/// What a sweep's call took.
pub(super) struct Swept {
    pub(super) expired: Vec<Arc<Session>>,
    /// Nothing more to take now; else the batch ran out first.
    pub(super) done: bool,
}

/// What `insert` had to end to make room.
pub(super) type Evicted = Vec<(Arc<Session>, CloseReason)>;

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Full {
    /// Every session of the table (or of the principal) has a request in flight.
    AllBusy,
}

impl Table {
    /// A table of at most `max` sessions, `max_per_principal` of them one
    /// principal's. At either bound a new session evicts the least recently
    /// used idle one (of the principal, or of the table); when all are busy
    /// the new one is refused.
    pub(super) fn new(max: usize, max_per_principal: usize) -> Table {
        Table {
            map: FastMap::default(),
            by_use: BTreeMap::new(),
            by_principal: (max_per_principal < max).then(HashMap::new),
            max,
            max_per_principal,
            next_stamp: 0,
            origin: Instant::now(),
        }
    }

    /// `at` as `Entry::last_used` counts it (an instant before the table
    /// was made counts as that moment: no session is older).
    fn nanos(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.origin);
        (since.as_secs().saturating_mul(1_000_000_000)).saturating_add(since.subsec_nanos().into())
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    fn stamp(&mut self) -> u64 {
        self.next_stamp += 1;
        self.next_stamp
    }

    fn owned_by(&self, principal: &Principal) -> usize {
        self.by_principal
            .as_ref()
            .and_then(|p| p.get(principal))
            .map_or(0, BTreeSet::len)
    }

    /// Inserts a new session, first evicting the least recently used idle
    /// session of its principal (at the per-principal cap) or of the table
    /// (at capacity).
    pub(super) fn insert(&mut self, session: Arc<Session>, now: Instant) -> Result<Evicted, Full> {
        // Evicting one of the principal's own sessions also frees a table slot.
        let (victim, reason) = if self.owned_by(&session.principal) >= self.max_per_principal {
            let victim = self.oldest_idle(Some(&session.principal));
            (
                Some(victim.ok_or(Full::AllBusy)?),
                CloseReason::principal_cap,
            )
        } else if self.map.len() >= self.max {
            let victim = self.oldest_idle(None);
            (Some(victim.ok_or(Full::AllBusy)?), CloseReason::capacity)
        } else {
            (None, CloseReason::capacity)
        };
        let evicted = victim
            .and_then(|id| self.remove(&id))
            .map(|s| vec![(s, reason)])
            .unwrap_or_default();
        let stamp = self.stamp();
        let id = session.id.clone();
        if let Some(p) = &mut self.by_principal {
            p.entry(session.principal.clone())
                .or_default()
                .insert(stamp);
        }
        self.by_use.insert(stamp, id.clone());
        self.map.insert(
            id,
            Entry {
                session,
                placed: stamp,
                last_used: self.nanos(now),
                in_flight: 0,
                since: 0,
            },
        );
        Ok(evicted)
    }

    /// The least recently used idle session, of `principal` or of the
    /// table. Records found behind their last use are moved to it on the
    /// way; busy sessions are skipped (at most as many as requests in
    /// flight).
    fn oldest_idle(&mut self, principal: Option<&Principal>) -> Option<SessionId> {
        let mut cursor = 0;
        loop {
            let key = match principal {
                None => *self.by_use.range(cursor..).next()?.0,
                Some(p) => *self.by_principal.as_ref()?.get(p)?.range(cursor..).next()?,
            };
            let entry = self.map.get_mut(self.by_use.get(&key)?)?;
            if entry.since > 0 {
                let to = entry.last_stamp();
                move_to(&mut self.by_use, &mut self.by_principal, entry, to);
            } else if entry.in_flight == 0 {
                return self.by_use.get(&key).cloned();
            } else {
                cursor = key + 1;
            }
        }
    }

    pub(super) fn remove(&mut self, id: &SessionId) -> Option<Arc<Session>> {
        let entry = self.map.remove(id)?;
        self.by_use.remove(&entry.placed);
        if let Some(p) = &mut self.by_principal
            && let Some(stamps) = p.get_mut(&entry.session.principal)
        {
            stamps.remove(&entry.placed);
            if stamps.is_empty() {
                p.remove(&entry.session.principal);
            }
        }
        Some(entry.session)
    }

    /// Looks a session up without counting it as used.
    pub(super) fn get(&self, id: &str) -> Option<&Arc<Session>> {
        self.map.get(id).map(|e| &e.session)
    }

    /// Looks a session's principal up without counting it as used.
    pub(super) fn owner(&self, id: &str) -> Option<&Principal> {
        self.get(id).map(|s| &s.principal)
    }

    /// Marks a request in flight on a session. A busy session is neither
    /// evicted nor expired, wherever it stands in `by_use`, so neither its
    /// place nor its last use change until the request ends (`leave`): no
    /// clock is read for it. Only if `may` holds of the session (one
    /// lookup for both): `Err` when it does not, and then nothing is marked.
    pub(super) fn enter_if(
        &mut self,
        id: &str,
        may: impl FnOnce(&Session) -> bool,
    ) -> Result<Option<Arc<Session>>, ()> {
        let Some(entry) = self.map.get_mut(id) else {
            return Ok(None);
        };
        if !may(&entry.session) {
            return Err(());
        }
        entry.in_flight = entry.in_flight.saturating_add(1);
        Ok(Some(entry.session.clone()))
    }

    /// Ends a request that `enter` began: the session was used at `now`.
    pub(super) fn leave(&mut self, id: &SessionId, now: Instant) {
        self.used(id, now, true);
    }

    /// Marks a session used at `now`; false if it is not in the table.
    pub(super) fn touch(&mut self, id: &SessionId, now: Instant) -> bool {
        self.used(id, now, false)
    }

    /// The session's last use is now: noted in its entry, where the walks
    /// find it (its record in `by_use` stays where it is).
    fn used(&mut self, id: &SessionId, now: Instant, leaving: bool) -> bool {
        let stamp = self.stamp();
        let now = self.nanos(now);
        let Some(entry) = self.map.get_mut(id) else {
            return false;
        };
        entry.last_used = now;
        if leaving {
            entry.in_flight = entry.in_flight.saturating_sub(1);
        }
        match u32::try_from(stamp - entry.placed) {
            Ok(since) => entry.since = since,
            // Placed more uses of the table ago than `since` counts.
            Err(_) => move_to(&mut self.by_use, &mut self.by_principal, entry, stamp),
        }
        true
    }

    /// Removes the sessions idle since before `deadline`, as many as
    /// `batch` allows: a removal and a record moved to its last use count
    /// one each.
    pub(super) fn expire(&mut self, deadline: Instant, batch: usize) -> Swept {
        let deadline = self.nanos(deadline);
        let mut expired = Vec::new();
        let (mut cursor, mut work) = (0, 0);
        while let Some((&key, id)) = self.by_use.range(cursor..).next() {
            if work >= batch {
                return Swept {
                    expired,
                    done: false,
                };
            }
            let Some(entry) = self.map.get_mut(id) else {
                break;
            };
            if entry.since > 0 {
                let to = entry.last_stamp();
                move_to(&mut self.by_use, &mut self.by_principal, entry, to);
                work += 1;
                continue;
            }
            if entry.last_used >= deadline {
                break;
            }
            cursor = key + 1;
            // A busy session is not idle, however old its last touch.
            if entry.in_flight > 0 {
                continue;
            }
            if let Some(s) = self
                .by_use
                .get(&key)
                .cloned()
                .and_then(|id| self.remove(&id))
            {
                expired.push(s);
                work += 1;
            }
        }
        Swept {
            expired,
            done: true,
        }
    }

    /// Gives back the map's spare room once most sessions are gone: a
    /// burst of abandoned sessions must not hold its peak memory forever.
    pub(super) fn shrink(&mut self) {
        let (len, cap) = (self.map.len(), self.map.capacity());
        if cap > 64 && len * 4 < cap {
            self.map.shrink_to(len * 2);
            if let Some(p) = &mut self.by_principal {
                p.shrink_to(p.len() * 2);
            }
        }
    }

    pub(super) fn drain(&mut self) -> Vec<Arc<Session>> {
        self.by_use.clear();
        if let Some(p) = &mut self.by_principal {
            p.clear();
        }
        self.map.drain().map(|(_, e)| e.session).collect()
    }

    #[cfg(test)]
    pub(super) fn assert_consistent(&self) {
        assert_eq!(self.map.len(), self.by_use.len());
        for (stamp, id) in &self.by_use {
            assert_eq!(self.map[id].placed, *stamp);
            assert!(self.map[id].last_stamp() < self.next_stamp + 1);
        }
        if let Some(p) = &self.by_principal {
            let owned: usize = p.values().map(BTreeSet::len).sum();
            assert_eq!(owned, self.map.len());
            for (principal, stamps) in p {
                for stamp in stamps {
                    assert_eq!(&self.map[&self.by_use[stamp]].session.principal, principal);
                }
            }
        }
    }
}

/// Moves `entry`'s record (and its principal's key) to `to`, one of its
/// uses, now its place.
fn move_to(
    by_use: &mut BTreeMap<u64, SessionId>,
    by_principal: &mut Option<HashMap<Principal, BTreeSet<u64>>>,
    entry: &mut Entry,
    to: u64,
) {
    let from = std::mem::replace(&mut entry.placed, to);
    entry.since = 0;
    if let Some(id) = by_use.remove(&from) {
        by_use.insert(to, id);
    }
    if let Some(p) = by_principal
        && let Some(keys) = p.get_mut(&entry.session.principal)
    {
        keys.remove(&from);
        keys.insert(to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ClientCaps, LegacyVersion};
    use std::time::Duration;

    fn session(n: u64, principal: u64) -> Arc<Session> {
        Session::new(
            SessionId::from_header(&format!("s{n}")),
            Principal::named(principal as usize),
            LegacyVersion::V2025_11_25,
            ClientCaps::default(),
            None,
            b"",
            0,
        )
    }

    /// Against a plain model (each session's last use, its requests in
    /// flight): whatever the uses, eviction takes the least recently used
    /// idle session, of the principal at its cap, else of the table, and
    /// the sweep removes exactly the idle ones unused since its deadline.
    /// Time often stands still (as in paused tests), so uses in one instant
    /// are ordered by the table's stamps.
    #[test]
    fn eviction_and_expiry_follow_last_use_exactly() {
        for per_principal in [4, 1000] {
            let origin = Instant::now();
            let mut table = Table::new(12, per_principal);
            // Model: id -> (principal, order of last use, requests in
            // flight, time of last use in ms).
            let mut model: HashMap<u64, (u64, u64, u32, u64)> = HashMap::new();
            // Evictions, refusals, sessions expired: each path is taken.
            let mut seen = [0usize; 3];
            let (mut seq, mut next_id, mut rng, mut ms) =
                (0u64, 0u64, 0x2545_f491_4f6c_dd1du64, 0u64);
            let mut roll = |n: u64| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % n
            };
            for _ in 0..4000 {
                if roll(4) == 0 {
                    ms += roll(3);
                }
                let now = origin + Duration::from_millis(ms);
                let ids: Vec<u64> = {
                    let mut v: Vec<u64> = model.keys().copied().collect();
                    v.sort_unstable();
                    v
                };
                let pick = |r: u64| ids.get(r as usize % ids.len().max(1)).copied();
                match roll(6) {
                    0 | 1 => {
                        let principal = roll(3);
                        let owned = model.values().filter(|e| e.0 == principal).count();
                        let idle_lru = |of: Option<u64>| {
                            model
                                .iter()
                                .filter(|(_, e)| e.2 == 0 && of.is_none_or(|p| e.0 == p))
                                .min_by_key(|(_, e)| e.1)
                                .map(|(id, _)| *id)
                        };
                        let want = if owned >= per_principal {
                            Some(idle_lru(Some(principal)))
                        } else if model.len() >= 12 {
                            Some(idle_lru(None))
                        } else {
                            None
                        };
                        let got = table.insert(session(next_id, principal), now);
                        match want {
                            Some(None) => {
                                assert_eq!(got.err(), Some(Full::AllBusy));
                                seen[1] += 1;
                            }
                            want => {
                                let evicted: Vec<u64> = got
                                    .unwrap()
                                    .iter()
                                    .map(|(s, _)| s.id.as_str()[1..].parse().unwrap())
                                    .collect();
                                assert_eq!(evicted, want.flatten().into_iter().collect::<Vec<_>>());
                                if let Some(Some(victim)) = want {
                                    model.remove(&victim);
                                    seen[0] += 1;
                                }
                                seq += 1;
                                model.insert(next_id, (principal, seq, 0, ms));
                                next_id += 1;
                            }
                        }
                    }
                    2 => {
                        if let Some(id) = pick(roll(64)) {
                            table.enter_if(&format!("s{id}"), |_| true).unwrap();
                            model.get_mut(&id).unwrap().2 += 1;
                        }
                    }
                    3 => {
                        let busy: Vec<u64> =
                            ids.iter().copied().filter(|id| model[id].2 > 0).collect();
                        if let Some(&id) = busy.get(roll(64) as usize % busy.len().max(1)) {
                            table.leave(&SessionId::from_header(&format!("s{id}")), now);
                            seq += 1;
                            let e = model.get_mut(&id).unwrap();
                            (e.1, e.2, e.3) = (seq, e.2 - 1, ms);
                        }
                    }
                    4 => {
                        if let Some(id) = pick(roll(64)) {
                            table.touch(&SessionId::from_header(&format!("s{id}")), now);
                            seq += 1;
                            let e = model.get_mut(&id).unwrap();
                            (e.1, e.3) = (seq, ms);
                        }
                    }
                    _ => {
                        // Everything idle and last used before the deadline
                        // goes, and nothing else.
                        if roll(8) == 0 {
                            let cut = ms.saturating_sub(roll(3));
                            let deadline = origin + Duration::from_millis(cut);
                            // In small batches, as the sweep takes them
                            // (moves count too), until it is done.
                            let mut got: Vec<u64> = Vec::new();
                            loop {
                                let swept = table.expire(deadline, 1 + roll(4) as usize);
                                got.extend(
                                    swept
                                        .expired
                                        .iter()
                                        .map(|s| -> u64 { s.id.as_str()[1..].parse().unwrap() }),
                                );
                                table.assert_consistent();
                                if swept.done {
                                    break;
                                }
                            }
                            got.sort_unstable();
                            let mut want: Vec<u64> = model
                                .iter()
                                .filter(|(_, e)| e.2 == 0 && e.3 < cut)
                                .map(|(id, _)| *id)
                                .collect();
                            want.sort_unstable();
                            assert_eq!(got, want);
                            model.retain(|id, _| !got.contains(id));
                            seen[2] += got.len();
                        }
                    }
                }
                table.assert_consistent();
                assert_eq!(table.len(), model.len());
            }
            assert!(seen.iter().all(|&n| n > 20), "{per_principal}: {seen:?}");
        }
    }

    /// A use farther from its record than `Entry::since` counts moves the
    /// record at once; the order stays exact.
    #[test]
    fn a_use_long_after_its_record_moves_it() {
        let now = Instant::now();
        let mut table = Table::new(2, 1);
        for n in 0..2 {
            table.insert(session(n, n), now).unwrap();
        }
        let s0 = SessionId::from_header("s0");
        table.touch(&s0, now);
        assert_eq!(table.map[&s0].since, 2);
        table.next_stamp += u64::from(u32::MAX);
        table.touch(&s0, now);
        assert_eq!(table.map[&s0].since, 0, "moved");
        assert_eq!(table.map[&s0].placed, table.next_stamp);
        table.assert_consistent();
        // s1 is the least recently used: it goes for a third session.
        let evicted = table.insert(session(2, 2), now).unwrap();
        assert_eq!(evicted[0].0.id.as_str(), "s1");
        table.assert_consistent();
    }

    /// The table holds hundreds of thousands: a bucket of its map (key and
    /// entry) is 48 bytes.
    #[test]
    fn an_entry_is_32_bytes() {
        assert_eq!(std::mem::size_of::<super::Entry>(), 32);
        assert_eq!(std::mem::size_of::<(super::SessionId, super::Entry)>(), 48);
    }
}
