//! How sessions end and what keeps them alive: GET streams that are
//! writable, cancellation, and the stateless mode.

mod support;

use std::time::Duration;

use serde_json::json;
use support::*;

fn config(server: &str) -> String {
    format!("[server]\n{server}\n{}", demo_backend("demo"))
}

async fn open_stream(http: &Http, sid: &str) -> reqwest::Response {
    let r = http.get_stream(sid).await;
    assert_eq!(r.status(), 200);
    r
}

/// A GET stream that is being read keeps its session alive past the idle
/// TTL; once its client vanishes, the session ages out like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_stream_keeps_its_session_and_a_dead_one_does_not() {
    let gw = Gateway::start(&config("session_idle_ttl = \"1500ms\""));
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let mut stream = open_stream(&http, &sid).await;
    // Read keep-alives for three TTLs: the session must survive.
    let reading = tokio::time::timeout(Duration::from_millis(4500), async {
        while stream.chunk().await.unwrap().is_some() {}
    })
    .await;
    assert!(
        reading.is_err(),
        "the stream ended while its client was reading"
    );
    assert_eq!(http.call(&sid, 2, "ping", json!({})).await.status, 200);

    // The client vanishes without a word (connection dropped).
    drop(stream);
    wait_until(Duration::from_secs(20), || {
        gw.metrics().get("sluice_client_sessions_live") == 0.0
    });
    assert_eq!(http.call(&sid, 3, "ping", json!({})).await.status, 404);
    assert_eq!(
        gw.metrics()
            .get(r#"sluice_client_sessions_closed_total{reason="idle"}"#),
        1.0
    );
}

/// The client's notifications/cancelled ends its request: no response is
/// sent for it, the session is free again, and other requests go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_reaches_the_request() {
    let gw = Gateway::start(&config(""));
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let slow = http.start_slow_call(&sid, json!("slow-1"), 60_000).await;
    let r = http
        .post(
            Some(&sid),
            &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow-1","reason":"user"}}),
        )
        .await;
    assert_eq!(r.status, 202);
    let body = tokio::time::timeout(Duration::from_secs(10), slow.text())
        .await
        .expect("the cancelled request's stream ended")
        .unwrap();
    assert!(
        !body.contains(r#""id":"slow-1""#),
        "a cancelled request gets no response: {body}"
    );
    let r = http
        .call(
            &sid,
            2,
            "tools/call",
            json!({"name":"demo__echo","arguments":{"text":"after"}}),
        )
        .await;
    assert_eq!(text_of(&r.json()), "after");
}

/// `sessions = "stateless"`: no session id is issued, every request stands
/// alone, a stale id is ignored, and nothing is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_mode_keeps_nothing() {
    let gw = Gateway::start(&config("sessions = \"stateless\""));
    let http = Http::new(gw.url("/mcp"));
    for i in 0..200 {
        let r = http.post(None, &init_request(i)).await;
        assert_eq!(r.status, 200);
        assert!(r.session_id().is_none());
    }
    let r = http
        .post(None, &json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"plain"}}}))
        .await;
    assert_eq!(text_of(&r.json()), "plain");
    let stale = http
        .post(
            Some("stale-id-from-before-a-restart"),
            &json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
        )
        .await;
    assert_eq!(stale.status, 200);
    assert_eq!(stale.json()["result"]["tools"].as_array().unwrap().len(), 4);
    let get = http.get_stream("none").await;
    assert_eq!(get.status(), 405);
    let m = gw.metrics();
    assert_eq!(m.get("sluice_client_sessions_live"), 0.0);
    assert_eq!(m.get("sluice_client_sessions_opened_total"), 0.0);
}

/// An open GET stream does not hold up a graceful shutdown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_is_not_held_up_by_streams() {
    let gw = Gateway::start(&config(""));
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let stream = open_stream(&http, &sid).await;
    assert_eq!(gw.stop(), Some(0), "a GET stream must not hold up shutdown");
    drop(stream);
}
