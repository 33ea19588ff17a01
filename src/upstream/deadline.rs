//! One deadline for a whole backend operation (open, handshake, call),
//! applied at every wait inside it: a backend that accepts and never
//! answers costs a bounded time, however many steps the operation has.

use std::future::Future;
use std::time::{Duration, Instant};

use super::UpstreamError;
use crate::vocab::BackendName;

#[derive(Debug, Clone, Copy)]
pub(super) struct Deadline(Instant);

impl Deadline {
    pub(super) fn after(limit: Duration) -> Deadline {
        Deadline(crate::clock::now() + limit)
    }

    /// `fut`, or a timeout error naming the backend once the deadline passes.
    /// (`crate::timers`, not tokio's wheel: every call waits under one.)
    /// Not an `async fn`: one would keep `fut` twice in its state (as the
    /// argument, and inside the timeout that awaits it), and a call's
    /// future carries two of these.
    pub(super) fn run<'a, T>(
        self,
        backend: &'a BackendName,
        fut: impl Future<Output = T> + 'a,
    ) -> impl Future<Output = Result<T, UpstreamError>> + 'a {
        use futures_util::FutureExt as _;
        crate::timers::timeout_at(self.0, fut)
            .map(move |r| r.map_err(|_| UpstreamError::timeout(backend)))
    }

    /// Like `run`, for a fallible step.
    pub(super) fn try_run<'a, T>(
        self,
        backend: &'a BackendName,
        fut: impl Future<Output = Result<T, UpstreamError>> + 'a,
    ) -> impl Future<Output = Result<T, UpstreamError>> + 'a {
        use futures_util::FutureExt as _;
        self.run(backend, fut).map(|r| r.and_then(|done| done))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The future under a deadline is kept once: an `async fn` taking it
    /// kept it twice, and every call's future paid for that.
    #[test]
    fn a_deadline_keeps_its_future_once() {
        let big = async {
            let held = [0u8; 1024];
            std::future::ready(()).await;
            held.len()
        };
        let alone = std::mem::size_of_val(&big);
        let name = BackendName::new("b").unwrap();
        let timed = Deadline::after(Duration::from_secs(1)).run(&name, big);
        assert!(
            std::mem::size_of_val(&timed) < alone + 256,
            "{} bytes around a future of {alone}",
            std::mem::size_of_val(&timed)
        );
    }
}
