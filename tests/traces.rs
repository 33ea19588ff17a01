//! OpenTelemetry traces: a real OTLP/HTTP receiver on loopback decodes
//! what the gateway exports with the official protobuf definitions
//! (`opentelemetry-proto`); the backends (our fault-injection fixture, over
//! HTTP and stdio) report the trace context they were sent.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::{Value, json};
use support::*;

/// A span as the collector received it (ids in hex).
#[derive(Debug, Clone)]
struct Got {
    trace_id: String,
    span_id: String,
    parent: String,
    name: String,
    kind: SpanKind,
    attributes: HashMap<String, String>,
    service: String,
    error: bool,
}

/// An OTLP/HTTP collector: `POST /v1/traces` with protobuf bodies.
struct Collector {
    addr: std::net::SocketAddr,
    spans: Arc<Mutex<Vec<Got>>>,
    posts: Arc<Mutex<u64>>,
    task: tokio::task::JoinHandle<()>,
}

impl Collector {
    async fn start() -> Collector {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let posts = Arc::new(Mutex::new(0));
        let (s, p) = (spans.clone(), posts.clone());
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |headers: axum::http::HeaderMap, body: Bytes| {
                let (spans, posts) = (s.clone(), p.clone());
                async move {
                    assert_eq!(
                        headers.get("content-type").unwrap(),
                        "application/x-protobuf"
                    );
                    *posts.lock().unwrap() += 1;
                    let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                    spans.lock().unwrap().extend(decode(request));
                    (
                        [("content-type", "application/x-protobuf")],
                        ExportTraceServiceResponse::default().encode_to_vec(),
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Collector {
            addr,
            spans,
            posts,
            task,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The spans of `trace_id`, once `n` of them have arrived (10 s at most).
    async fn trace(&self, trace_id: &str, n: usize) -> Vec<Got> {
        for _ in 0..200 {
            let got: Vec<Got> = self
                .spans
                .lock()
                .unwrap()
                .iter()
                .filter(|s| s.trace_id == trace_id)
                .cloned()
                .collect();
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "fewer than {n} spans of trace {trace_id} arrived; all: {:#?}",
            self.spans.lock().unwrap()
        );
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn decode(request: ExportTraceServiceRequest) -> Vec<Got> {
    let mut out = Vec::new();
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .map(|kv| text(kv.value.as_ref().and_then(|v| v.value.as_ref())))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                out.push(Got {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent: hex(&span.parent_span_id),
                    name: span.name.clone(),
                    kind: span.kind(),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| {
                            let v = kv.value.as_ref().and_then(|v| v.value.as_ref());
                            (kv.key.clone(), text(v))
                        })
                        .collect(),
                    service: service.clone(),
                    // STATUS_CODE_ERROR = 2
                    error: span.status.as_ref().is_some_and(|s| s.code == 2),
                });
            }
        }
    }
    out
}

fn text(v: Option<&Any>) -> String {
    match v {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

fn traceparent(trace: &str, span: &str) -> String {
    format!("00-{trace}-{span}-01")
}

/// (trace id, parent span id) of a `traceparent` value.
fn parts(traceparent: &str) -> (String, String) {
    let p: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(p.len(), 4, "{traceparent}");
    (p[1].to_owned(), p[2].to_owned())
}

fn gateway(collector: Option<&Collector>, http_backend_url: &str) -> Gateway {
    let tracing = collector.map_or_else(String::new, |c| {
        format!("[tracing]\notlp_endpoint = \"{}\"\n", c.url())
    });
    let toml = format!(
        "{tracing}{}{}",
        http_backend("web", http_backend_url, ""),
        faulty_stdio("pipe", "ok", "")
    );
    // The batch processor exports every 100 ms instead of every 5 s.
    Gateway::start_with_env(&toml, &[("OTEL_BSP_SCHEDULE_DELAY", "100")])
}

/// What the last request the HTTP backend received carried in `header`.
fn last_header(backend: &Fixture, header: &str) -> Option<String> {
    let (status, body) = http_get(&format!("http://{}", backend.addr), "/seen").unwrap();
    assert_eq!(status, 200);
    let seen: Vec<Value> = serde_json::from_str(&body).unwrap();
    let last = seen.iter().rev().find(|r| r["method"] == "POST").unwrap();
    last["headers"][header].as_str().map(str::to_owned)
}

/// A client's trace, continued from its `traceparent` header: the gateway's
/// server span is the client span's child, the backend call's client span
/// is the gateway span's child, and the backend is sent that span's id in
/// its headers and in `_meta`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_continues_through_the_gateway_to_the_backend() {
    let collector = Collector::start().await;
    let backend = faulty_http("ok", &[]);
    let gw = gateway(Some(&collector), &backend.url());
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;

    let parent = traceparent(TRACE, CLIENT_SPAN);
    let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
        "params":{"name":"web__meta","arguments":{}}});
    let headers = [
        ("traceparent", parent.as_str()),
        ("tracestate", "congo=t61rcWkgMzE"),
    ];
    let r = http.post_with(Some(&session), &headers, &call).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let seen_meta = r.json()["result"]["structuredContent"].clone();
    let sent = seen_meta["traceparent"]
        .as_str()
        .expect("_meta.traceparent");
    let (trace, backend_parent) = parts(sent);
    assert_eq!(trace, TRACE);
    assert_ne!(
        backend_parent, CLIENT_SPAN,
        "the gateway's own span, not the client's"
    );
    assert_eq!(seen_meta["tracestate"], "congo=t61rcWkgMzE");
    // The same context in the HTTP headers.
    assert_eq!(last_header(&backend, "traceparent").as_deref(), Some(sent));
    assert_eq!(
        last_header(&backend, "tracestate").as_deref(),
        Some("congo=t61rcWkgMzE")
    );

    let spans = collector.trace(TRACE, 2).await;
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let server = spans.iter().find(|s| s.kind == SpanKind::Server).unwrap();
    let client = spans.iter().find(|s| s.kind == SpanKind::Client).unwrap();
    assert_eq!(server.parent, CLIENT_SPAN);
    assert_eq!(server.name, "tools/call web__meta");
    assert_eq!(server.service, "sluice");
    for (key, value) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "web__meta"),
        ("sluice.backend", "web"),
        ("sluice.session.kind", "session"),
        ("sluice.namespace", "default"),
        // OpenTelemetry's MCP conventions.
        ("jsonrpc.request.id", "2"),
        ("mcp.protocol.version", "2025-06-18"),
        ("network.transport", "tcp"),
    ] {
        assert_eq!(
            server.attributes.get(key).map(String::as_str),
            Some(value),
            "{key}: {server:#?}"
        );
    }
    // A session id is a credential here: no `mcp.session.id` at all.
    assert!(!server.attributes.contains_key("mcp.session.id"));
    assert!(!server.error);
    assert_eq!(client.parent, server.span_id);
    assert_eq!(client.span_id, backend_parent);
    assert_eq!(client.attributes["sluice.backend"], "web");
    assert_eq!(client.attributes["sluice.backend.transport"], "http");
    let port = backend
        .url()
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(client.attributes["server.address"], "127.0.0.1");
    assert_eq!(client.attributes["server.port"], port);
    assert_eq!(client.attributes["network.transport"], "tcp");
    // No span says which session it ran in, nor carries a credential.
    for span in &spans {
        for value in span.attributes.values() {
            assert!(!value.contains(&session), "{span:#?}");
        }
    }
    drop(gw);
}

/// A context in the request's own `_meta` wins over the HTTP headers', in
/// both eras, and a stdio backend gets the gateway's span in its `_meta`.
/// A failing call is recorded as an error with its JSON-RPC code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_trace_context_wins_and_reaches_stdio_backends() {
    let collector = Collector::start().await;
    let backend = faulty_http("ok", &[]);
    let gw = gateway(Some(&collector), &backend.url());
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;

    let meta_trace = "11111111111111111111111111111111";
    let header_trace = "22222222222222222222222222222222";
    let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
        "params":{"name":"pipe__meta","arguments":{},
            "_meta":{"traceparent": traceparent(meta_trace, CLIENT_SPAN), "progressToken": 5}}});
    let header = traceparent(header_trace, "1111111111111111");
    let r = http
        .post_with(Some(&session), &[("traceparent", &header)], &call)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let messages = r.messages();
    let seen_meta = &messages.last().unwrap()["result"]["structuredContent"];
    let (trace, backend_parent) = parts(seen_meta["traceparent"].as_str().unwrap());
    assert_eq!(trace, meta_trace);
    // The rest of the client's `_meta` still reaches the backend.
    assert!(seen_meta.get("progressToken").is_some(), "{seen_meta}");
    let spans = collector.trace(meta_trace, 2).await;
    let server = spans.iter().find(|s| s.kind == SpanKind::Server).unwrap();
    let client = spans.iter().find(|s| s.kind == SpanKind::Client).unwrap();
    assert_eq!(server.parent, CLIENT_SPAN);
    assert_eq!(client.span_id, backend_parent);
    assert_eq!(client.attributes["sluice.backend.transport"], "stdio");
    assert_eq!(client.attributes["network.transport"], "pipe");
    assert!(!client.attributes.contains_key("server.address"));

    // 2026-07-28: no session; `_meta` carries the context as well.
    let modern_trace = "33333333333333333333333333333333";
    let params = json!({"name": "web__meta", "arguments": {}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "traceparent": traceparent(modern_trace, CLIENT_SPAN)}});
    let r = http.modern_call(3, "web__meta", params, &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (trace, _) = parts(
        r.json()["result"]["structuredContent"]["traceparent"]
            .as_str()
            .unwrap(),
    );
    assert_eq!(trace, modern_trace);
    let spans = collector.trace(modern_trace, 2).await;
    let server = spans.iter().find(|s| s.kind == SpanKind::Server).unwrap();
    assert_eq!(server.attributes["sluice.session.kind"], "modern");
    assert_eq!(server.attributes["mcp.protocol.version"], "2026-07-28");

    // An unknown tool: the request span is an error with its code.
    let failing = "44444444444444444444444444444444";
    let header = traceparent(failing, CLIENT_SPAN);
    let unknown = json!({"jsonrpc":"2.0","id":4,"method":"tools/call",
        "params":{"name":"web__nothing","arguments":{}}});
    let r = http
        .post_with(Some(&session), &[("traceparent", &header)], &unknown)
        .await;
    assert!(r.json()["error"].is_object(), "{}", r.body);
    let spans = collector.trace(failing, 1).await;
    assert!(spans[0].error, "{spans:#?}");
    assert_eq!(spans[0].attributes["error.type"], "-32602");
    assert_eq!(spans[0].attributes["rpc.response.status_code"], "-32602");
    drop(gw);
}

/// Tracing off (the default): nothing is exported, and the backend gets
/// the client's `_meta` exactly as sent and none of its trace headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_nothing_is_traced_and_meta_passes_through() {
    let backend = faulty_http("ok", &[]);
    let gw = gateway(None, &backend.url());
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    let parent = traceparent(TRACE, CLIENT_SPAN);
    let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
        "params":{"name":"web__meta","arguments":{},"_meta":{"traceparent": parent}}});
    let r = http
        .post_with(Some(&session), &[("traceparent", &parent)], &call)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["result"]["structuredContent"],
        json!({"traceparent": parent}),
        "{}",
        r.body
    );
    assert_eq!(
        r.json()["result"]["structuredContent"],
        json!({"traceparent": parent})
    );
    assert_eq!(last_header(&backend, "traceparent"), None);
    drop(gw);
}

/// Spans queued when the gateway stops are exported before it exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_are_flushed_at_shutdown() {
    let collector = Collector::start().await;
    let backend = faulty_http("ok", &[]);
    let toml = format!(
        "[tracing]\notlp_endpoint = \"{}\"\nservice_name = \"edge-1\"\n{}",
        collector.url(),
        http_backend("web", &backend.url(), "")
    );
    // Far longer than the test: only the shutdown flush can send them.
    let gw = Gateway::start_with_env(&toml, &[("OTEL_BSP_SCHEDULE_DELAY", "600000")]);
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    let parent = traceparent(TRACE, CLIENT_SPAN);
    for id in 0..5 {
        let echo = json!({"jsonrpc":"2.0","id":id + 2,"method":"tools/call",
            "params":{"name":"web__echo","arguments":{"text":"x"}}});
        let r = http
            .post_with(Some(&session), &[("traceparent", &parent)], &echo)
            .await;
        assert_eq!(r.status, 200);
    }
    assert_eq!(*collector.posts.lock().unwrap(), 0);
    assert_eq!(gw.stop(), Some(0));
    let spans = collector.trace(TRACE, 10).await;
    assert_eq!(spans.len(), 10);
    assert!(spans.iter().all(|s| s.service == "edge-1"));
}
