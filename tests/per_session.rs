//! Per-session isolation with stdio backends: each client session gets its
//! own child, which ends with the client session (any path) or when idle
//! past the backend's idle_ttl, and never beyond the backend's bound.

mod support;

use std::time::Duration;

use serde_json::json;
use support::*;

fn config(server: &str, backend_extra: &str) -> String {
    format!(
        "[server]\n{server}\n{}isolation = \"per-session\"\n{backend_extra}\n",
        demo_backend("demo")
    )
}

async fn counter(http: &Http, sid: &str) -> String {
    let r = http
        .call(
            sid,
            7,
            "tools/call",
            json!({"name":"demo__counter","arguments":{}}),
        )
        .await;
    text_of(&r.json()).to_owned()
}

fn child_pids(gw: &Gateway) -> Vec<u32> {
    children(gw.pid()).into_iter().map(|(p, _)| p).collect()
}

/// Two clients, two children, independent state; DELETE ends one child,
/// the idle TTL the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_session_gets_its_own_child() {
    let gw = Gateway::start(&config("session_idle_ttl = \"1500ms\"", ""));
    // The health probe's child is gone once the backend is ready.
    wait_until(Duration::from_secs(10), || child_pids(&gw).is_empty());
    let http = Http::new(gw.url("/mcp"));
    let a = http.initialize().await;
    let b = http.initialize().await;
    assert!(child_pids(&gw).is_empty(), "children are opened lazily");
    assert_eq!(counter(&http, &a).await, "1");
    assert_eq!(counter(&http, &a).await, "2");
    assert_eq!(counter(&http, &b).await, "1");
    let kids = child_pids(&gw);
    assert_eq!(kids.len(), 2);
    let m = gw.metrics();
    assert_eq!(
        m.get(r#"sluice_backend_sessions_live{backend="demo"}"#),
        2.0
    );

    // Lists come from the cache: no child is opened for them.
    let r = http.call(&a, 8, "tools/list", json!({})).await;
    assert_eq!(r.json()["result"]["tools"].as_array().unwrap().len(), 4);
    assert_eq!(child_pids(&gw).len(), 2);

    assert_eq!(http.delete(&a).await, 200);
    wait_until(Duration::from_secs(10), || child_pids(&gw).len() == 1);
    let left = child_pids(&gw);
    // B goes idle: its session and its child end without a word from B.
    wait_until(Duration::from_secs(20), || child_pids(&gw).is_empty());
    for k in kids {
        assert!(!exists(k), "child {k} was not reaped");
    }
    assert!(left.iter().all(|k| !exists(*k)));
    let m = gw.metrics();
    assert_eq!(
        m.get(r#"sluice_backend_sessions_closed_total{backend="demo",reason="client_closed"}"#),
        2.0
    );
    assert_eq!(
        m.get(r#"sluice_backend_sessions_live{backend="demo"}"#),
        0.0
    );
    assert_eq!(m.get("sluice_client_sessions_live"), 0.0);
}

/// A backend session idle past the backend's idle_ttl ends even while its
/// client session lives; the next call opens a fresh one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_idle_ttl_ends_the_child() {
    let gw = Gateway::start(&config("", "idle_ttl = \"1s\""));
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    assert_eq!(counter(&http, &sid).await, "1");
    let first = child_pids(&gw);
    assert_eq!(first.len(), 1);
    wait_until(Duration::from_secs(10), || child_pids(&gw).is_empty());
    assert!(!exists(first[0]));
    assert_eq!(
        counter(&http, &sid).await,
        "1",
        "a new backend session starts over"
    );
    assert_eq!(
        gw.metrics()
            .get(r#"sluice_backend_sessions_closed_total{backend="demo",reason="idle"}"#),
        1.0
    );
}

/// At the backend's max_sessions a new client is refused with an error
/// naming the backend; nothing is opened beyond the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_sessions_bounds_backend_sessions() {
    let gw = Gateway::start(&config("", "max_sessions = 2"));
    let http = Http::new(gw.url("/mcp"));
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(http.initialize().await);
    }
    assert_eq!(counter(&http, &ids[0]).await, "1");
    assert_eq!(counter(&http, &ids[1]).await, "1");
    let r = http
        .call(
            &ids[2],
            9,
            "tools/call",
            json!({"name":"demo__counter","arguments":{}}),
        )
        .await;
    let msg = r.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        msg.contains("`demo`") && msg.contains("limit of 2"),
        "{msg}"
    );
    assert_eq!(child_pids(&gw).len(), 2);
    // A slot frees when its client leaves.
    assert_eq!(http.delete(&ids[0]).await, 200);
    wait_until(Duration::from_secs(10), || child_pids(&gw).len() == 1);
    assert_eq!(counter(&http, &ids[2]).await, "1");
}

/// Shutdown ends every per-session child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_per_session_children() {
    let gw = Gateway::start(&config("", ""));
    let http = Http::new(gw.url("/mcp"));
    for _ in 0..3 {
        let sid = http.initialize().await;
        counter(&http, &sid).await;
    }
    let kids = child_pids(&gw);
    assert_eq!(kids.len(), 3);
    assert_eq!(gw.stop(), Some(0));
    for k in kids {
        assert!(!exists(k));
    }
}
