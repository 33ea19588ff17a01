//! What a forwarded call is observed under in the operation histograms
//! (`metrics::Series`). A tool's series is kept with its catalog entry
//! (`upstream::Listing::series_of`), found by the look-up that checks the
//! call; every other series, and a tool's through a second namespace, is
//! kept here per thread by namespace member and name: found by a hash of
//! the name instead of the metrics families' look-ups by every label
//! (SipHash over all of them, and the family's lock).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::fast_map::FastMap;
use crate::jsonrpc::Outcome;
use crate::metrics::{ErrorType, Method, Metrics, Series};

/// Series per thread before its cache starts over.
const MAX_CACHED: usize = 4_096;

/// (member, method) pairs per thread before it starts over: each call
/// scans them.
const MAX_PAIRS: usize = 128;

/// What the router tells the front of a call it forwarded: the series to
/// observe the whole request under, and what the backend's outcome said
/// of itself (read once, for both histograms).
pub struct Seen {
    pub series: Series,
    pub backend_error: Option<ErrorType>,
}

impl Seen {
    /// A request the front answered, in the server's histogram: under the
    /// series the router observed it in (`seen`), or by its method alone.
    pub fn served(
        seen: Option<&Seen>,
        metrics: &Metrics,
        method: Method,
        outcome: Option<&Outcome>,
        seconds: f64,
    ) {
        let error = match (outcome, seen) {
            (None, _) => Some(ErrorType::CANCELLED),
            // The backend's result, whose `isError` the router has read.
            (Some(Outcome::Result(_)), Some(seen)) => {
                seen.backend_error.filter(|e| *e == ErrorType::TOOL_ERROR)
            }
            (Some(o), _) => ErrorType::of(o, method == Method::TOOLS_CALL),
        };
        match seen {
            Some(seen) => metrics.served(&seen.series, error, seconds),
            None => metrics.server_operation(method, error, seconds),
        }
    }
}

/// A namespace member's identity in the cache, never reused: the labels a
/// name gets depend on the member's backend and renames, and a reload
/// that changes them makes a new member.
pub(super) fn member_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Series by member and method (a few per thread: scanned, not hashed),
/// then by name.
#[derive(Default)]
struct Cache {
    by_member: Vec<((u64, Method), ByName)>,
    len: usize,
}

type ByName = FastMap<Box<str>, Series>;

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// The series of `method` sent through member `member`, made by `make`
/// the first time on this thread. `exposed` is the name called (empty for
/// a method that names no tool): with the member it decides every label.
pub(super) fn series(
    member: u64,
    method: Method,
    exposed: &str,
    make: impl FnOnce() -> Series,
) -> Series {
    let key = (member, method);
    let hit = CACHE.with_borrow(|c| {
        let (_, names) = c.by_member.iter().find(|(k, _)| *k == key)?;
        names.get(exposed).cloned()
    });
    if let Some(series) = hit {
        return series;
    }
    let series = make();
    CACHE.with_borrow_mut(|c| {
        if c.len >= MAX_CACHED || c.by_member.len() >= MAX_PAIRS {
            *c = Cache::default();
        }
        c.len += 1;
        let at = match c.by_member.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                c.by_member.push((key, FastMap::default()));
                c.by_member.len() - 1
            }
        };
        c.by_member[at].1.insert(exposed.into(), series.clone());
    });
    series
}
