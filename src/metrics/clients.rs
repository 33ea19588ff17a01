//! What clients hold: connections, and legacy sessions (opened, closed,
//! rebuilt from a sealed id, and the revocations kept for them).

use std::sync::atomic::Ordering;

use super::Metrics;
use super::labels::{
    CauseLabel, CloseReason, ReasonLabel, ResumeCause, ShedLabel, ShedReason, VersionLabel,
};

impl Metrics {
    pub fn session_opened(&self) {
        self.sessions_live.inc();
        self.sessions_opened.inc();
        self.window.opened.fetch_add(1, Ordering::Relaxed);
    }

    /// A session of revision `version` ended after `seconds`.
    pub fn session_closed(&self, reason: CloseReason, version: &'static str, seconds: f64) {
        self.sessions_live.dec();
        self.session_durations
            .get_or_create(&VersionLabel {
                mcp_protocol_version: version,
            })
            .observe(seconds);
        self.sessions_closed
            .get_or_create(&ReasonLabel { reason })
            .inc();
        self.window.closed[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn sessions_live(&self) -> i64 {
        self.sessions_live.get()
    }

    /// A sealed session rebuilt from its id (it is live again).
    pub fn session_resumed(&self, cause: ResumeCause) {
        self.sessions_live.inc();
        self.sessions_resumed
            .get_or_create(&CauseLabel { cause })
            .inc();
    }

    pub fn revocation_dropped(&self) {
        self.revocations_dropped.inc();
    }

    pub fn connection_opened(&self) {
        self.connections_open.inc();
    }

    pub fn connection_closed(&self) {
        self.connections_open.dec();
    }

    pub fn connection_refused(&self) {
        self.connections_refused.inc();
    }

    pub fn connection_refused_per_peer(&self) {
        self.connections_refused_per_peer.inc();
    }

    /// A connection closed to make room (`front/places.rs`).
    pub fn connection_shed(&self, reason: ShedReason) {
        self.connections_shed
            .get_or_create(&ShedLabel { reason })
            .inc();
    }
}
