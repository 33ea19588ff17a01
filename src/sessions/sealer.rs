//! How the table names sessions: random keys (`table`, the default), or
//! sealed sessions (`sealed`, see `sealed`), with what sealing needs beside
//! the key ring: the absolute lifetime, this process's boot id, and the
//! revocations that `DELETE` leaves behind.

use std::collections::HashMap;
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use super::sealed::{Contents, KeyRing};
use crate::protocol::{ClientCaps, LegacyVersion};
use crate::vocab::{SessionId, unix_now};

/// Revoked ids remembered at once. Past this, the one expiring soonest is
/// forgotten first (and counted): it can be resumed again until its own
/// expiry, which is nearer than any other revoked id's.
pub(super) const MAX_REVOKED: usize = 100_000;

pub enum Ids {
    Table,
    Sealed(Sealer),
}

pub struct Sealer {
    /// Replaced whole by a reload (`rotate`).
    ring: ArcSwap<KeyRing>,
    lifetime: Duration,
    /// This process's own id, sealed into what it issues: an id of ours
    /// that is not in the table was evicted; one of another boot is back
    /// after a restart.
    pub(super) boot: u32,
    /// Serial -> expiry (unix seconds).
    revoked: Mutex<HashMap<[u8; 16], u64>>,
    /// Whether an id not in memory may be resumed on local knowledge alone
    /// (one node); in cluster mode the front asks Redis first.
    pub(super) local: bool,
}

impl Sealer {
    /// `boot` names this process (see `new_boot`); `local`: one node.
    pub fn new(ring: KeyRing, lifetime: Duration, boot: u32, local: bool) -> Sealer {
        Sealer {
            ring: ArcSwap::from_pointee(ring),
            lifetime,
            boot,
            revoked: Mutex::new(HashMap::new()),
            local,
        }
    }

    /// A random id for this process.
    pub fn new_boot() -> u32 {
        let mut boot = [0u8; 4];
        getrandom::fill(&mut boot).expect("OS randomness is unavailable");
        u32::from_be_bytes(boot)
    }

    /// What a new session's id carries.
    pub(super) fn contents(&self, version: LegacyVersion, caps: ClientCaps) -> Contents {
        let now = unix_now();
        let mut serial = [0u8; 16];
        getrandom::fill(&mut serial).expect("OS randomness is unavailable");
        Contents {
            issued: now,
            expires: now + self.lifetime.as_secs(),
            version,
            caps,
            boot: self.boot,
            serial,
        }
    }

    /// An id's contents if it opens, is unexpired and is not revoked.
    pub(super) fn reopen(&self, id: &SessionId, bound: &[u8]) -> Option<Contents> {
        let contents = self.ring.load().open(id.as_str(), bound)?;
        let now = unix_now();
        if now >= contents.expires {
            return None;
        }
        let revoked = self
            .revoked
            .lock()
            .get(&contents.serial)
            .is_some_and(|e| *e > now);
        (!revoked).then_some(contents)
    }

    /// Revokes a serial until `expires`; false if another revocation had to
    /// be forgotten to make room.
    pub fn revoke(&self, serial: [u8; 16], expires: u64) -> bool {
        let now = unix_now();
        let mut revoked = self.revoked.lock();
        let mut kept_all = true;
        if revoked.len() >= MAX_REVOKED {
            revoked.retain(|_, e| *e > now);
        }
        if revoked.len() >= MAX_REVOKED
            && let Some(soonest) = revoked.iter().min_by_key(|(_, e)| **e).map(|(s, _)| *s)
        {
            revoked.remove(&soonest);
            kept_all = false;
        }
        revoked.insert(serial, expires);
        kept_all
    }

    /// The ring in use now: other sealed things (an OAuth flow's
    /// `state`) are sealed with the sessions' keys too.
    pub fn ring(&self) -> std::sync::Arc<KeyRing> {
        self.ring.load_full()
    }

    pub fn keys(&self) -> usize {
        self.ring.load().len()
    }

    /// Seals with the new ring's first key from now on and opens with any
    /// of its keys: an id sealed with a key it lacks is no longer found.
    pub fn rotate(&self, ring: KeyRing) {
        self.ring.store(std::sync::Arc::new(ring));
    }

    pub(super) fn seal(&self, contents: &Contents, bound: &[u8]) -> SessionId {
        self.ring.load().seal(contents, bound)
    }

    pub(super) fn revoked(&self) -> usize {
        self.revoked.lock().len()
    }
}
