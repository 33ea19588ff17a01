//! `[limits]` (issue 11, part 2): one principal's flood is refused with 429,
//! `Retry-After` and a JSON-RPC error, counted by reason, while another
//! principal's calls all go through. Asserted by statuses and counts.

mod support;

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{Value, json};
use support::*;

const TOKENS: &str = "alpha-token,beta-token";

fn config(limits: &str) -> String {
    format!(
        "[auth]\nbearer_tokens_env = \"TEST_TOKENS\"\n[limits]\n{limits}\n{}",
        demo_backend("demo")
    )
}

/// A client holding one bearer token.
#[derive(Clone)]
struct As {
    http: Http,
    auth: String,
}

impl As {
    fn new(gw: &Gateway, token: &str) -> As {
        As {
            http: Http::new(gw.url("/mcp")),
            auth: format!("Bearer {token}"),
        }
    }

    async fn post(&self, session: Option<&str>, msg: &Value) -> Reply {
        let mut headers = vec![
            ("content-type", "application/json"),
            ("accept", ACCEPT_BOTH),
            ("authorization", self.auth.as_str()),
        ];
        if let Some(s) = session {
            headers.push(("mcp-session-id", s));
        }
        self.http.post_raw(&headers, msg.to_string()).await
    }

    async fn initialize(&self) -> String {
        self.initialize_as("2025-06-18").await
    }

    async fn initialize_as(&self, version: &str) -> String {
        let mut init = init_request(1);
        init["params"]["protocolVersion"] = json!(version);
        let r = self.post(None, &init).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.session_id().unwrap()
    }

    /// Opens the session's GET stream (the caller checks the status).
    async fn stream(&self, session: &str) -> reqwest::Response {
        self.http
            .client
            .get(&self.http.url)
            .header("accept", "text/event-stream")
            .header("authorization", &self.auth)
            .header("mcp-session-id", session)
            .send()
            .await
            .unwrap()
    }

    async fn delete(&self, session: &str) -> Reply {
        let resp = self
            .http
            .client
            .delete(&self.http.url)
            .header("authorization", &self.auth)
            .header("mcp-session-id", session)
            .send()
            .await
            .unwrap();
        Reply::read(resp).await
    }

    async fn ping(&self, session: &str, id: u64) -> Reply {
        self.post(
            Some(session),
            &json!({"jsonrpc":"2.0","id":id,"method":"ping"}),
        )
        .await
    }
}

/// The refusal every limit answers with.
fn assert_refusal(r: &Reply) {
    assert_eq!(r.status, 429, "{}", r.body);
    let wait: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(wait >= 1, "Retry-After {wait}");
    let body = r.json();
    assert_eq!(body["jsonrpc"], "2.0");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Too Many Requests"),
        "{body}"
    );
}

/// A burst of 5 at 1 per second: 30 concurrent pings from alpha get at
/// most the rest of its burst plus what the elapsed seconds refill; beta,
/// sending at the same time, is refused nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_is_limited_and_other_principals_are_not() {
    let gw = Gateway::start_with_env(
        &config("requests_per_second = 1\nburst = 5"),
        &[("TEST_TOKENS", TOKENS)],
    );
    let alpha = As::new(&gw, "alpha-token");
    let beta = As::new(&gw, "beta-token");
    let a = alpha.initialize().await;
    let b = beta.initialize().await;

    let started = Instant::now();
    let flood = (0..30).map(|i| {
        let alpha = alpha.clone();
        let a = a.clone();
        async move { alpha.ping(&a, 10 + i).await }
    });
    let calm = (0..4).map(|i| {
        let beta = beta.clone();
        let b = b.clone();
        async move { beta.ping(&b, 100 + i).await }
    });
    let (flood, calm) = tokio::join!(join_all(flood), join_all(calm));
    let elapsed = started.elapsed().as_secs();

    for r in &calm {
        assert_eq!(r.status, 200, "beta refused: {}", r.body);
    }
    let ok = flood.iter().filter(|r| r.status == 200).count() as u64;
    let refused: Vec<_> = flood.iter().filter(|r| r.status != 200).collect();
    refused.iter().for_each(|r| assert_refusal(r));
    // 4 left of the burst after initialize, one more per elapsed second.
    assert!(ok >= 4, "only {ok} let in");
    assert!(ok <= 4 + elapsed + 1, "{ok} let in within {elapsed} s");
    let m = gw.metrics();
    assert_eq!(
        m.get(r#"sluice_requests_limited_total{reason="rate"}"#),
        refused.len() as f64
    );
    assert_eq!(
        m.get_or_untouched(r#"sluice_requests_limited_total{reason="concurrency"}"#),
        0.0
    );

    // Waiting as long as Retry-After says lets the next one in.
    let wait: u64 = refused[0].headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(wait)).await;
    assert_eq!(alpha.ping(&a, 99).await.status, 200);
}

/// Two calls in flight is alpha's limit: a third is refused while they
/// run (beta is not), and let in once they are done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_flight_are_limited_per_principal() {
    let gw = Gateway::start_with_env(
        &config("max_concurrent_requests = 2"),
        &[("TEST_TOKENS", TOKENS)],
    );
    let alpha = As::new(&gw, "alpha-token");
    let beta = As::new(&gw, "beta-token");
    let a = alpha.initialize().await;
    let b = beta.initialize().await;

    let (slow_alpha, slow_a) = (alpha.clone(), a.clone());
    let slow = move |id: u64| {
        let alpha = slow_alpha.clone();
        let a = slow_a.clone();
        async move {
            alpha
                .post(
                    Some(&a),
                    &json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                        "params":{"name":"demo__sleep_ms","arguments":{"ms":6000}}}),
                )
                .await
        }
    };
    let calls = tokio::spawn(async move { tokio::join!(slow(1), slow(2)) });
    // Once both are at the backend (admitted, then), the next of alpha's
    // is refused: they hold their places for seconds yet.
    let pending = r#"sluice_bounded_entries{map="pending_calls",owner="demo"}"#;
    tokio::task::block_in_place(|| {
        wait_until(Duration::from_secs(10), || {
            gw.metrics().get_or_untouched(pending) == 2.0
        })
    });
    let refusal = alpha.ping(&a, 10).await;
    assert_eq!(
        refusal.status, 429,
        "a third request in flight was let in: {}",
        refusal.body
    );
    assert_refusal(&refusal);
    assert_eq!(beta.ping(&b, 1).await.status, 200, "beta was refused");

    let (one, two) = calls.await.unwrap();
    assert_eq!(one.status, 200, "{}", one.body);
    assert_eq!(two.status, 200, "{}", two.body);
    // Done: they no longer count.
    assert_eq!(alpha.ping(&a, 500).await.status, 200);
    let m = gw.metrics();
    assert!(m.get(r#"sluice_requests_limited_total{reason="concurrency"}"#) >= 1.0);
    assert_eq!(
        m.get_or_untouched(r#"sluice_requests_limited_total{reason="rate"}"#),
        0.0
    );
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
        "params":{"name":format!("demo__{tool}"),"arguments":arguments}})
}

/// The demo backend's counter (one backend session, shared by every
/// client): how many `counter` calls have run, this one included.
async fn counter(who: &As, session: &str, id: u64) -> u64 {
    let r = who
        .post(Some(session), &call(id, "counter", json!({})))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    text_of(&r.json()).parse().unwrap()
}

/// A gateway under `limits`, and alpha and beta with a session each:
/// alpha's of 2025-03-26, the revision that may batch.
async fn batching_alpha_and_beta(limits: &str) -> (Gateway, (As, String), (As, String)) {
    let gw = Gateway::start_with_env(&config(limits), &[("TEST_TOKENS", TOKENS)]);
    let alpha = As::new(&gw, "alpha-token");
    let beta = As::new(&gw, "beta-token");
    let a = alpha.initialize_as("2025-03-26").await;
    let b = beta.initialize().await;
    (gw, (alpha, a), (beta, b))
}

/// Each request of a 2025-03-26 batch takes one from the principal's
/// rate, as if sent alone: a batch of 12 with 4 left of the burst runs 4
/// (plus what the elapsed seconds refill), and the rest are answered in
/// the batch's reply with the rate refusal under their own ids, never
/// run: the backend's counter moved exactly as many times as there are
/// results. Before, a batch was one request and all 12 ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_of_a_batch_takes_from_the_rate() {
    let (gw, (alpha, a), (beta, b)) =
        batching_alpha_and_beta("requests_per_second = 1\nburst = 5").await;

    let started = Instant::now();
    let batch: Vec<Value> = (1..=12).map(|i| call(i, "counter", json!({}))).collect();
    let r = alpha.post(Some(&a), &Value::Array(batch)).await;
    let elapsed = started.elapsed().as_secs();
    assert_eq!(r.status, 200, "{}", r.body);
    let lines = r.json();
    let lines = lines.as_array().unwrap();
    let mut ids: Vec<u64> = lines.iter().map(|l| l["id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=12).collect::<Vec<_>>(), "one line per request");
    let ran = lines.iter().filter(|l| l.get("result").is_some()).count() as u64;
    let refused: Vec<_> = lines.iter().filter(|l| l.get("error").is_some()).collect();
    for l in &refused {
        assert_eq!(l["error"]["code"], -32000, "{l}");
        let message = l["error"]["message"].as_str().unwrap();
        assert!(message.contains("Too Many Requests"), "{l}");
        assert!(
            l["error"]["data"]["retryAfter"].as_u64().unwrap() >= 1,
            "{l}"
        );
    }
    // 4 left of the burst after initialize, one more per elapsed second.
    assert!(ran >= 4, "only {ran} ran");
    assert!(ran <= 4 + elapsed + 1, "{ran} ran within {elapsed} s");
    assert_eq!(ran + refused.len() as u64, 12);
    // Beta's call is the only other one: nothing refused ran.
    assert_eq!(counter(&beta, &b, 100).await, ran + 1);
    let m = gw.metrics();
    assert_eq!(
        m.get(r#"sluice_requests_limited_total{reason="rate"}"#),
        refused.len() as f64
    );
}

/// Under `max_concurrent_requests = 2` a batch of six slow calls runs at
/// most two at once (the backend never has more of them pending), holds
/// the principal's two slots while it runs (alpha's next request is
/// refused, beta's is not), and all six are answered: a batch is paced by
/// the principal's free slots, not refused for them. Before, all six ran
/// at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_runs_no_more_at_once_than_the_principal_may() {
    let (gw, (alpha, a), (beta, b)) = batching_alpha_and_beta("max_concurrent_requests = 2").await;

    let batch: Vec<Value> = (1..=6)
        .map(|i| call(i, "sleep_ms", json!({"ms": 1000})))
        .collect();
    let (sender, session) = (alpha.clone(), a.clone());
    let running =
        tokio::spawn(async move { sender.post(Some(&session), &Value::Array(batch)).await });
    let pending = r#"sluice_bounded_entries{map="pending_calls",owner="demo"}"#;
    let mut most = 0.0f64;
    let mut refusal = None;
    while !running.is_finished() {
        let now = gw.metrics().get(pending);
        most = most.max(now);
        if now == 2.0 && refusal.is_none() {
            // Both slots are the batch's until its reply ends.
            refusal = Some(alpha.ping(&a, 50).await);
            assert_eq!(beta.ping(&b, 51).await.status, 200, "beta was refused");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = running.await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let lines = r.json();
    let lines = lines.as_array().unwrap();
    assert_eq!(lines.len(), 6, "{}", r.body);
    assert!(
        lines.iter().all(|l| l.get("result").is_some()),
        "{}",
        r.body
    );
    assert_eq!(most, 2.0, "calls pending at the backend at once");
    assert_refusal(&refusal.expect("two calls were never seen pending"));
    let m = gw.metrics();
    assert_eq!(
        m.get(r#"sluice_requests_limited_total{reason="concurrency"}"#),
        1.0
    );
    // Done: the batch's slots are free again.
    assert_eq!(alpha.ping(&a, 500).await.status, 200);
}

/// In cluster mode a batch's requests take from the one allowance in
/// Redis, each as if sent alone: two batches of 8, one through each
/// replica, with 5 left of a burst of 6 run 5 between them (plus what the
/// elapsed seconds refill), where counting a batch as one request ran all
/// 16. On each replica the backend's counter moved exactly as many times
/// as that batch has results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_takes_from_the_rate_shared_across_replicas() {
    let redis = Redis::start();
    let toml = format!(
        "[server]\nsession_ids = \"sealed\"\n[cluster]\nredis_url = \"{}\"\n{}",
        redis.url(),
        config("requests_per_second = 1\nburst = 6")
    );
    let key = keygen();
    let env = [
        ("TEST_TOKENS", TOKENS),
        ("SLUICE_SESSION_KEY", key.as_str()),
    ];
    let gws = [
        Gateway::start_with_env(&toml, &env),
        Gateway::start_with_env(&toml, &env),
    ];
    for gw in &gws {
        wait_until(Duration::from_secs(15), || {
            gw.metrics().get("sluice_cluster_up") == 1.0
        });
    }
    let alpha = As::new(&gws[0], "alpha-token");
    let a = alpha.initialize_as("2025-03-26").await;
    let b = As::new(&gws[0], "beta-token").initialize().await;

    let started = Instant::now();
    let mut ran = [0u64; 2];
    for (i, gw) in gws.iter().enumerate() {
        let batch: Vec<Value> = (1..=8).map(|n| call(n, "counter", json!({}))).collect();
        let r = As::new(gw, "alpha-token")
            .post(Some(&a), &Value::Array(batch))
            .await;
        if r.status == 429 {
            assert_refusal(&r);
            continue;
        }
        assert_eq!(r.status, 200, "{}", r.body);
        let lines = r.json();
        let lines = lines.as_array().unwrap();
        assert_eq!(lines.len(), 8, "{}", r.body);
        ran[i] = lines.iter().filter(|l| l.get("result").is_some()).count() as u64;
    }
    let elapsed = started.elapsed().as_secs();
    let total = ran[0] + ran[1];
    assert!(total >= 5, "only {total} ran");
    assert!(
        total <= 5 + elapsed + 1,
        "{total} ran within {elapsed} s: not shared"
    );
    for (i, gw) in gws.iter().enumerate() {
        let beta = As::new(gw, "beta-token");
        assert_eq!(counter(&beta, &b, 100).await, ran[i] + 1, "replica {i}");
    }
}

/// Issue 38, item 4: `max_streams_per_principal = 2`. Alpha's third GET
/// stream is refused with 429 (counted as `reason="streams"`) while its
/// two stay open; beta still opens one and is served, and so are alpha's
/// own POSTs (a stream holds no request slot, even under
/// `max_concurrent_requests = 1`). A stream that ends gives its slot back:
/// one ended with its session (DELETE), one whose client went away
/// (noticed at the next keep-alive write, every 2 s under this idle TTL).
/// Before, every stream opened and held a connection. An unknown session
/// at the cap gets 404, not 429, and is not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_capped_per_principal_and_give_their_slot_back() {
    let toml = format!(
        "[server]\nsession_idle_ttl = \"6s\"\n{}",
        config("max_streams_per_principal = 2\nmax_concurrent_requests = 1")
    );
    let gw = Gateway::start_with_env(&toml, &[("TEST_TOKENS", TOKENS)]);
    let alpha = As::new(&gw, "alpha-token");
    let beta = As::new(&gw, "beta-token");
    let a = [
        alpha.initialize().await,
        alpha.initialize().await,
        alpha.initialize().await,
    ];
    let b = beta.initialize().await;

    let first = alpha.stream(&a[0]).await;
    assert_eq!(first.status(), 200);
    let second = alpha.stream(&a[1]).await;
    assert_eq!(second.status(), 200);
    let third = alpha.stream(&a[2]).await;
    // Checked before its body is read: an open stream's never ends.
    assert_eq!(third.status(), 429, "a third stream was let in");
    let third = Reply::read(third).await;
    assert_refusal(&third);
    assert!(third.body.contains("GET streams"), "{}", third.body);
    // At the cap, a session the gateway does not know is still told 404,
    // the answer that has its client initialize again (it was 429).
    let unknown = alpha.stream("no-such-session").await;
    assert_eq!(unknown.status(), 404, "an unknown session at the cap");
    let theirs = beta.stream(&b).await;
    assert_eq!(theirs.status(), 200, "beta's stream was refused");
    assert_eq!(beta.ping(&b, 1).await.status, 200);
    // Two streams open, and alpha's single request slot is still free.
    assert_eq!(alpha.ping(&a[2], 2).await.status, 200);
    let m = gw.metrics();
    assert_eq!(
        m.get(r#"sluice_requests_limited_total{reason="streams"}"#),
        1.0
    );

    // Its session ended, the first stream ends and frees its slot.
    assert_eq!(alpha.delete(&a[0]).await.status, 200);
    let mut first = first;
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(_)) = first.chunk().await {}
    });
    assert!(ended.await.is_ok(), "the stream outlived its session");
    let reopened = retry_stream(&alpha, &a[2]).await;

    // A client that goes away frees its slot too.
    drop(second);
    let a3 = alpha.initialize().await;
    let again = retry_stream(&alpha, &a3).await;
    drop((reopened, again, theirs));
}

/// Opens the session's stream, retrying while its principal's slots are
/// taken (each try refused with 429), for at most 15 s. The session is
/// pinged at each try, so it stays alive meanwhile.
async fn retry_stream(who: &As, session: &str) -> reqwest::Response {
    let limit = Instant::now() + Duration::from_secs(15);
    for id in 1000.. {
        assert_eq!(who.ping(session, id).await.status, 200);
        let resp = who.stream(session).await;
        if resp.status() == 200 {
            return resp;
        }
        assert_refusal(&Reply::read(resp).await);
        assert!(
            Instant::now() < limit,
            "the stream's slot was never given back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    unreachable!()
}

/// Issue 38, item 4: a DELETE is a request in flight, as a POST is: with
/// alpha's one slot taken by a slow call, alpha's DELETE is refused with
/// 429 (beta's is not), and served once the call is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_counts_as_a_request_in_flight() {
    let gw = Gateway::start_with_env(
        &config("max_concurrent_requests = 1"),
        &[("TEST_TOKENS", TOKENS)],
    );
    let alpha = As::new(&gw, "alpha-token");
    let beta = As::new(&gw, "beta-token");
    let a = [alpha.initialize().await, alpha.initialize().await];
    let b = beta.initialize().await;
    let (slow_alpha, slow_a) = (alpha.clone(), a[0].clone());
    let slow = tokio::spawn(async move {
        slow_alpha
            .post(Some(&slow_a), &call(1, "sleep_ms", json!({"ms": 2000})))
            .await
    });
    let pending = r#"sluice_bounded_entries{map="pending_calls",owner="demo"}"#;
    wait_until(Duration::from_secs(10), || gw.metrics().get(pending) == 1.0);
    let r = alpha.delete(&a[1]).await;
    assert_refusal(&r);
    assert_eq!(beta.delete(&b).await.status, 200, "beta was refused");
    assert_eq!(slow.await.unwrap().status, 200);
    assert_eq!(alpha.delete(&a[1]).await.status, 200);
    let m = gw.metrics();
    assert_eq!(
        m.get(r#"sluice_requests_limited_total{reason="concurrency"}"#),
        1.0
    );
}

/// A limit that is not a number, or a burst without a rate, is a config error.
#[test]
fn bad_limits_are_refused_by_check() {
    let dir = tempdir::Dir::new();
    for (text, wanted) in [
        ("burst = 3", "a burst needs limits.requests_per_second"),
        ("requests_per_second = \"fast\"", "requests_per_second"),
        ("rate = 3", "unknown key `rate` in [limits]"),
    ] {
        let path = tempdir::write(&dir, "sluice.toml", &config(text));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["check", "--config"])
            .arg(&path)
            .env("TEST_TOKENS", TOKENS)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains(wanted), "{text}: {stderr}");
    }
}
