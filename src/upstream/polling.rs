//! Which waiter is polling on this thread: a wake for it is left out.
//!
//! A waiter that polls the very thing that may answer it (a caller reading
//! its backend's response, a request's inline work ending) looks at its
//! answer right after that poll. A wake from inside the poll would only
//! buy its task one more poll that finds nothing new, a third per
//! forwarded call where two do (bench/analysis.md). The mark is per thread
//! and per waiter (the address of what it waits on), never per task: one
//! task may wait for many things (a batch's calls), and an answer for one
//! of them, settled while another polls, still wakes it.

use std::cell::Cell;

thread_local! {
    /// The waiter whose poll is running on this thread (0: none).
    static POLLING: Cell<usize> = const { Cell::new(0) };
}

/// Runs `poll` as the poll of the waiter `key`, which must look at what it
/// waits on after `poll` returns, before its task sleeps.
pub(super) fn as_waiter<R>(key: usize, poll: impl FnOnce() -> R) -> R {
    /// Restores the outer mark on the way out, a panic included.
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            POLLING.with(|p| p.set(self.0));
        }
    }
    let _restore = Restore(POLLING.with(|p| p.replace(key)));
    poll()
}

/// Whether the waiter `key` is polling on this thread now: then it needs
/// no wake.
pub(super) fn is_polling(key: usize) -> bool {
    key != 0 && POLLING.with(Cell::get) == key
}

/// A waker that counts its wakes, for the tests of what wakes and what
/// does not.
#[cfg(test)]
#[derive(Default)]
pub(super) struct WakeCount(std::sync::atomic::AtomicUsize);

#[cfg(test)]
impl futures_util::task::ArcWake for WakeCount {
    fn wake_by_ref(me: &std::sync::Arc<Self>) {
        me.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(test)]
impl WakeCount {
    pub(super) fn get(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Polls `fut` once with a waker that counts here.
    pub(super) fn poll<F: std::future::Future>(
        self: &std::sync::Arc<Self>,
        fut: std::pin::Pin<&mut F>,
    ) -> std::task::Poll<F::Output> {
        let waker = futures_util::task::waker(self.clone());
        fut.poll(&mut std::task::Context::from_waker(&waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_is_the_innermost_waiters_and_ends_with_its_poll() {
        assert!(!is_polling(1));
        as_waiter(1, || {
            assert!(is_polling(1));
            as_waiter(2, || assert!(is_polling(2) && !is_polling(1)));
            assert!(is_polling(1), "the outer mark is back");
        });
        assert!(!is_polling(1));
        let panicked = std::panic::catch_unwind(|| as_waiter(3, || panic!("the poll panicked")));
        assert!(panicked.is_err());
        assert!(!is_polling(3), "a panic leaves no mark behind");
        assert!(!is_polling(0), "0 is no waiter");
    }
}
