//! Cancellation read without a lock: the gateway's stop signals
//! (`CancelFlag`, many waiters) and a request's own (`RequestCancel`, one).
//!
//! tokio-util's `CancellationToken::is_cancelled` takes the token's mutex.
//! The gateway's own stop signals are asked on every request from every
//! worker thread (is the gateway stopping, are connections closing, is
//! this backend link dead), and a lock taken there writes to a cache line
//! all the workers share: perf put `is_cancelled` at four times the
//! average time per instruction (bench/analysis.md). Here the question is
//! one load of a flag, set before the token is cancelled; waiting is still
//! the token's.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use futures_util::task::AtomicWaker;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

/// Cancelled only through `cancel` (the token it lends out is for waiting
/// and for children).
#[derive(Clone, Default)]
pub(crate) struct CancelFlag {
    flag: Arc<AtomicBool>,
    token: CancellationToken,
}

impl CancelFlag {
    pub(crate) fn new() -> CancelFlag {
        CancelFlag::default()
    }

    pub(crate) fn cancel(&self) {
        self.flag.store(true, Ordering::Release);
        self.token.cancel();
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    pub(crate) fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.token.cancelled()
    }

    /// The token, to wait on or to make children of.
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }
}

/// One request's cancellation: anyone may cancel it (its client, its
/// session's end, a 2026-07-28 stream closed early); only the request waits
/// on it. A flag and one waker in one allocation, and no lock. A child of
/// the session's token, which it replaces, took the session token's lock
/// to be made and again to be dropped, its own lock to be cloned, waited
/// on and dropped, and allocated the session token's list of children
/// besides itself (bench/analysis.md).
#[derive(Clone, Default)]
pub(crate) struct RequestCancel(Arc<Sole>);

#[derive(Default)]
struct Sole {
    cancelled: AtomicBool,
    waiter: AtomicWaker,
}

impl RequestCancel {
    pub(crate) fn new() -> RequestCancel {
        RequestCancel::default()
    }

    pub(crate) fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::Release);
        self.0.waiter.wake();
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::Acquire)
    }

    /// The same for every clone, and for no other cancellation while one
    /// lives: a key for the request it cancels.
    pub(crate) fn key(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Ready once cancelled. One waiter at a time: a second one's
    /// registration takes the first one's wake-up.
    pub(crate) fn cancelled(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(|cx| {
            if self.is_cancelled() {
                return Poll::Ready(());
            }
            self.0.waiter.register(cx.waker());
            // A cancel between the load and the registration woke no one.
            match self.is_cancelled() {
                true => Poll::Ready(()),
                false => Poll::Pending,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_flag_and_the_token_tell_the_same() {
        let stop = CancelFlag::new();
        let child = stop.token().child_token();
        assert!(!stop.is_cancelled() && !stop.token().is_cancelled());
        let waiting = tokio::spawn({
            let stop = stop.clone();
            async move { stop.cancelled().await }
        });
        tokio::task::yield_now().await;
        stop.clone().cancel();
        assert!(stop.is_cancelled() && stop.token().is_cancelled());
        assert!(child.is_cancelled(), "children go with it");
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("a waiter is woken")
            .unwrap();
    }

    #[tokio::test]
    async fn a_request_cancel_wakes_its_waiter_from_another_thread() {
        let cancel = RequestCancel::new();
        assert!(!cancel.is_cancelled());
        let waiting = tokio::spawn({
            let cancel = cancel.clone();
            async move { cancel.cancelled().await }
        });
        tokio::task::yield_now().await;
        let other = cancel.clone();
        std::thread::spawn(move || other.cancel()).join().unwrap();
        assert!(cancel.is_cancelled());
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("the waiter is woken")
            .unwrap();
        // Cancelled before the wait: ready at once.
        tokio::time::timeout(std::time::Duration::from_secs(5), cancel.cancelled())
            .await
            .expect("already cancelled");
    }
}
