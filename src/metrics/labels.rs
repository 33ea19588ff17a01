//! The label values and label sets the metrics are kept by, and the one
//! label a client's request could grow (its method) held to a known list.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};

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

/// Why a client connection was closed to make room (`front/places.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum ShedReason {
    /// Displaced at the cap: it had sent no complete request head.
    no_request,
    /// Displaced at the cap: a keep-alive connection idle between requests.
    idle,
    /// Under pressure, it sent no request head within the shortened
    /// header-read timeout.
    head_timeout,
    /// Displaced at the cap: its request's body had fallen behind the
    /// floor rate (`front/places.rs`, `FLOOR`).
    slow_body,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ShedLabel {
    pub(super) reason: ShedReason,
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
pub(super) struct CauseLabel {
    pub(super) cause: ResumeCause,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Outcome {
    ok,
    error,
    rejected,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReasonLabel {
    pub(super) reason: CloseReason,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BackendLabel {
    pub(super) backend: String,
}

/// A session's revision, under the MCP conventions' attribute name
/// (`mcp.protocol.version`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct VersionLabel {
    pub(super) mcp_protocol_version: &'static str,
}

/// Why a backend session ended without the gateway asking, so that
/// another is started (`sluice_backend_restarts_total`). More reasons may
/// come (a sandbox's limits); each is one variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum RestartReason {
    /// The process exited (with a status code).
    exited,
    /// The process was killed by a signal.
    signal,
    /// It closed its output (stdout, the HTTP connection or event stream)
    /// while it ran.
    closed,
    /// It failed its handshake or a health check, and the gateway ended it.
    unhealthy,
    /// Its sandbox's cgroup killed it over `memory`.
    memory,
    /// It ended after its sandbox refused it a process (`processes`).
    pids,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RestartLabels {
    pub(super) backend: String,
    pub(super) reason: RestartReason,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BackendReasonLabel {
    pub(super) backend: String,
    pub(super) reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RequestLabels {
    pub(super) era: &'static str,
    pub(super) method: &'static str,
    pub(super) outcome: Outcome,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct MethodLabel {
    pub(super) method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EntriesLabels {
    pub(super) map: &'static str,
    pub(super) owner: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct DroppedLabels {
    pub(super) reason: &'static str,
}

/// Why a request was refused by `[limits]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum LimitReason {
    rate,
    concurrency,
    streams,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LimitLabel {
    pub(super) reason: LimitReason,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ResultLabel {
    pub(super) result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RefreshLabels {
    pub(super) backend: String,
    pub(super) result: &'static str,
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
pub struct Method(pub(super) u8);

impl Method {
    pub(super) const OTHER: Method = Method(KNOWN_METHODS.len() as u8);
    pub(super) const COUNT: usize = KNOWN_METHODS.len() + 1;
    /// Its place in `KNOWN_METHODS` (held by a test).
    pub const TOOLS_CALL: Method = Method(3);

    pub(super) fn label(self) -> &'static str {
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

/// `mcp.server.operation.duration`'s attributes, as Prometheus labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OperationLabels {
    pub(super) mcp_method_name: &'static str,
    pub(super) gen_ai_tool_name: String,
    pub(super) error_type: &'static str,
}

/// `mcp.client.operation.duration`'s, and the backend asked.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BackendOperationLabels {
    pub(super) mcp_method_name: &'static str,
    pub(super) gen_ai_tool_name: String,
    pub(super) error_type: &'static str,
    pub(super) backend: String,
}
