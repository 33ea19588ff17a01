//! Bad input gets its documented status and body, and disturbs nothing:
//! a healthy session in the same gateway keeps working throughout.

mod support;

use serde_json::{Value, json};
use support::*;

struct Case {
    name: &'static str,
    method: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    status: u16,
    /// Expected JSON-RPC error code in the body, if the case has one.
    code: Option<i64>,
}

const CT: (&str, &str) = ("content-type", "application/json");

fn h(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_table() {
    let toml = format!(
        "[server]\nmax_body_bytes = 65536\n[auth]\nbearer_tokens_env = \"T\"\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start_with_env(&toml, &[("T", "tok-a,tok-b")]);
    let url = gw.url("/mcp");
    let client = reqwest::Client::new();
    let auth_a = "Bearer tok-a";

    let open = |token: &'static str| {
        let client = client.clone();
        let url = url.clone();
        async move {
            let r = client
                .post(&url)
                .header("content-type", "application/json")
                .header("accept", ACCEPT_BOTH)
                .header("authorization", token)
                .body(init_request(1).to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            r.headers()["mcp-session-id"].to_str().unwrap().to_owned()
        }
    };
    let healthy = open(auth_a).await;
    let other_principals = open("Bearer tok-b").await;

    let ok_call = json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"still here"}}});
    let with_session = |extra: &[(&'static str, &str)]| {
        let mut v = h(&[
            CT,
            ("accept", ACCEPT_BOTH),
            ("authorization", auth_a),
            ("mcp-session-id", &healthy),
        ]);
        for (k, val) in extra {
            v.retain(|(kk, _)| kk != k);
            v.push((*k, (*val).to_owned()));
        }
        v
    };
    let ping = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec();

    let cases = vec![
        Case { name: "malformed JSON", method: "POST", headers: with_session(&[]), body: b"{\"jsonrpc\":".to_vec(), status: 400, code: Some(-32700) },
        Case { name: "not JSON-RPC", method: "POST", headers: with_session(&[]), body: br#"{"hello":"world"}"#.to_vec(), status: 400, code: Some(-32600) },
        Case { name: "wrong Content-Type", method: "POST", headers: with_session(&[("content-type", "text/plain")]), body: ping.clone(), status: 415, code: Some(-32000) },
        Case { name: "Accept lists neither type", method: "POST", headers: with_session(&[("accept", "text/html")]), body: ping.clone(), status: 406, code: Some(-32000) },
        Case { name: "Accept without SSE", method: "POST", headers: with_session(&[("accept", "application/json")]), body: ping.clone(), status: 406, code: Some(-32000) },
        Case { name: "oversized body", method: "POST", headers: with_session(&[]), body: format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#, "x".repeat(70_000)).into_bytes(), status: 413, code: Some(-32000) },
        Case { name: "unknown session id", method: "POST", headers: with_session(&[("mcp-session-id", "0123456789abcdef0123456789abcdef0123456789abcdef")]), body: ping.clone(), status: 404, code: Some(-32001) },
        Case { name: "another principal's session id", method: "POST", headers: with_session(&[("mcp-session-id", &other_principals)]), body: ping.clone(), status: 404, code: Some(-32001) },
        Case { name: "missing session id", method: "POST", headers: with_session(&[]).into_iter().filter(|(k, _)| *k != "mcp-session-id").collect(), body: ping.clone(), status: 400, code: Some(-32000) },
        Case { name: "bad Origin", method: "POST", headers: with_session(&[("origin", "https://evil.example")]), body: ping.clone(), status: 403, code: Some(-32000) },
        Case { name: "bad Host", method: "POST", headers: with_session(&[("host", "evil.example")]), body: ping.clone(), status: 403, code: Some(-32000) },
        Case { name: "no bearer token", method: "POST", headers: with_session(&[]).into_iter().filter(|(k, _)| *k != "authorization").collect(), body: ping.clone(), status: 401, code: Some(-32000) },
        Case { name: "wrong bearer token", method: "POST", headers: with_session(&[("authorization", "Bearer nope")]), body: ping.clone(), status: 401, code: Some(-32000) },
        Case { name: "unsupported protocol version header", method: "POST", headers: with_session(&[("mcp-protocol-version", "1999-01-01")]), body: ping.clone(), status: 400, code: Some(-32022) },
        // Issue 9 (4): a revision nobody speaks is "unsupported", not "_meta required".
        Case { name: "future protocol version header", method: "POST", headers: with_session(&[("mcp-protocol-version", "9999-12-31")]), body: ping.clone(), status: 400, code: Some(-32022) },
        // Issue 9 (4): ids are strings or integers; a null id is not a notification.
        Case { name: "null id", method: "POST", headers: with_session(&[]), body: br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.to_vec(), status: 400, code: Some(-32600) },
        Case { name: "object id", method: "POST", headers: with_session(&[]), body: br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#.to_vec(), status: 400, code: Some(-32600) },
        Case { name: "array id", method: "POST", headers: with_session(&[]), body: br#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#.to_vec(), status: 400, code: Some(-32600) },
        Case { name: "boolean id", method: "POST", headers: with_session(&[]), body: br#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#.to_vec(), status: 400, code: Some(-32600) },
        Case { name: "fractional id", method: "POST", headers: with_session(&[]), body: br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#.to_vec(), status: 400, code: Some(-32600) },
        Case { name: "60 KB id", method: "POST", headers: with_session(&[]), body: format!(r#"{{"jsonrpc":"2.0","id":"{}","method":"ping"}}"#, "i".repeat(60_000)).into_bytes(), status: 400, code: Some(-32600) },
        Case { name: "Host with junk after an IPv6 literal", method: "POST", headers: with_session(&[("host", "[::1].evil.com")]), body: ping.clone(), status: 400, code: Some(-32000) },
        Case { name: "Host with a name glued to an IPv6 literal", method: "POST", headers: with_session(&[("host", "[::1]evil.com:80")]), body: ping.clone(), status: 400, code: Some(-32000) },
        Case { name: "batch on 2025-06-18", method: "POST", headers: with_session(&[]), body: format!("[{}]", String::from_utf8(ping.clone()).unwrap()).into_bytes(), status: 400, code: Some(-32600) },
        Case { name: "modern request without clientCapabilities", method: "POST", headers: with_session(&[]), body: br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#.to_vec(), status: 400, code: Some(-32602) },
        Case { name: "GET without session", method: "GET", headers: h(&[("accept", "text/event-stream"), ("authorization", auth_a)]), body: vec![], status: 400, code: Some(-32000) },
        Case { name: "GET without SSE in Accept", method: "GET", headers: h(&[("accept", "application/json"), ("authorization", auth_a), ("mcp-session-id", &healthy)]), body: vec![], status: 406, code: Some(-32000) },
        Case { name: "DELETE of unknown session", method: "DELETE", headers: h(&[("authorization", auth_a), ("mcp-session-id", "nope")]), body: vec![], status: 404, code: Some(-32001) },
        Case { name: "PUT", method: "PUT", headers: with_session(&[]), body: ping.clone(), status: 405, code: Some(-32000) },
        Case { name: "unknown namespace", method: "POST", headers: with_session(&[]), body: ping.clone(), status: 404, code: Some(-32000) },
    ];

    for case in cases {
        let target = if case.name == "unknown namespace" {
            gw.url("/ns/nope/mcp")
        } else {
            url.clone()
        };
        let method = reqwest::Method::from_bytes(case.method.as_bytes()).unwrap();
        let mut req = client.request(method, &target).body(case.body.clone());
        for (k, v) in &case.headers {
            req = req.header(*k, v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text().await.unwrap();
        assert_eq!(status, case.status, "{}: body {body}", case.name);
        if let Some(code) = case.code {
            let v: Value = serde_json::from_str(&body)
                .unwrap_or_else(|_| panic!("{}: body not JSON: {body}", case.name));
            assert_eq!(v["jsonrpc"], "2.0", "{}", case.name);
            assert_eq!(v["error"]["code"], code, "{}: {body}", case.name);
            assert!(
                !body.contains(&healthy) && !body.contains(&other_principals),
                "{}: body leaks a session id",
                case.name
            );
            assert!(
                body.len() < 1024,
                "{}: the refusal echoes the input",
                case.name
            );
        }
        match case.status {
            405 => assert_eq!(headers["allow"], "GET, POST, DELETE"),
            401 => assert_eq!(headers["www-authenticate"], "Bearer"),
            _ => {}
        }

        // The healthy session is undisturbed.
        let mut ok = client.post(&url).body(ok_call.to_string());
        for (k, v) in with_session(&[]) {
            ok = ok.header(k, v);
        }
        let r = ok.send().await.unwrap();
        assert_eq!(r.status(), 200, "after {}", case.name);
        let v: Value = r.json().await.unwrap();
        assert_eq!(text_of(&v), "still here", "after {}", case.name);
    }
    assert_eq!(gw.metrics().get("sluice_client_sessions_live"), 2.0);
}

/// Notifications and responses get 202 with an empty body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_get_202() {
    let gw = Gateway::start(&demo_backend("demo"));
    let http = Http::new(gw.url("/mcp"));
    let id = http.initialize().await;
    let r = http
        .post(
            Some(&id),
            &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        )
        .await;
    assert_eq!(r.status, 202);
    assert!(r.body.is_empty());
    let r = http
        .post(Some(&id), &json!({"jsonrpc":"2.0","id":"x","result":{}}))
        .await;
    assert_eq!(r.status, 202);
}

/// A gateway with the demo backend and a 2025-03-26 session (the revision
/// that may batch).
async fn batching_session() -> (Gateway, Http, String) {
    let gw = Gateway::start(&demo_backend("demo"));
    let http = Http::new(gw.url("/mcp"));
    let mut init = init_request(1);
    init["params"]["protocolVersion"] = json!("2025-03-26");
    let r = http.post(None, &init).await;
    assert_eq!(r.json()["result"]["protocolVersion"], "2025-03-26");
    let id = r.session_id().unwrap();
    (gw, http, id)
}

/// 2025-03-26 sessions may batch; responses come back as an array.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_on_2025_03_26() {
    let (_gw, http, id) = batching_session().await;
    let batch = json!([
        {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"one"}}},
        {"jsonrpc":"2.0","method":"notifications/initialized"},
        {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"demo__add","arguments":{"a":1,"b":2}}},
        {"bogus":true}
    ]);
    let r = http.post(Some(&id), &batch).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let replies = r.json();
    let replies = replies.as_array().unwrap();
    assert_eq!(replies.len(), 3);
    let by_id = |i: i64| replies.iter().find(|m| m["id"] == i).unwrap();
    assert_eq!(text_of(by_id(1)), "one");
    assert_eq!(text_of(by_id(2)), "3");
    assert!(replies.iter().any(|m| m["error"]["code"] == -32600));
}

/// Version negotiation: a known version is echoed, an unknown one gets ours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_negotiates_versions() {
    let gw = Gateway::start(&demo_backend("demo"));
    let http = Http::new(gw.url("/mcp"));
    for (asked, got) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2024-10-07", "2025-11-25"),
    ] {
        let mut init = init_request(1);
        init["params"]["protocolVersion"] = json!(asked);
        let r = http.post(None, &init).await;
        assert_eq!(r.json()["result"]["protocolVersion"], got);
        assert_eq!(r.json()["result"]["serverInfo"]["name"], "sluice");
    }
}

/// A key repeated inside `params` where the gateway reads it (`name`,
/// `_meta`'s keys, `ref`'s) is refused as a repeated top-level key is:
/// 400 with the same code, and nothing called, so an inspector that reads
/// the first `name` never sees another tool than the one the gateway
/// calls. In a batch it is that item's error, and the others are served.
/// Before, the last `name` was called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_repeated_in_params_is_refused_like_a_repeated_top_level_key() {
    let (_gw, http, sid) = batching_session().await;

    let top = http
        .post_bytes(
            &sid,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/call","params":{"name":"demo__counter","arguments":{}}}"#.into(),
        )
        .await;
    assert_eq!(top.status, 400, "{}", top.body);
    let code = top.json()["error"]["code"].clone();
    assert_eq!(code, -32700);
    for (case, body) in [
        (
            "name",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"x"},"name":"demo__counter"}}"#,
        ),
        (
            "name, spelled with an escape",
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"x"},"na\u006de":"demo__counter"}}"#,
        ),
        (
            "_meta.progressToken",
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"demo__counter","arguments":{},"_meta":{"progressToken":1,"progressToken":2}}}"#,
        ),
        (
            "ref.name",
            r#"{"jsonrpc":"2.0","id":5,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"demo__greeting","name":"demo__other"},"argument":{"name":"n","value":""}}}"#,
        ),
    ] {
        let r = http.post_bytes(&sid, body.into()).await;
        assert_eq!(r.status, 400, "{case}: {}", r.body);
        assert_eq!(r.json()["error"]["code"], code, "{case}: {}", r.body);
        assert!(r.body.contains("duplicate field"), "{case}: {}", r.body);
    }

    let batch = r#"[{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"x"},"name":"demo__counter"}},
        {"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"served"}}}]"#;
    let r = http.post_bytes(&sid, batch.into()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let lines = r.json();
    let lines = lines.as_array().unwrap();
    assert_eq!(lines.len(), 2, "{}", r.body);
    let refused = lines.iter().find(|l| l["id"].is_null()).unwrap();
    assert_eq!(refused["error"]["code"], code);
    let served = lines.iter().find(|l| l["id"] == 11).unwrap();
    assert_eq!(text_of(served), "served");

    // None of the refused calls reached the counter.
    let counted = http.tool(&sid, 20, "demo__counter", json!({})).await;
    assert_eq!(text_of(&counted), "1");
}
