//! What a backend sends a client about one of its requests (progress, log
//! messages, server-to-client requests), and the queue it waits in on its
//! way to the client's response stream.
//!
//! One queue per request, and nearly every request's stays empty: so it is
//! a lock around a `VecDeque` that allocates on its first event, not a
//! general channel (tokio's allocates a block of slots for each, and its
//! receive costs a cooperative-budget check and an atomic waker per poll).
//! Senders never wait: a full queue refuses, and the sender drops what a
//! slow client cannot take, as it would with any bounded channel.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Poll, Waker};

use parking_lot::Mutex;
use serde_json::value::RawValue;

use super::polling;
use crate::jsonrpc;

/// What a backend sends a client about one of its requests.
#[derive(Debug)]
pub enum Event {
    /// A notification (progress, log message), as a JSON-RPC line.
    Notification(String),
    /// A request for the client, under the gateway's id for it. A legacy
    /// client gets it as a JSON-RPC request; a 2026-07-28 client as an
    /// input request (see `front::bridge`).
    Request {
        id: String,
        method: String,
        params: Option<Box<RawValue>>,
    },
}

impl Event {
    /// The JSON-RPC line a legacy client reads.
    pub fn line(&self) -> String {
        match self {
            Event::Notification(line) => line.clone(),
            Event::Request { id, method, params } => {
                jsonrpc::request(&jsonrpc::raw(id), method, params.as_deref())
            }
        }
    }
}

/// A queue of at most `capacity` events: its sending half (cloned for
/// every backend link the request reaches) and its one receiver.
pub(crate) fn channel(capacity: usize) -> (EventSink, Events) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            waker: None,
        }),
        capacity,
        senders: AtomicUsize::new(1),
        queued: AtomicUsize::new(0),
        receiving: AtomicBool::new(true),
    });
    (EventSink(shared.clone()), Events(shared))
}

/// The counts and flags are atomics beside the lock, not in it: nearly
/// every request's queue stays empty, and its senders come and go and its
/// receiver looks and leaves without taking the lock (each take and
/// release is a locked instruction, and a forwarded call made about two
/// dozen of them here).
struct Shared {
    state: Mutex<State>,
    capacity: usize,
    /// Senders alive: at none, an empty queue is over. Read under the lock
    /// by a receiver about to sleep, and the last sender takes the lock
    /// after it counts itself out, so that receiver is always woken.
    senders: AtomicUsize,
    /// `state.queue`'s length, written under the lock.
    queued: AtomicUsize,
    /// The receiver is alive: else nothing more is queued.
    receiving: AtomicBool,
}

struct State {
    queue: VecDeque<Event>,
    /// The receiver waiting for an event.
    waker: Option<Waker>,
}

/// Where a request's events go.
pub struct EventSink(Arc<Shared>);

impl EventSink {
    /// Queues `event`, or gives it back when the queue is full or its
    /// receiver gone.
    pub fn try_send(&self, event: Event) -> Result<(), Event> {
        let waker = {
            let mut state = self.0.state.lock();
            if !self.0.receiving.load(Ordering::Acquire) || state.queue.len() >= self.0.capacity {
                return Err(event);
            }
            state.queue.push_back(event);
            self.0.queued.store(state.queue.len(), Ordering::Release);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }
}

impl Clone for EventSink {
    fn clone(&self) -> EventSink {
        self.0.senders.fetch_add(1, Ordering::Relaxed);
        EventSink(self.0.clone())
    }
}

impl Drop for EventSink {
    fn drop(&mut self) {
        if self.0.senders.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        // The last sender is gone: the receiver learns the queue is over,
        // at once unless it is polling now (`Events::ending_in`).
        let waker = self.0.state.lock().waker.take();
        if let Some(waker) = waker
            && !polling::is_polling(Arc::as_ptr(&self.0).addr())
        {
            waker.wake();
        }
    }
}

/// The receiving half: the request's response stream reads it.
pub(crate) struct Events(Arc<Shared>);

impl Events {
    /// The next event; None once every sender is gone and the queue empty.
    pub(crate) async fn recv(&self) -> Option<Event> {
        poll_fn(|cx| {
            let mut state = self.0.state.lock();
            if let Some(event) = state.queue.pop_front() {
                self.0.queued.store(state.queue.len(), Ordering::Release);
                return Poll::Ready(Some(event));
            }
            if self.0.senders.load(Ordering::Acquire) == 0 {
                return Poll::Ready(None);
            }
            match &mut state.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                slot => *slot = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
        .await
    }

    /// The next event if one is queued.
    pub(crate) fn try_recv(&mut self) -> Option<Event> {
        if self.is_empty() {
            return None;
        }
        let mut state = self.0.state.lock();
        let event = state.queue.pop_front();
        self.0.queued.store(state.queue.len(), Ordering::Release);
        event
    }

    /// Runs `poll_work`, a poll of the work that holds the senders, as the
    /// receiver's own: the work ending there (its last sender dropped)
    /// wakes no one. The caller sees the work's end as the `Ready` of that
    /// poll, and looks at this queue again before it sleeps.
    pub(crate) fn ending_in<R>(&self, poll_work: impl FnOnce() -> R) -> R {
        polling::as_waiter(Arc::as_ptr(&self.0).addr(), poll_work)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.queued.load(Ordering::Acquire) == 0
    }
}

impl Drop for Events {
    /// What is queued is dropped now, and nothing more is taken. (A sender
    /// that looked before this may still queue one: it goes with the last
    /// sender. A waker left behind wakes a task that has moved on: harmless.)
    fn drop(&mut self) {
        self.0.receiving.store(false, Ordering::Release);
        if !self.is_empty() {
            let queue = std::mem::take(&mut self.0.state.lock().queue);
            self.0.queued.store(0, Ordering::Release);
            drop(queue);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(n: usize) -> Event {
        Event::Notification(n.to_string())
    }

    fn text(e: Option<Event>) -> Option<String> {
        e.map(|e| e.line())
    }

    /// What a waiting receiver got; a lost wake-up fails, not hangs.
    async fn woken(waiting: tokio::task::JoinHandle<Option<String>>) -> Option<String> {
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("the receiver was woken")
            .unwrap()
    }

    #[tokio::test]
    async fn events_arrive_in_order_until_the_last_sender_goes() {
        let (tx, mut rx) = channel(4);
        let tx2 = tx.clone();
        tx.try_send(note(1)).unwrap();
        tx2.try_send(note(2)).unwrap();
        drop(tx);
        assert_eq!(text(rx.recv().await).as_deref(), Some("1"));
        assert_eq!(text(rx.try_recv()).as_deref(), Some("2"));
        assert!(rx.is_empty());
        // One sender is left: the queue is not over, the wait is woken by it.
        let waiting = tokio::spawn(async move { text(rx.recv().await) });
        tokio::task::yield_now().await;
        tx2.try_send(note(3)).unwrap();
        assert_eq!(woken(waiting).await.as_deref(), Some("3"));
    }

    #[tokio::test]
    async fn a_receiver_waiting_learns_when_the_senders_are_gone() {
        let (tx, rx) = channel(4);
        let waiting = tokio::spawn(async move { text(rx.recv().await) });
        tokio::task::yield_now().await;
        drop(tx);
        assert_eq!(woken(waiting).await, None);
    }

    /// The last sender dropped inside the receiver's own poll of the work
    /// (`ending_in`) wakes no one: the receiver sees the end when it looks
    /// again. Dropped anywhere else, or while another receiver polls, it
    /// wakes.
    #[test]
    fn a_work_ending_in_its_receivers_poll_wakes_no_one() {
        use super::super::polling::WakeCount;

        /// Whether the queue is over, polled once with a counting waker.
        fn over(rx: &Events, count: &Arc<WakeCount>) -> Poll<bool> {
            count.poll(std::pin::pin!(rx.recv())).map(|e| e.is_none())
        }
        let count = Arc::new(WakeCount::default());
        let woken = || count.get();

        let (tx, rx) = channel(4);
        let tx2 = tx.clone();
        assert!(over(&rx, &count).is_pending());
        rx.ending_in(|| drop(tx));
        rx.ending_in(|| drop(tx2));
        assert_eq!(woken(), 0, "the receiver is polling: no wake");
        assert_eq!(over(&rx, &count), Poll::Ready(true));

        let (tx, rx) = channel(4);
        let (_, other) = channel(4);
        assert!(over(&rx, &count).is_pending());
        other.ending_in(|| drop(tx));
        assert_eq!(woken(), 1, "another receiver's poll: woken");
        assert_eq!(over(&rx, &count), Poll::Ready(true));

        let (tx, rx) = channel(4);
        assert!(over(&rx, &count).is_pending());
        drop(tx);
        assert_eq!(woken(), 2, "dropped outside any poll: woken");
        assert_eq!(over(&rx, &count), Poll::Ready(true));
    }

    #[test]
    fn a_full_queue_or_a_gone_receiver_refuses() {
        let (tx, rx) = channel(2);
        assert!(tx.try_send(note(1)).is_ok());
        assert!(tx.try_send(note(2)).is_ok());
        assert!(tx.try_send(note(3)).is_err(), "past the capacity");
        drop(rx);
        assert!(tx.try_send(note(4)).is_err(), "nobody to read it");
        assert_eq!(
            tx.0.state.lock().queue.len(),
            0,
            "what was queued is dropped"
        );
    }
}
