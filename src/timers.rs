//! Deadlines without tokio's timer wheel: sleeps kept in a slab per worker
//! shard and fired by one thread that sleeps until the earliest of them.
//!
//! Every forwarded call waits under two deadlines (the header-read
//! timeout for the client's next request, the call's own), and nearly all
//! of them are cancelled long before they expire. tokio registers each in
//! its wheel on first poll and unlinks it on drop, about 1,000
//! instructions a deadline (bench/analysis.md); here a deadline is a slab
//! slot under an uncontended lock, and the thread wakes only when the
//! earliest one is due, and a connection's header-read timeout is one
//! sleep moved at each request (`Sleep::reset`). A deadline that expires
//! wakes its task from that thread, which is rare and costs one
//! cross-thread wake-up.
//!
//! Real time (`std::time::Instant`): tokio's paused test clock does not
//! move these.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use slab::Slab;

/// The sleeps of every shard, and the thread that fires them.
struct Timers {
    shards: Box<[Shard]>,
    /// When the thread will next look, in nanoseconds since `origin`
    /// (`u64::MAX`: when woken).
    armed: AtomicU64,
    origin: Instant,
    thread: std::thread::Thread,
}

#[derive(Default)]
struct Shard {
    slab: Mutex<Slab<Entry>>,
    /// Bumped, under the lock, whenever the thread fires a sleep here: a
    /// sleep that finds it where it last saw it unfired has not fired, and
    /// is polled without the lock.
    fired: AtomicU64,
}

struct Entry {
    deadline: Instant,
    /// `None` once fired (or before the first poll registered one).
    waker: Option<Waker>,
    fired: bool,
}

/// The process's timers, started on first use.
fn timers() -> &'static Timers {
    static TIMERS: OnceLock<&'static Timers> = OnceLock::new();
    TIMERS.get_or_init(Timers::start)
}

impl Timers {
    /// A set of timers and its thread, for the life of the process (tests
    /// start their own, so that counting sleeps sees only theirs).
    fn start() -> &'static Timers {
        let (tx, rx) = std::sync::mpsc::channel::<&'static Timers>();
        let thread = std::thread::Builder::new()
            .name("sluice-timers".into())
            .spawn(move || fire(rx.recv().expect("sent at start")))
            .expect("the timer thread starts");
        let timers: &'static Timers = Box::leak(Box::new(Timers {
            // Enough for every worker, started before or after this.
            shards: (0..crate::workers::shards()
                .max(std::thread::available_parallelism().map_or(1, usize::from)))
                .map(|_| Shard::default())
                .collect(),
            armed: AtomicU64::new(u64::MAX),
            origin: Instant::now(),
            thread: thread.thread().clone(),
        }));
        let _ = tx.send(timers);
        timers
    }

    fn sleep_until(&'static self, deadline: Instant) -> Sleep {
        Sleep {
            timers: self,
            deadline,
            slot: None,
        }
    }
}

/// How late a sleep may fire: the thread looks at most this often, so a
/// crowd of sleeps falling due one after another costs a scan per tick, not
/// one per sleep.
const TICK: Duration = Duration::from_millis(10);
/// Slots scanned per hold of a shard's lock: a scan of many sleeps never
/// holds up that shard's worker for long.
const SCAN_CHUNK: usize = 1024;

/// The thread: wakes every sleep that is due, then parks until the next.
fn fire(timers: &Timers) -> ! {
    let mut due = Vec::new();
    loop {
        // Scanning: any sleep added from now on unparks us, so one added
        // behind the scan (in a shard already looked at) is not missed.
        timers.armed.store(u64::MAX, Ordering::SeqCst);
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        for shard in &timers.shards {
            let mut from = 0;
            loop {
                let mut slab = shard.slab.lock();
                let end = slab.capacity();
                let to = end.min(from + SCAN_CHUNK);
                for key in from..to {
                    let Some(entry) = slab.get_mut(key).filter(|e| !e.fired) else {
                        continue;
                    };
                    if entry.deadline <= now {
                        entry.fired = true;
                        shard.fired.fetch_add(1, Ordering::Release);
                        due.extend(entry.waker.take());
                    } else {
                        next = Some(next.map_or(entry.deadline, |n| n.min(entry.deadline)));
                    }
                }
                drop(slab);
                if to >= end {
                    break;
                }
                from = to;
            }
        }
        // Outside the locks: a wake may run code of its own.
        due.drain(..).for_each(Waker::wake);
        let wait = next.map(|n| n.saturating_duration_since(now).max(TICK));
        // From here, only a sleep earlier than this unparks us.
        timers.armed.store(
            wait.map_or(u64::MAX, |w| timers.nanos(now + w)),
            Ordering::SeqCst,
        );
        match wait {
            Some(w) => std::thread::park_timeout(w),
            None => std::thread::park(),
        }
    }
}

impl Timers {
    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Completes at `deadline`. Registers on its first poll, unregisters when
/// dropped. Moved later (`reset`), it keeps the deadline it registered
/// with until the thread fires that one, and registers the new one then:
/// a connection's header-read timeout moves at every request, and so costs
/// no lock per request. Polled while nothing in its shard has fired, it
/// takes no lock either.
pub(crate) struct Sleep {
    timers: &'static Timers,
    deadline: Instant,
    /// Once registered.
    slot: Option<Slot>,
}

struct Slot {
    shard: usize,
    key: usize,
    /// The deadline the thread has for it: not later than the sleep's own.
    registered: Instant,
    /// It was seen fired at `registered` (and not registered again since).
    fired: bool,
    /// The shard's `fired` count when it was last seen unfired.
    seen: u64,
    /// Whom the registered waker wakes (`Waker::data` and `vtable`): a
    /// poll by a waker that wakes the same keeps it without the lock.
    waker: (usize, usize),
}

/// Whom a waker wakes, as `Waker::will_wake` compares them.
fn identity(waker: &Waker) -> (usize, usize) {
    (
        waker.data().addr(),
        std::ptr::from_ref(waker.vtable()).addr(),
    )
}

pub(crate) fn sleep_until(deadline: Instant) -> Sleep {
    timers().sleep_until(deadline)
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let timers = self.timers;
        let deadline = self.deadline;
        let Some(slot) = &mut self.slot else {
            if crate::clock::now() >= deadline {
                return Poll::Ready(());
            }
            let shard = crate::workers::shard() % timers.shards.len();
            let (key, seen) = {
                let mut slab = timers.shards[shard].slab.lock();
                let key = slab.insert(Entry {
                    deadline,
                    waker: Some(cx.waker().clone()),
                    fired: false,
                });
                (key, timers.shards[shard].fired.load(Ordering::Acquire))
            };
            self.slot = Some(Slot {
                shard,
                key,
                registered: deadline,
                fired: false,
                seen,
                waker: identity(cx.waker()),
            });
            timers.wake_for(deadline);
            return Poll::Pending;
        };
        if slot.fired {
            return Poll::Ready(());
        }
        let shard = &timers.shards[slot.shard];
        if shard.fired.load(Ordering::Acquire) == slot.seen && slot.waker == identity(cx.waker()) {
            return Poll::Pending;
        }
        let mut slab = shard.slab.lock();
        slot.seen = shard.fired.load(Ordering::Acquire);
        let entry = &mut slab[slot.key];
        if entry.fired {
            if Instant::now() >= deadline {
                slot.fired = true;
                return Poll::Ready(());
            }
            // Fired at the deadline it was registered with; it has moved
            // since.
            entry.deadline = deadline;
            entry.fired = false;
            entry.waker = Some(cx.waker().clone());
            drop(slab);
            slot.registered = deadline;
            timers.wake_for(deadline);
        } else {
            match &mut entry.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                w => *w = Some(cx.waker().clone()),
            }
        }
        slot.waker = identity(cx.waker());
        Poll::Pending
    }
}

impl Timers {
    /// Makes sure the thread looks by `deadline`.
    fn wake_for(&self, deadline: Instant) {
        let at = self.nanos(deadline);
        if at < self.armed.load(Ordering::SeqCst) {
            self.armed.fetch_min(at, Ordering::SeqCst);
            self.thread.unpark();
        }
    }
}

impl Sleep {
    /// Moves the deadline, firing or not: the slot stays where it is (a
    /// connection's header-read timeout, one per request, is this).
    pub(crate) fn reset(&mut self, deadline: Instant) {
        self.deadline = deadline;
        let Some(slot) = &mut self.slot else {
            return;
        };
        // Later than what the thread has: the thread fires that first, and
        // the next poll registers this one (see `poll`).
        if !slot.fired && deadline >= slot.registered {
            return;
        }
        let shard = &self.timers.shards[slot.shard];
        {
            let mut slab = shard.slab.lock();
            let entry = &mut slab[slot.key];
            entry.deadline = deadline;
            entry.fired = false;
            slot.seen = shard.fired.load(Ordering::Acquire);
        }
        slot.registered = deadline;
        if slot.fired {
            // Its waker went with the firing: the next poll leaves one.
            slot.fired = false;
            slot.waker = (0, 0);
        }
        self.timers.wake_for(deadline);
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            let entry = self.timers.shards[slot.shard].slab.lock().remove(slot.key);
            // Outside the lock: a waker's drop may run a task's.
            drop(entry);
        }
    }
}

/// `fut`, unless `deadline` passes first.
pub(crate) fn timeout_at<F: Future>(deadline: Instant, fut: F) -> Timeout<F> {
    timeout_in(timers(), deadline, fut)
}

fn timeout_in<F: Future>(timers: &'static Timers, deadline: Instant, fut: F) -> Timeout<F> {
    Timeout {
        fut,
        sleep: timers.sleep_until(deadline),
    }
}

pin_project_lite::pin_project! {
    /// `timeout_at`'s future. A type, not an `async fn`: one would hold
    /// `fut` twice (its argument, then the pinned local), and every
    /// backend call waits under one of these.
    pub(crate) struct Timeout<F> {
        #[pin]
        fut: F,
        sleep: Sleep,
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(out) = this.fut.poll(cx) {
            return Poll::Ready(Ok(out));
        }
        Pin::new(this.sleep).poll(cx).map(|()| Err(Elapsed))
    }
}

/// The deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elapsed;

impl hyper::rt::Sleep for Sleep {}

/// hyper's timer (the header-read timeout), on these sleeps.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HyperTimer;

impl hyper::rt::Timer for HyperTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(Instant::now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(sleep_until(deadline))
    }
}

#[cfg(test)]
mod tests;
