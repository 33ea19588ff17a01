use std::sync::mpsc as std_mpsc;
use std::thread::{self, ThreadId};
use std::time::Duration;

use futures_util::FutureExt;

use super::*;

/// Shard 0 is the test's thread; shard 1 a worker running its relay until
/// `stop` is sent.
fn two_shards() -> (
    &'static [Relay],
    oneshot::Sender<()>,
    thread::JoinHandle<()>,
) {
    // Shard 0's relay is never sent to (its jobs run at once); kept open.
    let (here, unused) = mpsc::unbounded_channel();
    std::mem::forget(unused);
    let (there, batches) = mpsc::unbounded_channel();
    let (stop, stopped) = oneshot::channel::<()>();
    let worker = thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::select! {
                () = run_batches(batches) => {}
                _ = stopped => {}
            }
        });
    });
    (Box::leak(Box::new([here, there])), stop, worker)
}

fn record(to: &std_mpsc::Sender<ThreadId>) -> impl FnOnce() + Send + 'static {
    let to = to.clone();
    move || to.send(thread::current().id()).unwrap()
}

#[test]
fn a_job_for_this_worker_runs_at_once_and_one_for_another_there_after_the_flush() {
    let (relays, stop, worker) = two_shards();
    let (ran, runs) = std_mpsc::channel();
    let mut handoff = Handoff::with(relays, 0);

    handoff.run_on(0, record(&ran));
    assert_eq!(runs.try_recv(), Ok(thread::current().id()));

    handoff.run_on(1, record(&ran));
    handoff.run_on(1, record(&ran));
    // Nothing reaches the other worker before the flush.
    assert!(runs.try_recv().is_err());
    handoff.flush();
    let there = worker.thread().id();
    for _ in 0..2 {
        assert_eq!(runs.recv_timeout(Duration::from_secs(10)), Ok(there));
    }

    // Dropping the handoff flushes what it holds.
    handoff.run_on(1, record(&ran));
    drop(handoff);
    assert_eq!(runs.recv_timeout(Duration::from_secs(10)), Ok(there));

    stop.send(()).unwrap();
    worker.join().unwrap();
}

#[test]
fn a_batch_is_flushed_when_the_stream_has_nothing_ready() {
    let (relays, stop, worker) = two_shards();
    let (ran, runs) = std_mpsc::channel();
    let mut handoff = Handoff::with(relays, 0);
    let mut lines = futures_util::stream::iter([1, 2]).chain(futures_util::stream::pending());

    assert_eq!(handoff.next(&mut lines).now_or_never(), Some(Some(1)));
    handoff.run_on(1, record(&ran));
    // The next item is ready: the batch is kept.
    assert_eq!(handoff.next(&mut lines).now_or_never(), Some(Some(2)));
    assert!(runs.try_recv().is_err());
    // Nothing is ready: the batch goes before the wait.
    assert_eq!(handoff.next(&mut lines).now_or_never(), None);
    assert_eq!(
        runs.recv_timeout(Duration::from_secs(10)),
        Ok(worker.thread().id())
    );

    stop.send(()).unwrap();
    worker.join().unwrap();
}
