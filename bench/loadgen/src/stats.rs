//! Counting: latency histograms (nanoseconds, 3 significant digits) and
//! failures by kind.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::client::Failure;

pub struct Tally {
    pub latency: Histogram<u64>,
    pub ok: u64,
    pub failures: BTreeMap<String, u64>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            latency: Histogram::new_with_bounds(1_000, 120_000_000_000, 3).expect("valid bounds"),
            ok: 0,
            failures: BTreeMap::new(),
        }
    }
}

impl Tally {
    /// The virtual users' tallies, merged (a user that panicked counts nothing).
    pub async fn join(users: Vec<tokio::task::JoinHandle<Tally>>) -> Tally {
        let mut total = Tally::default();
        for u in users {
            if let Ok(t) = u.await {
                total.merge(&t);
            }
        }
        total
    }

    pub fn record(&mut self, took: Duration, outcome: &Result<(), Failure>) {
        match outcome {
            Ok(()) => {
                self.ok += 1;
                let ns = (took.as_nanos() as u64).clamp(1_000, 120_000_000_000);
                self.latency.saturating_record(ns);
            }
            Err(f) => self.fail(f),
        }
    }

    pub fn fail(&mut self, f: &Failure) {
        *self.failures.entry(f.to_string()).or_insert(0) += 1;
    }

    pub fn errors(&self) -> u64 {
        self.failures.values().sum()
    }

    pub fn merge(&mut self, other: &Tally) {
        self.latency.add(&other.latency).expect("same bounds");
        self.ok += other.ok;
        for (k, v) in &other.failures {
            *self.failures.entry(k.clone()).or_insert(0) += v;
        }
    }

    pub fn summary(&self) -> Latency {
        let h = &self.latency;
        let us = |q: f64| {
            if h.is_empty() {
                0.0
            } else {
                h.value_at_quantile(q) as f64 / 1_000.0
            }
        };
        Latency {
            count: h.len(),
            mean_us: if h.is_empty() {
                0.0
            } else {
                h.mean() / 1_000.0
            },
            p50_us: us(0.50),
            p90_us: us(0.90),
            p99_us: us(0.99),
            p999_us: us(0.999),
            max_us: if h.is_empty() {
                0.0
            } else {
                h.max() as f64 / 1_000.0
            },
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Latency {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}
