//! Client connections' places under `max_connections`, and who gives one
//! up when a new connection needs it (as Envoy's overload manager and
//! nginx do).
//!
//! Every accepted connection holds a [`Place`] in the table until it
//! closes. Its [`Phase`] says what it is doing: waiting for its first
//! request head, receiving a request's body (its head taken, the rest of
//! its body still to come), busy with a request (its body whole, its
//! response, an SSE stream included, still being written), or idle between
//! requests. At the cap a new connection displaces the connection that
//! owes the longest: one that has sent no complete request head owes it
//! since it was accepted, a request whose body has fallen behind `FLOOR`
//! owes since it fell behind (its head's time, and a second more for every
//! `FLOOR` bytes of the body that came). With none waiting or behind, the
//! keep-alive connection idle longest gives way; a busy one never, nor one
//! whose body keeps to `FLOOR`. A connection is displaced by `shutdown(2)` of its
//! socket: its reader (this gateway's own or hyper's) sees the end of the
//! stream and the connection ends as if the client had closed it. The
//! table removes a connection under its lock before the socket is closed
//! (`Place` is dropped first), so a descriptor shut down is always the
//! displaced connection's own.
//!
//! A body is displaceable as soon as it falls behind, with no grace: a
//! flood of heads whose bodies never come, re-opened as fast as they are
//! let go, would otherwise take every place that comes free before any
//! client could. In that order the flood's connections give way to each
//! other and to a client that sends its request whole, which is busy from
//! its head on; and a client accepted a moment ago, not read yet, owes
//! less than any head that came before it.
//!
//! One address holds at most `max_connections_per_peer`: past it, a new
//! connection from that address displaces one of the address's own (in the
//! same order), or is refused. Above `PRESSURE` of the cap, a connection
//! that has not sent its first request head within a tenth of the
//! header-read timeout (at least `SHORT_HEAD`) is closed
//! (the header-read timeout, shortened while the gateway is full).
//!
//! Cost per request: a compare-and-swap when its head is taken and one
//! when its response ends; a body that does not come with its head takes
//! one more as each read of it arrives. The table is locked only at
//! accept, at close and while it sheds; a shed looks at every place only
//! when a body may be receiving or no connection waits for its head.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::metrics::{Metrics, ShedReason};

/// Above this share of `max_connections` (three quarters) the gateway is
/// under pressure: connections that have sent no request yet get a tenth
/// of the header-read timeout (10 s becomes 1 s), at least `SHORT_HEAD`
/// (and never more than the timeout itself).
pub(crate) const PRESSURE: (usize, usize) = (3, 4);
pub(crate) const SHORT_HEAD: Duration = Duration::from_secs(1);

/// The least rate (bytes a second, from its head on) at which a request's
/// body keeps its place when a new connection needs one: 16 KiB/s, 128
/// kbit/s, an eighth of a 1 Mbit/s uplink. A body of the largest size
/// `max_body_bytes` allows by default (4 MiB) must come at 140 KB/s
/// anyway to beat `body_read_timeout` (30 s); one on loopback or a LAN
/// comes hundreds of times faster. Holding a place against it costs a
/// client this rate for every place held, and no longer than
/// `body_read_timeout`.
pub(crate) const FLOOR: u64 = 16 * 1024;

/// A connection's phase, in the low three bits of its word. An idle one's
/// high bits hold when it went idle, a receiving one's when its body falls
/// behind `FLOOR` (its head's time, and a second more for every `FLOOR`
/// bytes that have come), both in µs since its `epoch`.
const WAITING: u64 = 0;
const BUSY: u64 = 1;
const IDLE: u64 = 2;
const DISPLACED: u64 = 3;
const RECEIVING: u64 = 4;
const STATE: u64 = 7;
/// Where a word's time begins.
const AT: u32 = 3;
const MAX_AT: u64 = u64::MAX >> AT;

/// What one connection is doing, shared by its reader and the table.
pub(crate) struct Phase {
    word: AtomicU64,
    epoch: Instant,
    /// The table's `receiving`.
    receiving: Arc<AtomicBool>,
}

impl Phase {
    /// A request head was taken with its body whole, or the body that was
    /// still arriving has come: busy until `end`. False when the
    /// connection was displaced: it serves nothing more.
    pub(crate) fn begin(&self) -> bool {
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            match word & STATE {
                DISPLACED => return false,
                BUSY => return true,
                _ => match self.word.compare_exchange_weak(
                    word,
                    BUSY,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return true,
                    Err(now) => word = now,
                },
            }
        }
    }

    /// A request whose head came at `head` with `had` bytes of its body
    /// waits for the rest: receiving until `begin` (or `end`), from
    /// waiting or idle as the head is taken, or from busy when a handler
    /// finds the body missing (hyper's). False when the connection was
    /// displaced.
    pub(crate) fn receive(&self, had: usize, head: Instant) -> bool {
        let behind = micros(self.epoch, head)
            .saturating_add(owed(had))
            .min(MAX_AT);
        let receiving = (behind << AT) | RECEIVING;
        let mut word = self.word.load(Ordering::Relaxed);
        while word & STATE != DISPLACED {
            match self.word.compare_exchange_weak(
                word,
                receiving,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    // After the word: a shed that clears the flag before
                    // this store sees the word when it looks.
                    self.receiving.store(true, Ordering::Release);
                    return true;
                }
                Err(now) => word = now,
            }
        }
        false
    }

    /// `n` more bytes of a receiving request's body have come: it falls
    /// behind `FLOOR` that much later. False when the connection was
    /// displaced.
    pub(crate) fn received(&self, n: usize) -> bool {
        let mut word = self.word.load(Ordering::Relaxed);
        while word & STATE == RECEIVING {
            let behind = (word >> AT).saturating_add(owed(n)).min(MAX_AT);
            match self.word.compare_exchange_weak(
                word,
                (behind << AT) | RECEIVING,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => word = now,
            }
        }
        word & STATE != DISPLACED
    }

    /// The request's response has ended (or been dropped): idle since `now`.
    /// (A request answered before its body came, refused, say, ends from
    /// receiving.)
    pub(crate) fn end(&self, now: Instant) {
        let idle = (micros(self.epoch, now).min(MAX_AT) << AT) | IDLE;
        let mut from = BUSY;
        loop {
            match self
                .word
                .compare_exchange(from, idle, Ordering::Release, Ordering::Relaxed)
            {
                Err(word) if word & STATE == RECEIVING => from = word,
                _ => return,
            }
        }
    }

    fn load(&self) -> u64 {
        self.word.load(Ordering::Acquire)
    }

    /// From `seen` (waiting, receiving or idle) to displaced, unless it
    /// moved.
    fn displace(&self, seen: u64) -> bool {
        self.word
            .compare_exchange(seen, DISPLACED, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }
}

/// A connection's place in the table; dropping it (before the socket is
/// closed) gives the place back.
pub(crate) struct Place {
    places: Arc<Places>,
    key: Key,
    phase: Arc<Phase>,
}

impl Place {
    pub(crate) fn phase(&self) -> &Arc<Phase> {
        &self.phase
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.places.leave(self.key);
    }
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Place").field("key", &self.key).finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    index: u32,
    generation: u32,
}

/// The table of connections' places.
pub(crate) struct Places {
    table: Mutex<Table>,
    /// Told when a displaced connection has closed.
    left: tokio::sync::Notify,
    per_peer: usize,
    pressure: usize,
    short_head: Duration,
    epoch: Instant,
    /// A connection may be receiving a body: set as one begins to,
    /// cleared by a shed that looks and finds none. Without it a shed
    /// that has a connection waiting for its head to displace looks no
    /// further (a flood of silent sockets displaces each in O(1)).
    receiving: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
}

#[derive(Default)]
struct Table {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Connections in the order they came, for those still waiting for
    /// their first head; others are dropped from it as they are met.
    fresh: VecDeque<Key>,
    /// Places held by each address; keyed by what clients choose, so
    /// SipHash.
    peers: HashMap<IpAddr, usize>,
    live: usize,
    /// Of `live`, those displaced and not closed yet.
    displacing: usize,
}

#[derive(Default)]
struct Slot {
    generation: u32,
    held: Option<Held>,
}

struct Held {
    peer: IpAddr,
    fd: RawFd,
    phase: Arc<Phase>,
    since: Instant,
}

/// A new connection's place.
pub(crate) struct Entered {
    pub(crate) place: Place,
    /// One of the address's own connections gave way for it.
    pub(crate) gave_way: bool,
    /// More connections are open than `PRESSURE` of the cap.
    pub(crate) pressed: bool,
}

/// Why a new connection could not have a place.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct PeerFull;

impl Places {
    /// For `max` connections, at most `per_peer` from one address (0:
    /// half of `max`), under a header-read timeout of `header_read`.
    pub(crate) fn new(
        max: usize,
        per_peer: usize,
        header_read: Duration,
        metrics: Arc<Metrics>,
    ) -> Arc<Places> {
        let per_peer = match per_peer {
            0 => (max / 2).max(1),
            n => n.min(max),
        };
        Arc::new(Places {
            table: Mutex::new(Table::default()),
            left: tokio::sync::Notify::new(),
            per_peer,
            pressure: max * PRESSURE.0 / PRESSURE.1,
            short_head: (header_read / 10).max(SHORT_HEAD).min(header_read),
            epoch: Instant::now(),
            receiving: Arc::new(AtomicBool::new(false)),
            metrics,
        })
    }

    /// A place for a connection from `peer` on socket `fd`. At the
    /// address's cap one of its own connections gives way, else the new
    /// one is refused.
    pub(crate) fn enter(self: &Arc<Self>, peer: IpAddr, fd: RawFd) -> Result<Entered, PeerFull> {
        let peer = peer.to_canonical();
        let now = Instant::now();
        let mut table = self.table.lock();
        let held = table.peers.get(&peer).copied().unwrap_or(0);
        let gave_way = held >= self.per_peer;
        if gave_way && !self.shed(&mut table, Some(peer), None) {
            self.metrics.connection_refused_per_peer();
            return Err(PeerFull);
        }
        let phase = Arc::new(Phase {
            word: AtomicU64::new(WAITING),
            epoch: self.epoch,
            receiving: self.receiving.clone(),
        });
        let index = match table.free.pop() {
            Some(i) => i,
            None => {
                table.slots.push(Slot::default());
                u32::try_from(table.slots.len() - 1).expect("fewer than 2^32 connections")
            }
        };
        let slot = &mut table.slots[index as usize];
        slot.held = Some(Held {
            peer,
            fd,
            phase: phase.clone(),
            since: now,
        });
        let key = Key {
            index,
            generation: slot.generation,
        };
        table.fresh.push_back(key);
        *table.peers.entry(peer).or_insert(0) += 1;
        table.live += 1;
        // Keys of connections that went on or closed are dropped as they
        // are met; without shedding, none are met: compact now and then.
        if table.fresh.len() > 2 * table.slots.len() + 64 {
            let Table { fresh, slots, .. } = &mut *table;
            fresh.retain(|k| waiting(slots, *k));
        }
        let pressed = table.live > self.pressure;
        drop(table);
        let place = Place {
            places: self.clone(),
            key,
            phase,
        };
        Ok(Entered {
            place,
            gave_way,
            pressed,
        })
    }

    /// The cap is reached: one connection other than `new` gives way.
    /// False when every one is busy.
    pub(crate) fn make_room(&self, new: &Place) -> bool {
        let mut table = self.table.lock();
        self.shed(&mut table, None, Some(new.key))
    }

    /// Returns once every connection displaced so far has closed: a new
    /// one takes a place only after the one that gave way has left it, so
    /// descriptors stay within the cap however fast a flood reconnects.
    pub(crate) async fn settled(&self) {
        loop {
            let left = self.left.notified();
            if self.table.lock().displacing == 0 {
                return;
            }
            left.await;
        }
    }

    /// Under pressure, closes the connections that have waited
    /// `short_head` for their first request head. Returns whether the
    /// gateway is still under pressure.
    pub(crate) fn sweep(&self) -> bool {
        let mut guard = self.table.lock();
        let table = &mut *guard;
        if table.live <= self.pressure {
            return false;
        }
        let Some(before) = Instant::now().checked_sub(self.short_head) else {
            return true;
        };
        while let Some(&key) = table.fresh.front() {
            let Some(held) = held(&table.slots, key) else {
                table.fresh.pop_front();
                continue;
            };
            let word = held.phase.load();
            if word & STATE != WAITING {
                table.fresh.pop_front();
                continue;
            }
            if held.since > before {
                break;
            }
            table.fresh.pop_front();
            if held.phase.displace(word) {
                shut(held.fd);
                table.displacing += 1;
                self.metrics.connection_shed(ShedReason::head_timeout);
            }
        }
        table.live > self.pressure
    }

    /// Displaces one connection (of `peer`, if given; never `spare`), in
    /// the order the module's doc gives. False when there is none (every
    /// one busy, or receiving a body that keeps to `FLOOR`).
    fn shed(&self, table: &mut Table, peer: Option<IpAddr>, spare: Option<Key>) -> bool {
        let bodies = self.receiving.swap(false, Ordering::AcqRel);
        match self.shed_once(table, peer, spare, bodies) {
            Some(displaced) => {
                // The ones chosen moved on (a head taken, a body come)
                // before they could be displaced: again, looking at all.
                displaced || self.shed_once(table, peer, spare, true) == Some(true)
            }
            None => false,
        }
    }

    /// `shed`, looking at bodies and idle connections only if `bodies`
    /// may be receiving or none waits for its head. None when there was
    /// none to choose; false when those chosen had moved on.
    fn shed_once(
        &self,
        table: &mut Table,
        peer: Option<IpAddr>,
        spare: Option<Key>,
        bodies: bool,
    ) -> Option<bool> {
        let ours = |held: &Held| peer.is_none_or(|p| held.peer == p);
        // Waiting: the oldest. Keys no longer waiting go at the front,
        // and are passed over further in.
        let mut at = 0;
        let mut waiting = None;
        while at < table.fresh.len() {
            let key = table.fresh[at];
            let word = held(&table.slots, key).map(|h| h.phase.load());
            let Some(word) = word.filter(|w| w & STATE == WAITING) else {
                if at == 0 {
                    table.fresh.pop_front();
                } else {
                    at += 1;
                }
                continue;
            };
            let held = held(&table.slots, key).expect("just seen");
            if Some(key) != spare && ours(held) {
                waiting = Some((held, word, micros(self.epoch, held.since)));
                break;
            }
            at += 1;
        }
        // The body behind longest, and the connection idle longest, in
        // one pass.
        let now = micros(self.epoch, Instant::now());
        let (mut behind, mut idle) = (None, None);
        let slots = match bodies || waiting.is_none() {
            true => &table.slots[..],
            false => &[],
        };
        for held in slots.iter().filter_map(|s| s.held.as_ref()) {
            let word = held.phase.load();
            let since = word >> AT;
            if word & STATE == RECEIVING {
                self.receiving.store(true, Ordering::Relaxed);
            }
            let first = match word & STATE {
                _ if !ours(held) => continue,
                IDLE => &mut idle,
                RECEIVING if since <= now => &mut behind,
                _ => continue,
            };
            if first.is_none_or(|(_, _, s): (&Held, u64, u64)| s > since) {
                *first = Some((held, word, since));
            }
        }
        // Of the waiting one and the body behind, the one that owes
        // longest first.
        let owes = |c: &Option<(&Held, u64, u64)>| c.map_or(u64::MAX, |(_, _, since)| since);
        let waiting = (waiting, ShedReason::no_request);
        let behind = (behind, ShedReason::slow_body);
        let (first, then) = match owes(&waiting.0) <= owes(&behind.0) {
            true => (waiting, behind),
            false => (behind, waiting),
        };
        let mut chosen = None;
        for (choice, reason) in [first, then, (idle, ShedReason::idle)] {
            let Some((held, word, _)) = choice else {
                continue;
            };
            if held.phase.displace(word) {
                shut(held.fd);
                if reason == ShedReason::no_request {
                    table.fresh.remove(at);
                }
                table.displacing += 1;
                self.metrics.connection_shed(reason);
                return Some(true);
            }
            chosen = Some(false);
        }
        chosen
    }

    fn leave(&self, key: Key) {
        let mut table = self.table.lock();
        let Some(slot) = table.slots.get_mut(key.index as usize) else {
            return;
        };
        if slot.generation != key.generation {
            return;
        }
        let Some(held) = slot.held.take() else {
            return;
        };
        slot.generation = slot.generation.wrapping_add(1);
        table.free.push(key.index);
        table.live -= 1;
        if let Some(n) = table.peers.get_mut(&held.peer) {
            *n -= 1;
            if *n == 0 {
                table.peers.remove(&held.peer);
            }
        }
        if held.phase.load() & STATE == DISPLACED {
            table.displacing -= 1;
            drop(table);
            self.left.notify_waiters();
        }
    }
}

/// µs from `epoch` to `now`.
fn micros(epoch: Instant, now: Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(epoch).as_micros()).unwrap_or(u64::MAX)
}

/// µs that `bytes` of a body buy at `FLOOR`.
fn owed(bytes: usize) -> u64 {
    u64::try_from(bytes)
        .unwrap_or(u64::MAX)
        .saturating_mul(1_000_000)
        / FLOOR
}

fn held(slots: &[Slot], key: Key) -> Option<&Held> {
    let slot = slots.get(key.index as usize)?;
    if slot.generation != key.generation {
        return None;
    }
    slot.held.as_ref()
}

fn waiting(slots: &[Slot], key: Key) -> bool {
    held(slots, key).is_some_and(|h| h.phase.load() & STATE == WAITING)
}

/// Ends a displaced connection's stream both ways: its reader sees the
/// end at once, the client a FIN.
fn shut(fd: RawFd) {
    // SAFETY: called under the table's lock, which the connection's
    // `Place` takes to leave before its socket is closed: `fd` is still
    // that connection's open socket. shutdown(2) changes no memory.
    unsafe {
        libc::shutdown(fd, libc::SHUT_RDWR);
    }
}

#[cfg(test)]
mod tests;
