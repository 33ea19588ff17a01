//! A cancellation token whose state is read without a lock.
//!
//! tokio-util's `CancellationToken::is_cancelled` takes the token's mutex.
//! The gateway's own stop signals are asked on every request from every
//! worker thread (is the gateway stopping, are connections closing, is
//! this backend link dead), and a lock taken there writes to a cache line
//! all the workers share: perf put `is_cancelled` at four times the
//! average time per instruction (bench/analysis.md). Here the question is
//! one load of a flag, set before the token is cancelled; waiting is still
//! the token's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
}
