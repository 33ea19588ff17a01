//! Workload "forwarding": closed-loop `tools/call` at fixed concurrency.
//! Each virtual user opens its own connection and session (`initialize` +
//! `notifications/initialized`), then calls the tool back to back. Only
//! calls that start after the warm-up and end before the deadline are
//! measured; a failure anywhere counts.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Barrier;
use tokio::time::Instant;

use crate::client::{Mcp, Target};
use crate::procs;
use crate::stats::{Latency, Tally};

pub struct Plan {
    pub target: Arc<Target>,
    pub concurrency: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub method: String,
    pub params: String,
    pub pid: Option<i32>,
    /// The backend behind the target, whose own CPU is sampled too.
    pub backend_pid: Option<i32>,
    /// All users share one session (opened by the first) instead of one each.
    pub shared_session: bool,
}

#[derive(Debug, Serialize)]
pub struct Run {
    pub concurrency: usize,
    pub duration_s: f64,
    pub requests: u64,
    pub errors: u64,
    pub failures: std::collections::BTreeMap<String, u64>,
    pub throughput_rps: f64,
    pub latency: Latency,
    /// CPU the server's process tree used in the measured window.
    pub server_cpu_s: Option<f64>,
    pub server_cpu_us_per_request: Option<f64>,
    /// The same for the server's own process alone (a gateway without the
    /// backends it runs as children).
    pub server_own_cpu_us_per_request: Option<f64>,
    /// The kernel's part of it (the server's own system time per request).
    pub server_own_sys_cpu_us_per_request: Option<f64>,
    /// Context switches of the server's threads per request.
    pub server_ctx_switches_per_request: Option<f64>,
    pub server_rss_kib: Option<u64>,
    pub server_processes: Option<usize>,
    /// The backend's own CPU per request in the same window (`backend_pid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_cpu_us_per_request: Option<f64>,
    pub loadgen_cpu_s: f64,
    pub reconnects: u64,
    /// With several rounds: every round's numbers (this run is the round
    /// with the highest throughput, the one least disturbed by the rest of
    /// a shared machine). Its `errors` count all rounds.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<Round>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Round {
    pub throughput_rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub server_cpu_us_per_request: Option<f64>,
    pub server_own_cpu_us_per_request: Option<f64>,
    pub server_own_sys_cpu_us_per_request: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_cpu_us_per_request: Option<f64>,
    pub errors: u64,
}

impl Run {
    /// One level's figures: the requests' tally and the server's samples
    /// at the window's two ends.
    pub fn measured(
        concurrency: usize,
        duration: Duration,
        total: &Tally,
        (before, after): (Option<procs::Sample>, Option<procs::Sample>),
        loadgen_cpu_s: f64,
        reconnects: u64,
    ) -> Run {
        let secs = duration.as_secs_f64();
        let per_request = |what| procs::per_request(before, after, total.ok, what);
        let server_cpu_s = match (before, after) {
            (Some(b), Some(a)) => Some(a.cpu_s - b.cpu_s),
            _ => None,
        };
        Run {
            concurrency,
            duration_s: secs,
            requests: total.ok,
            errors: total.errors(),
            failures: total.failures.clone(),
            throughput_rps: total.ok as f64 / secs,
            latency: total.summary(),
            server_cpu_s,
            server_cpu_us_per_request: per_request(procs::cpu_us),
            server_own_cpu_us_per_request: per_request(procs::own_cpu_us),
            server_own_sys_cpu_us_per_request: per_request(procs::own_sys_cpu_us),
            server_ctx_switches_per_request: per_request(procs::switches),
            server_rss_kib: after.map(|a| a.rss_kib),
            server_processes: after.map(|a| a.processes),
            backend_cpu_us_per_request: None,
            loadgen_cpu_s,
            reconnects,
            rounds: Vec::new(),
        }
    }

    fn round(&self) -> Round {
        Round {
            throughput_rps: self.throughput_rps,
            p50_us: self.latency.p50_us,
            p99_us: self.latency.p99_us,
            server_cpu_us_per_request: self.server_cpu_us_per_request,
            server_own_cpu_us_per_request: self.server_own_cpu_us_per_request,
            server_own_sys_cpu_us_per_request: self.server_own_sys_cpu_us_per_request,
            backend_cpu_us_per_request: self.backend_cpu_us_per_request,
            errors: self.errors,
        }
    }
}

/// The best of several rounds of the same run (highest throughput), with
/// every round listed and every round's errors counted.
pub fn best_of(runs: Vec<Run>) -> Option<Run> {
    let rounds: Vec<Round> = runs.iter().map(Run::round).collect();
    let errors = rounds.iter().map(|r| r.errors).sum();
    let mut best = runs
        .into_iter()
        .max_by(|a, b| a.throughput_rps.total_cmp(&b.throughput_rps))?;
    best.errors = errors;
    if rounds.len() > 1 {
        best.rounds = rounds;
    }
    Some(best)
}

struct Window {
    start: Instant,
    end: Instant,
}

pub async fn run(plan: &Plan) -> Run {
    let n = plan.concurrency.max(1);
    let ready = Arc::new(Barrier::new(n + 1));
    let go = Arc::new(Barrier::new(n + 1));
    let window: Arc<OnceLock<Window>> = Arc::new(OnceLock::new());

    // One session for everyone, when asked: opened here, shared below.
    let mut shared = None;
    let mut setup = Tally::default();
    if plan.shared_session {
        let mut c = Mcp::new(plan.target.clone());
        match c.initialize().await {
            Ok(_) => shared = Some((c.session.clone(), c.version.clone())),
            Err(f) => setup.fail(&f),
        }
    }

    let mut users = Vec::with_capacity(n);
    for _ in 0..n {
        let target = plan.target.clone();
        let (ready, go, window) = (ready.clone(), go.clone(), window.clone());
        let (method, params) = (plan.method.clone(), plan.params.clone());
        let shared = shared.clone();
        let want_shared = plan.shared_session;
        users.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut c = Mcp::new(target);
            let init = match (want_shared, shared) {
                (true, Some((s, v))) => {
                    c.session = s;
                    c.version = v;
                    Ok(())
                }
                (true, None) => Err(None),
                (false, _) => c.initialize().await.map(|_| ()).map_err(Some),
            };
            ready.wait().await;
            go.wait().await;
            if let Err(f) = init {
                if let Some(f) = f {
                    tally.fail(&f);
                }
                return (tally, c.conn.reconnects);
            }
            let w = window.get().expect("set before go");
            loop {
                let t0 = Instant::now();
                if t0 >= w.end {
                    break;
                }
                let outcome = c.request(&method, &params).await;
                let t1 = Instant::now();
                if t0 >= w.start && t1 <= w.end {
                    tally.record(t1 - t0, &outcome);
                } else if let Err(f) = &outcome {
                    tally.fail(f);
                }
                if outcome.is_err() {
                    // Never spin on a broken server.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            (tally, c.conn.reconnects)
        }));
    }

    ready.wait().await;
    let start = Instant::now() + plan.warmup;
    let end = start + plan.duration;
    let _ = window.set(Window { start, end });
    go.wait().await;

    tokio::time::sleep_until(start).await;
    let before = plan.pid.map(procs::sample);
    let backend_before = plan.backend_pid.map(procs::sample);
    let lg_before = procs::self_cpu_s();
    tokio::time::sleep_until(end).await;
    let after = plan.pid.map(procs::sample);
    let backend_after = plan.backend_pid.map(procs::sample);
    let lg_after = procs::self_cpu_s();

    let mut total = setup;
    let mut reconnects = 0;
    for u in users {
        if let Ok((t, r)) = u.await {
            total.merge(&t);
            reconnects += r;
        }
    }
    let mut run = Run::measured(
        n,
        plan.duration,
        &total,
        (before, after),
        lg_after - lg_before,
        reconnects,
    );
    run.backend_cpu_us_per_request =
        procs::per_request(backend_before, backend_after, total.ok, procs::own_cpu_us);
    run
}
