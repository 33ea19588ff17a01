//! The gateway's own state: config reloads, cluster mode's Redis, and how
//! full its bounded internal maps are.

use super::Metrics;
use super::labels::{EntriesLabels, ResultLabel};

impl Metrics {
    pub fn reloaded(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.reloads.get_or_create(&ResultLabel { result }).inc();
    }

    pub fn cluster_up(&self, up: bool) {
        self.cluster_up.set(i64::from(up));
    }

    /// How full one of the bounded internal maps is (set at each scrape).
    pub fn entries(&self, map: &'static str, owner: &str, n: usize) {
        self.entries
            .get_or_create(&EntriesLabels {
                map,
                owner: owner.to_owned(),
            })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}
