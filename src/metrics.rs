//! The contract's Prometheus metrics, and the periodic summary line.
//!
//! `Metrics` registers every series here; what records them is by area:
//! client connections and sessions (`clients`), backends (`backends`),
//! requests and the status page's recent window (`requests`), the
//! gateway's own state (`gateway`), the summary line (`summary`), all kept
//! by the labels of `labels`, and served in the text format a scraper asks
//! for (`exposition`).

mod backends;
mod clients;
mod exposition;
mod gateway;
mod labels;
mod operations;
mod requests;
mod summary;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

pub use exposition::Format;
use labels::{
    BackendLabel, BackendReasonLabel, CauseLabel, DroppedLabels, EntriesLabels, LimitLabel,
    MethodLabel, ReasonLabel, RefreshLabels, RequestLabels, RestartLabels, ResultLabel, ShedLabel,
    VersionLabel,
};
pub use labels::{
    CloseReason, LimitReason, Method, Outcome, RestartReason, ResumeCause, ShedReason, method_label,
};
pub use operations::{ErrorType, Series};
pub use requests::{Counts, LATENCY_BOUNDS_US};
use requests::{Recent, RequestSeries};
use summary::Window;

pub struct Metrics {
    registry: Registry,
    sessions_live: Gauge,
    sessions_opened: Counter,
    sessions_closed: Family<ReasonLabel, Counter>,
    /// `mcp.server.session.duration`, by revision.
    session_durations: Family<VersionLabel, Histogram>,
    backend_sessions_live: Family<BackendLabel, Gauge>,
    backend_sessions_opened: Family<BackendLabel, Counter>,
    backend_sessions_closed: Family<BackendReasonLabel, Counter>,
    backend_up: Family<BackendLabel, Gauge>,
    backend_restarts: Family<RestartLabels, Counter>,
    requests: Family<RequestLabels, Counter>,
    durations: Family<MethodLabel, Histogram>,
    request_series: RequestSeries,
    /// `mcp.server.operation.duration` and `mcp.client.operation.duration`.
    operations: operations::Operations,
    list_refresh: Family<RefreshLabels, Counter>,
    oauth_grants: Family<BackendLabel, Gauge>,
    oauth_flows: Family<RefreshLabels, Counter>,
    entries: Family<EntriesLabels, Gauge>,
    answers_dropped: Family<DroppedLabels, Counter>,
    limited: Family<LimitLabel, Counter>,
    reloads: Family<ResultLabel, Counter>,
    connections_open: Gauge,
    connections_refused: Counter,
    connections_refused_per_peer: Counter,
    connections_shed: Family<ShedLabel, Counter>,
    sessions_resumed: Family<CauseLabel, Counter>,
    revocations_dropped: Counter,
    /// Registered only in cluster mode (`with_cluster`): a gateway without
    /// Redis has no Redis to be up or down.
    cluster_up: Gauge,
    rss: Gauge,
    /// `crate::budget::BODIES`: bytes held (read at each scrape), and
    /// bodies refused past it.
    bodies_held: Gauge,
    bodies_refused: Counter,
    /// Counters since the last summary line.
    window: Window,
    /// Every metric's name as scraped, in registration order.
    names: Vec<String>,
    /// Requests and their latencies, for the status page's recent window.
    recent: Recent,
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
        // The conventions' advised bounds, then the hours sessions live.
        let session_durations = Family::<VersionLabel, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
                900.0, 3600.0, 14400.0, 86400.0,
            ])
        });
        let backend_sessions_live = Family::<BackendLabel, Gauge>::default();
        let backend_sessions_opened = Family::<BackendLabel, Counter>::default();
        let backend_sessions_closed = Family::<BackendReasonLabel, Counter>::default();
        let backend_up = Family::<BackendLabel, Gauge>::default();
        let backend_restarts = Family::<RestartLabels, Counter>::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let durations = Family::<MethodLabel, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
            ])
        });
        let operations = operations::Operations::new();
        let list_refresh = Family::<RefreshLabels, Counter>::default();
        let oauth_grants = Family::<BackendLabel, Gauge>::default();
        let oauth_flows = Family::<RefreshLabels, Counter>::default();
        let entries = Family::<EntriesLabels, Gauge>::default();
        let answers_dropped = Family::<DroppedLabels, Counter>::default();
        let limited = Family::<LimitLabel, Counter>::default();
        let reloads = Family::<ResultLabel, Counter>::default();
        let connections_open = Gauge::default();
        let connections_refused = Counter::default();
        let connections_refused_per_peer = Counter::default();
        let connections_shed = Family::<ShedLabel, Counter>::default();
        let sessions_resumed = Family::<CauseLabel, Counter>::default();
        let revocations_dropped = Counter::default();
        let cluster_up = Gauge::default();
        let rss = Gauge::default();
        let bodies_held = Gauge::default();
        let bodies_refused = Counter::default();

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
            "mcp_server_session_duration_seconds",
            "How long client sessions lived, from initialize to their end (mcp.server.session.duration)",
            &session_durations,
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
            "sluice_backend_restarts",
            "Backend sessions (a stdio child, an HTTP session) that ended without the gateway asking, so that another is started, by reason",
            &backend_restarts,
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
            "mcp_server_operation_duration_seconds",
            "Time to answer a client's MCP request, by method, tool and error type (mcp.server.operation.duration)",
            &operations.server,
        );
        register(
            &mut registry,
            &mut names,
            "mcp_client_operation_duration_seconds",
            "Time a backend took to answer the gateway's MCP request, by method, tool, error type and backend (mcp.client.operation.duration)",
            &operations.client,
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
            "sluice_oauth_grants",
            "Principals' grants held per backend (oauth.flow = authorization_code)",
            &oauth_grants,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_oauth_flows",
            "Authorization code flows ended, by result",
            &oauth_flows,
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
            "sluice_connections_open",
            "Client TCP connections open",
            &connections_open,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_connections_refused",
            "Client connections refused with 503 at max_connections, none of those open displaceable",
            &connections_refused,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_connections_refused_per_peer",
            "Client connections refused with 503 at max_connections_per_peer, none of the address's own displaceable",
            &connections_refused_per_peer,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_connections_shed",
            "Client connections closed to make room for others, by reason",
            &connections_shed,
        );
        register(
            &mut registry,
            &mut names,
            "process_resident_memory_bytes",
            "Resident set size of the gateway process",
            &rss,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_inflight_body_bytes",
            "Bytes of large backend bodies held now, under max_inflight_body_bytes",
            &bodies_held,
        );
        register(
            &mut registry,
            &mut names,
            "sluice_bodies_refused",
            "Backend bodies not read because they would take max_inflight_body_bytes past its limit",
            &bodies_refused,
        );
        Metrics {
            registry,
            sessions_live,
            sessions_opened,
            sessions_closed,
            session_durations,
            backend_sessions_live,
            backend_sessions_opened,
            backend_sessions_closed,
            backend_up,
            backend_restarts,
            requests,
            durations,
            request_series: RequestSeries::new(),
            operations,
            list_refresh,
            oauth_grants,
            oauth_flows,
            entries,
            answers_dropped,
            limited,
            reloads,
            connections_open,
            connections_refused,
            connections_refused_per_peer,
            connections_shed,
            sessions_resumed,
            revocations_dropped,
            cluster_up,
            rss,
            bodies_held,
            bodies_refused,
            window: Window::default(),
            names,
            recent: Recent::default(),
        }
    }

    /// Cluster mode: `sluice_cluster_up` is exported (0 until Redis
    /// first answers).
    pub fn with_cluster(mut self) -> Metrics {
        register(
            &mut self.registry,
            &mut self.names,
            "sluice_cluster_up",
            "1 while Redis (cluster mode) answers",
            &self.cluster_up,
        );
        self
    }

    /// A backend body refused by the body budget (`crate::budget`).
    pub fn body_refused(&self) {
        self.bodies_refused.inc();
    }

    /// Every metric this gateway exports, by the name scrapers see.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The exposition in Prometheus's classic text format (0.0.4).
    pub fn render(&self) -> String {
        self.render_as(Format::Prometheus)
    }

    /// The exposition in `format`.
    pub fn render_as(&self, format: Format) -> String {
        self.rss.set(resident_bytes() as i64);
        self.bodies_held
            .set(i64::try_from(crate::budget::BODIES.held()).unwrap_or(i64::MAX));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        match format {
            Format::OpenMetrics => out,
            Format::Prometheus => exposition::classic(&out),
        }
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
mod tests;
