//! Client connections' places under `max_connections`, and who gives one
//! up when a new connection needs it (as Envoy's overload manager and
//! nginx do).
//!
//! Every accepted connection holds a [`Place`] in the table until it
//! closes. Its [`Phase`] says what it is doing: waiting for its first
//! request head, busy with a request (its response, an SSE stream
//! included, still being written), or idle between requests. At the cap a
//! new connection displaces, in this order, the connection that has waited
//! longest without sending a complete request head, then the keep-alive
//! connection idle longest; a busy one never. A connection is displaced by
//! `shutdown(2)` of its socket: its reader (this gateway's own or hyper's)
//! sees the end of the stream and the connection ends as if the client had
//! closed it. The table removes a connection under its lock before the
//! socket is closed (`Place` is dropped first), so a descriptor shut down
//! is always the displaced connection's own.
//!
//! One address holds at most `max_connections_per_peer`: past it, a new
//! connection from that address displaces one of the address's own (in the
//! same order), or is refused. Above `PRESSURE` of the cap, a connection
//! that has not sent its first request head within a tenth of the
//! header-read timeout (at least `SHORT_HEAD`) is closed
//! (the header-read timeout, shortened while the gateway is full).
//!
//! Cost per request: a compare-and-swap when its head is taken and one
//! when its response ends; the table is locked only at accept, at close
//! and while it sheds.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::metrics::{Metrics, ShedReason};

/// Above this share of `max_connections` (three quarters) the gateway is
/// under pressure: connections that have sent no request yet get a tenth
/// of the header-read timeout (10 s becomes 1 s), at least `SHORT_HEAD`
/// (and never more than the timeout itself).
pub(crate) const PRESSURE: (usize, usize) = (3, 4);
pub(crate) const SHORT_HEAD: Duration = Duration::from_secs(1);

/// A connection's phase, in the low two bits of its word; an idle one's
/// high bits hold when it went idle (µs since its `epoch`).
const WAITING: u64 = 0;
const BUSY: u64 = 1;
const IDLE: u64 = 2;
const DISPLACED: u64 = 3;
const STATE: u64 = 3;

/// What one connection is doing, shared by its reader and the table.
pub(crate) struct Phase {
    word: AtomicU64,
    epoch: Instant,
}

impl Phase {
    /// A request head was taken: busy until `end`. False when the
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

    /// The request's response has ended (or been dropped): idle since `now`.
    pub(crate) fn end(&self, now: Instant) {
        let us = u64::try_from(now.saturating_duration_since(self.epoch).as_micros())
            .unwrap_or(u64::MAX);
        let idle = (us.min(u64::MAX >> 2) << 2) | IDLE;
        let _ = self
            .word
            .compare_exchange(BUSY, idle, Ordering::Release, Ordering::Relaxed);
    }

    fn load(&self) -> u64 {
        self.word.load(Ordering::Acquire)
    }

    /// From `seen` (waiting or idle) to displaced, unless it moved.
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

    /// Displaces one connection (of `peer`, if given; never `spare`):
    /// the one waiting longest for its first head, else the one idle
    /// longest. False when there is none.
    fn shed(&self, table: &mut Table, peer: Option<IpAddr>, spare: Option<Key>) -> bool {
        let ours = |held: &Held| peer.is_none_or(|p| held.peer == p);
        // Waiting: the oldest first. Keys no longer waiting go at the
        // front, and are passed over further in.
        let mut at = 0;
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
            if Some(key) == spare || !ours(held) {
                at += 1;
                continue;
            }
            if held.phase.displace(word) {
                shut(held.fd);
                table.fresh.remove(at);
                table.displacing += 1;
                self.metrics.connection_shed(ShedReason::no_request);
                return true;
            }
            at += 1;
        }
        // Idle between requests: the longest idle first.
        let oldest = table
            .slots
            .iter()
            .filter_map(|s| s.held.as_ref())
            .filter(|h| ours(h))
            .map(|h| (h, h.phase.load()))
            .filter(|(_, w)| w & STATE == IDLE)
            .min_by_key(|(_, w)| w >> 2);
        if let Some((held, word)) = oldest
            && held.phase.displace(word)
        {
            shut(held.fd);
            table.displacing += 1;
            self.metrics.connection_shed(ShedReason::idle);
            return true;
        }
        false
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
