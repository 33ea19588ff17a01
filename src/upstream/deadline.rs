//! One deadline for a whole backend operation (open, handshake, call),
//! applied at every wait inside it: a backend that accepts and never
//! answers costs a bounded time, however many steps the operation has.

use std::future::Future;
use std::time::{Duration, Instant};

use super::UpstreamError;
use crate::config::BackendName;

#[derive(Debug, Clone, Copy)]
pub(super) struct Deadline(Instant);

impl Deadline {
    pub(super) fn after(limit: Duration) -> Deadline {
        Deadline(Instant::now() + limit)
    }

    /// `fut`, or a timeout error naming the backend once the deadline passes.
    /// (`crate::timers`, not tokio's wheel: every call waits under one.)
    pub(super) async fn run<T>(
        self,
        backend: &BackendName,
        fut: impl Future<Output = T>,
    ) -> Result<T, UpstreamError> {
        crate::timers::timeout_at(self.0, fut)
            .await
            .map_err(|_| UpstreamError::timeout(backend))
    }

    /// Like `run`, for a fallible step.
    pub(super) async fn try_run<T>(
        self,
        backend: &BackendName,
        fut: impl Future<Output = Result<T, UpstreamError>>,
    ) -> Result<T, UpstreamError> {
        self.run(backend, fut).await?
    }
}
