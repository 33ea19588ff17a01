//! One client session: what it was opened with, the id's binding and end,
//! its GET stream, its subscriptions and log level, its requests in flight.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::found::Found;
use super::in_flight::InFlight;
use crate::cancel_flag::RequestCancel;
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
    pub(super) sealed: Option<Box<(u64, [u8; 16])>>,
    /// A digest of what the id is bound to (principal and namespace, for
    /// sealed ids; nothing for table ids): presented with anything else,
    /// the id is not found, in memory or not.
    pub(super) binding: u64,
    pub(super) ended: CancellationToken,
    /// At most one standalone GET stream per session.
    streaming: AtomicBool,
    /// The caller's tag for where the session was opened (the front's
    /// namespace index), for counts by namespace.
    pub(super) namespace: u16,
    /// When it was opened (or rebuilt from its sealed id) here, in
    /// hundredths of a second since the process began (`lived`): 4 bytes,
    /// where an `Instant` would take the session past its allocation class.
    opened: u32,
    /// What changes while it lives, under one lock (one lock word and its
    /// padding fewer: a smaller allocation class).
    pub(super) state: Mutex<State>,
}

pub(super) struct State {
    /// Requests in flight, by the client's raw id, so that the client's
    /// `notifications/cancelled` can reach them. Entries live exactly as
    /// long as their request.
    pub(super) in_flight: InFlight,
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
    /// Tools its searches found (search mode's `expose_found`).
    found: Found,
}

/// Resource subscriptions one session may hold.
pub const MAX_SUBSCRIPTIONS: usize = 1024;

impl Session {
    pub(super) fn new(
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
            opened: centis_since_start(),
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

    /// Seconds since it was opened here (`mcp.server.session.duration`).
    pub(super) fn lived(&self) -> f64 {
        f64::from(centis_since_start().saturating_sub(self.opened)) / 100.0
    }

    /// Sealed ids: (absolute end in unix seconds, serial).
    pub fn sealed(&self) -> Option<(u64, [u8; 16])> {
        self.sealed.as_deref().copied()
    }

    /// A sealed session lives no longer than its id says, even in memory.
    pub(super) fn is_past_its_end(&self) -> bool {
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

    fn note_found(&self, names: &[String], max: usize) -> bool {
        let mut state = self.state.lock();
        state.extras.get_or_insert_default().found.note(names, max)
    }

    fn found(&self) -> Vec<String> {
        let state = self.state.lock();
        state
            .extras
            .as_ref()
            .map_or_else(Vec::new, |e| e.found.names())
    }

    fn principal(&self) -> &Principal {
        &self.principal
    }
}

/// Hundredths of a second since the first session (497 days fit).
fn centis_since_start() -> u32 {
    static START: std::sync::LazyLock<std::time::Instant> =
        std::sync::LazyLock::new(std::time::Instant::now);
    u32::try_from(START.elapsed().as_millis() / 10).unwrap_or(u32::MAX)
}

/// What a session is bound to, as a digest kept beside it: foldhash's,
/// seeded at random once per process (std's SipHash cost 180 instructions
/// a request, foldhash about 20; the digest never leaves the process).
pub(super) fn digest(bound: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    static SEEDED: std::sync::LazyLock<foldhash::quality::RandomState> =
        std::sync::LazyLock::new(foldhash::quality::RandomState::default);
    SEEDED.hash_one(bound)
}
