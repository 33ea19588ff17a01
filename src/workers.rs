//! Where client connections run.
//!
//! By default on one current-thread runtime per core: each accepted
//! connection is handed to one of them in turn, and every request on it,
//! with the backend connections it takes from its runtime's own pool, stays
//! on that thread. The main thread's runtime is one of them; it also runs
//! the gateway's own tasks (the accept loop, reapers, shared backends'
//! owners and a shared stdio child's pipes), so a connection there reaches
//! a shared stdio backend without a hand-off between threads.
//!
//! With `SLUICE_RUNTIME=work-stealing`, tokio's multi-thread runtime
//! instead, where a task woken by I/O may run on any worker and an idle
//! worker is woken to look for work: at one connection that cost two to
//! three more context switches per forwarded call and a quarter to a half
//! more CPU (bench/RESULTS.md has both side by side).
//!
//! Connections are long-lived (keep-alive), so handing each to a runtime
//! once at accept costs nothing per request; `SO_REUSEPORT` listeners per
//! runtime would only move that hand-off into the kernel.
//!
//! What one task does for callers on other workers (a shared stdio child's
//! reader answering them) goes over in batches ([`Handoff`]): waking a task
//! of another current-thread runtime writes to that runtime's eventfd every
//! time, so answers read together are delivered together, by one relay
//! task per worker, woken once.

use std::cell::Cell;
use std::future::Future;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::{FutureExt, Stream, StreamExt};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};

thread_local! {
    /// This thread's shard: `1..n` on the extra workers, 0 on the main
    /// thread and everywhere else.
    static SHARD: Cell<usize> = const { Cell::new(0) };
}

static WORKERS: OnceLock<Workers> = OnceLock::new();

/// How connections are run, from `SLUICE_RUNTIME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    PerCore,
    WorkStealing,
}

impl Mode {
    pub fn from_env() -> Result<Mode, String> {
        match std::env::var("SLUICE_RUNTIME").as_deref() {
            Err(_) | Ok("" | "per-core") => Ok(Mode::PerCore),
            Ok("work-stealing") => Ok(Mode::WorkStealing),
            Ok(other) => Err(format!(
                "SLUICE_RUNTIME must be \"per-core\" or \"work-stealing\", not {other:?}"
            )),
        }
    }
}

/// The per-core runtimes: the main thread's (where `serve` runs) and one
/// more thread per further core; the extra threads are stopped and joined
/// after the gateway has stopped.
pub struct Workers {
    handles: Vec<Handle>,
    /// Each worker's relay, by shard.
    relays: Vec<Relay>,
    stops: std::sync::Mutex<Vec<(oneshot::Sender<()>, std::thread::JoinHandle<()>)>>,
    next: AtomicUsize,
}

impl Workers {
    /// Makes `main` (the calling thread's runtime) and `n - 1` new
    /// current-thread runtimes where connections go.
    pub fn install(main: &tokio::runtime::Runtime, n: usize) -> std::io::Result<&'static Workers> {
        let mut handles = vec![main.handle().clone()];
        let mut stops = Vec::with_capacity(n.saturating_sub(1));
        for shard in 1..n {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            handles.push(rt.handle().clone());
            let (stop, stopped) = oneshot::channel::<()>();
            let thread = std::thread::Builder::new()
                .name(format!("sluice-worker-{shard}"))
                .spawn(move || {
                    SHARD.with(|s| s.set(shard));
                    rt.block_on(async {
                        let _ = stopped.await;
                    });
                    // Connections still open are dropped with the runtime.
                    rt.shutdown_timeout(std::time::Duration::from_secs(1));
                })?;
            stops.push((stop, thread));
        }
        let relays = handles
            .iter()
            .map(|h| {
                let (relay, batches) = mpsc::unbounded_channel();
                h.spawn(run_batches(batches));
                relay
            })
            .collect();
        let workers = Workers {
            handles,
            relays,
            stops: std::sync::Mutex::new(stops),
            next: AtomicUsize::new(0),
        };
        WORKERS
            .set(workers)
            .map_err(|_| std::io::Error::other("workers already installed"))?;
        Ok(WORKERS.get().expect("just set"))
    }

    /// Stops the extra workers and waits for their threads.
    pub fn stop(&self) {
        let stops = std::mem::take(&mut *self.stops.lock().unwrap_or_else(|e| e.into_inner()));
        for (stop, thread) in stops {
            let _ = stop.send(());
            let _ = thread.join();
        }
    }
}

/// Shards of per-thread state (the backend connection pools): one per
/// worker (one in all when connections run work-stealing).
pub(crate) fn shards() -> usize {
    WORKERS.get().map_or(1, |w| w.handles.len())
}

/// The calling thread's shard, below `shards()`.
pub(crate) fn shard() -> usize {
    SHARD.with(Cell::get)
}

/// Runs a connection's future: on the next worker, or (work-stealing) on
/// the current runtime. `make` runs where the future will, so the socket
/// registers with that runtime's reactor.
pub(crate) fn spawn_connection<F, Fut>(tcp: tokio::net::TcpStream, make: F)
where
    F: FnOnce(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Some(workers) = WORKERS.get() else {
        tokio::spawn(make(tcp));
        return;
    };
    let at = workers.next.fetch_add(1, Ordering::Relaxed) % workers.handles.len();
    if at == shard() {
        tokio::spawn(make(tcp));
        return;
    }
    // The socket leaves this runtime's reactor and joins the worker's.
    let Ok(std_tcp) = tcp.into_std() else {
        return;
    };
    workers.handles[at].spawn(async move {
        let Ok(tcp) = tokio::net::TcpStream::from_std(std_tcp) else {
            return;
        };
        make(tcp).await;
    });
}

/// Runs `job` on every worker's thread (on the calling thread alone when
/// connections run work-stealing): at once on this one, soon on the others.
pub(crate) fn on_every_worker(job: fn()) {
    let mut handoff = Handoff::new();
    for shard in 0..shards() {
        handoff.run_on(shard, job);
    }
}

/// How long after a large buffer is freed the worker's free pages go back
/// to the OS: the ends of a burst of connections make one collection per
/// worker, not one each.
const RELEASE_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Per shard (by `shard() % 64`): a collection is due there.
static RELEASE_DUE: [std::sync::atomic::AtomicBool; 64] =
    [const { std::sync::atomic::AtomicBool::new(false) }; 64];

/// Gives the calling worker's free memory back to the OS within
/// `RELEASE_AFTER`, once however often it is asked meanwhile: called as
/// something that held a large buffer ends (a connection that held an
/// unfinished head). The binary's allocator (mimalloc, `src/allocator.rs`)
/// returns a freed page to the OS only after a delay, at that thread's
/// later allocator work: a worker that goes quiet after a burst of closes
/// kept them (bench/HEADS.md: 8,192 connections that had held 64 KiB heads
/// each left 107 MiB behind after they closed; 2 MiB with this).
pub(crate) fn release_memory_soon() {
    let due = &RELEASE_DUE[shard() % RELEASE_DUE.len()];
    if due.swap(true, Ordering::Relaxed) {
        return;
    }
    let Ok(runtime) = Handle::try_current() else {
        due.store(false, Ordering::Relaxed);
        return;
    };
    runtime.spawn(async move {
        tokio::time::sleep(RELEASE_AFTER).await;
        due.store(false, Ordering::Relaxed);
        // Twice: a forced collection purges (returns to the OS) the free
        // spans of each segment it visits before it frees that segment's
        // empty pages, whose spans it only schedules for a purge; the
        // second purges those where the segment has pages still in use
        // (a segment left wholly free went back at the first).
        for _ in 0..2 {
            // SAFETY: mi_collect frees and returns the calling thread's
            // unused pages; it touches no live block.
            unsafe { libmimalloc_sys::mi_collect(true) }
        }
    });
}

/// Work for a worker's thread: runs there, in its relay task.
type Job = Box<dyn FnOnce() + Send>;
type Relay = mpsc::UnboundedSender<Vec<Job>>;

async fn run_batches(mut batches: mpsc::UnboundedReceiver<Vec<Job>>) {
    while let Some(batch) = batches.recv().await {
        batch.into_iter().for_each(|job| job());
    }
}

/// Jobs gathered for other workers until [`Handoff::flush`]. A job for the
/// calling thread's own worker (or when there are no workers) runs at once.
/// Unbounded by itself: its callers hand over answers to calls in flight,
/// which are bounded.
pub(crate) struct Handoff {
    relays: &'static [Relay],
    here: usize,
    /// By shard; a shard's `Vec` is allocated by its first job of a batch.
    batches: Vec<Vec<Job>>,
}

impl Handoff {
    /// For the calling thread.
    pub(crate) fn new() -> Handoff {
        Handoff::with(WORKERS.get().map_or(&[], |w| &w.relays), shard())
    }

    fn with(relays: &'static [Relay], here: usize) -> Handoff {
        Handoff {
            relays,
            here,
            batches: Vec::new(),
        }
    }

    /// Runs `job` on `shard`'s worker: now if that is this one, else once
    /// the batch is flushed.
    pub(crate) fn run_on(&mut self, shard: usize, job: impl FnOnce() + Send + 'static) {
        if shard == self.here || shard >= self.relays.len() {
            return job();
        }
        if self.batches.len() <= shard {
            self.batches.resize_with(self.relays.len(), Vec::new);
        }
        self.batches[shard].push(Box::new(job));
    }

    /// Sends each worker its batch: one wake-up per worker.
    pub(crate) fn flush(&mut self) {
        for (batch, relay) in self.batches.iter_mut().zip(self.relays) {
            if !batch.is_empty() {
                // A worker that has stopped drops the jobs, and with them
                // the answers' senders: their callers see the link gone.
                let _ = relay.send(std::mem::take(batch));
            }
        }
    }

    /// The stream's next item; the batch so far is flushed before waiting
    /// for it, so what was read together is delivered together.
    pub(crate) async fn next<S: Stream + Unpin>(&mut self, stream: &mut S) -> Option<S::Item> {
        if let Some(item) = stream.next().now_or_never() {
            return item;
        }
        self.flush();
        stream.next().await
    }
}

impl Drop for Handoff {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests;
