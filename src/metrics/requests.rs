//! Requests: the series each is counted in, and the recent window the
//! status page samples; requests refused by `[limits]`, answers dropped.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

use super::Metrics;
use super::labels::{
    CloseReason, DroppedLabels, LimitLabel, LimitReason, Method, MethodLabel, Outcome, ReasonLabel,
    RequestLabels,
};
use crate::protocol::Era;

/// The request series, each looked up in its family once: a lookup hashes
/// the labels and takes the family's lock, on every request otherwise.
pub(super) struct RequestSeries {
    /// By era, method and outcome.
    counts: Box<[OnceLock<Counter>]>,
    /// By method.
    durations: Box<[OnceLock<Histogram>]>,
}

const OUTCOMES: usize = 3;

impl RequestSeries {
    pub(super) fn new() -> RequestSeries {
        RequestSeries {
            counts: (0..2 * Method::COUNT * OUTCOMES)
                .map(|_| OnceLock::new())
                .collect(),
            durations: (0..Method::COUNT).map(|_| OnceLock::new()).collect(),
        }
    }
}

/// Upper bounds (µs) of the status page's latency buckets; one more
/// bucket holds the rest.
pub const LATENCY_BOUNDS_US: [u64; 18] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

/// Counters that only grow; the status page keeps snapshots and reads
/// rates and percentiles from their differences.
#[derive(Default)]
pub(super) struct Recent {
    requests: AtomicU64,
    errors: AtomicU64,
    latency: [AtomicU64; LATENCY_BOUNDS_US.len() + 1],
}

/// A snapshot of `Recent` and the session counts, for the status page.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    pub requests: u64,
    pub errors: u64,
    pub latency: [u64; LATENCY_BOUNDS_US.len() + 1],
    pub sessions_live: i64,
    pub sessions_opened: u64,
    /// Client sessions closed, by reason label.
    pub closed: Vec<(&'static str, u64)>,
}

impl Metrics {
    pub fn limited(&self, reason: LimitReason) {
        self.limited.get_or_create(&LimitLabel { reason }).inc();
    }

    /// A client answered a server-to-client request it was not asked (or
    /// one nobody waits for): dropped, never delivered.
    pub fn answer_dropped(&self, reason: &'static str) {
        self.answers_dropped
            .get_or_create(&DroppedLabels { reason })
            .inc();
    }

    pub fn request(&self, era: Era, method: Method, outcome: Outcome, seconds: f64) {
        let series = &self.request_series;
        let eras = match era {
            Era::Legacy => 0,
            Era::Modern => 1,
        };
        let slot = (eras * Method::COUNT + usize::from(method.0)) * OUTCOMES + outcome as usize;
        let labels = || RequestLabels {
            era: era.as_str(),
            method: method.label(),
            outcome,
        };
        series.counts[slot]
            .get_or_init(|| self.requests.get_or_create(&labels()).clone())
            .inc();
        series.durations[usize::from(method.0)]
            .get_or_init(|| {
                let labels = MethodLabel {
                    method: method.label(),
                };
                self.durations.get_or_create(&labels).clone()
            })
            .observe(seconds);
        let r = &self.recent;
        r.requests.fetch_add(1, Ordering::Relaxed);
        if outcome != Outcome::ok {
            r.errors.fetch_add(1, Ordering::Relaxed);
        }
        let us = (seconds * 1e6) as u64;
        let bucket = LATENCY_BOUNDS_US.partition_point(|b| *b < us);
        r.latency[bucket].fetch_add(1, Ordering::Relaxed);
    }

    /// What the status page samples.
    pub fn counts(&self) -> Counts {
        let r = &self.recent;
        let closed = [
            CloseReason::delete,
            CloseReason::idle,
            CloseReason::capacity,
            CloseReason::shutdown,
            CloseReason::principal_cap,
        ]
        .into_iter()
        .map(|reason| {
            let n = self
                .sessions_closed
                .get(&ReasonLabel { reason })
                .map_or(0, |c| c.get());
            (reason.label(), n)
        })
        .collect();
        Counts {
            requests: r.requests.load(Ordering::Relaxed),
            errors: r.errors.load(Ordering::Relaxed),
            latency: std::array::from_fn(|i| r.latency[i].load(Ordering::Relaxed)),
            sessions_live: self.sessions_live.get(),
            sessions_opened: self.sessions_opened.get(),
            closed,
        }
    }
}
