//! The audit trail: one line per tool call, prompt get and resource read,
//! under the log target `sluice::audit` (JSON with
//! `SLUICE_LOG_FORMAT=json`): who (the principal), where (namespace and
//! backend), what (the method and the name the client used), how it ended
//! and how long it took. Never a token or a session id; the arguments and
//! the result only when the operator asks for them by the target's level
//! (`sluice::audit=debug`: they may hold what a client keeps secret), each
//! cut at `MAX_CONTENT` bytes. Off unless `SLUICE_LOG` turns the target on;
//! then a call costs one check of the target's interest.

use std::time::Instant;

use serde_json::value::RawValue;

use crate::jsonrpc::{self, Outcome};
use crate::vocab::{BackendName, NamespaceName, Principal};

pub(crate) const TARGET: &str = "sluice::audit";

/// The most of a call's arguments or result a line carries: a line per
/// call must not grow with what a client or a backend sends.
const MAX_CONTENT: usize = 2048;

/// One audited request, filled in as it is routed.
pub(super) struct Trail<'a> {
    principal: &'a Principal,
    namespace: &'a NamespaceName,
    method: &'static str,
    name: Option<String>,
    backend: Option<BackendName>,
    unlisted: bool,
    /// With the target at debug: the arguments and result are written too.
    contents: bool,
    arguments: Option<String>,
    started: Instant,
}

impl<'a> Trail<'a> {
    /// None when nobody reads the trail.
    pub(super) fn begin(
        principal: &'a Principal,
        namespace: &'a NamespaceName,
        method: &str,
    ) -> Option<Trail<'a>> {
        if !tracing::enabled!(target: TARGET, tracing::Level::INFO) {
            return None;
        }
        let method = match method {
            "tools/call" => "tools/call",
            "prompts/get" => "prompts/get",
            "resources/read" => "resources/read",
            _ => return None,
        };
        Some(Trail {
            principal,
            namespace,
            method,
            name: None,
            backend: None,
            unlisted: false,
            contents: tracing::enabled!(target: TARGET, tracing::Level::DEBUG),
            arguments: None,
            started: Instant::now(),
        })
    }

    pub(super) fn name(&mut self, name: &str) {
        self.name = Some(name.to_owned());
    }

    /// The call's `arguments`, kept when the trail carries them.
    pub(super) fn arguments(&mut self, params: Option<&RawValue>) {
        if self.contents {
            let fields = jsonrpc::parse_fields(params).unwrap_or_default();
            self.arguments = fields.get("arguments").map(|a| cut(a.get()));
        }
    }

    pub(super) fn backend(&mut self, backend: &BackendName) {
        self.backend = Some(backend.clone());
    }

    /// The name is not one the gateway lists to this caller.
    pub(super) fn unlisted(&mut self) {
        self.unlisted = true;
    }

    pub(super) fn end(self, outcome: &Outcome) {
        let result = match outcome {
            Outcome::Result(r) if self.contents => Some(cut(r.get())),
            Outcome::Error(e) if self.contents => Some(cut(e.get())),
            _ => None,
        };
        let (outcome, code) = match outcome {
            _ if self.unlisted => ("unlisted", None),
            Outcome::Error(e) => ("error", jsonrpc::error_code(e)),
            // A tool's own failure is a result with `isError` set.
            Outcome::Result(r) if self.method == "tools/call" && jsonrpc::is_tool_error(r) => {
                ("tool_error", None)
            }
            Outcome::Result(_) => ("ok", None),
        };
        tracing::info!(
            target: TARGET,
            principal = %self.principal,
            namespace = %self.namespace,
            backend = self.backend.as_ref().map(BackendName::as_str),
            method = self.method,
            name = self.name.as_deref(),
            outcome,
            code,
            duration_ms = self.started.elapsed().as_secs_f64() * 1000.0,
            arguments = self.arguments.as_deref(),
            result = result.as_deref(),
            "audit"
        );
    }
}

/// At most `MAX_CONTENT` bytes of `text`, cut at a character and marked.
fn cut(text: &str) -> String {
    if text.len() <= MAX_CONTENT {
        return text.to_owned();
    }
    let mut end = MAX_CONTENT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}
