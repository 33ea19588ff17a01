//! The MCP semantic conventions' operation durations: what the gateway
//! answers as a server (`mcp.server.operation.duration`) and what it asks
//! a backend as a client (`mcp.client.operation.duration`), by method,
//! tool and error type.
//!
//! Every label is bounded: the method by `KNOWN_METHODS`, the error type by
//! a fixed list, and the tool by what a backend's catalog listed (callers
//! pass a name only once its call has reached the backend), with at most
//! `MAX_TOOLS` names per histogram; past that, `_OTHER`.
//!
//! A call observes a `Series` its caller keeps: a family's lookup hashes
//! the labels with SipHash and takes the family's lock, several hundred
//! instructions on every call.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

use super::Metrics;
use super::labels::{BackendOperationLabels, Method, OperationLabels};
use crate::jsonrpc::{self, Outcome};

/// Series with a tool name per histogram; a catalog that keeps making new
/// names shares `_OTHER` past this many.
pub(super) const MAX_TOOLS: usize = 2_000;

/// The label value for a name past `MAX_TOOLS` or an unknown error code.
const OTHER: &str = "_OTHER";

/// The conventions' advised bucket bounds.
pub(super) const BOUNDS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// How an operation failed, as `error.type` says it: the JSON-RPC error's
/// code, a tool's own failure, or why a backend gave no answer. Held as
/// its label (16 bytes, and none more in an `Option`: it rides in every
/// call's future).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorType(&'static str);

impl ErrorType {
    /// A result with `isError`: the tool ran and failed.
    pub const TOOL_ERROR: ErrorType = ErrorType("tool_error");
    /// The client left, or cancelled the request.
    pub const CANCELLED: ErrorType = ErrorType("cancelled");

    /// What `outcome` says of a failure (None: it succeeded); a
    /// `tools/call`'s result may say the tool failed.
    pub fn of(outcome: &Outcome, tools_call: bool) -> Option<ErrorType> {
        match outcome {
            Outcome::Error(e) => Some(ErrorType::code(
                jsonrpc::error_code(e).unwrap_or(jsonrpc::INTERNAL_ERROR),
            )),
            Outcome::Result(r) if tools_call && jsonrpc::is_tool_error(r) => {
                Some(ErrorType::TOOL_ERROR)
            }
            Outcome::Result(_) => None,
        }
    }

    /// A JSON-RPC error code: the specification's, or `_OTHER`.
    pub fn code(code: i64) -> ErrorType {
        ErrorType(match code {
            -32700 => "-32700",
            -32600 => "-32600",
            -32601 => "-32601",
            -32602 => "-32602",
            -32603 => "-32603",
            -32000 => "-32000",
            -32001 => "-32001",
            -32002 => "-32002",
            -32020 => "-32020",
            -32021 => "-32021",
            -32022 => "-32022",
            -32042 => "-32042",
            -32800 => "-32800",
            _ => OTHER,
        })
    }

    /// Why a backend gave no answer, as `UpstreamError::reason` says.
    pub fn transport(reason: &'static str) -> ErrorType {
        ErrorType(reason)
    }

    pub(super) fn label(self) -> &'static str {
        self.0
    }
}

/// The two operation histograms and what bounds their tool labels.
pub(super) struct Operations {
    pub(super) server: Family<OperationLabels, Histogram>,
    pub(super) client: Family<BackendOperationLabels, Histogram>,
    /// The server histogram's successes by method, for methods without a
    /// tool label: looked up once.
    plain: Box<[OnceLock<Histogram>]>,
    server_tools: AtomicUsize,
    client_tools: AtomicUsize,
}

impl Operations {
    pub(super) fn new() -> Operations {
        let histogram = || Histogram::new(BOUNDS);
        Operations {
            server: Family::new_with_constructor(histogram),
            client: Family::new_with_constructor(histogram),
            plain: (0..Method::COUNT).map(|_| OnceLock::new()).collect(),
            server_tools: AtomicUsize::new(0),
            client_tools: AtomicUsize::new(0),
        }
    }
}

/// A call's series in both histograms, found before the call (while the
/// names it is labelled by are at hand) and observed after it.
#[derive(Clone)]
pub struct Series(Arc<Labelled>);

/// The labels of one operation's series, and its successes' histograms
/// (made on first use).
struct Labelled {
    method: Method,
    backend: Box<str>,
    /// The name the client called (`tools/call` only; else empty).
    exposed: Box<str>,
    /// The backend's own name of it.
    original: Box<str>,
    served: OnceLock<Histogram>,
    asked: OnceLock<Histogram>,
}

impl Metrics {
    /// An operation the gateway answered as a server, outside a `Series`
    /// (a request no backend answered by name: lists, `ping`,
    /// `initialize`, or a call refused before its backend).
    pub fn server_operation(&self, method: Method, error: Option<ErrorType>, seconds: f64) {
        let ops = &self.operations;
        let success = &ops.plain[usize::from(method.0)];
        let labels = |error| server_labels(method, "", error);
        observe(&ops.server, success, labels, error, seconds);
    }

    /// The series of `method` forwarded to `backend`; for a `tools/call`,
    /// `exposed` is the name the client called and `original` the
    /// backend's (empty otherwise). Callers name a tool only once its
    /// catalog has listed it, so no other name becomes a label; they keep
    /// the series for the calls that follow (see `router::observed`).
    pub fn series(&self, method: Method, backend: &str, exposed: &str, original: &str) -> Series {
        Series(Arc::new(Labelled {
            method,
            backend: backend.into(),
            exposed: exposed.into(),
            original: original.into(),
            served: OnceLock::new(),
            asked: OnceLock::new(),
        }))
    }

    /// How the client's request ended, as the server answered it.
    pub fn served(&self, series: &Series, error: Option<ErrorType>, seconds: f64) {
        let (ops, l) = (&self.operations, &*series.0);
        let labels = |error| {
            let tool = bounded(&ops.server_tools, &l.exposed, |t| {
                ops.server.get(&server_labels(l.method, t, error)).is_some()
            });
            server_labels(l.method, tool, error)
        };
        observe(&ops.server, &l.served, labels, error, seconds);
    }

    /// How the gateway's request to the backend ended.
    pub fn asked(&self, series: &Series, error: Option<ErrorType>, seconds: f64) {
        let (ops, l) = (&self.operations, &*series.0);
        let labels = |error| {
            let tool = bounded(&ops.client_tools, &l.original, |t| {
                let labels = client_labels(l.method, &l.backend, t, error);
                ops.client.get(&labels).is_some()
            });
            client_labels(l.method, &l.backend, tool, error)
        };
        observe(&ops.client, &l.asked, labels, error, seconds);
    }
}

/// Observes `seconds` in `family`: a success in the series `success`
/// keeps (looked up once), a failure in its error type's series.
/// `labels`: a series' labels by its error type's label.
fn observe<L>(
    family: &Family<L, Histogram>,
    success: &OnceLock<Histogram>,
    labels: impl Fn(&'static str) -> L,
    error: Option<ErrorType>,
    seconds: f64,
) where
    L: Clone + std::hash::Hash + Eq,
{
    match error {
        None => success
            .get_or_init(|| family.get_or_create(&labels("")).clone())
            .observe(seconds),
        Some(e) => family.get_or_create(&labels(e.label())).observe(seconds),
    }
}

/// `tool`, unless it would make a new series past `MAX_TOOLS` (`_OTHER`
/// then); `known` says whether the histogram has that series already.
fn bounded<'t>(count: &AtomicUsize, tool: &'t str, known: impl Fn(&str) -> bool) -> &'t str {
    match tool {
        "" => "",
        t if known(t) => t,
        t if count.fetch_add(1, Ordering::Relaxed) < MAX_TOOLS => t,
        _ => OTHER,
    }
}

fn server_labels(method: Method, tool: &str, error: &'static str) -> OperationLabels {
    OperationLabels {
        mcp_method_name: method.label(),
        gen_ai_tool_name: tool.to_owned(),
        error_type: error,
    }
}

fn client_labels(
    method: Method,
    backend: &str,
    tool: &str,
    error: &'static str,
) -> BackendOperationLabels {
    BackendOperationLabels {
        mcp_method_name: method.label(),
        gen_ai_tool_name: tool.to_owned(),
        error_type: error,
        backend: backend.to_owned(),
    }
}
