//! The process-wide budget for bodies in flight (`[server]
//! max_inflight_body_bytes`): the bytes of the large backend response
//! bodies the gateway holds at once, counted from before their first byte
//! is read until their result has been written to its client (or dropped
//! on the way). A body that would take the total past the budget is
//! refused before it is read, and its call answered with a JSON-RPC error:
//! memory stays bounded, and a burst of large results is an error for some
//! of them, never an out-of-memory kill for everyone.
//!
//! Taking is one compare-and-swap on one atomic, giving back one subtract,
//! when the `Permit` (a drop guard, carried with the body and then with its
//! result) drops. Small bodies take nothing: they are parsed where they lie
//! in their connection's read buffer, bounded by the connections.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The budget of this process, its limit set from the config at start and
/// at each reload (`app`, `reload`).
pub static BODIES: Budget = Budget::new();

/// A backend body at least this long is held under the budget, in a
/// buffer of its own: an HTTP body (by its length, or as it arrives), a
/// stdio line (as it is read). A shorter one is parsed where it lies in
/// its connection's or pipe's read buffer, bounded by those.
pub const LARGE: usize = 256 * 1024;

/// The least the default is sized to: one body of the largest size a
/// backend may send (64 MiB) fits.
const LEAST_DEFAULT: usize = 64 * 1024 * 1024;

/// Bytes held, and how many may be.
#[derive(Debug)]
pub struct Budget {
    limit: AtomicUsize,
    held: AtomicUsize,
}

/// Why a body was refused: it wanted `wanted` bytes more while `held` were
/// held, under `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub wanted: usize,
    pub held: usize,
    pub limit: usize,
}

impl Budget {
    /// A budget without a limit (until one is set).
    pub const fn new() -> Budget {
        Budget {
            limit: AtomicUsize::new(usize::MAX),
            held: AtomicUsize::new(0),
        }
    }

    pub fn set_limit(&self, bytes: usize) {
        self.limit.store(bytes, Ordering::Relaxed);
    }

    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// `bytes` of the budget, held until the permit drops; refused when
    /// they would take what is held past the limit.
    pub fn take(&'static self, bytes: usize) -> Result<Permit, Refused> {
        self.add(bytes)?;
        Ok(Permit {
            budget: self,
            bytes,
        })
    }

    fn add(&self, bytes: usize) -> Result<(), Refused> {
        let limit = self.limit();
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|&total| total <= limit)
            })
            .map(drop)
            .map_err(|held| Refused {
                wanted: bytes,
                held,
                limit,
            })
    }
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new()
    }
}

/// Bytes of a budget, held until this drops.
#[derive(Debug)]
pub struct Permit {
    budget: &'static Budget,
    bytes: usize,
}

impl Permit {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Holds `to` bytes in all (a body that grew past what it took), or
    /// says why not; what was held stays held either way.
    pub fn grow_to(&mut self, to: usize) -> Result<(), Refused> {
        if to > self.bytes {
            self.budget.add(to - self.bytes)?;
            self.bytes = to;
        }
        Ok(())
    }

    /// Holds only `to` bytes when that is fewer (a body that ended short
    /// of what it took): the rest is given back now.
    pub fn shrink_to(&mut self, to: usize) {
        if to < self.bytes {
            self.budget
                .held
                .fetch_sub(self.bytes - to, Ordering::AcqRel);
            self.bytes = to;
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// The default limit: a quarter of the memory this process may use (the
/// machine's, or its control group's limit when that is lower), and at
/// least 64 MiB.
pub fn default_limit() -> usize {
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total(&text));
    let group = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|text| text.trim().parse::<usize>().ok());
    let memory = match (machine, group) {
        (Some(m), Some(g)) => m.min(g),
        // Unknown: as if 1 GiB.
        (m, g) => m.or(g).unwrap_or(1 << 30),
    };
    (memory / 4).max(LEAST_DEFAULT)
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total(meminfo: &str) -> Option<usize> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(limit: usize) -> &'static Budget {
        let b = Box::leak(Box::new(Budget::new()));
        b.set_limit(limit);
        b
    }

    #[test]
    fn permits_hold_until_dropped_and_past_the_limit_are_refused() {
        let b = budget(10);
        let eight = b.take(8).unwrap();
        assert_eq!(
            b.take(3).unwrap_err(),
            Refused {
                wanted: 3,
                held: 8,
                limit: 10
            }
        );
        let two = b.take(2).unwrap();
        assert_eq!(b.held(), 10);
        drop(eight);
        assert_eq!(b.held(), 2);
        let mut grown = b.take(1).unwrap();
        grown.grow_to(8).unwrap();
        assert!(grown.grow_to(9).is_err());
        assert_eq!(grown.bytes(), 8);
        grown.shrink_to(3);
        assert_eq!((grown.bytes(), b.held()), (3, 5));
        grown.shrink_to(4);
        assert_eq!(grown.bytes(), 3);
        drop((two, grown));
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn the_default_is_a_quarter_of_memory() {
        assert_eq!(
            mem_total("MemTotal:       16384 kB\nMemFree: 1 kB\n"),
            Some(16 << 20)
        );
        assert!(default_limit() >= LEAST_DEFAULT);
    }
}
