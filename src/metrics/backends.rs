//! Backends: up or down, their sessions and restarts, their list refreshes.

use std::sync::atomic::Ordering;

use super::Metrics;
use super::labels::{
    BackendLabel, BackendReasonLabel, RefreshLabels, RestartLabels, RestartReason,
};
use crate::vocab::BackendName;

impl Metrics {
    pub fn backend_up(&self, backend: &BackendName, up: bool) {
        self.backend_up
            .get_or_create(&BackendLabel {
                backend: backend.to_string(),
            })
            .set(i64::from(up));
    }

    /// A backend a reload removed: no longer reported up or down.
    pub fn backend_removed(&self, backend: &BackendName) {
        self.backend_up.remove(&BackendLabel {
            backend: backend.to_string(),
        });
    }

    /// One of the backend's sessions ended on its own (or failed its
    /// health check), and another will be started.
    pub fn backend_restarted(&self, backend: &BackendName, reason: RestartReason) {
        self.backend_restarts
            .get_or_create(&RestartLabels {
                backend: backend.to_string(),
                reason,
            })
            .inc();
    }

    pub fn backend_session_opened(&self, backend: &BackendName) {
        let label = BackendLabel {
            backend: backend.to_string(),
        };
        self.backend_sessions_live.get_or_create(&label).inc();
        self.window.backend_sessions.fetch_add(1, Ordering::Relaxed);
        self.backend_sessions_opened.get_or_create(&label).inc();
    }

    pub fn backend_session_closed(&self, backend: &BackendName, reason: &str) {
        let label = BackendLabel {
            backend: backend.to_string(),
        };
        self.backend_sessions_live.get_or_create(&label).dec();
        self.window.backend_sessions.fetch_sub(1, Ordering::Relaxed);
        self.backend_sessions_closed
            .get_or_create(&BackendReasonLabel {
                backend: backend.to_string(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// A backend's sessions: (live, opened, closed).
    pub fn backend_sessions(&self, backend: &BackendName) -> (i64, u64, u64) {
        let label = BackendLabel {
            backend: backend.as_str().to_owned(),
        };
        let live = self
            .backend_sessions_live
            .get(&label)
            .map_or(0, |g| g.get());
        let opened = self
            .backend_sessions_opened
            .get(&label)
            .map_or(0, |c| c.get());
        let closed = [
            "client_closed",
            "idle",
            "probe",
            "expired",
            "exited",
            "shutdown",
        ]
        .into_iter()
        .map(|reason| {
            self.backend_sessions_closed
                .get(&BackendReasonLabel {
                    backend: label.backend.clone(),
                    reason: reason.to_owned(),
                })
                .map_or(0, |c| c.get())
        })
        .sum();
        (live, opened, closed)
    }

    /// `sluice_oauth_grants{backend}`: grants held now.
    pub fn oauth_grants(&self, backend: &str, held: usize) {
        self.oauth_grants
            .get_or_create(&BackendLabel {
                backend: backend.to_owned(),
            })
            .set(i64::try_from(held).unwrap_or(i64::MAX));
    }

    /// `sluice_oauth_flows_total{backend,result}`: connected, or why not
    /// (unknown, expired, used, other_browser, denied, failed).
    pub fn oauth_flow(&self, backend: &str, result: &'static str) {
        self.oauth_flows
            .get_or_create(&RefreshLabels {
                backend: backend.to_owned(),
                result,
            })
            .inc();
    }

    pub fn list_refresh(&self, backend: &BackendName, result: &'static str) {
        self.list_refresh
            .get_or_create(&RefreshLabels {
                backend: backend.to_string(),
                result,
            })
            .inc();
    }
}
