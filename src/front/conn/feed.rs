//! The body of a request whose head came before all of it. The connection
//! reads on while the request runs and hands the body's bytes over here;
//! the handler reads them as a body, under its own deadline, as it reads
//! hyper's.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use axum::body::HttpBody;
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};

/// The connection's end.
pub(super) struct Feed(Arc<parking_lot::Mutex<State>>);

/// The handler's end.
pub(super) struct FeedBody(Arc<parking_lot::Mutex<State>>);

struct State {
    /// Read, not yet taken by the handler.
    chunks: VecDeque<Bytes>,
    queued: usize,
    /// Bytes of the body still to be read from the socket.
    left: usize,
    /// The client went away before sending them.
    cut: bool,
    /// The handler's task, waiting for bytes.
    reader: Option<Waker>,
    /// The connection's task, waiting for the handler to take some.
    writer: Option<Waker>,
}

impl Feed {
    /// A body of `first.len() + left` bytes, `first` already here.
    pub(super) fn new(first: Bytes, left: usize) -> Feed {
        let queued = first.len();
        let chunks = if first.is_empty() {
            VecDeque::new()
        } else {
            VecDeque::from([first])
        };
        Feed(Arc::new(parking_lot::Mutex::new(State {
            chunks,
            queued,
            left,
            cut: false,
            reader: None,
            writer: None,
        })))
    }

    pub(super) fn body(&self) -> FeedBody {
        FeedBody(self.0.clone())
    }

    /// Bytes still to come from the socket.
    pub(super) fn left(&self) -> usize {
        self.0.lock().left
    }

    /// Every byte of the body has been read from the socket.
    pub(super) fn is_whole(&self) -> bool {
        self.left() == 0
    }

    /// Bytes read that the handler has not taken: as the head is taken,
    /// those that came with it.
    pub(super) fn queued(&self) -> usize {
        self.0.lock().queued
    }

    /// Hands over bytes read, at most `left()` of them.
    pub(super) fn push(&self, bytes: Bytes) {
        let mut state = self.0.lock();
        debug_assert!(bytes.len() <= state.left);
        state.left -= bytes.len();
        state.queued += bytes.len();
        state.chunks.push_back(bytes);
        let reader = state.reader.take();
        drop(state);
        if let Some(w) = reader {
            w.wake();
        }
    }

    /// Whether `limit` bytes wait for the handler; if so, the caller is
    /// woken when it takes some.
    pub(super) fn is_full(&self, limit: usize, cx: &mut Context<'_>) -> bool {
        let mut state = self.0.lock();
        if state.queued < limit {
            return false;
        }
        state.writer = Some(cx.waker().clone());
        true
    }

    /// The client went away: the body ends in an error.
    pub(super) fn cut(&self) {
        let mut state = self.0.lock();
        state.cut = true;
        let reader = state.reader.take();
        drop(state);
        if let Some(w) = reader {
            w.wake();
        }
    }
}

/// The body ended before its length.
#[derive(Debug, thiserror::Error)]
#[error("the client closed the connection before the body's end")]
pub(super) struct Cut;

impl HttpBody for FeedBody {
    type Data = Bytes;
    type Error = Cut;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Cut>>> {
        let mut state = self.0.lock();
        if let Some(chunk) = state.chunks.pop_front() {
            state.queued -= chunk.len();
            let writer = state.writer.take();
            drop(state);
            if let Some(w) = writer {
                w.wake();
            }
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if state.left == 0 {
            return Poll::Ready(None);
        }
        if state.cut {
            return Poll::Ready(Some(Err(Cut)));
        }
        state.reader = Some(cx.waker().clone());
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        let state = self.0.lock();
        state.left == 0 && state.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        let state = self.0.lock();
        SizeHint::with_exact((state.queued + state.left) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn a_fed_body_reads_whole_in_order() {
        let feed = Feed::new(Bytes::from_static(b"ab"), 4);
        let body = feed.body();
        assert_eq!(body.size_hint().exact(), Some(6));
        let reader = tokio::spawn(async move { body.collect().await.map(|c| c.to_bytes()) });
        tokio::task::yield_now().await;
        feed.push(Bytes::from_static(b"cd"));
        assert!(!feed.is_whole());
        feed.push(Bytes::from_static(b"ef"));
        assert!(feed.is_whole());
        assert_eq!(reader.await.unwrap().unwrap(), "abcdef");
    }

    #[tokio::test]
    async fn a_cut_body_ends_in_an_error_after_what_came() {
        let feed = Feed::new(Bytes::from_static(b"ab"), 4);
        let mut body = feed.body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, "ab");
        feed.cut();
        assert!(body.frame().await.unwrap().is_err());
    }

    #[test]
    fn a_full_feed_wakes_the_connection_when_the_handler_takes() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        struct Count(AtomicUsize);
        impl std::task::Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let feed = Feed::new(Bytes::from_static(b"abcd"), 10);
        assert!(!feed.is_full(5, &mut cx));
        assert!(feed.is_full(4, &mut cx));
        let mut body = feed.body();
        assert!(Pin::new(&mut body).poll_frame(&mut cx).is_ready());
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(!feed.is_full(4, &mut cx));
    }
}
