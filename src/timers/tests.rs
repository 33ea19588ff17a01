use std::time::{Duration, Instant};

use super::{Elapsed, Timers, timeout_in};

/// Sleeps registered and not yet dropped, in every shard.
fn registered(timers: &Timers) -> usize {
    timers.shards.iter().map(|s| s.slab.lock().len()).sum()
}

// Timers of the test's own: the process's are shared with every test
// running beside it.
#[tokio::test]
async fn sleeps_fire_at_their_deadline_and_leave_nothing_behind() {
    let timers = Timers::start();
    let sleep_until = |at| timers.sleep_until(at);
    let registered = || registered(timers);
    // A sleep completes, and not before its deadline.
    let deadline = Instant::now() + Duration::from_millis(30);
    sleep_until(deadline).await;
    assert!(Instant::now() >= deadline);

    // A long sleep registered first does not hold up a shorter one added
    // while the thread waits for it: the shorter wakes the thread.
    let long = tokio::spawn(sleep_until(Instant::now() + Duration::from_secs(3600)));
    tokio::task::yield_now().await;
    let short = Instant::now() + Duration::from_millis(30);
    tokio::time::timeout(Duration::from_secs(30), sleep_until(short))
        .await
        .expect("the earlier deadline fired");
    assert!(Instant::now() >= short);

    // A future that is ready first wins, and its sleep is gone with it;
    // one that is not loses to the deadline.
    let before = registered();
    for _ in 0..1000 {
        let answer = timeout_in(timers, Instant::now() + Duration::from_secs(60), async {
            tokio::task::yield_now().await;
            7
        });
        assert_eq!(answer.await, Ok(7));
    }
    assert_eq!(registered(), before, "cancelled sleeps are unregistered");
    let hang = timeout_in(
        timers,
        Instant::now() + Duration::from_millis(20),
        std::future::pending::<()>(),
    );
    assert_eq!(hang.await, Err(Elapsed));
    assert_eq!(registered(), before);

    long.abort();
    let _ = long.await;
    assert_eq!(
        registered(),
        before - 1,
        "an aborted task's sleep is dropped"
    );
}

/// A sleep moved to a later deadline fires then, not at the first one; one
/// that has fired and is moved fires again; moved earlier than the
/// thread's next look, it wakes the thread. One slot all along.
#[tokio::test]
async fn a_reset_sleep_keeps_its_slot_and_fires_at_the_new_deadline() {
    use std::future::Future;
    let timers = Timers::start();
    let start = Instant::now();
    let mut sleep = timers.sleep_until(start + Duration::from_millis(20));
    let polled = |sleep: &mut super::Sleep| {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        std::pin::Pin::new(sleep).poll(&mut cx).is_ready()
    };
    assert!(!polled(&mut sleep));
    assert_eq!(registered(timers), 1);
    // Moved an hour on: past its first deadline it has not fired (however
    // late this task runs, it can only be ready by firing early).
    sleep.reset(start + Duration::from_secs(3600));
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert!(
        !polled(&mut sleep),
        "fired at the deadline it was moved from"
    );
    let near = Instant::now() + Duration::from_millis(20);
    sleep.reset(near);
    (&mut sleep).await;
    assert!(Instant::now() >= near);

    // Fired, then moved: it waits again. A far one first holds the thread's
    // next look an hour away; moving this one near must wake the thread.
    let mut far = timers.sleep_until(Instant::now() + Duration::from_secs(3600));
    assert!(!polled(&mut far));
    sleep.reset(Instant::now() + Duration::from_secs(3000));
    assert!(!polled(&mut sleep));
    tokio::time::sleep(Duration::from_millis(30)).await;
    let near = Instant::now() + Duration::from_millis(20);
    sleep.reset(near);
    tokio::time::timeout(Duration::from_secs(30), &mut sleep)
        .await
        .expect("moved nearer, it woke the thread");
    assert!(Instant::now() >= near);
    assert_eq!(registered(timers), 2, "no slot but the two sleeps'");
    drop((sleep, far));
    assert_eq!(registered(timers), 0);
}

/// A sleep polled while another of its shard fires is not fooled by it:
/// it stays pending until its own deadline, and one that has fired stays
/// ready. One moved later keeps its first deadline with the thread, is
/// not ready when that one fires, and fires at the new one.
#[tokio::test]
async fn a_sleep_sees_its_own_firing_only() {
    use std::future::Future;
    use std::sync::atomic::Ordering;
    let timers = Timers::start();
    let polled = |sleep: &mut super::Sleep| {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        std::pin::Pin::new(sleep).poll(&mut cx).is_ready()
    };
    let firings = || -> u64 {
        timers
            .shards
            .iter()
            .map(|s| s.fired.load(Ordering::Acquire))
            .sum()
    };
    let start = Instant::now();
    let mut soon = timers.sleep_until(start + Duration::from_millis(10));
    let mut later = timers.sleep_until(start + Duration::from_secs(3600));
    assert!(!polled(&mut soon));
    assert!(!polled(&mut later));
    tokio::time::timeout(Duration::from_secs(30), &mut soon)
        .await
        .expect("the near one fired");
    assert!(!polled(&mut later), "another sleep's firing is not its own");
    assert!(polled(&mut soon), "a fired sleep stays ready");
    assert!(polled(&mut soon));

    // Moved an hour on while registered: the thread still has the first
    // deadline, fires it (waking this task, whose waker it holds), and the
    // sleep is not ready for that; moved near again, it fires.
    let mut moved = timers.sleep_until(Instant::now() + Duration::from_millis(10));
    let before = firings();
    assert!(!polled(&mut moved), "registered with its first deadline");
    moved.reset(Instant::now() + Duration::from_secs(3600));
    tokio::time::timeout(
        Duration::from_secs(30),
        std::future::poll_fn(|cx| {
            if firings() > before {
                return std::task::Poll::Ready(());
            }
            assert!(std::pin::Pin::new(&mut moved).poll(cx).is_pending());
            std::task::Poll::Pending
        }),
    )
    .await
    .expect("the thread fired the first deadline");
    assert!(!polled(&mut moved), "fired at the deadline it left");
    let near = Instant::now() + Duration::from_millis(10);
    moved.reset(near);
    tokio::time::timeout(Duration::from_secs(30), &mut moved)
        .await
        .expect("moved near again, it fired");
    assert!(Instant::now() >= near);
    drop((soon, later, moved));
    assert_eq!(registered(timers), 0);
}
