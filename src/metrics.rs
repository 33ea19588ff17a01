//! The contract's Prometheus metrics, and the periodic summary line.

use std::fmt::Write as _;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use crate::protocol::Era;
use crate::vocab::BackendName;

/// Why a client session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum CloseReason {
    delete,
    idle,
    capacity,
    shutdown,
    principal_cap,
}

impl CloseReason {
    pub fn label(self) -> &'static str {
        match self {
            CloseReason::delete => "delete",
            CloseReason::idle => "idle",
            CloseReason::capacity => "capacity",
            CloseReason::shutdown => "shutdown",
            CloseReason::principal_cap => "principal_cap",
        }
    }
}

/// Why a sealed session had to be rebuilt from its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum ResumeCause {
    /// This process issued it and dropped it from memory (idle, capacity).
    evicted,
    /// Another process issued it: this gateway restarted since.
    restart,
    /// Another live replica issued it (cluster mode).
    replica,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabel {
    cause: ResumeCause,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Outcome {
    ok,
    error,
    rejected,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: CloseReason,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendLabel {
    backend: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendReasonLabel {
    backend: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    era: &'static str,
    method: &'static str,
    outcome: Outcome,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabel {
    method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EntriesLabels {
    map: &'static str,
    owner: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DroppedLabels {
    reason: &'static str,
}

/// Why a request was refused by `[limits]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum LimitReason {
    rate,
    concurrency,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabel {
    reason: LimitReason,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefreshLabels {
    backend: String,
    result: &'static str,
}

/// Methods get their own label value; anything else is "other", so a client
/// cannot grow the label set.
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "subscriptions/listen",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "tasks/result",
    "notification",
    "response",
    "GET",
    "DELETE",
];

/// A request's `method` label: an index into `KNOWN_METHODS`, or past it
/// for "other".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Method(u8);

impl Method {
    const OTHER: Method = Method(KNOWN_METHODS.len() as u8);
    const COUNT: usize = KNOWN_METHODS.len() + 1;

    fn label(self) -> &'static str {
        KNOWN_METHODS
            .get(usize::from(self.0))
            .copied()
            .unwrap_or("other")
    }
}

pub fn method_label(method: &str) -> Method {
    KNOWN_METHODS
        .iter()
        .position(|m| *m == method)
        .map_or(Method::OTHER, |i| Method(i as u8))
}

/// The request series, each looked up in its family once: a lookup hashes
/// the labels and takes the family's lock, on every request otherwise.
struct RequestSeries {
    /// By era, method and outcome.
    counts: Box<[OnceLock<Counter>]>,
    /// By method.
    durations: Box<[OnceLock<Histogram>]>,
}

const OUTCOMES: usize = 3;

impl RequestSeries {
    fn new() -> RequestSeries {
        RequestSeries {
            counts: (0..2 * Method::COUNT * OUTCOMES)
                .map(|_| OnceLock::new())
                .collect(),
            durations: (0..Method::COUNT).map(|_| OnceLock::new()).collect(),
        }
    }
}

pub struct Metrics {
    registry: Registry,
    sessions_live: Gauge,
    sessions_opened: Counter,
    sessions_closed: Family<ReasonLabel, Counter>,
    backend_sessions_live: Family<BackendLabel, Gauge>,
    backend_sessions_opened: Family<BackendLabel, Counter>,
    backend_sessions_closed: Family<BackendReasonLabel, Counter>,
    backend_up: Family<BackendLabel, Gauge>,
    requests: Family<RequestLabels, Counter>,
    durations: Family<MethodLabel, Histogram>,
    request_series: RequestSeries,
    list_refresh: Family<RefreshLabels, Counter>,
    entries: Family<EntriesLabels, Gauge>,
    answers_dropped: Family<DroppedLabels, Counter>,
    limited: Family<LimitLabel, Counter>,
    reloads: Family<ResultLabel, Counter>,
    connections_open: Gauge,
    connections_refused: Counter,
    sessions_resumed: Family<CauseLabel, Counter>,
    revocations_dropped: Counter,
    cluster_up: Gauge,
    rss: Gauge,
    /// Counters since the last summary line.
    window: Window,
    /// Every metric's name as scraped, in registration order.
    names: Vec<String>,
    /// Requests and their latencies, for the status page's recent window.
    recent: Recent,
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
struct Recent {
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

/// Registers `metric` and remembers the name it is scraped under (a
/// counter's samples carry `_total`, which prometheus-client appends).
fn register<M>(registry: &mut Registry, names: &mut Vec<String>, name: &str, help: &str, metric: &M)
where
    M: prometheus_client::registry::Metric + TypedMetric + Clone,
{
    registry.register(name, help, metric.clone());
    names.push(match M::TYPE {
        MetricType::Counter => format!("{name}_total"),
        _ => name.to_owned(),
    });
}

#[derive(Default)]
struct Window {
    /// Live backend sessions over all backends (the family has no sum).
    backend_sessions: AtomicI64,
    opened: AtomicU64,
    closed: [AtomicU64; 5],
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let mut names = Vec::new();
        let sessions_live = Gauge::default();
        let sessions_opened = Counter::default();
        let sessions_closed = Family::<ReasonLabel, Counter>::default();
        let backend_sessions_live = Family::<BackendLabel, Gauge>::default();
        let backend_sessions_opened = Family::<BackendLabel, Counter>::default();
        let backend_sessions_closed = Family::<BackendReasonLabel, Counter>::default();
        let backend_up = Family::<BackendLabel, Gauge>::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let durations = Family::<MethodLabel, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
            ])
        });
        let list_refresh = Family::<RefreshLabels, Counter>::default();
        let entries = Family::<EntriesLabels, Gauge>::default();
        let answers_dropped = Family::<DroppedLabels, Counter>::default();
        let limited = Family::<LimitLabel, Counter>::default();
        let reloads = Family::<ResultLabel, Counter>::default();
        let connections_open = Gauge::default();
        let connections_refused = Counter::default();
        let sessions_resumed = Family::<CauseLabel, Counter>::default();
        let revocations_dropped = Counter::default();
        let cluster_up = Gauge::default();
        let rss = Gauge::default();

        register(
            &mut registry,
            &mut names,
            "sluice_client_sessions_live",
            "Live legacy client sessions",
            &sessions_live,
        );
        // prometheus-client appends `_total` to counters itself.
        register(
            &mut registry,
            &mut names,
            "sluice_client_sessions_opened",
            "Client sessions opened",
            &sessions_opened,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_client_sessions_closed",
            "Client sessions closed, by reason",
            &sessions_closed,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_backend_sessions_live",
            "Live backend sessions",
            &backend_sessions_live,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_backend_sessions_opened",
            "Backend sessions opened",
            &backend_sessions_opened,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_backend_sessions_closed",
            "Backend sessions closed, by reason",
            &backend_sessions_closed,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_backend_up",
            "1 when the backend is healthy",
            &backend_up,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_requests",
            "MCP requests by era, method and outcome",
            &requests,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_request_duration_seconds",
            "Time to answer an MCP request",
            &durations,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_list_refresh",
            "Backend list refreshes by result",
            &list_refresh,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_bounded_entries",
            "Entries in the gateway's bounded internal maps (caches, indexes, pending requests), by map and owner",
            &entries,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_server_answers_dropped",
            "Client answers to server-to-client requests dropped: unknown id, or not from the client asked",
            &answers_dropped,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_requests_limited",
            "Requests refused by [limits] (POSTs answered 429, a batch's requests past the rate), by reason",
            &limited,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_config_reloads",
            "Config reloads (SIGHUP), by result: ok, or error (the old config kept)",
            &reloads,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_client_sessions_resumed",
            "Sealed sessions rebuilt from their id, by cause",
            &sessions_resumed,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_revocations_dropped",
            "Revoked sealed ids forgotten early because the revocation set was full",
            &revocations_dropped,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_cluster_up",
            "1 while Redis (cluster mode) answers",
            &cluster_up,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_connections_open",
            "Client TCP connections open",
            &connections_open,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_connections_refused",
            "Client connections refused with 503 at max_connections",
            &connections_refused,
        );
        register(
            &mut registry,
            &mut names,
            "process_resident_memory_bytes",
            "Resident set size of the gateway process",
            &rss,
        );
        Metrics {
            registry,
            sessions_live,
            sessions_opened,
            sessions_closed,
            backend_sessions_live,
            backend_sessions_opened,
            backend_sessions_closed,
            backend_up,
            requests,
            durations,
            request_series: RequestSeries::new(),
            list_refresh,
            entries,
            answers_dropped,
            limited,
            reloads,
            connections_open,
            connections_refused,
            sessions_resumed,
            revocations_dropped,
            cluster_up,
            rss,
            window: Window::default(),
            names,
            recent: Recent::default(),
        }
    }

    /// Every metric this gateway exports, by the name scrapers see.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn reloaded(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.reloads.get_or_create(&ResultLabel { result }).inc();
    }

    /// A backend a reload removed: no longer reported up or down.
    pub fn backend_removed(&self, backend: &BackendName) {
        self.backend_up.remove(&BackendLabel {
            backend: backend.to_string(),
        });
    }

    pub fn limited(&self, reason: LimitReason) {
        self.limited.get_or_create(&LimitLabel { reason }).inc();
    }

    pub fn session_opened(&self) {
        self.sessions_live.inc();
        self.sessions_opened.inc();
        self.window.opened.fetch_add(1, Ordering::Relaxed);
    }

    pub fn session_closed(&self, reason: CloseReason) {
        self.sessions_live.dec();
        self.sessions_closed
            .get_or_create(&ReasonLabel { reason })
            .inc();
        self.window.closed[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn sessions_live(&self) -> i64 {
        self.sessions_live.get()
    }

    pub fn backend_session_opened(&self, backend: &BackendName) {
        let label = BackendLabel {
            backend: backend.to_string(),
        };
        self.backend_sessions_live.get_or_create(&label).inc();
        self.window.backend_sessions.fetch_add(1, Ordering::Relaxed);
        self.backend_sessions_opened.get_or_create(&label).inc();
    }

    pub fn backend_session_closed(&self, backend: &BackendName, reason: &str) {
        let label = BackendLabel {
            backend: backend.to_string(),
        };
        self.backend_sessions_live.get_or_create(&label).dec();
        self.window.backend_sessions.fetch_sub(1, Ordering::Relaxed);
        self.backend_sessions_closed
            .get_or_create(&BackendReasonLabel {
                backend: backend.to_string(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    pub fn backend_up(&self, backend: &BackendName, up: bool) {
        self.backend_up
            .get_or_create(&BackendLabel {
                backend: backend.to_string(),
            })
            .set(i64::from(up));
    }

    pub fn list_refresh(&self, backend: &BackendName, result: &'static str) {
        self.list_refresh
            .get_or_create(&RefreshLabels {
                backend: backend.to_string(),
                result,
            })
            .inc();
    }

    /// A sealed session rebuilt from its id (it is live again).
    pub fn session_resumed(&self, cause: ResumeCause) {
        self.sessions_live.inc();
        self.sessions_resumed
            .get_or_create(&CauseLabel { cause })
            .inc();
    }

    pub fn cluster_up(&self, up: bool) {
        self.cluster_up.set(i64::from(up));
    }

    pub fn revocation_dropped(&self) {
        self.revocations_dropped.inc();
    }

    pub fn connection_opened(&self) {
        self.connections_open.inc();
    }

    pub fn connection_closed(&self) {
        self.connections_open.dec();
    }

    pub fn connection_refused(&self) {
        self.connections_refused.inc();
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

    /// A backend's sessions: (live, opened, closed).
    pub fn backend_sessions(&self, backend: &BackendName) -> (i64, u64, u64) {
        let label = BackendLabel {
            backend: backend.as_str().to_owned(),
        };
        let live = self
            .backend_sessions_live
            .get(&label)
            .map_or(0, |g| g.get());
        let opened = self
            .backend_sessions_opened
            .get(&label)
            .map_or(0, |c| c.get());
        let closed = [
            "client_closed",
            "idle",
            "probe",
            "expired",
            "exited",
            "shutdown",
        ]
        .into_iter()
        .map(|reason| {
            self.backend_sessions_closed
                .get(&BackendReasonLabel {
                    backend: label.backend.clone(),
                    reason: reason.to_owned(),
                })
                .map_or(0, |c| c.get())
        })
        .sum();
        (live, opened, closed)
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        self.rss.set(resident_bytes() as i64);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The summary log line, or None when nothing happened in the window.
    pub fn summary(&self) -> Option<String> {
        let opened = self.window.opened.swap(0, Ordering::Relaxed);
        let closed: Vec<u64> = self
            .window
            .closed
            .iter()
            .map(|c| c.swap(0, Ordering::Relaxed))
            .collect();
        let total_closed: u64 = closed.iter().sum();
        let live = self.sessions_live.get();
        if opened == 0 && total_closed == 0 && live == 0 {
            return None;
        }
        let names = ["delete", "idle", "capacity", "shutdown", "principal_cap"];
        let mut reasons = String::new();
        for (name, n) in names.iter().zip(&closed) {
            if *n > 0 {
                let sep = if reasons.is_empty() { "" } else { " " };
                let _ = write!(reasons, "{sep}{name}={n}");
            }
        }
        let backend_sessions = self.window.backend_sessions.load(Ordering::Relaxed);
        let mut line = format!("sessions live={live} new={opened} closed={total_closed}");
        if !reasons.is_empty() {
            let _ = write!(line, " ({reasons})");
        }
        let _ = write!(
            line,
            " backend_sessions={backend_sessions} rss={}MiB",
            resident_bytes() / (1024 * 1024)
        );
        Some(line)
    }
}

/// Resident set size from /proc (Linux); 0 elsewhere.
pub fn resident_bytes() -> u64 {
    resident_of("self").unwrap_or(0)
}

/// The resident set of `/proc/{pid}` (`self` for this process), in bytes.
pub(crate) fn resident_of(pid: &str) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).unwrap_or(4096))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_line_reports_the_window_and_then_goes_quiet() {
        let m = Metrics::new();
        assert_eq!(m.summary(), None, "nothing happened: no line");
        let b = BackendName::new("demo").unwrap();
        m.backend_session_opened(&b);
        for _ in 0..40 {
            m.session_opened();
        }
        for _ in 0..3 {
            m.session_closed(CloseReason::delete);
        }
        for _ in 0..35 {
            m.session_closed(CloseReason::idle);
        }
        let line = m.summary().unwrap();
        assert!(
            line.starts_with(
                "sessions live=2 new=40 closed=38 (delete=3 idle=35) backend_sessions=1 rss="
            ),
            "{line}"
        );
        // The window restarts; live sessions still deserve a line.
        assert!(
            m.summary()
                .unwrap()
                .starts_with("sessions live=2 new=0 closed=0 backend_sessions=1")
        );
        m.session_closed(CloseReason::capacity);
        m.session_closed(CloseReason::capacity);
        m.summary();
        assert_eq!(m.summary(), None);
    }

    #[test]
    fn exposition_uses_the_contract_names() {
        let m = Metrics::new();
        m.session_opened();
        m.session_closed(CloseReason::principal_cap);
        m.request(Era::Legacy, method_label("tools/call"), Outcome::ok, 0.01);
        m.request(Era::Legacy, method_label("x/unknown"), Outcome::error, 0.01);
        let text = m.render();
        for needle in [
            "sluice_client_sessions_live 0",
            "sluice_client_sessions_opened_total 1",
            r#"sluice_client_sessions_closed_total{reason="principal_cap"} 1"#,
            r#"sluice_requests_total{era="legacy",method="tools/call",outcome="ok"} 1"#,
            r#"sluice_requests_total{era="legacy",method="other",outcome="error"} 1"#,
            "sluice_request_duration_seconds_bucket",
            "process_resident_memory_bytes",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }
}
