//! OpenTelemetry traces (`[tracing]`): a span per MCP request and a child
//! per backend call. A request continues its client's W3C trace context
//! (`params._meta`, else the HTTP headers) and passes its own on to
//! backends (`_meta` for every transport, headers too over HTTP). Off by
//! default; off, no span is made and no request is read for a context.
//!
//! Spans never carry session ids, tokens, arguments or results.

mod export;
mod propagate;

use std::future::Future;
use std::time::Duration;

use futures_util::future::Either;
use http::HeaderName;
use opentelemetry::trace::{FutureExt, SpanKind, Status, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use serde_json::value::RawValue;

use crate::config::TracingSettings;
use crate::jsonrpc::Outcome;
use crate::vocab::BackendName;

pub(crate) use propagate::TRACESTATE;

/// How long shutdown waits for the last spans to be exported.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The gateway's tracer, or nothing.
pub(crate) struct Traces(Option<On>);

struct On {
    tracer: SdkTracer,
    provider: SdkTracerProvider,
}

impl Traces {
    pub(crate) fn off() -> Traces {
        Traces(None)
    }

    /// Starts the OTLP pipeline (on the current runtime).
    pub(crate) fn start(settings: &TracingSettings) -> Result<Traces, String> {
        let provider = export::provider(settings)?;
        let tracer = provider.tracer("sluice");
        Ok(Traces(Some(On { tracer, provider })))
    }

    /// Where a client's HTTP request continues a trace (its headers' trace
    /// context, or a new trace), each header's first value as `header`
    /// finds it. None when tracing is off (and no header is looked up).
    pub(crate) fn parent<'h>(
        &self,
        header: impl Fn(&HeaderName) -> Option<&'h str>,
    ) -> Option<Parent> {
        let on = self.0.as_ref()?;
        Some(Parent {
            tracer: on.tracer.clone(),
            cx: propagate::from_headers(header),
        })
    }

    /// Exports what is still queued, for at most `FLUSH_TIMEOUT`.
    pub(crate) async fn shutdown(&self) {
        let Some(on) = &self.0 else {
            return;
        };
        // The SDK blocks while the exporter's requests run on this runtime.
        let provider = on.provider.clone();
        let flush =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(FLUSH_TIMEOUT));
        if let Ok(Ok(Err(e))) = tokio::time::timeout(FLUSH_TIMEOUT * 2, flush).await {
            tracing::warn!("traces not all exported at shutdown: {e}");
        }
    }
}

/// The trace context an HTTP request arrived with, and the tracer.
#[derive(Clone)]
pub(crate) struct Parent {
    tracer: SdkTracer,
    cx: Context,
}

/// The kind of client session a request ran in (a span attribute).
#[derive(Clone, Copy)]
pub(crate) enum SessionKind {
    /// A 2025 session (`Mcp-Session-Id`).
    Session,
    /// A 2025 request with `[server] sessions = "stateless"`.
    Stateless,
    /// A 2026-07-28 request (no protocol session).
    Modern,
}

impl SessionKind {
    fn as_str(self) -> &'static str {
        match self {
            SessionKind::Session => "session",
            SessionKind::Stateless => "stateless",
            SessionKind::Modern => "modern",
        }
    }
}

/// What a request span is about.
pub(crate) struct About<'a> {
    pub(crate) method: &'a str,
    pub(crate) params: Option<&'a RawValue>,
    /// Its JSON-RPC id as the client wrote it.
    pub(crate) id: &'a RawValue,
    /// The protocol revision it speaks, when known (a session's, or
    /// 2026-07-28's).
    pub(crate) version: Option<&'a str>,
    pub(crate) session: SessionKind,
    pub(crate) namespace: &'a str,
}

/// The tracer, carried in a request span's context so that a backend call
/// inside it can start its child.
#[derive(Clone)]
struct Carried(SdkTracer);

impl Parent {
    /// Starts the span of one MCP request: its parent is the request's own
    /// `_meta` trace context if it has a valid one, else the headers'.
    pub(crate) fn request(&self, about: About<'_>) -> RequestSpan {
        let parent = propagate::from_meta(about.params).unwrap_or_else(|| self.cx.clone());
        let target = target_of(about.method, about.params);
        let name = match &target {
            Some((_, t)) => format!("{} {t}", about.method),
            None => about.method.to_owned(),
        };
        // The id as text: a string's quotes off, a number's digits.
        let id = serde_json::from_str::<String>(about.id.get())
            .unwrap_or_else(|_| about.id.get().to_owned());
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", about.method.to_owned()),
            KeyValue::new("jsonrpc.request.id", id),
            KeyValue::new("network.transport", "tcp"),
            KeyValue::new("sluice.session.kind", about.session.as_str()),
            KeyValue::new("sluice.namespace", about.namespace.to_owned()),
        ];
        if let Some(v) = about.version {
            attributes.push(KeyValue::new("mcp.protocol.version", v.to_owned()));
        }
        if let Some((key, t)) = target {
            attributes.push(KeyValue::new(key, t));
        }
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        RequestSpan {
            cx: parent
                .with_span(span)
                .with_value(Carried(self.tracer.clone())),
        }
    }
}

/// The tool, prompt or resource a request names, under the attribute
/// OpenTelemetry's MCP conventions give it; the span is named after it
/// too (`{mcp.method.name} {target}`).
fn target_of(method: &str, params: Option<&RawValue>) -> Option<(&'static str, String)> {
    let (key, field) = match method {
        "tools/call" => ("gen_ai.tool.name", "name"),
        "prompts/get" => ("gen_ai.prompt.name", "name"),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            ("mcp.resource.uri", "uri")
        }
        _ => return None,
    };
    let fields: std::collections::HashMap<&str, &RawValue> =
        serde_json::from_str(params?.get()).ok()?;
    let target: String = serde_json::from_str(fields.get(field)?.get()).ok()?;
    Some((key, target))
}

/// One MCP request's span; ended by [`RequestSpan::end`] (or when dropped).
pub(crate) struct RequestSpan {
    cx: Context,
}

impl RequestSpan {
    /// Runs `work` with this span current, so backend calls become children.
    pub(crate) fn around<F: Future>(
        span: Option<&RequestSpan>,
        work: F,
    ) -> Either<F, opentelemetry::trace::WithContext<F>> {
        match span {
            None => Either::Left(work),
            Some(s) => Either::Right(work.with_context(s.cx.clone())),
        }
    }

    /// Records the outcome (None: cancelled) and ends the span.
    pub(crate) fn end(self, outcome: Option<&Outcome>) {
        finish(&self.cx, outcome.map(Ok));
    }
}

/// A backend call's span, child of the request span it runs in.
pub(crate) struct BackendSpan {
    cx: Context,
}

impl BackendSpan {
    /// None unless a request span is current (so always None when off).
    /// `peer`: the HTTP backend's host and port (None for stdio), asked
    /// only when the span is made.
    pub(crate) fn start(
        backend: &BackendName,
        transport: &'static str,
        method: &str,
        peer: impl FnOnce() -> Option<(String, u16)>,
    ) -> Option<BackendSpan> {
        let cx = Context::map_current(|cx| cx.get::<Carried>().map(|_| cx.clone()))?;
        let tracer = &cx.get::<Carried>()?.0;
        cx.span()
            .set_attribute(KeyValue::new("sluice.backend", backend.as_str().to_owned()));
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", method.to_owned()),
            KeyValue::new("sluice.backend", backend.as_str().to_owned()),
            KeyValue::new("sluice.backend.transport", transport),
        ];
        match peer() {
            Some((host, port)) => attributes.extend([
                KeyValue::new("network.transport", "tcp"),
                KeyValue::new("server.address", host),
                KeyValue::new("server.port", i64::from(port)),
            ]),
            None => attributes.push(KeyValue::new("network.transport", "pipe")),
        }
        let span = tracer
            .span_builder(format!("{method} {backend}"))
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(tracer, &cx);
        Some(BackendSpan {
            cx: cx.with_span(span),
        })
    }

    /// `traceparent` and `tracestate` naming this span, for the backend.
    pub(crate) fn fields(&self) -> Vec<(&'static str, String)> {
        propagate::fields_of(&self.cx)
    }

    /// Records the call's outcome and ends the span.
    pub(crate) fn end<E: std::fmt::Display>(self, result: &Result<Outcome, E>) {
        let outcome = match result {
            Ok(o) => Ok(o),
            Err(e) => Err(e.to_string()),
        };
        finish(&self.cx, Some(outcome));
    }
}

/// Sets a span's outcome and ends it. Errors are `error.type`: the
/// JSON-RPC code, `tool_error` for a tool result with `isError`, or
/// `cancelled`; a gateway-side failure is `sluice.backend_error`.
fn finish(cx: &Context, outcome: Option<Result<&Outcome, String>>) {
    let span = cx.span();
    let failed = match outcome {
        None => Some(("cancelled".to_owned(), "cancelled".to_owned())),
        Some(Err(why)) => Some(("sluice.backend_error".to_owned(), why)),
        Some(Ok(Outcome::Error(e))) => {
            let code = code_of(e);
            span.set_attribute(KeyValue::new("rpc.response.status_code", code.clone()));
            Some((code.clone(), format!("JSON-RPC error {code}")))
        }
        Some(Ok(Outcome::Result(r))) if crate::jsonrpc::is_tool_error(r) => Some((
            "tool_error".to_owned(),
            "the tool reported an error".to_owned(),
        )),
        Some(Ok(Outcome::Result(_))) => None,
    };
    if let Some((kind, description)) = failed {
        span.set_attribute(KeyValue::new("error.type", kind));
        span.set_status(Status::error(description));
    }
    span.end();
}

fn code_of(error: &RawValue) -> String {
    crate::jsonrpc::error_code(error).map_or_else(|| "unknown".to_owned(), |c| c.to_string())
}
