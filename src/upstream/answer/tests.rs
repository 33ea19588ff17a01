use super::super::polling::WakeCount;
use super::*;

/// Polls `answer` once with a waker that counts.
fn poll_counted<T>(answer: &mut Answer<T>, count: &Arc<WakeCount>) -> Poll<Result<T, Closed>> {
    count.poll(Pin::new(answer))
}

/// What a task waiting on a fresh answer gets once another task runs
/// `settle` with the sender; a lost wake-up fails here instead of hanging.
async fn waited_for(settle: impl FnOnce(Settle<u32>) + Send + 'static) -> Result<u32, Closed> {
    let (tx, rx) = channel::<u32>();
    let waiting = tokio::spawn(rx);
    // The waiter registers before the sender moves (current-thread runtime).
    tokio::task::yield_now().await;
    tokio::spawn(async move { settle(tx) }).await.unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
        .await
        .expect("the waiter was woken")
        .unwrap()
}

#[tokio::test]
async fn an_answer_from_another_task_wakes_the_waiter() {
    assert_eq!(waited_for(|tx| tx.send(7)).await, Ok(7));
}

#[tokio::test]
async fn a_sender_gone_without_answering_wakes_the_waiter_with_closed() {
    assert_eq!(waited_for(drop).await, Err(Closed));
}

/// The point of the type: an answer settled while its waiter polls its own
/// wire wakes no one, and is there when the waiter looks right after.
#[test]
fn an_answer_settled_by_its_own_wire_wakes_no_one() {
    let count = Arc::new(WakeCount::default());
    let (tx, mut rx) = channel::<u32>();
    assert!(poll_counted(&mut rx, &count).is_pending());
    rx.settled_by(|| tx.send(1));
    assert_eq!(count.get(), 0, "the waiter is polling: no wake");
    assert_eq!(poll_counted(&mut rx, &count), Poll::Ready(Ok(1)));

    let (tx, mut rx) = channel::<u32>();
    assert!(poll_counted(&mut rx, &count).is_pending());
    rx.settled_by(|| drop(tx));
    assert_eq!(count.get(), 0);
    assert_eq!(poll_counted(&mut rx, &count), Poll::Ready(Err(Closed)));
}

/// A batch's calls share one task, and one call's wire may carry another's
/// answer: that answer wakes its own waiter. So does any answer settled
/// outside a wire's poll, on the same thread or not.
#[test]
fn any_other_answer_wakes() {
    let count = Arc::new(WakeCount::default());
    let (tx_a, mut rx_a) = channel::<u32>();
    let (_tx_b, rx_b) = channel::<u32>();
    assert!(poll_counted(&mut rx_a, &count).is_pending());
    rx_b.settled_by(|| tx_a.send(1));
    assert_eq!(count.get(), 1, "settled by another call's wire: woken");
    assert_eq!(poll_counted(&mut rx_a, &count), Poll::Ready(Ok(1)));

    let (tx, mut rx) = channel::<u32>();
    assert!(poll_counted(&mut rx, &count).is_pending());
    tx.send(2);
    assert_eq!(count.get(), 2, "settled outside any wire's poll: woken");
    assert_eq!(poll_counted(&mut rx, &count), Poll::Ready(Ok(2)));

    let (tx, mut rx) = channel::<u32>();
    assert!(poll_counted(&mut rx, &count).is_pending());
    rx.settled_by(|| std::thread::spawn(move || tx.send(3)).join().unwrap());
    assert_eq!(count.get(), 3, "settled on another thread: woken");
    assert_eq!(poll_counted(&mut rx, &count), Poll::Ready(Ok(3)));
}
