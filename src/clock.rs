//! The time a connection's task woke, read once per wake-up.
//!
//! A forwarded call took eleven readings of the clock: its start and its
//! duration, the header-read timeout moved, its deadline set and first
//! checked, its session's, its backend link's and its pooled connection's
//! last use, the pool's idle check, the response's `Date`. Each is a vDSO
//! call of about 20 ns here, 1.5% of a call's CPU (bench/analysis.md). They
//! fall within the two polls of the connection's task that serve a call,
//! microseconds apart, and what they feed is measured in milliseconds
//! (deadlines, idle times, the latency buckets) or seconds (`Date`). So a
//! connection's task reads the clock when it is polled (`Polled`), and
//! `now` is that reading for as long as the poll runs, and the clock itself
//! anywhere else.
//!
//! A poll that runs long makes its stamps early by as much: a deadline
//! comes sooner, a duration counts the poll whole.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

thread_local! {
    /// When the poll running on this thread began (None: no `Polled` poll).
    static POLL_BEGAN: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The time the running poll began, or the clock's.
pub(crate) fn now() -> Instant {
    POLL_BEGAN.get().unwrap_or_else(Instant::now)
}

/// `now` as tokio's `Instant` (the clock's own outside a `Polled` poll, so
/// that tokio's paused test clock still governs what it governed).
pub(crate) fn tokio_now() -> tokio::time::Instant {
    match POLL_BEGAN.get() {
        Some(at) => tokio::time::Instant::from_std(at),
        None => tokio::time::Instant::now(),
    }
}

pin_project_lite::pin_project! {
    /// A future whose polls each read the clock once for `now`.
    pub(crate) struct Polled<F> {
        #[pin]
        inner: F,
    }
}

impl<F> Polled<F> {
    pub(crate) fn new(inner: F) -> Polled<F> {
        Polled { inner }
    }
}

impl<F: Future> Future for Polled<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        /// Puts the outer reading back on the way out, a panic included.
        struct Restore(Option<Instant>);
        impl Drop for Restore {
            fn drop(&mut self) {
                POLL_BEGAN.set(self.0);
            }
        }
        let _restore = Restore(POLL_BEGAN.replace(Some(Instant::now())));
        self.project().inner.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{Polled, now};

    /// Inside a poll every reading is the poll's; between polls, and
    /// outside any, the clock moves.
    #[tokio::test]
    async fn a_poll_reads_the_clock_once() {
        let outside = now();
        std::thread::sleep(Duration::from_millis(2));
        assert!(now() > outside, "outside a poll, the clock itself");
        let seen = Polled::new(async {
            let first = now();
            std::thread::sleep(Duration::from_millis(2));
            let same = now();
            tokio::task::yield_now().await;
            let next = now();
            (first, same, next)
        })
        .await;
        assert_eq!(seen.0, seen.1, "one reading for the whole poll");
        assert!(seen.2 > seen.1, "a new reading at the next poll");
        assert!(
            super::POLL_BEGAN.get().is_none(),
            "none once the poll is over"
        );
        assert!(Instant::now() >= seen.2);
    }
}
