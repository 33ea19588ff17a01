//! Issue 39, item 2: a 2026-07-28 backend's lists are read once, not per
//! call or per client list, while the backend announces their changes on
//! the gateway's `subscriptions/listen` stream; a change announced costs
//! one read more.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "lists-test", "version": "0"}
    })
}

/// The backend's list reads the gateway made so far, whatever they found.
fn reads(gw: &Gateway) -> f64 {
    let m = gw.metrics();
    ["changed", "unchanged", "error"]
        .iter()
        .map(|r| {
            m.get_or_untouched(&format!(
                r#"sluice_list_refresh_total{{backend="fx",result="{r}"}}"#
            ))
        })
        .sum()
}

async fn call(http: &Http, id: u64) {
    let params = json!({"name": "fx__test_simple_text", "arguments": {}, "_meta": meta()});
    let r = http
        .modern_call(id, "fx__test_simple_text", params, &[])
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let m = r.messages().pop().unwrap();
    assert!(m["result"]["content"].is_array(), "{m}");
}

async fn list(http: &Http, id: u64) -> Value {
    let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":{"_meta": meta()}});
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
    ];
    let r = http.post_with(None, &headers, &body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let page = r.messages().pop().unwrap()["result"].clone();
    assert!(
        page["tools"].as_array().is_some_and(|t| !t.is_empty()),
        "{page}"
    );
    page
}

/// Has the backend announce a tools change, and waits until the gateway
/// has passed it on to a client's GET stream: by then the gateway has seen
/// it (and, since a listen stream opens with its acknowledgement, knows
/// what the backend announces).
async fn announce_change(http: &Http, stream: &mut ::reqwest::Response, id: u64) {
    let params = json!({"name": "fx__test_trigger_tool_change", "arguments": {}, "_meta": meta()});
    let r = http
        .modern_call(id, "fx__test_trigger_tool_change", params, &[])
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut seen = String::new();
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = stream.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("notifications/tools/list_changed") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(got, Ok(true), "stream so far: {seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_backends_lists_are_read_once_while_it_announces_changes() {
    // `ttlMs: 0` on every list, as the SDKs send by default.
    let fx = Fixture::start_example(
        "conformance_fixture",
        "127.0.0.1:0",
        &["--list-ttl-ms", "0"],
    );
    let gw = Gateway::start(&http_backend("fx", &fx.url(), ""));
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let mut stream = http.get_stream(&sid).await;
    assert_eq!(stream.status(), 200);
    announce_change(&http, &mut stream, 1).await;

    // A session of 20 calls and 2 list requests: one read at most.
    let before = reads(&gw);
    let first = list(&http, 10).await;
    assert_eq!(first["ttlMs"], 0, "the gateway says no more than its parts");
    for id in 11..21 {
        call(&http, id).await;
    }
    list(&http, 21).await;
    for id in 22..32 {
        call(&http, id).await;
    }
    let session = reads(&gw) - before;
    assert!(
        session <= 1.0,
        "{session} list reads for 20 calls and 2 lists"
    );

    // A change announced: exactly one read more, for the lists and calls
    // that follow.
    announce_change(&http, &mut stream, 40).await;
    let before = reads(&gw);
    list(&http, 41).await;
    for id in 42..52 {
        call(&http, id).await;
    }
    list(&http, 52).await;
    assert_eq!(reads(&gw) - before, 1.0);
}
