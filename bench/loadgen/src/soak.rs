//! Workload "soak": mixed traffic for a long time while backends are killed
//! at random.
//!
//! Virtual clients loop until the duration ends: `initialize` a legacy
//! session, send a random number (1-50) of requests (`tools/call` of an echo
//! tool, now and then a slow `sleep_ms`, `tools/list`, `ping`, and sometimes
//! a 2026-07-28 stateless `tools/call` beside the session), 0-10 ms apart,
//! then DELETE the session or abandon it (half the time with its
//! connection), and start over. Each session calls the tools of a random
//! subset of the backends (each with probability 1/2, at least one), so
//! that a per-session backend sees about half of the client sessions. A killer SIGKILLs one backend
//! process (a descendant of the gateway whose environment holds
//! `SOAK_BACKEND=<name>`) at random intervals; the gateway is expected to
//! restart or reopen it by itself.
//!
//! Every request records the backend it targets (the `{backend}__` prefix of
//! its tool; none for `initialize`, `ping`, `tools/list` and DELETE), when it
//! started and ended, and whether it failed. A failure is *explained* when
//! its backend was killed while it was in flight (start <= kill <= end);
//! every other failure is *unexplained*, and any makes the run fail.
//!
//! A kill is not instantaneous: the process dies some time after kill(2)
//! returns. The killer watches it die (a short busy wait on /proc, which on
//! the default single-threaded runtime also keeps every client from
//! starting a request meanwhile) and the kill is the interval from the
//! signal to the death: a request is in flight at the kill when
//! [start, end] overlaps it. A request that starts after the death meets
//! the gateway's handling of a dead backend, and fails unexplained.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method};
use serde::Serialize;
use tokio::time::Instant;

use crate::client::{self, Conn, Failure, Mcp, Reply, Target};
use crate::procs;

/// The environment variable that names a backend process's backend.
pub const LABEL: &str = "SOAK_BACKEND";
const MODERN_VERSION: &str = "2026-07-28";
/// At most this many unexplained failures are listed in full.
const SAMPLES: usize = 20;

pub struct Plan {
    pub target: Arc<Target>,
    pub pid: i32,
    pub duration: Duration,
    pub concurrency: usize,
    /// Tool names, each `{backend}__{tool}`.
    pub tools: Vec<String>,
    /// A kill every (min..=max), uniformly at random.
    pub kill_every: (Duration, Duration),
    pub seed: u64,
    pub sample_every: Duration,
}

// ---------------------------------------------------------------- PRNG

/// SplitMix64: small, fast, deterministic for a seed; not for secrets.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in lo..=hi (the modulo bias is negligible for our ranges).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// True with probability p.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

// ---------------------------------------------------------------- requests

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Initialize,
    Call,
    Sleep,
    List,
    Ping,
    ModernCall,
    ModernSleep,
    Delete,
}

impl Kind {
    const ALL: [Kind; 8] = [
        Kind::Initialize,
        Kind::Call,
        Kind::Sleep,
        Kind::List,
        Kind::Ping,
        Kind::ModernCall,
        Kind::ModernSleep,
        Kind::Delete,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Initialize => "initialize",
            Kind::Call => "tools/call echo",
            Kind::Sleep => "tools/call sleep_ms",
            Kind::List => "tools/list",
            Kind::Ping => "ping",
            Kind::ModernCall => "2026-07-28 tools/call echo",
            Kind::ModernSleep => "2026-07-28 tools/call sleep_ms",
            Kind::Delete => "DELETE",
        }
    }
}

/// The tools by backend, from `{backend}__{tool}` names.
struct Tools {
    backends: Vec<String>,
    /// (tool name, backend index).
    echo: Vec<(String, usize)>,
}

impl Tools {
    fn parse(names: &[String]) -> Result<Tools, String> {
        let mut backends: Vec<String> = Vec::new();
        let mut echo = Vec::new();
        for name in names {
            let Some((backend, _)) = name.split_once("__") else {
                return Err(format!(
                    "--tools: {name:?} has no backend prefix ({{backend}}__{{tool}})"
                ));
            };
            let ix = match backends.iter().position(|b| b == backend) {
                Some(i) => i,
                None => {
                    backends.push(backend.to_owned());
                    backends.len() - 1
                }
            };
            echo.push((name.clone(), ix));
        }
        if echo.is_empty() {
            return Err("--tools: at least one tool".into());
        }
        Ok(Tools { backends, echo })
    }

    fn sleep_tool(&self, backend: usize) -> String {
        format!("{}__sleep_ms", self.backends[backend])
    }
}

/// A failed request as recorded.
#[derive(Debug, Clone)]
struct Fail {
    kind: Kind,
    backend: Option<usize>,
    start_us: u64,
    end_us: u64,
    error: String,
}

#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct Counts {
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.requests += other.requests;
        self.ok += other.ok;
        self.failed += other.failed;
    }
}

#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct SessionCounts {
    pub opened: u64,
    pub deleted: u64,
    pub abandoned: u64,
    /// Abandoned together with the TCP connection (a client that vanished).
    pub abandoned_with_connection: u64,
    pub initialize_failed: u64,
}

/// Live figures for the progress lines.
#[derive(Default)]
struct Progress {
    requests: AtomicU64,
    failed: AtomicU64,
    kills: AtomicU64,
}

/// One virtual client's record.
struct ClientLog {
    by_kind: BTreeMap<Kind, Counts>,
    /// Indexed by backend; the last entry is "no backend".
    by_backend: Vec<Counts>,
    fails: Vec<Fail>,
    sessions: SessionCounts,
}

struct Clock {
    t0: Instant,
}

impl Clock {
    fn us(&self) -> u64 {
        self.t0.elapsed().as_micros() as u64
    }
}

impl ClientLog {
    fn new(backends: usize) -> ClientLog {
        ClientLog {
            by_kind: BTreeMap::new(),
            by_backend: vec![Counts::default(); backends + 1],
            fails: Vec::new(),
            sessions: SessionCounts::default(),
        }
    }

    fn record(
        &mut self,
        progress: &Progress,
        kind: Kind,
        backend: Option<usize>,
        start_us: u64,
        end_us: u64,
        outcome: Result<(), String>,
    ) {
        let none = self.by_backend.len() - 1;
        let k = self.by_kind.entry(kind).or_default();
        let b = &mut self.by_backend[backend.unwrap_or(none)];
        k.requests += 1;
        b.requests += 1;
        progress.requests.fetch_add(1, Ordering::Relaxed);
        match outcome {
            Ok(()) => {
                k.ok += 1;
                b.ok += 1;
            }
            Err(error) => {
                k.failed += 1;
                b.failed += 1;
                progress.failed.fetch_add(1, Ordering::Relaxed);
                self.fails.push(Fail {
                    kind,
                    backend,
                    start_us,
                    end_us,
                    error,
                });
            }
        }
    }
}

/// A failure and what the reply said (status and the start of the body).
fn describe(f: &Failure, reply: Option<&Reply>) -> String {
    match reply {
        Some(r) => {
            let body = String::from_utf8_lossy(&r.body);
            let mut text: String = body.chars().take(400).collect();
            text = text.replace(['\r', '\n'], " ");
            format!("{f}: HTTP {} {}", r.status.as_u16(), text.trim())
        }
        None => f.to_string(),
    }
}

async fn legacy(c: &mut Mcp, method: &str, params: &str) -> Result<(), String> {
    let (outcome, reply) = c.request_raw(method, params).await;
    outcome.map_err(|f| describe(&f, reply.as_ref()))
}

/// A 2026-07-28 stateless `tools/call`: the revision's `_meta` in the body
/// and the mirrored headers, no session id (on the client's connection).
async fn modern_call(conn: &mut Conn, id: u64, tool: &str, args: &str) -> Result<(), String> {
    let name = serde_json::to_string(tool).map_err(|e| e.to_string())?;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":{name},"arguments":{args},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN_VERSION}","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"sluice-loadgen","version":"0.1.0"}}}}}}}}"#
    );
    let headers = [
        ("content-type", HeaderValue::from_static("application/json")),
        (
            "accept",
            HeaderValue::from_static("application/json, text/event-stream"),
        ),
        (
            "mcp-protocol-version",
            HeaderValue::from_static(MODERN_VERSION),
        ),
        ("mcp-method", HeaderValue::from_static("tools/call")),
        (
            "mcp-name",
            HeaderValue::from_str(tool).map_err(|e| e.to_string())?,
        ),
    ];
    let reply = conn
        .send(Method::POST, Bytes::from(body), &headers)
        .await
        .map_err(|f| f.to_string())?;
    if !reply.status.is_success() {
        return Err(describe(
            &Failure::Http(reply.status.as_u16()),
            Some(&reply),
        ));
    }
    client::answer(&reply, id)
        .and_then(|result| client::check_tool_result("tools/call", result))
        .map_err(|f| describe(&f, Some(&reply)))
}

struct Shared {
    target: Arc<Target>,
    tools: Tools,
    clock: Clock,
    end: Instant,
    seed: u64,
    progress: Progress,
}

/// One virtual client until the end of the run.
async fn client(ix: usize, s: Arc<Shared>) -> ClientLog {
    let mut rng = Rng::new(s.seed ^ (ix as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F));
    let mut log = ClientLog::new(s.tools.backends.len());
    let mut c = Mcp::new(s.target.clone());
    // Modern ids live apart from the Mcp's own counter.
    let mut modern_id: u64 = 1 << 40;
    let clock = &s.clock;
    let p = &s.progress;
    while Instant::now() < s.end {
        let start = clock.us();
        let init = match c.initialize().await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err("no session id from initialize".to_owned()),
            Err(f) => Err(f.to_string()),
        };
        let failed = init.is_err();
        log.record(p, Kind::Initialize, None, start, clock.us(), init);
        if failed {
            log.sessions.initialize_failed += 1;
            c.session = None;
            c.version = None;
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        log.sessions.opened += 1;
        // The backends this session calls: each with probability 1/2, at
        // least one. A per-session backend then gets a backend session from
        // only about half the client sessions: with every client session
        // using it, the abandoned ones (kept until their idle TTL) would
        // hold more backend sessions than its max_sessions allows.
        let mut uses: Vec<usize> = (0..s.tools.backends.len())
            .filter(|_| rng.chance(0.5))
            .collect();
        if uses.is_empty() {
            uses.push(rng.below(s.tools.backends.len()));
        }
        let mine: Vec<&(String, usize)> = s
            .tools
            .echo
            .iter()
            .filter(|(_, b)| uses.contains(b))
            .collect();
        let n = rng.range(1, 50);
        for i in 0..n {
            if Instant::now() >= s.end {
                break;
            }
            // A client that thinks a little between requests (0-10 ms).
            if i > 0 {
                tokio::time::sleep(Duration::from_micros(rng.range(0, 10_000))).await;
            }
            let roll = rng.below(100);
            let (tool, backend) = mine[rng.below(mine.len())].clone();
            let start = clock.us();
            let (kind, target, outcome) = match roll {
                0..45 => (
                    Kind::Call,
                    Some(backend),
                    legacy(
                        &mut c,
                        "tools/call",
                        &format!(r#"{{"name":"{tool}","arguments":{{"text":"soak"}}}}"#),
                    )
                    .await,
                ),
                45..52 => {
                    let ms = rng.range(50, 500);
                    let tool = s.tools.sleep_tool(backend);
                    (
                        Kind::Sleep,
                        Some(backend),
                        legacy(
                            &mut c,
                            "tools/call",
                            &format!(r#"{{"name":"{tool}","arguments":{{"ms":{ms}}}}}"#),
                        )
                        .await,
                    )
                }
                52..67 => (Kind::List, None, legacy(&mut c, "tools/list", "{}").await),
                67..85 => (Kind::Ping, None, legacy(&mut c, "ping", "{}").await),
                85..97 => {
                    modern_id += 1;
                    (
                        Kind::ModernCall,
                        Some(backend),
                        modern_call(&mut c.conn, modern_id, &tool, r#"{"text":"soak"}"#).await,
                    )
                }
                _ => {
                    modern_id += 1;
                    let ms = rng.range(50, 500);
                    let tool = s.tools.sleep_tool(backend);
                    (
                        Kind::ModernSleep,
                        Some(backend),
                        modern_call(&mut c.conn, modern_id, &tool, &format!(r#"{{"ms":{ms}}}"#))
                            .await,
                    )
                }
            };
            log.record(p, kind, target, start, clock.us(), outcome);
        }
        if rng.chance(0.5) {
            let start = clock.us();
            let outcome = match c.delete().await {
                Ok(status) if (200..300).contains(&status) => Ok(()),
                Ok(status) => Err(format!("http_{status} on DELETE")),
                Err(f) => Err(f.to_string()),
            };
            log.record(p, Kind::Delete, None, start, clock.us(), outcome);
            log.sessions.deleted += 1;
        } else {
            // Abandoned: never used again; half the time the connection goes too.
            c.session = None;
            c.version = None;
            log.sessions.abandoned += 1;
            if rng.chance(0.5) {
                c.conn = Conn::new(s.target.clone());
                log.sessions.abandoned_with_connection += 1;
            }
        }
    }
    log
}

// ---------------------------------------------------------------- killer

#[derive(Debug, Clone, Serialize)]
pub struct Kill {
    /// SIGKILL sent.
    pub t_s: f64,
    #[serde(skip)]
    pub t_us: u64,
    /// The process seen dead: every thread gone, so its pipes are closed.
    pub dead_s: f64,
    #[serde(skip)]
    pub dead_us: u64,
    pub backend: String,
    pub pid: i32,
    /// Processes of that backend at the time (per-session backends have many).
    pub candidates: usize,
}

async fn killer(s: Arc<Shared>, root: i32, every: (Duration, Duration)) -> (Vec<Kill>, u64) {
    let mut rng = Rng::new(s.seed ^ 0x4B49_4C4C_4552_5F5F);
    let (lo, hi) = (every.0.as_millis() as u64, every.1.as_millis() as u64);
    let mut kills = Vec::new();
    let mut misses = 0;
    loop {
        let at = Instant::now() + Duration::from_millis(rng.range(lo, hi).max(1));
        if at >= s.end {
            break;
        }
        tokio::time::sleep_until(at).await;
        let mut by_backend: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for (pid, backend) in procs::labelled(root, LABEL) {
            by_backend.entry(backend).or_default().push(pid);
        }
        if by_backend.is_empty() {
            misses += 1;
            eprintln!(
                "loadgen: soak t={:.1}s no {LABEL} process to kill",
                s.clock.us() as f64 / 1e6
            );
            continue;
        }
        // A backend first, then one of its processes: per-session backends
        // have many processes and would otherwise take nearly every kill.
        let (backend, pids) = by_backend
            .iter()
            .nth(rng.below(by_backend.len()))
            .expect("non-empty");
        let pid = pids[rng.below(pids.len())];
        // SAFETY: kill(2) has no memory preconditions; pid is a descendant
        // of the gateway under test that we just read from /proc.
        let rc = unsafe { libc::kill(pid, libc::SIGKILL) };
        let t_us = s.clock.us();
        if rc != 0 {
            // Gone meanwhile: no kill happened.
            misses += 1;
            continue;
        }
        // Blocking on purpose (bounded): see the module's comment.
        let dying = std::time::Instant::now();
        while !procs::is_dead(pid) && dying.elapsed() < Duration::from_secs(2) {
            std::thread::yield_now();
        }
        let dead_us = s.clock.us();
        s.progress.kills.fetch_add(1, Ordering::Relaxed);
        eprintln!(
            "loadgen: soak t={:.3}s SIGKILL {backend} pid {pid} ({} of its processes), dead after {:.3} ms",
            t_us as f64 / 1e6,
            pids.len(),
            (dead_us - t_us) as f64 / 1e3
        );
        kills.push(Kill {
            t_s: t_us as f64 / 1e6,
            t_us,
            dead_s: dead_us as f64 / 1e6,
            dead_us,
            backend: backend.clone(),
            pid,
            candidates: pids.len(),
        });
    }
    (kills, misses)
}

// ---------------------------------------------------------------- RSS

#[derive(Debug, Clone, Serialize)]
pub struct RssSample {
    pub t_s: f64,
    pub kib: u64,
    pub processes: usize,
    /// Processes per backend label.
    pub backends: BTreeMap<String, usize>,
}

async fn sampler(s: Arc<Shared>, root: i32, every: Duration) -> Vec<RssSample> {
    let mut samples = Vec::new();
    let mut next_note = Duration::from_secs(60);
    loop {
        let sample = procs::sample(root);
        let mut backends = BTreeMap::new();
        for (_, b) in procs::labelled(root, LABEL) {
            *backends.entry(b).or_insert(0) += 1;
        }
        let t = s.clock.t0.elapsed();
        samples.push(RssSample {
            t_s: t.as_secs_f64(),
            kib: sample.rss_kib,
            processes: sample.processes,
            backends,
        });
        if t >= next_note {
            next_note += Duration::from_secs(60);
            eprintln!(
                "loadgen: soak t={:.0}s requests {} failed {} kills {} rss {:.1} MiB ({} processes)",
                t.as_secs_f64(),
                s.progress.requests.load(Ordering::Relaxed),
                s.progress.failed.load(Ordering::Relaxed),
                s.progress.kills.load(Ordering::Relaxed),
                sample.rss_kib as f64 / 1024.0,
                sample.processes
            );
        }
        let now = Instant::now();
        if now >= s.end {
            break;
        }
        tokio::time::sleep(every.min(s.end - now).max(Duration::from_millis(10))).await;
    }
    samples
}

// ---------------------------------------------------------------- report

#[derive(Debug, Serialize)]
pub struct FailureSample {
    pub kind: &'static str,
    pub backend: Option<String>,
    pub start_s: f64,
    pub end_s: f64,
    /// Time since the last death (by a kill) of the same backend before the
    /// start, if any.
    pub since_kill_of_backend_s: Option<f64>,
    pub error: String,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub duration_s: f64,
    pub concurrency: usize,
    pub seed: u64,
    pub tools: Vec<String>,
    pub kill_every_s: (f64, f64),
    pub requests: Counts,
    pub by_kind: BTreeMap<&'static str, Counts>,
    /// By targeted backend; "-" is the requests that target none.
    pub by_backend: BTreeMap<String, Counts>,
    pub sessions: SessionCounts,
    pub kills: Vec<Kill>,
    pub kills_per_backend: BTreeMap<String, u64>,
    /// Kill attempts that found no process (or one gone meanwhile).
    pub kill_misses: u64,
    pub explained_failures: u64,
    pub explained_by_error: BTreeMap<String, u64>,
    pub unexplained_failures: u64,
    pub unexplained_by_kind: BTreeMap<&'static str, u64>,
    pub unexplained_by_error: BTreeMap<String, u64>,
    /// Unexplained failures on a backend that started within 2 s after a
    /// kill of it (a request that met the restart rather than the kill).
    pub unexplained_within_2s_after_kill: u64,
    /// Up to 20: the first of each (kind, backend, error) first, then the
    /// earliest others, in time order.
    pub unexplained_samples: Vec<FailureSample>,
    pub unexplained_by_backend: BTreeMap<String, u64>,
    /// A few explained failures, for what a killed call looks like.
    pub explained_samples: Vec<FailureSample>,
    pub rss: Vec<RssSample>,
    pub rss_min_kib: u64,
    pub rss_max_kib: u64,
    /// The most processes labelled with each backend seen in one sample.
    pub max_processes_per_backend: BTreeMap<String, usize>,
}

/// The error's category: its text up to the first ':'.
fn category(error: &str) -> String {
    error.split(':').next().unwrap_or(error).trim().to_owned()
}

pub async fn run(plan: &Plan) -> Result<Report, String> {
    let tools = Tools::parse(&plan.tools)?;
    let t0 = Instant::now();
    let shared = Arc::new(Shared {
        target: plan.target.clone(),
        tools,
        clock: Clock { t0 },
        end: t0 + plan.duration,
        seed: plan.seed,
        progress: Progress::default(),
    });
    eprintln!(
        "loadgen: soak {:?} at concurrency {}, tools {:?}, a kill every {:?}..{:?}, seed {}",
        plan.duration,
        plan.concurrency,
        plan.tools,
        plan.kill_every.0,
        plan.kill_every.1,
        plan.seed
    );
    let sampler = tokio::spawn(sampler(shared.clone(), plan.pid, plan.sample_every));
    let killer = tokio::spawn(killer(shared.clone(), plan.pid, plan.kill_every));
    let clients: Vec<_> = (0..plan.concurrency.max(1))
        .map(|i| tokio::spawn(client(i, shared.clone())))
        .collect();
    let mut logs = Vec::new();
    for c in clients {
        logs.push(c.await.map_err(|e| format!("client task: {e}"))?);
    }
    let duration_s = t0.elapsed().as_secs_f64();
    let (kills, kill_misses) = killer.await.map_err(|e| format!("killer task: {e}"))?;
    let rss = sampler.await.map_err(|e| format!("sampler task: {e}"))?;

    let backends = &shared.tools.backends;
    let mut by_kind_ix: BTreeMap<Kind, Counts> = BTreeMap::new();
    let mut by_backend_ix = vec![Counts::default(); backends.len() + 1];
    let mut sessions = SessionCounts::default();
    let mut fails = Vec::new();
    for log in logs {
        for (k, c) in &log.by_kind {
            by_kind_ix.entry(*k).or_default().add(c);
        }
        for (i, c) in log.by_backend.iter().enumerate() {
            by_backend_ix[i].add(c);
        }
        sessions.opened += log.sessions.opened;
        sessions.deleted += log.sessions.deleted;
        sessions.abandoned += log.sessions.abandoned;
        sessions.abandoned_with_connection += log.sessions.abandoned_with_connection;
        sessions.initialize_failed += log.sessions.initialize_failed;
        fails.extend(log.fails);
    }
    fails.sort_by_key(|f| f.start_us);

    let mut requests = Counts::default();
    let mut by_kind = BTreeMap::new();
    for k in Kind::ALL {
        if let Some(c) = by_kind_ix.get(&k) {
            requests.add(c);
            by_kind.insert(k.name(), *c);
        }
    }
    let mut by_backend = BTreeMap::new();
    for (i, c) in by_backend_ix.iter().enumerate() {
        let name = backends.get(i).map_or("-".to_owned(), |b| b.clone());
        by_backend.insert(name, *c);
    }
    let mut kills_per_backend: BTreeMap<String, u64> = BTreeMap::new();
    for b in backends {
        kills_per_backend.insert(b.clone(), 0);
    }
    for k in &kills {
        *kills_per_backend.entry(k.backend.clone()).or_insert(0) += 1;
    }

    let kills_of = |b: usize| kills.iter().filter(move |k| k.backend == backends[b]);
    let mut explained = 0;
    let mut explained_by_error: BTreeMap<String, u64> = BTreeMap::new();
    let mut unexplained = 0;
    let mut unexplained_by_kind: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut unexplained_by_error: BTreeMap<String, u64> = BTreeMap::new();
    let mut near = 0;
    let mut unexplained_by_backend: BTreeMap<String, u64> = BTreeMap::new();
    let mut unexplained_fails: Vec<(&Fail, Option<u64>)> = Vec::new();
    let mut explained_samples = Vec::new();
    let sample = |f: &Fail, since: Option<u64>| FailureSample {
        kind: f.kind.name(),
        backend: f.backend.map(|b| backends[b].clone()),
        start_s: f.start_us as f64 / 1e6,
        end_s: f.end_us as f64 / 1e6,
        since_kill_of_backend_s: since.map(|us| us as f64 / 1e6),
        error: f.error.clone(),
    };
    for f in &fails {
        let in_flight = f
            .backend
            .is_some_and(|b| kills_of(b).any(|k| f.start_us <= k.dead_us && k.t_us <= f.end_us));
        if in_flight {
            if explained_samples.len() < 5 {
                explained_samples.push(sample(f, None));
            }
            explained += 1;
            *explained_by_error.entry(category(&f.error)).or_insert(0) += 1;
            continue;
        }
        unexplained += 1;
        *unexplained_by_kind.entry(f.kind.name()).or_insert(0) += 1;
        *unexplained_by_error.entry(category(&f.error)).or_insert(0) += 1;
        let since = f.backend.and_then(|b| {
            kills_of(b)
                .filter(|k| k.dead_us < f.start_us)
                .map(|k| f.start_us - k.dead_us)
                .min()
        });
        if since.is_some_and(|us| us <= 2_000_000) {
            near += 1;
        }
        let name = f.backend.map_or("-".to_owned(), |b| backends[b].clone());
        *unexplained_by_backend.entry(name).or_insert(0) += 1;
        unexplained_fails.push((f, since));
    }
    // The first of each kind of failure, then the earliest others.
    let mut picked = vec![false; unexplained_fails.len()];
    let mut seen = std::collections::BTreeSet::new();
    for (i, (f, _)) in unexplained_fails.iter().enumerate() {
        if seen.len() < SAMPLES && seen.insert((f.kind, f.backend, category(&f.error))) {
            picked[i] = true;
        }
    }
    let mut room = SAMPLES.saturating_sub(seen.len());
    for p in picked.iter_mut() {
        if room == 0 {
            break;
        }
        if !*p {
            *p = true;
            room -= 1;
        }
    }
    let samples: Vec<FailureSample> = unexplained_fails
        .iter()
        .zip(&picked)
        .filter(|(_, p)| **p)
        .map(|((f, since), _)| sample(f, *since))
        .collect();
    let mut max_processes_per_backend: BTreeMap<String, usize> = BTreeMap::new();
    for s in &rss {
        for (b, n) in &s.backends {
            let m = max_processes_per_backend.entry(b.clone()).or_insert(0);
            *m = (*m).max(*n);
        }
    }
    Ok(Report {
        duration_s,
        concurrency: plan.concurrency,
        seed: plan.seed,
        tools: plan.tools.clone(),
        kill_every_s: (
            plan.kill_every.0.as_secs_f64(),
            plan.kill_every.1.as_secs_f64(),
        ),
        requests,
        by_kind,
        by_backend,
        sessions,
        kills_per_backend,
        kills,
        kill_misses,
        explained_failures: explained,
        explained_by_error,
        unexplained_failures: unexplained,
        unexplained_by_kind,
        unexplained_by_error,
        unexplained_within_2s_after_kill: near,
        unexplained_samples: samples,
        unexplained_by_backend,
        explained_samples,
        rss_min_kib: rss.iter().map(|s| s.kib).min().unwrap_or(0),
        rss_max_kib: rss.iter().map(|s| s.kib).max().unwrap_or(0),
        rss,
        max_processes_per_backend,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..1000 {
            let x = a.range(5, 20);
            assert_eq!(x, b.range(5, 20));
            assert!((5..=20).contains(&x));
            assert!(a.below(3) < 3);
            b.below(3);
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
        let hits = (0..10_000).filter(|_| a.chance(0.25)).count();
        assert!((2_000..3_000).contains(&hits), "{hits}");
    }

    #[test]
    fn tools_by_backend() {
        let t = Tools::parse(&["a__echo".into(), "b__echo".into(), "a__add".into()]).unwrap();
        assert_eq!(t.backends, ["a", "b"]);
        assert_eq!(t.echo[2], ("a__add".to_owned(), 0));
        assert_eq!(t.sleep_tool(1), "b__sleep_ms");
        assert!(Tools::parse(&["echo".into()]).is_err());
    }
}
