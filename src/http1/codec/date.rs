//! The `Date` header's value, formatted once a second per thread.

use std::cell::RefCell;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

thread_local! {
    /// The text of the second in progress, and when the next begins.
    static CACHED: RefCell<(Instant, String)> = RefCell::new((Instant::now(), String::new()));
}

/// Appends the `Date` value: the wall clock is read once a second per
/// thread; in between, the poll's own reading (`clock::now`) tells whether
/// the second has turned.
pub(super) fn now(out: &mut Vec<u8>) {
    let at = crate::clock::now();
    CACHED.with_borrow_mut(|(next, text)| {
        if text.is_empty() || at >= *next {
            let wall = SystemTime::now();
            let into = wall
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            *next = at + (Duration::from_secs(1) - Duration::from_nanos(into.into()));
            *text = httpdate::fmt_http_date(wall);
        }
        out.extend_from_slice(text.as_bytes());
    });
}
