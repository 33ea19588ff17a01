//! Workload "abandoned sessions", the field reports' method: a batch of N
//! sessions, each `initialize` + `notifications/initialized` + `tools/list`,
//! never DELETE; RSS of the server's process tree at checkpoints; then the
//! clients go away and the server idles (the drain, longer than its idle
//! TTL); then a stale session id is presented; then a second identical batch.
//!
//! RSS is a high-water mark and allocators return pages lazily, so one batch
//! cannot tell a leak from a working set: what tells them apart is whether
//! RSS comes back after the drain, and whether batch 2 climbs higher than
//! batch 1 did.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::HeaderValue;
use serde::Serialize;
use tokio::time::Instant;

use crate::client::{Failure, Mcp, Target, error_code};
use crate::procs::{self, Sample};

pub struct Plan {
    pub target: Arc<Target>,
    pub count: usize,
    pub checkpoint: usize,
    pub concurrency: usize,
    pub pid: i32,
    pub drain: Duration,
    pub sample_every: Duration,
    pub batches: usize,
    /// Sessions opened, used and DELETEd before batch 1's start is read,
    /// so that one-time start-up costs (first connections, lazily built
    /// state) are not counted as per-session growth, and no warm-up session
    /// is left to inflate the baseline.
    pub warmup_sessions: usize,
    /// This batch ends its sessions with DELETE (the warm-up only).
    pub polite: bool,
    /// The server's metrics page, read after the drain.
    pub metrics: Option<Arc<Target>>,
}

#[derive(Debug, Serialize)]
pub struct Checkpoint {
    pub sessions: usize,
    pub t_s: f64,
    pub rss_kib: u64,
    pub processes: usize,
}

#[derive(Debug, Serialize)]
pub struct Batch {
    pub start: Sample,
    pub checkpoints: Vec<Checkpoint>,
    pub peak_rss_kib: u64,
    pub end_rss_kib: u64,
    pub elapsed_s: f64,
    pub sessions_ok: usize,
    pub sessions_with_id: usize,
    pub sessions_per_s: f64,
    pub failures: BTreeMap<String, u64>,
}

#[derive(Debug, Serialize)]
pub struct Drain {
    pub duration_s: f64,
    pub samples: Vec<Checkpoint>,
    pub after_rss_kib: u64,
    /// The server process alone (no child) at the end of the drain.
    pub after_server_memory: Option<procs::Memory>,
}

#[derive(Debug, Serialize)]
pub struct Probe {
    pub status: Option<u16>,
    pub rpc_error_code: Option<i64>,
    pub outcome: String,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub count: usize,
    pub concurrency: usize,
    pub warmup_sessions: usize,
    /// RSS before the warm-up (the idle, freshly started server).
    pub cold_rss_kib: u64,
    pub batches: Vec<Batch>,
    pub drain: Option<Drain>,
    /// A batch-1 session id presented after the drain.
    pub stale_id: Option<Probe>,
    /// An id the server never issued (a client from before a restart).
    pub unknown_id: Option<Probe>,
    /// The server's own figures after the drain (`--metrics-url`), or why
    /// they could not be read.
    pub server_after_drain: Option<Result<BTreeMap<String, f64>, String>>,
    pub errors: u64,
    /// (batch-1 end - batch-1 start) / N.
    pub kib_per_session: f64,
    /// Least-squares slope of RSS over batch 1's checkpoints.
    pub kib_per_session_slope: f64,
    /// RSS after the drain / RSS at batch 1's start.
    pub after_drain_ratio: Option<f64>,
    /// Batch-2 peak / batch-1 peak.
    pub batch2_peak_ratio: Option<f64>,
}

async fn one_session(c: &mut Mcp, polite: bool) -> Result<Option<HeaderValue>, Failure> {
    let id = c.initialize().await?;
    c.request("tools/list", "{}").await?;
    if polite {
        c.delete().await?;
    }
    // Never DELETE (but in the warm-up): forget the session, keep the connection.
    c.session = None;
    c.version = None;
    Ok(id)
}

async fn batch(plan: &Plan, keep_id: &mut Option<HeaderValue>) -> Batch {
    let start = procs::sample(plan.pid);
    let t0 = Instant::now();
    let mut clients: Vec<Mcp> = (0..plan.concurrency.max(1))
        .map(|_| Mcp::new(plan.target.clone()))
        .collect();
    let mut checkpoints = vec![Checkpoint {
        sessions: 0,
        t_s: 0.0,
        rss_kib: start.rss_kib,
        processes: start.processes,
    }];
    let mut failures: BTreeMap<String, u64> = BTreeMap::new();
    let (mut ok, mut with_id, mut done) = (0, 0, 0);
    while done < plan.count {
        let chunk = plan.checkpoint.max(1).min(plan.count - done);
        let next = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        let polite = plan.polite;
        for mut c in clients.drain(..) {
            let next = next.clone();
            tasks.push(tokio::spawn(async move {
                let mut results = Vec::new();
                while next.fetch_add(1, Ordering::Relaxed) < chunk {
                    let r = one_session(&mut c, polite).await;
                    if r.is_err() {
                        c.session = None;
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    results.push(r);
                }
                (c, results)
            }));
        }
        for t in tasks {
            let (c, results) = t.await.expect("session task");
            clients.push(c);
            for r in results {
                match r {
                    Ok(id) => {
                        ok += 1;
                        if let Some(id) = id {
                            with_id += 1;
                            if keep_id.is_none() {
                                *keep_id = Some(id);
                            }
                        }
                    }
                    Err(f) => *failures.entry(f.to_string()).or_insert(0) += 1,
                }
            }
        }
        done += chunk;
        let s = procs::sample(plan.pid);
        checkpoints.push(Checkpoint {
            sessions: done,
            t_s: t0.elapsed().as_secs_f64(),
            rss_kib: s.rss_kib,
            processes: s.processes,
        });
    }
    let elapsed = t0.elapsed().as_secs_f64();
    // The clients go away without a word.
    drop(clients);
    let peak = checkpoints.iter().map(|c| c.rss_kib).max().unwrap_or(0);
    let end = checkpoints.last().map_or(0, |c| c.rss_kib);
    Batch {
        start,
        checkpoints,
        peak_rss_kib: peak,
        end_rss_kib: end,
        elapsed_s: elapsed,
        sessions_ok: ok,
        sessions_with_id: with_id,
        sessions_per_s: ok as f64 / elapsed.max(1e-9),
        failures,
    }
}

async fn drain(plan: &Plan) -> Drain {
    let t0 = Instant::now();
    let mut samples = Vec::new();
    loop {
        let s = procs::sample(plan.pid);
        samples.push(Checkpoint {
            sessions: 0,
            t_s: t0.elapsed().as_secs_f64(),
            rss_kib: s.rss_kib,
            processes: s.processes,
        });
        if t0.elapsed() >= plan.drain {
            break;
        }
        let left = plan.drain.saturating_sub(t0.elapsed());
        tokio::time::sleep(plan.sample_every.min(left).max(Duration::from_millis(10))).await;
    }
    Drain {
        after_server_memory: procs::memory(plan.pid),
        duration_s: t0.elapsed().as_secs_f64(),
        after_rss_kib: samples.last().map_or(0, |s| s.rss_kib),
        samples,
    }
}

async fn probe(plan: &Plan, id: HeaderValue) -> Probe {
    let mut c = Mcp::new(plan.target.clone());
    c.session = Some(id);
    c.version = Some(HeaderValue::from_static(crate::client::PROTOCOL_VERSION));
    let (outcome, reply) = c.request_raw("tools/list", "{}").await;
    Probe {
        status: reply.as_ref().map(|r| r.status.as_u16()),
        rpc_error_code: reply.as_ref().and_then(error_code),
        outcome: match outcome {
            Ok(()) => "ok".into(),
            Err(f) => f.to_string(),
        },
    }
}

fn batches_failures_note(failures: &BTreeMap<String, u64>) {
    eprintln!("loadgen: abandon warm-up failures: {failures:?}");
}

fn slope(points: &[Checkpoint]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mx = points.iter().map(|p| p.sessions as f64).sum::<f64>() / n;
    let my = points.iter().map(|p| p.rss_kib as f64).sum::<f64>() / n;
    let sxy: f64 = points
        .iter()
        .map(|p| (p.sessions as f64 - mx) * (p.rss_kib as f64 - my))
        .sum();
    let sxx: f64 = points
        .iter()
        .map(|p| (p.sessions as f64 - mx).powi(2))
        .sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

pub async fn run(plan: &Plan) -> Report {
    let mut batches = Vec::new();
    let mut kept = None;
    let mut drained = None;
    let (mut stale, mut unknown) = (None, None);
    let mut server_after_drain = None;
    let cold = procs::sample(plan.pid);
    if plan.warmup_sessions > 0 {
        let warm = Plan {
            target: plan.target.clone(),
            count: plan.warmup_sessions,
            checkpoint: plan.warmup_sessions,
            concurrency: plan.concurrency,
            pid: plan.pid,
            drain: plan.drain,
            sample_every: plan.sample_every,
            batches: 1,
            warmup_sessions: 0,
            polite: true,
            metrics: None,
        };
        let mut ignored = None;
        let w = batch(&warm, &mut ignored).await;
        if !w.failures.is_empty() {
            batches_failures_note(&w.failures);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for b in 0..plan.batches.max(1) {
        eprintln!(
            "loadgen: abandon batch {} of {} sessions",
            b + 1,
            plan.count
        );
        batches.push(batch(plan, &mut kept).await);
        if b == 0 {
            eprintln!("loadgen: drain {:?}", plan.drain);
            drained = Some(drain(plan).await);
            if let Some(m) = &plan.metrics {
                let r = crate::client::scrape_metrics(m)
                    .await
                    .map_err(|f| f.to_string());
                if let Ok(m) = &r {
                    eprintln!(
                        "loadgen: after the drain the server reports {:?} live sessions",
                        m.get("sluice_client_sessions_live")
                    );
                }
                server_after_drain = Some(r);
            }
            if let Some(id) = kept.clone() {
                stale = Some(probe(plan, id).await);
            }
            let never = HeaderValue::from_static("sluice-bench-never-issued-5f1d3c0a9e8b7d6c");
            unknown = Some(probe(plan, never).await);
        }
    }
    let b1 = &batches[0];
    let errors = batches.iter().flat_map(|b| b.failures.values()).sum();
    let n = plan.count.max(1) as f64;
    Report {
        count: plan.count,
        concurrency: plan.concurrency,
        warmup_sessions: plan.warmup_sessions,
        cold_rss_kib: cold.rss_kib,
        kib_per_session: (b1.end_rss_kib as f64 - b1.start.rss_kib as f64) / n,
        kib_per_session_slope: slope(&b1.checkpoints),
        after_drain_ratio: drained
            .as_ref()
            .map(|d| d.after_rss_kib as f64 / b1.start.rss_kib.max(1) as f64),
        batch2_peak_ratio: batches
            .get(1)
            .map(|b2| b2.peak_rss_kib as f64 / b1.peak_rss_kib.max(1) as f64),
        batches,
        drain: drained,
        stale_id: stale,
        unknown_id: unknown,
        server_after_drain,
        errors,
    }
}
