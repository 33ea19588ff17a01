//! A call's answer, from whoever settles the call to the caller awaiting
//! it: a oneshot channel, except that an answer settled while its waiter
//! polls the wire that carries it wakes no one (`polling`).
//!
//! That is the common case: an HTTP backend's response is read by the
//! caller's own task, in the very poll that waits for the answer
//! (`Conn::posted`). tokio's oneshot wakes the receiver on every send, and
//! there that wake bought one more poll of the whole connection task.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

use super::polling;

/// A sender and its receiver.
pub(super) fn channel<T>() -> (Settle<T>, Answer<T>) {
    let slot = Arc::new(Mutex::new(Slot {
        value: None,
        closed: false,
        waiter: None,
    }));
    (Settle(Some(slot.clone())), Answer(slot))
}

struct Slot<T> {
    value: Option<T>,
    /// The sender went without answering.
    closed: bool,
    waiter: Option<Waker>,
}

/// The sending half. Dropped without sending, the receiver sees `Closed`.
pub(super) struct Settle<T>(Option<Arc<Mutex<Slot<T>>>>);

impl<T> Settle<T> {
    pub(super) fn send(mut self, value: T) {
        if let Some(slot) = self.0.take() {
            settle(&slot, Some(value));
        }
    }
}

impl<T> Drop for Settle<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            settle(&slot, None);
        }
    }
}

fn settle<T>(slot: &Arc<Mutex<Slot<T>>>, value: Option<T>) {
    let waiter = {
        let mut slot = slot.lock();
        match value {
            Some(value) => slot.value = Some(value),
            None => slot.closed = true,
        }
        slot.waiter.take()
    };
    if let Some(waker) = waiter
        && !polling::is_polling(Arc::as_ptr(slot).addr())
    {
        waker.wake();
    }
}

/// The sender went without answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Closed;

/// The receiving half: a future of the answer.
pub(super) struct Answer<T>(Arc<Mutex<Slot<T>>>);

impl<T> Answer<T> {
    /// Runs `poll_wire`, a poll of the wire that may settle this answer, as
    /// the waiter's own: what it settles wakes no one. The caller must poll
    /// this answer right after, before it sleeps.
    pub(super) fn settled_by<R>(&self, poll_wire: impl FnOnce() -> R) -> R {
        polling::as_waiter(Arc::as_ptr(&self.0).addr(), poll_wire)
    }
}

impl<T> Future for Answer<T> {
    type Output = Result<T, Closed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = self.0.lock();
        if let Some(value) = slot.value.take() {
            return Poll::Ready(Ok(value));
        }
        if slot.closed {
            return Poll::Ready(Err(Closed));
        }
        match &mut slot.waiter {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            waiter => *waiter = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests;
