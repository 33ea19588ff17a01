//! `sluice probe URL`: the field reports' manual diagnosis as one command,
//! for any Streamable HTTP MCP server. It finds which protocol eras the
//! server speaks, opens sessions the way real clients do and abandons them
//! (no DELETE), and reports what each session costs, whether DELETE is
//! honoured, whether unknown and deleted ids get the 404 that makes
//! clients re-initialize (or 400, the symptom of the second report), and
//! whether idle sessions expire. Bounded in requests and time; Ctrl-C
//! stops it and it reports what it has.

mod memory;
mod peer;
mod report;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream;
use http::StatusCode;

pub use report::{Check, Report, Verdict};

use memory::Memory;
use peer::{Peer, PeerError, list};

/// Sessions a probe may open at most.
pub const MAX_SESSIONS: usize = 100_000;
/// The longest idle wait a probe accepts.
pub const MAX_WAIT: Duration = Duration::from_secs(3600);
/// Per-session memory above this, not given back, is reported as a leak:
/// a well-kept session costs a few hundred bytes to a few KiB (sluice's
/// 0.45 KiB), the field reports' leaks 76 KB and 0.7 MiB.
const LEAK_KIB: f64 = 8.0;
/// Growth of the resident set smaller than this is not told from noise:
/// an allocator's arenas and a metrics scrape's own buffers move it by
/// hundreds of KiB whatever the sessions cost. Below it, the probe gives
/// only a bound (this over the sessions), and says so.
const RESOLUTION: u64 = 1024 * 1024;

pub struct Options {
    pub url: String,
    pub sessions: usize,
    pub concurrency: usize,
    pub pid: Option<u32>,
    pub metrics: Option<String>,
    pub wait: Duration,
    pub headers: Vec<String>,
    /// Show progress (a terminal is watching).
    pub progress: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ProbeError {
    message: String,
    /// The command line was wrong (exit 2), not the server (exit 1).
    usage: bool,
}

impl ProbeError {
    fn usage(message: String) -> Self {
        Self {
            message,
            usage: true,
        }
    }

    pub fn is_usage(&self) -> bool {
        self.usage
    }
}

impl From<String> for ProbeError {
    fn from(message: String) -> Self {
        Self {
            message,
            usage: false,
        }
    }
}

/// Runs every check; stops early, with what it has, once `stop` resolves.
pub async fn run(
    opts: Options,
    stop: impl std::future::Future<Output = ()>,
) -> Result<Report, ProbeError> {
    let peer = Peer::new(&opts.url, &opts.headers).map_err(|e| match e {
        PeerError::Header(why) => ProbeError::usage(why),
        other => ProbeError::from(other.to_string()),
    })?;
    let memory = match (opts.pid, &opts.metrics) {
        (Some(pid), _) => Some(Memory::Tree(pid)),
        (None, Some(url)) => {
            if url.parse::<http::Uri>().is_err() {
                return Err(ProbeError::usage(format!("--metrics: not a URL: {url}")));
            }
            Some(Memory::metrics(url)?)
        }
        (None, None) => None,
    };
    let mut report = Report {
        url: opts.url.clone(),
        ..Report::default()
    };
    let mut stop = std::pin::pin!(stop);
    let probe = Probe { peer, memory, opts };
    tokio::select! {
        biased;
        () = &mut stop => report.interrupted = true,
        r = probe.all(&mut report) => r?,
    }
    Ok(report)
}

struct Probe {
    peer: Peer,
    memory: Option<Memory>,
    opts: Options,
}

impl Probe {
    async fn all(&self, report: &mut Report) -> Result<(), ProbeError> {
        self.eras(report).await?;
        if report.legacy.is_some() && report.stateful {
            self.unknown_id(report).await;
            self.delete(report).await;
            self.abandon(report).await;
        } else if report.legacy.is_some() {
            for name in ["unknown id", "delete", "idle expiry", "memory per session"] {
                report.add(
                    name,
                    Verdict::NotApplicable,
                    "the server issues no session ids",
                );
            }
        }
        Ok(())
    }

    /// Which eras: `initialize` (2025) and `server/discover` (2026-07-28),
    /// and whether stateless 2026-07-28 requests are served.
    async fn eras(&self, report: &mut Report) -> Result<(), ProbeError> {
        let legacy = self.peer.initialize().await;
        let modern = self.peer.modern(1, "server/discover").await;
        if let (Err(e), Err(_)) = (&legacy, &modern) {
            return Err(ProbeError::from(format!("no answer from the server: {e}")));
        }
        let legacy_evidence = match &legacy {
            Ok(a) if a.status.is_success() && a.result().is_some() => {
                let version = a
                    .result()
                    .and_then(|r| r.get("protocolVersion"))
                    .and_then(|v| v.as_str())
                    .unwrap_or("?")
                    .to_owned();
                report.stateful = a.session.is_some();
                report.legacy = Some(version.clone());
                format!(
                    "initialize answered {version}, {}",
                    if report.stateful {
                        "with a session id"
                    } else {
                        "without a session id (stateless)"
                    }
                )
            }
            Ok(a) => format!("initialize answered HTTP {}", a.status),
            Err(e) => format!("initialize: {e}"),
        };
        if let Ok(a) = &modern
            && a.status.is_success()
            && a.result().is_some()
        {
            report.modern = true;
        }
        let stateless = match self.peer.modern(2, "tools/list").await {
            Ok(a) if a.status.is_success() && a.result().is_some() => "served",
            Ok(_) | Err(_) => "refused",
        };
        report.add(
            "eras",
            Verdict::Ok,
            format!(
                "{legacy_evidence}; server/discover (2026-07-28) {}; a stateless 2026-07-28 tools/list {stateless}",
                if report.modern { "answered" } else { "refused" }
            ),
        );
        Ok(())
    }

    /// An id the server never issued (a client from before a restart).
    async fn unknown_id(&self, report: &mut Report) {
        let id = crate::vocab::random::hex(16);
        let (verdict, evidence) = match self.peer.post(Some(&id), &[], &list(3)).await {
            Ok(a) => unknown_verdict("a never-issued id", a.status, a.error_code()),
            Err(e) => (Verdict::Inconclusive, format!("no answer: {e}")),
        };
        report.add("unknown id", verdict, evidence);
    }

    /// DELETE, then the deleted id.
    async fn delete(&self, report: &mut Report) {
        let session = match self.peer.open_session().await {
            Ok(Some(s)) => s,
            Ok(None) => {
                report.add(
                    "delete",
                    Verdict::Inconclusive,
                    "no session id issued this time",
                );
                return;
            }
            Err(e) => {
                report.add(
                    "delete",
                    Verdict::Inconclusive,
                    format!("could not open a session: {e}"),
                );
                return;
            }
        };
        let deleted = match self.peer.delete(&session).await {
            Ok(s) => s,
            Err(e) => {
                report.add("delete", Verdict::Inconclusive, format!("DELETE: {e}"));
                return;
            }
        };
        if deleted == StatusCode::METHOD_NOT_ALLOWED {
            report.add(
                "delete",
                Verdict::Ok,
                "DELETE answered 405: clients cannot end sessions (the spec allows it; then idle expiry matters all the more)",
            );
            return;
        }
        let after = self.peer.post(Some(&session), &[], &list(4)).await;
        let (verdict, evidence) = match (&after, deleted.is_success()) {
            (Ok(a), true) if a.status.is_success() => (
                Verdict::SpecDeviation,
                format!("DELETE answered {deleted}, but the deleted session is still served"),
            ),
            (Ok(a), true) => {
                let (v, e) = unknown_verdict("the deleted id", a.status, a.error_code());
                (v, format!("DELETE answered {deleted}; {e}"))
            }
            (Ok(_), false) => (
                Verdict::SpecDeviation,
                format!("DELETE answered {deleted} (the spec wants success or 405)"),
            ),
            (Err(e), _) => (Verdict::Inconclusive, format!("after DELETE: {e}")),
        };
        report.add("delete", verdict, evidence);
    }

    /// N sessions opened and abandoned; their memory; whether they expire;
    /// and, once they have, whether a second batch reuses their memory (the
    /// field reports' method: a leak grows again by as much).
    async fn abandon(&self, report: &mut Report) {
        let first = self.batch("opening sessions").await;
        report.sessions_opened = first.ids.len();
        report.initialize_per_s = first.rate();
        report.kib_per_session = first.kib();
        let mut opened = format!("{} sessions opened and abandoned", first.ids.len());
        if let Some(r) = first.rate() {
            opened.push_str(&format!(", {r:.0} sessions/s"));
        }
        if first.failed > 0 {
            opened.push_str(&format!(", {} failed to open", first.failed));
        }
        let expiry = self.expiry(first.ids.first().map(String::as_str)).await;
        let (verdict, evidence) = match (&self.memory, first.kib()) {
            (None, _) => (
                Verdict::Inconclusive,
                format!("{opened}; no --pid or --metrics, memory not measured"),
            ),
            (Some(m), None) => (
                Verdict::Inconclusive,
                format!("{opened}; {} could not be read", m.describe()),
            ),
            (Some(m), Some(_)) if first.grown().is_some_and(|g| g < RESOLUTION) => {
                let n = first.ids.len();
                let bound = RESOLUTION as f64 / 1024.0 / n as f64;
                let growth = format!(
                    "{opened}; under {bound:.2} KiB per session ({}: {}, less than the {} that can be told from noise)",
                    m.describe(),
                    first.span(),
                    mebibytes(RESOLUTION),
                );
                match bound <= LEAK_KIB {
                    true => (Verdict::Ok, growth),
                    false => {
                        let needed = (RESOLUTION as f64 / 1024.0 / LEAK_KIB).ceil();
                        (
                            Verdict::Inconclusive,
                            format!("{growth}; pass --sessions {needed} or more to tell"),
                        )
                    }
                }
            }
            (Some(m), Some(kib)) => {
                let growth = format!(
                    "{opened}; {kib:.2} KiB per session ({}: {})",
                    m.describe(),
                    first.span()
                );
                match &expiry {
                    _ if kib <= LEAK_KIB => (Verdict::Ok, growth),
                    Expiry::NotChecked => (
                        Verdict::Inconclusive,
                        format!(
                            "{growth}; pass --wait longer than the server's idle timeout to see whether it is given back"
                        ),
                    ),
                    Expiry::Unknown(_) => (Verdict::Inconclusive, growth),
                    Expiry::Kept(_) => (
                        Verdict::Inconclusive,
                        format!(
                            "{growth}, all of it held while the sessions sit idle: a leak if the server never ends them, which no wait can show; pass --wait longer than its idle timeout"
                        ),
                    ),
                    Expiry::Expired(_) => {
                        let second = self.batch("opening a second batch").await;
                        match reuse(&first, &second) {
                            Some((verdict, found)) => (verdict, format!("{growth}; {found}")),
                            None => (Verdict::Inconclusive, growth),
                        }
                    }
                }
            }
        };
        report.add("memory per session", verdict, evidence);
        let (verdict, evidence) = match expiry {
            Expiry::NotChecked => (
                Verdict::Inconclusive,
                "not checked: pass --wait DURATION (longer than the server's idle timeout)"
                    .to_owned(),
            ),
            Expiry::Expired(e) => (Verdict::Ok, e),
            // Served after the wait: its idle timeout is longer, or there
            // is none, and the probe cannot tell which.
            Expiry::Kept(e) => (
                Verdict::Inconclusive,
                format!(
                    "{e}: its idle timeout is longer than the wait, or it has none (the probe cannot tell which); pass --wait longer than the timeout it documents"
                ),
            ),
            Expiry::Unknown(e) => (Verdict::Inconclusive, e),
        };
        report.add("idle expiry", verdict, evidence);
    }

    /// Opens `--sessions` sessions, `--concurrency` at a time, never DELETEd.
    async fn batch(&self, what: &'static str) -> Batch {
        let n = self.opts.sessions;
        let before = self.sample().await;
        let bar = self.progress(n as u64, what);
        let started = Instant::now();
        let mut batch = Batch::default();
        let mut opened = stream::iter(0..n)
            .map(|_| self.peer.open_session())
            .buffer_unordered(self.opts.concurrency.max(1));
        while let Some(r) = opened.next().await {
            match r {
                Ok(Some(id)) => batch.ids.push(id),
                Ok(None) | Err(_) => batch.failed += 1,
            }
            if let Some(b) = &bar {
                b.inc(1);
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        batch.secs = started.elapsed().as_secs_f64();
        batch.before = before;
        batch.after = self.sample().await;
        batch
    }

    /// After `--wait` idle, the first abandoned session presented again.
    async fn expiry(&self, first: Option<&str>) -> Expiry {
        let (Some(first), false) = (first, self.opts.wait.is_zero()) else {
            return Expiry::NotChecked;
        };
        let bar = self.progress(self.opts.wait.as_secs(), "waiting idle, seconds");
        let deadline = Instant::now() + self.opts.wait;
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_secs(1).min(deadline - Instant::now())).await;
            if let Some(b) = &bar {
                b.set_position(self.opts.wait.as_secs() - (deadline - Instant::now()).as_secs());
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        let wait = crate::config::format_duration(self.opts.wait);
        match self.peer.post(Some(first), &[], &list(5)).await {
            Ok(a) if a.status.is_success() => Expiry::Kept(format!(
                "a session idle for {wait} is still served (HTTP {})",
                a.status
            )),
            Ok(a) => Expiry::Expired(format!(
                "a session idle for {wait} is gone (HTTP {}{})",
                a.status,
                a.error_code()
                    .map_or_else(String::new, |c| format!(", {c}"))
            )),
            Err(e) => Expiry::Unknown(format!("after {wait}: {e}")),
        }
    }

    /// A bar on a terminal; elsewhere one line on stderr as each step
    /// begins (scripts, and the tests, see where the probe is).
    fn progress(&self, len: u64, what: &'static str) -> Option<indicatif::ProgressBar> {
        if !self.opts.progress {
            eprintln!("sluice probe: {what} ({len})");
            return None;
        }
        Some(progress(len, what))
    }

    async fn sample(&self) -> Option<u64> {
        match &self.memory {
            Some(m) => m.sample().await,
            None => None,
        }
    }
}

#[derive(Default)]
struct Batch {
    ids: Vec<String>,
    failed: usize,
    secs: f64,
    /// Memory before and after (bytes).
    before: Option<u64>,
    after: Option<u64>,
}

impl Batch {
    fn rate(&self) -> Option<f64> {
        (self.secs > 0.0).then(|| self.ids.len() as f64 / self.secs)
    }

    /// Bytes the batch added (zero if memory shrank meanwhile).
    fn grown(&self) -> Option<u64> {
        Some(self.after?.saturating_sub(self.before?))
    }

    fn kib(&self) -> Option<f64> {
        let n = self.ids.len();
        (n > 0).then(|| self.grown().map(|g| g as f64 / 1024.0 / n as f64))?
    }

    fn span(&self) -> String {
        match (self.before, self.after) {
            (Some(b), Some(a)) => format!("{:.1} -> {:.1} MiB", mib(b), mib(a)),
            _ => "?".to_owned(),
        }
    }
}

/// Whether the expired first batch's memory served the second: judged by
/// the peaks, not by what each batch added, because a server that hands
/// freed memory back to the OS faults it in again for the next batch (as
/// much growth as before, but no higher a peak), while one that keeps the
/// expired sessions peaks a whole batch higher.
fn reuse(first: &Batch, second: &Batch) -> Option<(Verdict, String)> {
    let (first_peak, second_peak) = (first.after?, second.after?);
    let above = second_peak.saturating_sub(first_peak);
    let found = format!(
        "after they expired a second batch peaked at {} against the first's {}",
        mebibytes(second_peak),
        mebibytes(first_peak)
    );
    Some(if above > first.grown()? / 2 {
        (
            Verdict::LeakSuspected,
            format!("{found}: their memory is not reused"),
        )
    } else {
        (Verdict::Ok, format!("{found}: their memory is reused"))
    })
}

enum Expiry {
    NotChecked,
    Expired(String),
    Kept(String),
    /// The server did not answer when the id was presented again.
    Unknown(String),
}

/// An id the server does not hold must get 404 (clients re-initialize on
/// it); 400 leaves them stuck.
fn unknown_verdict(what: &str, status: StatusCode, code: Option<i64>) -> (Verdict, String) {
    let code = code.map_or_else(String::new, |c| format!(", JSON-RPC {c}"));
    match status {
        StatusCode::NOT_FOUND => (Verdict::Ok, format!("{what} answered 404{code}")),
        s if s.is_success() => (
            Verdict::SpecDeviation,
            format!("{what} answered {s}: served as if it were live"),
        ),
        s => (
            Verdict::SpecDeviation,
            format!(
                "{what} answered {s}{code}; the spec asks for 404, on which clients re-initialize"
            ),
        ),
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1024.0 / 1024.0
}

fn mebibytes(bytes: u64) -> String {
    format!("{:.1} MiB", mib(bytes))
}

fn progress(len: u64, what: &'static str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{msg} {bar:30} {pos}/{len}") {
        bar.set_style(style);
    }
    bar.set_message(what);
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    fn batch(before: u64, after: u64) -> Batch {
        Batch {
            ids: vec![String::new(); 100],
            failed: 0,
            secs: 1.0,
            before: Some(before * MIB),
            after: Some(after * MIB),
        }
    }

    #[test]
    fn memory_given_back_and_taken_again_is_reuse() {
        // 20 -> 60 MiB, back to 20 after the expiry, 20 -> 61 again.
        let (verdict, found) = reuse(&batch(20, 60), &batch(20, 61)).unwrap();
        assert_eq!(verdict, Verdict::Ok, "{found}");
    }

    #[test]
    fn memory_kept_after_the_expiry_is_not_reuse() {
        // The first batch's 40 MiB stay: the second peaks 40 higher.
        let (verdict, found) = reuse(&batch(20, 60), &batch(60, 100)).unwrap();
        assert_eq!(verdict, Verdict::LeakSuspected, "{found}");
        assert!(
            found.contains("100.0 MiB against the first's 60.0 MiB"),
            "{found}"
        );
    }

    #[test]
    fn half_a_batch_higher_is_still_reuse_and_more_is_not() {
        assert_eq!(
            reuse(&batch(20, 60), &batch(40, 80)).unwrap().0,
            Verdict::Ok
        );
        assert_eq!(
            reuse(&batch(20, 60), &batch(41, 81)).unwrap().0,
            Verdict::LeakSuspected
        );
    }

    #[test]
    fn an_unread_sample_decides_nothing() {
        let mut second = batch(20, 60);
        second.after = None;
        assert!(reuse(&batch(20, 60), &second).is_none());
    }
}
