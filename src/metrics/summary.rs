//! The periodic summary line: what changed since the last one.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use super::{Metrics, resident_bytes};

#[derive(Default)]
pub(super) struct Window {
    /// Live backend sessions over all backends (the family has no sum).
    pub(super) backend_sessions: AtomicI64,
    pub(super) opened: AtomicU64,
    pub(super) closed: [AtomicU64; 5],
}

impl Metrics {
    /// The summary log line, or None when nothing happened in the window.
    pub fn summary(&self) -> Option<String> {
        let opened = self.window.opened.swap(0, Ordering::Relaxed);
        let closed: Vec<u64> = self
            .window
            .closed
            .iter()
            .map(|c| c.swap(0, Ordering::Relaxed))
            .collect();
        let total_closed: u64 = closed.iter().sum();
        let live = self.sessions_live.get();
        if opened == 0 && total_closed == 0 && live == 0 {
            return None;
        }
        let names = ["delete", "idle", "capacity", "shutdown", "principal_cap"];
        let mut reasons = String::new();
        for (name, n) in names.iter().zip(&closed) {
            if *n > 0 {
                let sep = if reasons.is_empty() { "" } else { " " };
                let _ = write!(reasons, "{sep}{name}={n}");
            }
        }
        let backend_sessions = self.window.backend_sessions.load(Ordering::Relaxed);
        let mut line = format!("sessions live={live} new={opened} closed={total_closed}");
        if !reasons.is_empty() {
            let _ = write!(line, " ({reasons})");
        }
        let _ = write!(
            line,
            " backend_sessions={backend_sessions} rss={}MiB",
            resident_bytes() / (1024 * 1024)
        );
        Some(line)
    }
}
