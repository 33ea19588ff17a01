//! Client sessions are bounded: the seed leak (sessions never DELETEd)
//! cannot grow the gateway, and capacity evicts the least recently used.

mod support;

use std::time::Duration;

use futures_util::future::join_all;
use serde_json::json;
use support::*;

fn config(extra_server: &str) -> String {
    format!("[server]\n{extra_server}\n{}", demo_backend("demo"))
}

/// Seed: 2,000 sessions opened and abandoned (no DELETE). With a 2 s idle
/// TTL every one is reclaimed, counted as idle, and answers 404 / -32001.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_sessions_are_reclaimed_by_idle_ttl() {
    let gw = Gateway::start(&config(
        "session_idle_ttl = \"2s\"\nmax_sessions_per_principal = 10000",
    ));
    let http = Http::new(gw.url("/mcp"));
    let mut ids = Vec::new();
    for chunk in 0..20 {
        let batch = (0..100).map(|_| {
            let http = http.clone();
            async move {
                let id = http.initialize().await;
                let r = http.call(&id, 2, "tools/list", json!({})).await;
                assert_eq!(r.status, 200);
                id
            }
        });
        ids.extend(join_all(batch).await);
        let _ = chunk;
    }
    assert_eq!(ids.len(), 2000);
    let opened = gw.metrics().get("sluice_client_sessions_opened_total");
    assert_eq!(opened, 2000.0);

    wait_until(Duration::from_secs(30), || {
        gw.metrics().get("sluice_client_sessions_live") == 0.0
    });
    let m = gw.metrics();
    assert_eq!(
        m.get(r#"sluice_client_sessions_closed_total{reason="idle"}"#),
        2000.0
    );
    assert_eq!(
        m.get_or_untouched(r#"sluice_client_sessions_closed_total{reason="capacity"}"#),
        0.0
    );

    let replies = join_all(ids.iter().map(|id| {
        let http = http.clone();
        async move { http.call(id, 3, "tools/list", json!({})).await }
    }))
    .await;
    for r in replies {
        assert_eq!(r.status, 404);
        assert_eq!(r.json()["error"]["code"], -32001);
        assert_eq!(r.json()["error"]["message"], "Session not found");
    }
    assert_eq!(gw.stop(), Some(0));
}

/// At `max_sessions = 100` the 101st initialize succeeds by evicting the
/// least recently used idle session, which then gets 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_evicts_the_least_recently_used_session() {
    let gw = Gateway::start(&config("max_sessions = 100"));
    let http = Http::new(gw.url("/mcp"));
    let mut ids = Vec::new();
    for _ in 0..100 {
        ids.push(http.initialize().await);
    }
    // Touch the oldest: the second-oldest becomes least recently used.
    assert_eq!(http.call(&ids[0], 2, "ping", json!({})).await.status, 200);

    let newest = http.initialize().await;
    assert_eq!(http.call(&newest, 2, "ping", json!({})).await.status, 200);
    let evicted = http.call(&ids[1], 2, "ping", json!({})).await;
    assert_eq!(evicted.status, 404);
    assert_eq!(evicted.json()["error"]["code"], -32001);
    assert_eq!(http.call(&ids[0], 3, "ping", json!({})).await.status, 200);
    assert_eq!(http.call(&ids[2], 3, "ping", json!({})).await.status, 200);

    let m = gw.metrics();
    assert_eq!(m.get("sluice_client_sessions_live"), 100.0);
    assert_eq!(
        m.get(r#"sluice_client_sessions_closed_total{reason="capacity"}"#),
        1.0
    );
}

/// When every session in a full table has a request in flight, a new
/// initialize gets 503 with Retry-After rather than growing the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_table_of_busy_sessions_answers_503() {
    let gw = Gateway::start(&config("max_sessions = 2"));
    let http = Http::new(gw.url("/mcp"));
    let a = http.initialize().await;
    let b = http.initialize().await;
    let ra = http.start_slow_call(&a, json!(9), 2000).await;
    let rb = http.start_slow_call(&b, json!(9), 2000).await;
    let r = http.post(None, &init_request(1)).await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.headers["retry-after"], "1");
    assert_eq!(gw.metrics().get("sluice_client_sessions_live"), 2.0);
    for resp in [ra, rb] {
        let body = resp.text().await.unwrap();
        assert!(body.contains("slept 2000ms"), "{body}");
    }
    // Idle again: a new session evicts the least recently used one.
    http.initialize().await;
    assert_eq!(
        gw.metrics()
            .get(r#"sluice_client_sessions_closed_total{reason="capacity"}"#),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_ends_a_session() {
    let gw = Gateway::start(&config(""));
    let http = Http::new(gw.url("/mcp"));
    let before = std::time::Instant::now();
    let id = http.initialize().await;
    // A session that lives a known while: what the duration histogram
    // measures, not a wait for anything.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(http.delete(&id).await, 200);
    let lived = before.elapsed().as_secs_f64();
    assert_eq!(http.call(&id, 2, "ping", json!({})).await.status, 404);
    assert_eq!(http.delete(&id).await, 404);
    let m = gw.metrics();
    assert_eq!(
        m.get(r#"sluice_client_sessions_closed_total{reason="delete"}"#),
        1.0
    );
    assert_eq!(m.get("sluice_client_sessions_live"), 0.0);
    // Its life, under the MCP conventions' name and its revision.
    let version = r#"{mcp_protocol_version="2025-06-18"}"#;
    assert_eq!(
        m.get(&format!(
            "mcp_server_session_duration_seconds_count{version}"
        )),
        1.0
    );
    let sum = m.get(&format!("mcp_server_session_duration_seconds_sum{version}"));
    assert!((0.19..=lived + 0.01).contains(&sum), "{sum} s of {lived} s");
    // The `initialize` that opened it took time, and its duration says so
    // (it is answered within one wake-up of its connection).
    assert_eq!(
        m.get(r#"sluice_request_duration_seconds_count{method="initialize"}"#),
        1.0
    );
    assert!(m.get(r#"sluice_request_duration_seconds_sum{method="initialize"}"#) > 0.0);
}

/// Per-principal cap: one token's sessions cannot crowd out another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_principal_cap_evicts_that_principals_oldest() {
    let toml = format!(
        "[server]\nmax_sessions_per_principal = 3\n[auth]\nbearer_tokens_env = \"TEST_TOKENS\"\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start_with_env(&toml, &[("TEST_TOKENS", "alpha-token,beta-token")]);
    let http = Http::new(gw.url("/mcp"));
    let init = |token: &'static str| {
        let http = http.clone();
        async move {
            let auth = format!("Bearer {token}");
            let r = http
                .post_raw(
                    &[
                        ("content-type", "application/json"),
                        ("accept", ACCEPT_BOTH),
                        ("authorization", &auth),
                    ],
                    init_request(1).to_string(),
                )
                .await;
            assert_eq!(r.status, 200, "{}", r.body);
            r.session_id().unwrap()
        }
    };
    let beta = init("beta-token").await;
    let mut alpha = Vec::new();
    for _ in 0..4 {
        alpha.push(init("alpha-token").await);
    }
    let ping = |id: String, token: &'static str| {
        let http = http.clone();
        async move {
            let auth = format!("Bearer {token}");
            http.post_raw(
                &[
                    ("content-type", "application/json"),
                    ("accept", ACCEPT_BOTH),
                    ("authorization", &auth),
                    ("mcp-session-id", &id),
                ],
                r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#,
            )
            .await
            .status
        }
    };
    assert_eq!(ping(alpha[0].clone(), "alpha-token").await, 404);
    assert_eq!(ping(alpha[3].clone(), "alpha-token").await, 200);
    assert_eq!(ping(beta.clone(), "beta-token").await, 200);
    // A session is bound to its principal: the other token gets 404.
    assert_eq!(ping(beta.clone(), "alpha-token").await, 404);
    assert_eq!(
        gw.metrics()
            .get(r#"sluice_client_sessions_closed_total{reason="principal_cap"}"#),
        1.0
    );
}
