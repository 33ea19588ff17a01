//! Streamable HTTP backends: every backend session has an owner, a bound
//! and an end. The stateful test backend stands in for a browser-backed
//! server (one context per session) and counts its live sessions itself.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

async fn call_tool(http: &Http, sid: &str, name: &str, args: Value) -> Value {
    http.call(
        sid,
        3,
        "tools/call",
        json!({"name": name, "arguments": args}),
    )
    .await
    .json()
}

/// The seed: clients connect, list tools, call a tool and leave without
/// DELETE, with list refreshes in between. Shared isolation: the backend
/// never holds more than one session, and the gateway opened exactly one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_shared_isolation_never_opens_a_second_session() {
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let toml = format!(
        "[server]\nsession_idle_ttl = \"2s\"\n{}",
        http_backend("web", &fx.url(), "")
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    for cycle in 0..150 {
        let sid = http.initialize().await;
        let tools = http.call(&sid, 2, "tools/list", json!({})).await.json();
        assert_eq!(tools["result"]["tools"].as_array().unwrap().len(), 7);
        let r = call_tool(
            &http,
            &sid,
            "web__echo",
            json!({"text": format!("c{cycle}")}),
        )
        .await;
        assert_eq!(text_of(&r), format!("c{cycle}"));
        if cycle % 25 == 12 {
            // A list change makes the next list a real refresh.
            call_tool(&http, &sid, "web__change", json!({})).await;
        }
        assert!(fx.live() <= 1);
    }
    let stats = fx.stats();
    assert_eq!(stats["max_live"], 1);
    assert_eq!(stats["initialize_calls"], 1);
    // One fetch at startup plus one after each of the 6 changes.
    assert_eq!(stats["tools_list_calls"], 7);
    let m = gw.metrics();
    assert_eq!(
        m.get(r#"sluice_backend_sessions_opened_total{backend="web"}"#),
        1.0
    );
    assert_eq!(
        m.get(r#"sluice_backend_sessions_live{backend="web"}"#),
        stats["live_sessions"].as_f64().unwrap()
    );
    assert_eq!(
        m.get(r#"sluice_list_refresh_total{backend="web",result="changed"}"#),
        6.0
    );
    // Client sessions age out; the shared backend session stays, one.
    wait_until(Duration::from_secs(20), || {
        gw.metrics().get("sluice_client_sessions_live") == 0.0
    });
    assert_eq!(fx.live(), 1);
    // Shutdown DELETEs it.
    assert_eq!(gw.stop(), Some(0));
    assert_eq!(fx.live(), 0);
}

/// The seed with per-session isolation: the backend's live sessions never
/// exceed the gateway's live client sessions, and return to 0 once the
/// client idle TTL and the backend idle_ttl pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_per_session_isolation_closes_every_session() {
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let toml = format!(
        "[server]\nsession_idle_ttl = \"5s\"\n{}",
        http_backend(
            "web",
            &fx.url(),
            "isolation = \"per-session\"\nidle_ttl = \"5s\"\nmax_sessions = 1000"
        )
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    wait_until(Duration::from_secs(10), || fx.live() == 0);
    let probe_lists = fx.stats()["tools_list_calls"].as_u64().unwrap();
    for cycle in 0..150 {
        let sid = http.initialize().await;
        let tools = http.call(&sid, 2, "tools/list", json!({})).await.json();
        assert_eq!(tools["result"]["tools"].as_array().unwrap().len(), 7);
        let r = call_tool(&http, &sid, "web__counter", json!({})).await;
        assert_eq!(
            text_of(&r),
            "1",
            "a fresh backend session per client session"
        );
        if cycle % 25 == 0 {
            // Client count first: it only falls while we look.
            let clients = gw.metrics().get("sluice_client_sessions_live");
            let backend = fx.live() as f64;
            assert!(backend <= clients, "backend {backend} > clients {clients}");
        }
    }
    // Lists were served from the cache: fetched once for 150 clients.
    assert_eq!(
        fx.stats()["tools_list_calls"].as_u64().unwrap(),
        probe_lists
    );
    wait_until(Duration::from_secs(30), || fx.live() == 0);
    wait_until(Duration::from_secs(30), || {
        gw.metrics().get("sluice_client_sessions_live") == 0.0
    });
    // The gateway counts a session closed once its DELETE was answered.
    wait_until(Duration::from_secs(10), || {
        gw.metrics()
            .get(r#"sluice_backend_sessions_live{backend="web"}"#)
            == 0.0
    });
    let m = gw.metrics();
    let stats = fx.stats();
    // Every session the backend ever held was closed by the gateway.
    assert_eq!(stats["opened"], stats["closed"]);
    assert_eq!(
        m.get(r#"sluice_backend_sessions_opened_total{backend="web"}"#),
        stats["opened"].as_f64().unwrap()
    );
}

/// Per-session isolation is real: two clients see independent counters;
/// with shared isolation they see one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolation_is_visible_in_backend_state() {
    let fx = Fixture::start("127.0.0.1:0", &[]);
    for (isolation, expect_b) in [("per-session", "1"), ("shared", "3")] {
        let extra = format!("isolation = \"{isolation}\"");
        let gw = Gateway::start(&http_backend("web", &fx.url(), &extra));
        let http = Http::new(gw.url("/mcp"));
        let a = http.initialize().await;
        let b = http.initialize().await;
        assert_eq!(
            text_of(&call_tool(&http, &a, "web__counter", json!({})).await),
            "1"
        );
        assert_eq!(
            text_of(&call_tool(&http, &a, "web__counter", json!({})).await),
            "2"
        );
        assert_eq!(
            text_of(&call_tool(&http, &b, "web__counter", json!({})).await),
            expect_b,
            "{isolation}"
        );
        let who_a = text_of(&call_tool(&http, &a, "web__whoami", json!({})).await).to_owned();
        let who_b = text_of(&call_tool(&http, &b, "web__whoami", json!({})).await).to_owned();
        assert_eq!(who_a == who_b, isolation == "shared");
        assert_eq!(gw.stop(), Some(0));
        assert_eq!(
            fx.live(),
            0,
            "shutdown ended every backend session ({isolation})"
        );
    }
}

/// The backend restarts and forgets its sessions: the next call succeeds
/// after one transparent re-initialize, in both isolation modes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_session_is_reinitialized_once() {
    let fx = Fixture::start("127.0.0.1:0", &[]);
    for isolation in ["shared", "per-session"] {
        let extra = format!("isolation = \"{isolation}\"");
        let gw = Gateway::start(&http_backend("web", &fx.url(), &extra));
        let http = Http::new(gw.url("/mcp"));
        let sid = http.initialize().await;
        assert_eq!(
            text_of(&call_tool(&http, &sid, "web__counter", json!({})).await),
            "1"
        );
        let before = fx.stats()["initialize_calls"].as_u64().unwrap();
        fx.forget();
        let r = call_tool(&http, &sid, "web__counter", json!({})).await;
        assert_eq!(
            text_of(&r),
            "1",
            "{isolation}: served by a new backend session"
        );
        assert_eq!(
            fx.stats()["initialize_calls"].as_u64().unwrap(),
            before + 1,
            "{isolation}"
        );
        let m = gw.metrics();
        assert_eq!(
            m.get(r#"sluice_backend_sessions_closed_total{backend="web",reason="expired"}"#),
            1.0
        );
        assert_eq!(fx.live(), 1);
        assert_eq!(gw.stop(), Some(0));
    }
}

/// A stopped backend fails fast with an error naming it, /readyz names it,
/// other backends keep serving; when it comes back it rejoins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_backend_fails_fast_and_rejoins() {
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let addr = fx.addr.clone();
    let toml = format!(
        "{}{}",
        http_backend("web", &fx.url(), ""),
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    assert_eq!(
        text_of(&call_tool(&http, &sid, "web__echo", json!({"text":"up"})).await),
        "up"
    );

    fx.stop();
    let r = call_tool(&http, &sid, "web__echo", json!({"text":"down"})).await;
    let msg = r["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();
    assert!(msg.contains("`web`"), "{msg}");
    wait_until(Duration::from_secs(10), || {
        http_get(&gw.base, "/readyz").is_ok_and(|(s, b)| s == 503 && b.contains("\"web\""))
    });
    assert_eq!(gw.metrics().get(r#"sluice_backend_up{backend="web"}"#), 0.0);
    // Its session went with its connection: the backend's doing, not the
    // gateway's (issue 49, part 4).
    let lost = r#"sluice_backend_restarts_total{backend="web",reason="closed"}"#;
    assert_eq!(gw.metrics().get(lost), 1.0);
    // Down means fast: the next call does not wait for a timeout.
    let r = call_tool(&http, &sid, "web__echo", json!({"text":"still down"})).await;
    assert!(r["error"]["message"].as_str().unwrap().contains("`web`"));
    let r = call_tool(&http, &sid, "demo__echo", json!({"text":"others serve"})).await;
    assert_eq!(text_of(&r), "others serve");

    let back = Fixture::start(&addr, &[]);
    gw.wait_ready();
    assert_eq!(
        text_of(&call_tool(&http, &sid, "web__echo", json!({"text":"back"})).await),
        "back"
    );
    assert_eq!(back.live(), 1);
}

/// At a per-session backend's max_sessions a new one is refused with a
/// clear error; the backend never sees more than the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_session_http_max_sessions() {
    // The fixture refuses (503) past 3, so exceeding 2 would show.
    let fx = Fixture::start("127.0.0.1:0", &["--max-sessions", "3"]);
    let extra = "isolation = \"per-session\"\nmax_sessions = 2";
    let gw = Gateway::start(&http_backend("web", &fx.url(), extra));
    let http = Http::new(gw.url("/mcp"));
    let ids: Vec<String> = futures_util::future::join_all((0..3).map(|_| http.initialize())).await;
    assert_eq!(
        text_of(&call_tool(&http, &ids[0], "web__counter", json!({})).await),
        "1"
    );
    assert_eq!(
        text_of(&call_tool(&http, &ids[1], "web__counter", json!({})).await),
        "1"
    );
    let r = call_tool(&http, &ids[2], "web__counter", json!({})).await;
    let msg = r["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();
    assert!(msg.contains("`web`") && msg.contains("limit of 2"), "{msg}");
    let stats = fx.stats();
    assert_eq!(stats["max_live"], 2);
    assert_eq!(stats["refused"], 0);
}

/// A backend's list_changed invalidates the cache and reaches clients'
/// GET streams; the next list is fetched once, whatever the client count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changes_refresh_the_cache_once() {
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let extra = "isolation = \"per-session\"";
    let gw = Gateway::start(&http_backend("web", &fx.url(), extra));
    let http = Http::new(gw.url("/mcp"));
    let ids: Vec<String> = futures_util::future::join_all((0..5).map(|_| http.initialize())).await;
    let mut stream = http.get_stream(&ids[1]).await;
    assert_eq!(stream.status(), 200);
    let lists = fx.stats()["tools_list_calls"].as_u64().unwrap();
    for id in &ids {
        http.call(id, 2, "tools/list", json!({})).await;
    }
    assert_eq!(
        fx.stats()["tools_list_calls"].as_u64().unwrap(),
        lists,
        "all five from the cache"
    );

    call_tool(&http, &ids[0], "web__change", json!({})).await;
    let mut seen = String::new();
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = stream.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("notifications/tools/list_changed") {
                return;
            }
        }
    })
    .await;
    assert!(got.is_ok(), "{seen}");
    let mut descriptions = Vec::new();
    for id in &ids {
        let r = http.call(id, 4, "tools/list", json!({})).await.json();
        let change = r["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "web__change")
            .unwrap()["description"]
            .clone();
        descriptions.push(change);
    }
    assert!(
        descriptions
            .iter()
            .all(|d| d.as_str().unwrap().contains("(now 2)")),
        "{descriptions:?}"
    );
    assert_eq!(
        fx.stats()["tools_list_calls"].as_u64().unwrap(),
        lists + 1,
        "one fetch per change"
    );
}

/// A backend's server-to-client request over Streamable HTTP rides on the
/// POST's own stream, so it reaches exactly the client that caused it,
/// and the client's answer goes back to that backend session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_over_http_reaches_the_calling_client() {
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let gw = Gateway::start(&http_backend("web", &fx.url(), ""));
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize_with(json!({"sampling": {}})).await;
    let other = http.initialize().await;
    // Another client's request in flight at the same time must not matter.
    let busy = http
        .start_progress_call(&other, json!(1), "web__slow", json!({"ms": 3000}))
        .await;
    let mut call = http
        .client
        .post(&http.url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("mcp-session-id", &sid)
        .body(json!({"jsonrpc":"2.0","id":"ask-1","method":"tools/call","params":{"name":"web__ask","arguments":{}}}).to_string())
        .send()
        .await
        .unwrap();
    let mut seen = String::new();
    let request: Value = loop {
        let chunk = call
            .chunk()
            .await
            .unwrap()
            .expect("stream ended before the sampling request");
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(line) = seen.lines().find(|l| l.contains("sampling/createMessage")) {
            break serde_json::from_str(line.trim_start_matches("data:").trim()).unwrap();
        }
    };
    let answer = json!({"jsonrpc":"2.0","id":request["id"],"result":{
        "role":"assistant","content":{"type":"text","text":"from the right client"},"model":"test"}});
    assert_eq!(http.post(Some(&sid), &answer).await.status, 202);
    let rest = call.text().await.unwrap();
    assert!(rest.contains("from the right client"), "{rest}");
    drop(busy);
}

/// Every POST of an established backend session carries what the backend
/// needs: the configured headers, the JSON-RPC media types, the protocol
/// version, the session and the body's length. A call's POST is written
/// without a request builder (`Endpoint::post_lent`), the handshake's
/// with one: both are checked here, header by header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_post_carries_the_configured_and_session_headers() {
    let fx = faulty_http("ok", &[]);
    let gw = Gateway::start(&http_backend(
        "web",
        &fx.url(),
        "headers = { X-Team = \"blue\" }",
    ));
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let r = call_tool(&http, &sid, "web__fault", json!({})).await;
    assert_eq!(text_of(&r), "fault-ok", "{r}");

    let (_, seen) = http_get(&format!("http://{}", fx.addr), "/seen").unwrap();
    let seen: Value = serde_json::from_str(&seen).unwrap();
    let posts: Vec<&Value> = seen
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["method"] == "POST")
        .collect();
    // The 2026-07-28 probe and initialize have no session yet; then
    // notifications/initialized, tools/list (the catalogue) and tools/call
    // at least.
    let in_session = posts
        .iter()
        .filter(|r| r["headers"]["mcp-session-id"].is_string())
        .count();
    assert_eq!(posts.len() - in_session, 2, "{seen}");
    assert!(in_session >= 3, "{seen}");
    for r in posts {
        let h = &r["headers"];
        assert_eq!(r["path"], "/mcp", "{r}");
        assert_eq!(h["x-team"], "blue", "{r}");
        assert_eq!(h["content-type"], "application/json", "{r}");
        assert_eq!(h["accept"], "application/json, text/event-stream", "{r}");
        assert_eq!(h["host"], fx.addr.to_string(), "{r}");
        assert!(
            h["content-length"]
                .as_str()
                .is_some_and(|n| n.parse::<u64>().is_ok_and(|n| n > 0)),
            "{r}"
        );
        if h["mcp-session-id"].is_string() {
            assert_eq!(h["mcp-protocol-version"], "2025-11-25", "{r}");
            // Those, and nothing else (no header twice either: /seen
            // joins repeated ones).
            assert_eq!(h.as_object().unwrap().len(), 7, "{r}");
        }
    }
    assert_eq!(gw.stop(), Some(0));
}
