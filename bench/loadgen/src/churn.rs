//! Workload "churn": how fast sessions can be opened (`initialize` only, the
//! request that creates one), and what a request costs when the table holds
//! few or many live idle sessions (opened without DELETE, then left alone
//! while `tools/call` runs on one more session).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::client::{Mcp, Target};
use crate::forward::{self, Run};
use crate::procs::{self, Sample};
use crate::stats::{Latency, Tally};

#[derive(Debug, Serialize)]
pub struct InitRate {
    pub concurrency: usize,
    pub duration_s: f64,
    pub initializes: u64,
    pub errors: u64,
    pub failures: BTreeMap<String, u64>,
    pub initialize_per_s: f64,
    pub latency: Latency,
    pub before: Option<Sample>,
    pub after: Option<Sample>,
    pub server_cpu_us_per_initialize: Option<f64>,
    /// The server's own process alone (without its children).
    pub server_own_cpu_us_per_initialize: Option<f64>,
}

pub async fn init_rate(
    target: &Arc<Target>,
    concurrency: usize,
    duration: Duration,
    pid: Option<i32>,
) -> InitRate {
    let before = pid.map(procs::sample);
    let t0 = Instant::now();
    let end = t0 + duration;
    let mut users = Vec::new();
    for _ in 0..concurrency.max(1) {
        let target = target.clone();
        users.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut c = Mcp::new(target);
            while Instant::now() < end {
                let s = Instant::now();
                let r = c.initialize_only().await.map(|_| ());
                tally.record(s.elapsed(), &r);
                if r.is_err() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            tally
        }));
    }
    let total = Tally::join(users).await;
    let secs = t0.elapsed().as_secs_f64();
    let after = pid.map(procs::sample);
    let cpu = procs::per_request(before, after, total.ok, procs::cpu_us);
    let own_cpu = procs::per_request(before, after, total.ok, procs::own_cpu_us);
    InitRate {
        concurrency,
        duration_s: secs,
        initializes: total.ok,
        errors: total.errors(),
        failures: total.failures.clone(),
        initialize_per_s: total.ok as f64 / secs,
        latency: total.summary(),
        before,
        after,
        server_cpu_us_per_initialize: cpu,
        server_own_cpu_us_per_initialize: own_cpu,
    }
}

/// Opens `count` sessions (`initialize` only) and leaves them idle.
async fn open_sessions(target: &Arc<Target>, count: usize, concurrency: usize) -> Tally {
    let next = Arc::new(AtomicUsize::new(0));
    let mut users = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (target, next) = (target.clone(), next.clone());
        users.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut c = Mcp::new(target);
            while next.fetch_add(1, Ordering::Relaxed) < count {
                let s = Instant::now();
                let r = c.initialize_only().await.map(|_| ());
                tally.record(s.elapsed(), &r);
            }
            tally
        }));
    }
    Tally::join(users).await
}

#[derive(Debug, Serialize)]
pub struct Level {
    /// Idle sessions opened so far (the table's live count, for a server
    /// that keeps them).
    pub live: usize,
    pub open_s: f64,
    pub open_errors: u64,
    pub rss: Option<Sample>,
    pub runs: Vec<Run>,
}

#[derive(Debug, Serialize)]
pub struct IdleCost {
    pub levels: Vec<Level>,
    pub errors: u64,
    /// (RSS at the last level - RSS at the first) / (sessions between them).
    pub kib_per_live_session: Option<f64>,
}

pub struct IdlePlan {
    pub target: Arc<Target>,
    pub levels: Vec<usize>,
    pub open_concurrency: usize,
    pub concurrency: Vec<usize>,
    pub duration: Duration,
    pub warmup: Duration,
    pub method: String,
    pub params: String,
    pub pid: Option<i32>,
}

pub async fn idle_cost(plan: &IdlePlan) -> IdleCost {
    let mut levels = Vec::new();
    let mut opened = 0;
    let mut errors = 0;
    for &live in &plan.levels {
        let t0 = Instant::now();
        let want = live.saturating_sub(opened);
        eprintln!("loadgen: idle-cost: opening {want} sessions (to {live} live)");
        let t = open_sessions(&plan.target, want, plan.open_concurrency).await;
        opened += want;
        errors += t.errors();
        let open_s = t0.elapsed().as_secs_f64();
        let rss = plan.pid.map(procs::sample);
        let mut runs = Vec::new();
        for &c in &plan.concurrency {
            let run = forward::run(&forward::Plan {
                target: plan.target.clone(),
                concurrency: c,
                duration: plan.duration,
                warmup: plan.warmup,
                method: plan.method.clone(),
                params: plan.params.clone(),
                pid: plan.pid,
                backend_pid: None,
                shared_session: true,
            })
            .await;
            errors += run.errors;
            runs.push(run);
        }
        levels.push(Level {
            live,
            open_s,
            open_errors: t.errors(),
            rss,
            runs,
        });
    }
    let kib = match (levels.first(), levels.last()) {
        (Some(a), Some(b)) if b.live > a.live => match (&a.rss, &b.rss) {
            (Some(ra), Some(rb)) => {
                Some((rb.rss_kib as f64 - ra.rss_kib as f64) / (b.live - a.live) as f64)
            }
            _ => None,
        },
        _ => None,
    };
    IdleCost {
        levels,
        errors,
        kib_per_live_session: kib,
    }
}
