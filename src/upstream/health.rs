//! A backend's health as calls see it: up, starting, restarting (waited
//! out, briefly), down or stopped; its history for the status page (with
//! how its last session to end on its own ended); how full its bounded
//! maps are.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::link::Link;
use super::{Backend, InitInfo, Pool, RESTART_WAIT, UpstreamError, notice};
use crate::upstream::Notice;

pub(super) enum Health {
    Starting,
    Up(Arc<InitInfo>),
    /// It was up and its session just ended: the supervisor is reopening it
    /// now. Calls wait for that (bounded by `RESTART_WAIT`) instead of
    /// failing: only the calls in flight when it died see an error.
    Restarting,
    /// Why, as a reason class (`UpstreamError::reason`).
    Down(&'static str),
    Stopped,
}

impl Health {
    /// What went wrong, for the status page's history (starting and
    /// stopping are not problems).
    fn problem(&self) -> Option<&'static str> {
        match self {
            Health::Restarting => Some("restarting"),
            Health::Down(why) => Some(why),
            Health::Up(..) | Health::Starting | Health::Stopped => None,
        }
    }
}

/// A backend's health over its life, for the status page.
#[derive(Default)]
pub(super) struct HealthHistory {
    ever_up: bool,
    /// Came back up after having been up.
    restarts: u64,
    last_problem: Option<(&'static str, std::time::SystemTime)>,
}

impl Backend {
    pub(super) fn set_health(&self, health: Health) {
        let up = matches!(health, Health::Up(..));
        let problem = health.problem();
        let old = {
            let mut current = self.health.lock();
            let modern = matches!(&health, Health::Up(info) if info.is_modern());
            self.glance.up.store(up, Ordering::Release);
            self.glance.up_modern.store(modern, Ordering::Release);
            std::mem::replace(&mut *current, health)
        };
        let was_up = matches!(old, Health::Up(..));
        {
            // A problem is dated from when it began, not from each retry.
            let mut history = self.history.lock();
            if let Some(p) = problem
                && old.problem() != Some(p)
            {
                history.last_problem = Some((p, std::time::SystemTime::now()));
            }
            if up && !was_up {
                if history.ever_up {
                    history.restarts += 1;
                }
                history.ever_up = true;
            }
        }
        self.ctx.metrics.backend_up(&self.name, up);
        self.settled.send_replace(true);
        self.glance.settled.store(true, Ordering::Release);
        self.health_changed.send_replace(());
        if up && !was_up {
            // Clients that listed while it was away have incomplete lists.
            for kind in notice::ListKind::ALL {
                let _ = self.changes.send(Notice::ListChanged(kind));
            }
        }
    }

    /// Waits for the first start attempt to end, so that clients arriving
    /// with the gateway see complete lists; but only until the gateway's
    /// settle window closes. After that nothing ever waits here: a backend
    /// that hangs in its handshake delays no one else's `initialize`.
    pub async fn settle(&self) {
        // Nearly always: settled long ago, no waiter needed.
        if self.glance.settled.load(Ordering::Acquire) {
            return;
        }
        let mut rx = self.settled.subscribe();
        let _ = tokio::time::timeout_at(self.settle_until, rx.wait_for(|s| *s)).await;
    }

    /// Whether a warning about this backend may be logged now: repeated
    /// warnings are bounded per backend (see `throttle`).
    pub fn may_warn(&self) -> bool {
        self.ctx.warnings.admit().is_some()
    }

    /// The backend's `initialize` result, while it is healthy.
    pub fn info(&self) -> Option<Arc<InitInfo>> {
        match &*self.health.lock() {
            Health::Up(info) => Some(info.clone()),
            _ => None,
        }
    }

    /// Why the backend is not healthy, as a reason class (None when it is).
    pub fn problem(&self) -> Option<&'static str> {
        let health = self.health.lock();
        match &*health {
            // The authorization code flow: never probed (nothing may reach
            // it without a principal's grant); each call finds out.
            Health::Starting if self.code_flow().is_some() => None,
            Health::Starting => Some("starting"),
            Health::Stopped => Some("stopped"),
            other => other.problem(),
        }
    }

    /// Fails fast while the backend is down: no call waits on a dead peer.
    /// A restart in progress is waited out, briefly.
    pub(super) async fn check_health(&self) -> Result<(), UpstreamError> {
        let mut changed = self.health_changed.subscribe();
        let until = tokio::time::Instant::now() + RESTART_WAIT.min(self.ctx.timeout);
        loop {
            match self.problem() {
                None => return Ok(()),
                Some("restarting") => {
                    if tokio::time::timeout_at(until, changed.changed())
                        .await
                        .is_err()
                    {
                        return Err(UpstreamError::down(&self.name, "restarting"));
                    }
                }
                Some(why) => return Err(UpstreamError::down(&self.name, why)),
            }
        }
    }

    /// Whether it speaks 2026-07-28 (answers may be `input_required`).
    pub fn is_modern(&self) -> bool {
        self.glance.up_modern.load(Ordering::Acquire)
    }

    /// (the last problem and when it began, the times it came back up).
    pub fn history(&self) -> (Option<(&'static str, std::time::SystemTime)>, u64) {
        let h = self.history.lock();
        (h.last_problem, h.restarts)
    }

    /// How the last of its sessions that ended on its own ended ("exited
    /// with 3", "killed by signal 9 (SIGKILL)"), and when.
    pub fn last_exit(&self) -> Option<(String, std::time::SystemTime)> {
        self.ctx
            .last_exit
            .get()
            .map(|(exit, at)| (exit.to_string(), at))
    }

    /// Records how full this backend's bounded maps are, for /metrics.
    pub fn census(&self) {
        let mut links: Vec<Arc<Link>> = Vec::new();
        links.extend(self.modern.lock().clone());
        let mut slots = match &self.pool {
            Pool::Shared(slot) => {
                links.extend(slot.lock().clone());
                0
            }
            Pool::PerSession(p) => {
                links.extend(p.links());
                p.len()
            }
        };
        if let Some(by) = self.by_principal() {
            links.extend(by.pool.links());
            slots += by.pool.len();
        }
        let (calls, server_requests) = links
            .iter()
            .map(|l| l.conn.census())
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
        let (pages, seen) = self.cache.census();
        let m = &self.ctx.metrics;
        let name = self.name.as_str();
        m.entries("pending_calls", name, calls);
        m.entries("server_requests", name, server_requests);
        m.entries("backend_slots", name, slots);
        m.entries("list_pages", name, pages);
        m.entries("list_hashes", name, seen);
        m.entries("catalogs", name, self.catalogs.census());
    }
}
