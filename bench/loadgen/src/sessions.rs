//! Workload "sessions": sessions that outlive the gateway's memory (sealed
//! ids). `open` opens N sessions the way SDK clients do (`initialize` +
//! `notifications/initialized`) and writes their ids to a file, one a line
//! (`id<TAB>protocol version`); `resume` presents every id of such a file
//! once (after a restart, or an idle eviction) with one request each, and
//! says how many answered, how fast, at what server CPU, and what the
//! server's own `sluice_client_sessions_resumed_total` counted meanwhile.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use http::HeaderValue;
use serde::Serialize;
use tokio::time::Instant;

use crate::client::{self, Mcp, Target};
use crate::procs::{self, Memory, Sample};
use crate::stats::{Latency, Tally};

/// A session to present again: its id and the protocol version it was
/// opened with (sent as `MCP-Protocol-Version`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub id: HeaderValue,
    pub version: Option<HeaderValue>,
}

/// One `id<TAB>version` line per session (the version may be missing).
pub fn format_ids(held: &[Held]) -> String {
    let mut out = String::new();
    for h in held {
        out.push_str(h.id.to_str().unwrap_or_default());
        if let Some(v) = h.version.as_ref().and_then(|v| v.to_str().ok()) {
            out.push('\t');
            out.push_str(v);
        }
        out.push('\n');
    }
    out
}

/// The sessions of an ids file; blank lines are skipped, anything that
/// cannot be a header value is an error (with its line number).
pub fn parse_ids(text: &str) -> Result<Vec<Held>, String> {
    let mut held = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut f = line.split('\t');
        let bad = |what: &str| format!("ids line {}: bad {what}", n + 1);
        let id = f.next().unwrap_or_default().trim();
        if id.is_empty() || id.contains(char::is_whitespace) {
            return Err(bad("session id"));
        }
        let id = HeaderValue::from_str(id).map_err(|_| bad("session id"))?;
        let version = match f.next().map(str::trim) {
            None | Some("") => None,
            Some(v) => Some(HeaderValue::from_str(v).map_err(|_| bad("protocol version"))?),
        };
        if f.next().is_some() {
            return Err(bad("line (id<TAB>version)"));
        }
        held.push(Held { id, version });
    }
    Ok(held)
}

/// `sluice_client_sessions_resumed_total` by cause, from scraped metrics.
pub fn resumed_by_cause(metrics: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    const NAME: &str = "sluice_client_sessions_resumed_total{";
    metrics
        .iter()
        .filter_map(|(series, v)| {
            let labels = series.strip_prefix(NAME)?.strip_suffix('}')?;
            let cause = labels
                .split(',')
                .find_map(|l| l.trim().strip_prefix("cause="))?
                .trim_matches('"');
            Some((cause.to_owned(), *v))
        })
        .collect()
}

pub struct OpenPlan {
    pub target: Arc<Target>,
    pub count: usize,
    pub concurrency: usize,
    pub pid: Option<i32>,
    pub ids_out: PathBuf,
}

#[derive(Debug, Serialize)]
pub struct Opened {
    pub count: usize,
    /// Sessions opened with an id written out.
    pub opened: u64,
    pub errors: u64,
    pub failures: BTreeMap<String, u64>,
    /// `initialize` succeeded but the server gave no session id.
    pub without_id: u64,
    pub duration_s: f64,
    pub sessions_per_s: f64,
    /// Of `initialize` + `notifications/initialized`.
    pub latency: Latency,
    pub before: Option<Sample>,
    pub after: Option<Sample>,
    /// The server's own process (smaps), before and after.
    pub memory_before: Option<Memory>,
    pub memory_after: Option<Memory>,
    pub server_cpu_us_per_session: Option<f64>,
    pub server_own_cpu_us_per_session: Option<f64>,
    /// (the server process's RSS after - before) / sessions opened.
    pub kib_per_session: Option<f64>,
}

pub async fn open(plan: &OpenPlan) -> Result<Opened, String> {
    let before = plan.pid.map(procs::sample);
    let memory_before = plan.pid.and_then(procs::memory);
    let t0 = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut users = Vec::new();
    for _ in 0..plan.concurrency.max(1) {
        let (target, next, count) = (plan.target.clone(), next.clone(), plan.count);
        users.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut held = Vec::new();
            let mut without_id = 0;
            let mut c = Mcp::new(target);
            while next.fetch_add(1, Ordering::Relaxed) < count {
                let s = Instant::now();
                let r = c.initialize().await;
                tally.record(s.elapsed(), &r.as_ref().map(|_| ()).map_err(Clone::clone));
                match r {
                    Ok(Some(id)) => held.push(Held {
                        id,
                        version: c.version.clone(),
                    }),
                    Ok(None) => without_id += 1,
                    Err(_) => {}
                }
            }
            (tally, held, without_id)
        }));
    }
    let mut total = Tally::default();
    let mut held = Vec::with_capacity(plan.count);
    let mut without_id = 0;
    for u in users {
        if let Ok((t, h, w)) = u.await {
            total.merge(&t);
            held.extend(h);
            without_id += w;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let after = plan.pid.map(procs::sample);
    let memory_after = plan.pid.and_then(procs::memory);
    std::fs::write(&plan.ids_out, format_ids(&held))
        .map_err(|e| format!("{}: {e}", plan.ids_out.display()))?;
    let opened = held.len() as u64;
    let cpu = procs::per_request(before, after, opened, procs::cpu_us);
    let own_cpu = procs::per_request(before, after, opened, procs::own_cpu_us);
    let kib = match (memory_before, memory_after) {
        (Some(b), Some(a)) if opened > 0 => {
            Some((a.rss_kib as f64 - b.rss_kib as f64) / opened as f64)
        }
        _ => None,
    };
    Ok(Opened {
        count: plan.count,
        opened,
        errors: total.errors() + without_id,
        failures: total.failures.clone(),
        without_id,
        duration_s: secs,
        sessions_per_s: opened as f64 / secs,
        latency: total.summary(),
        before,
        after,
        memory_before,
        memory_after,
        server_cpu_us_per_session: cpu,
        server_own_cpu_us_per_session: own_cpu,
        kib_per_session: kib,
    })
}

pub struct ResumePlan {
    pub target: Arc<Target>,
    pub held: Vec<Held>,
    pub concurrency: usize,
    pub method: String,
    pub params: String,
    pub pid: Option<i32>,
    pub metrics: Option<Arc<Target>>,
}

#[derive(Debug, Serialize)]
pub struct Resumed {
    /// Ids presented (each once).
    pub presented: usize,
    pub ok: u64,
    pub errors: u64,
    pub failures: BTreeMap<String, u64>,
    pub concurrency: usize,
    pub method: String,
    pub duration_s: f64,
    pub sessions_per_s: f64,
    pub latency: Latency,
    pub before: Option<Sample>,
    pub after: Option<Sample>,
    pub memory_after: Option<Memory>,
    pub server_cpu_us_per_session: Option<f64>,
    pub server_own_cpu_us_per_session: Option<f64>,
    /// `sluice_client_sessions_resumed_total` by cause, before and after,
    /// and what this pass added.
    pub resumed_before: BTreeMap<String, f64>,
    pub resumed_after: BTreeMap<String, f64>,
    pub resumed_delta: BTreeMap<String, f64>,
    pub live_after: Option<f64>,
    pub metrics_error: Option<String>,
}

pub async fn resume(plan: &ResumePlan) -> Resumed {
    let mut metrics_error = None;
    let scrape = async |what: &str| match &plan.metrics {
        Some(m) => client::scrape_metrics(m)
            .await
            .map(Some)
            .map_err(|e| format!("{what}: {e}")),
        None => Ok(None),
    };
    let metrics_before = scrape("before").await.unwrap_or_else(|e| {
        metrics_error = Some(e);
        None
    });
    let before = plan.pid.map(procs::sample);
    let t0 = Instant::now();
    let held = Arc::new(plan.held.clone());
    let next = Arc::new(AtomicUsize::new(0));
    let mut users = Vec::new();
    for _ in 0..plan.concurrency.max(1) {
        let (target, next, held) = (plan.target.clone(), next.clone(), held.clone());
        let (method, params) = (plan.method.clone(), plan.params.clone());
        users.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut c = Mcp::new(target);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(h) = held.get(i) else { break };
                c.session = Some(h.id.clone());
                c.version = h.version.clone();
                let s = Instant::now();
                let r = c.request(&method, &params).await;
                tally.record(s.elapsed(), &r);
            }
            tally
        }));
    }
    let total = Tally::join(users).await;
    let secs = t0.elapsed().as_secs_f64();
    let after = plan.pid.map(procs::sample);
    let memory_after = plan.pid.and_then(procs::memory);
    let metrics_after = scrape("after").await.unwrap_or_else(|e| {
        metrics_error = Some(e);
        None
    });
    let cpu = procs::per_request(before, after, total.ok, procs::cpu_us);
    let own_cpu = procs::per_request(before, after, total.ok, procs::own_cpu_us);
    let resumed_before = metrics_before
        .as_ref()
        .map(resumed_by_cause)
        .unwrap_or_default();
    let resumed_after = metrics_after
        .as_ref()
        .map(resumed_by_cause)
        .unwrap_or_default();
    let resumed_delta = resumed_after
        .iter()
        .map(|(k, v)| (k.clone(), v - resumed_before.get(k).copied().unwrap_or(0.0)))
        .collect();
    Resumed {
        presented: plan.held.len(),
        ok: total.ok,
        errors: total.errors(),
        failures: total.failures.clone(),
        concurrency: plan.concurrency.max(1),
        method: plan.method.clone(),
        duration_s: secs,
        sessions_per_s: total.ok as f64 / secs,
        latency: total.summary(),
        before,
        after,
        memory_after,
        server_cpu_us_per_session: cpu,
        server_own_cpu_us_per_session: own_cpu,
        resumed_before,
        resumed_after,
        resumed_delta,
        live_after: metrics_after
            .as_ref()
            .and_then(|m| m.get("sluice_client_sessions_live").copied()),
        metrics_error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        let held = vec![
            Held {
                id: HeaderValue::from_static("s1.abc-_DEF.x"),
                version: Some(HeaderValue::from_static("2025-11-25")),
            },
            Held {
                id: HeaderValue::from_static("0123abcd"),
                version: None,
            },
        ];
        let text = format_ids(&held);
        assert_eq!(text, "s1.abc-_DEF.x\t2025-11-25\n0123abcd\n");
        assert_eq!(parse_ids(&text).unwrap(), held);
        assert_eq!(parse_ids("\n  \n").unwrap(), vec![]);
        assert_eq!(
            parse_ids("a\t2025-11-25\n\nb c\n").unwrap_err(),
            "ids line 3: bad session id"
        );
        assert!(parse_ids("a\tv\textra\n").is_err());
    }

    #[test]
    fn resumed_counts_by_cause() {
        let mut m = BTreeMap::new();
        m.insert(
            r#"sluice_client_sessions_resumed_total{cause="restart"}"#.to_owned(),
            20000.0,
        );
        m.insert(
            r#"sluice_client_sessions_resumed_total{cause="evicted"}"#.to_owned(),
            3.0,
        );
        m.insert("sluice_client_sessions_live".to_owned(), 5.0);
        m.insert("sluice_client_sessions_resumed_created".to_owned(), 1.0);
        let r = resumed_by_cause(&m);
        assert_eq!(r.len(), 2);
        assert_eq!(r["restart"], 20000.0);
        assert_eq!(r["evicted"], 3.0);
    }
}
