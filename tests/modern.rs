//! The 2026-07-28 front: stateless requests beside legacy sessions on one
//! endpoint, its refusals, server/discover and subscriptions/listen.

mod support;

use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{Value, json};
use support::*;

const RAW: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/raw_backend.py");

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "sluice-test", "version": "0"}
    })
}

/// A well-formed modern request: body `_meta` and the mirrored headers.
async fn modern(http: &Http, id: u64, method: &str, mut params: Value) -> Reply {
    // The request's own `_meta` keys (a progress token) stay beside ours.
    let mut m = meta();
    if let Some(own) = params["_meta"].as_object() {
        for (k, v) in own {
            m[k] = v.clone();
        }
    }
    params["_meta"] = m;
    let name = params["name"]
        .as_str()
        .or(params["uri"].as_str())
        .or(params["taskId"].as_str())
        .map(str::to_owned);
    let mut headers = vec![
        ("content-type", "application/json".to_owned()),
        ("accept", ACCEPT_BOTH.to_owned()),
        ("mcp-protocol-version", "2026-07-28".to_owned()),
        ("mcp-method", method.to_owned()),
    ];
    if let Some(n) = name {
        headers.push(("mcp-name", n));
    }
    let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let body = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
    http.post_raw(&pairs, body.to_string()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_requests_are_served_without_a_session() {
    let gw = Gateway::start(&demo_backend("demo"));
    let http = Http::new(gw.url("/mcp"));

    let d = modern(&http, 1, "server/discover", json!({})).await;
    assert_eq!(d.status, 200, "{}", d.body);
    let r = &d.json()["result"];
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["supportedVersions"][0], "2026-07-28");
    assert!(r["capabilities"]["tools"].is_object());
    assert!(r["capabilities"].get("logging").is_none());
    assert!(r["ttlMs"].is_u64() && r["cacheScope"].is_string());
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "sluice"
    );
    assert!(d.session_id().is_none());

    let l = modern(&http, 2, "tools/list", json!({})).await.json();
    assert_eq!(l["result"]["tools"].as_array().unwrap().len(), 4);
    assert_eq!(l["result"]["resultType"], "complete");
    assert!(l["result"]["ttlMs"].is_u64());

    let c = modern(
        &http,
        3,
        "tools/call",
        json!({"name":"demo__echo","arguments":{"text":"stateless"}}),
    )
    .await;
    assert_eq!(text_of(&c.json()), "stateless");
    assert_eq!(c.json()["result"]["resultType"], "complete");

    // Progress comes on the request's own stream, then the result.
    let mut params = json!({"name":"demo__sleep_ms","arguments":{"ms":50}});
    params["_meta"] = meta();
    params["_meta"]["progressToken"] = json!("m1");
    let p = http
        .post_raw(
            &[
                ("content-type", "application/json"),
                ("accept", ACCEPT_BOTH),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "demo__sleep_ms"),
            ],
            json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":params}).to_string(),
        )
        .await;
    let msgs = p.messages();
    assert_eq!(
        msgs.iter()
            .filter(|m| m["method"] == "notifications/progress")
            .count(),
        5
    );
    assert_eq!(msgs.last().unwrap()["result"]["resultType"], "complete");

    // Both eras on one endpoint: a legacy session works alongside.
    let sid = http.initialize().await;
    assert_eq!(http.call(&sid, 5, "ping", json!({})).await.status, 200);
    let m = gw.metrics();
    assert_eq!(m.get("sluice_client_sessions_live"), 1.0);
    assert_eq!(
        m.get(r#"sluice_requests_total{era="modern",method="tools/call",outcome="ok"}"#),
        2.0
    );
}

/// Each refusal of the 2026-07-28 revision, with its status and code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_refusals() {
    let gw = Gateway::start(&demo_backend("demo"));
    let http = Http::new(gw.url("/mcp"));
    let post = |headers: Vec<(&'static str, &'static str)>, body: Value| {
        let http = http.clone();
        async move {
            let mut h = vec![
                ("content-type", "application/json"),
                ("accept", ACCEPT_BOTH),
            ];
            h.extend(headers);
            http.post_raw(&h, body.to_string()).await
        }
    };
    let good = vec![
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
    ];
    let m = meta();
    // (case, headers, body, status, JSON-RPC code)
    type Case = (
        &'static str,
        Vec<(&'static str, &'static str)>,
        Value,
        u16,
        i64,
    );
    let cases: Vec<Case> = vec![
        (
            "unsupported version",
            vec![
                ("mcp-protocol-version", "2099-01-01"),
                ("mcp-method", "tools/list"),
            ],
            json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}),
            400,
            -32022,
        ),
        (
            "missing clientCapabilities",
            good.clone(),
            json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}),
            400,
            -32602,
        ),
        (
            "missing MCP-Protocol-Version",
            vec![("mcp-method", "tools/list")],
            json!({"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":m}}),
            400,
            -32020,
        ),
        (
            "Mcp-Method disagrees",
            vec![
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "prompts/list"),
            ],
            json!({"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":m}}),
            400,
            -32020,
        ),
        (
            "missing Mcp-Name",
            vec![
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
            ],
            json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"x"},"_meta":m}}),
            400,
            -32020,
        ),
        (
            "removed method",
            vec![
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "ping"),
            ],
            json!({"jsonrpc":"2.0","id":6,"method":"ping","params":{"_meta":m}}),
            404,
            -32601,
        ),
        (
            "unknown method",
            vec![
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "no/such"),
            ],
            json!({"jsonrpc":"2.0","id":7,"method":"no/such","params":{"_meta":m}}),
            404,
            -32601,
        ),
    ];
    for (name, headers, body, status, code) in cases {
        let id = body["id"].clone();
        let r = post(headers, body).await;
        assert_eq!(r.status, status, "{name}: {}", r.body);
        let v = r.json();
        assert_eq!(v["error"]["code"], code, "{name}: {}", r.body);
        assert_eq!(v["id"], id, "{name}: the refusal answers the request's id");
        if code == -32022 {
            assert_eq!(v["error"]["data"]["requested"], "2099-01-01");
            assert!(
                v["error"]["data"]["supported"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("2026-07-28"))
            );
        }
    }
    // Base64 Mcp-Name for a value outside the header-safe set matches too.
    let r = post(
        vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "=?base64?ZGVtb19fZWNobw==?=")],
        json!({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"b64"},"_meta":m}}),
    )
    .await;
    assert_eq!(text_of(&r.json()), "b64");
    assert_eq!(gw.metrics().get("sluice_client_sessions_live"), 0.0);
}

/// One merged acknowledgement; backend list changes reach the listener
/// carrying its subscription id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_listen_delivers_list_changes() {
    let toml = format!(
        "{}[backends.raw]\ntransport = \"stdio\"\ncommand = \"python3\"\nargs = [\"{RAW}\"]\n",
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let mut params = json!({"notifications": {"toolsListChanged": true, "promptsListChanged": false, "resourceSubscriptions": ["demo://readme"]}});
    params["_meta"] = meta();
    let stream = http.listen("sub-9", params).await;
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let mut events = Events::new(stream);
    let ack = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-9"
    );

    let r = modern(
        &http,
        2,
        "tools/call",
        json!({"name":"raw__change","arguments":{}}),
    )
    .await;
    assert_eq!(text_of(&r.json()), "changed");
    let change = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .unwrap();
    assert_eq!(change["method"], "notifications/tools/list_changed");
    assert_eq!(
        change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-9"
    );
}

/// A bounded map's size as /metrics reports it; the map must be reported.
fn entries(m: &Metrics, map: &str, owner: &str) -> f64 {
    m.get(&format!(
        r#"sluice_bounded_entries{{map="{map}",owner="{owner}"}}"#
    ))
}

/// 10,000 modern requests leave no per-request state behind: every map a
/// request could grow (pending calls, list pages under client cursors, the
/// name index under unknown names, the task index under unknown tasks)
/// is as small afterwards as its bound says, and memory comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_modern_requests_leave_nothing() {
    let toml = format!(
        "{}[namespaces.default]\nbackends = [\"demo\"]\nprefix = \"never\"\n",
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let before = gw.metrics();
    let rss_before = before.get("process_resident_memory_bytes");
    for chunk in 0..100u64 {
        let replies = join_all((0..100u64).map(|i| {
            let http = http.clone();
            let n = chunk * 100 + i;
            async move {
                // Each request differs in what a careless gateway would keep.
                let (method, params) = match n % 4 {
                    0 => (
                        "tools/call",
                        json!({"name":"echo","arguments":{"text":"n"},
                        "_meta":{"progressToken": format!("p-{n}")}}),
                    ),
                    1 => (
                        "tools/list",
                        json!({"cursor": format!("s2.0.0.client-made-{n}")}),
                    ),
                    2 => (
                        "tools/call",
                        json!({"name": format!("unknown-{n}"),"arguments":{}}),
                    ),
                    _ => ("tasks/get", json!({"taskId": format!("task-{n}")})),
                };
                (n % 4, modern(&http, n, method, params).await)
            }
        }))
        .await;
        for (kind, r) in replies {
            assert_eq!(r.status, 200, "{}", r.body);
            if kind == 0 {
                assert_eq!(text_of(&r.json()), "n");
            }
        }
    }
    let after = gw.metrics();
    assert_eq!(after.get("sluice_client_sessions_live"), 0.0);
    assert_eq!(after.get("sluice_client_sessions_opened_total"), 0.0);
    for key in [
        r#"sluice_backend_sessions_live{backend="demo"}"#,
        r#"sluice_backend_sessions_opened_total{backend="demo"}"#,
    ] {
        assert_eq!(after.get(key), before.get(key), "{key}");
    }
    assert_eq!(entries(&after, "pending_calls", "demo"), 0.0);
    assert_eq!(entries(&after, "server_requests", "demo"), 0.0);
    // One page per list kind at most: client cursors are never keys.
    assert!(entries(&after, "list_pages", "demo") <= 4.0);
    assert!(entries(&after, "list_hashes", "demo") <= 4.0);
    // The names the demo backend has, not the 2,500 asked for.
    assert!(entries(&after, "name_index", "default") <= 16.0);
    assert_eq!(entries(&after, "task_index", "default"), 0.0);
    let grown = after.get("process_resident_memory_bytes") - rss_before;
    assert!(grown < 32.0 * 1024.0 * 1024.0, "RSS grew by {grown} bytes");
    assert_eq!(
        after.get(r#"sluice_requests_total{era="modern",method="tools/call",outcome="ok"}"#),
        2_500.0
    );
}

/// `sessions = "stateless"`: 10,000 legacy initializes, each a different
/// client, keep nothing: no session, no backend session per client (with
/// per-session isolation the principal is the key), nothing pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_stateless_initializes_keep_nothing() {
    let gw = Gateway::start(&format!(
        "[server]\nsessions = \"stateless\"\n{}isolation = \"per-session\"\n",
        demo_backend("demo")
    ));
    let http = Http::new(gw.url("/mcp"));
    let rss_before = gw.metrics().get("process_resident_memory_bytes");
    for chunk in 0..100u64 {
        let replies = join_all((0..100u64).map(|i| {
            let http = http.clone();
            async move {
                let n = chunk * 100 + i;
                let mut init = init_request(n);
                init["params"]["clientInfo"]["name"] = json!(format!("client-{n}"));
                let r = http.post(None, &init).await;
                // Each also uses the backend once, as a new client would.
                let call = http
                    .post(
                        None,
                        &json!({"jsonrpc":"2.0","id":n,"method":"tools/call",
                    "params":{"name":"demo__echo","arguments":{"text":"s"}}}),
                    )
                    .await;
                (r, call)
            }
        }))
        .await;
        for (r, call) in replies {
            assert!(r.status == 200 && r.session_id().is_none());
            assert_eq!(text_of(&call.json()), "s");
        }
    }
    let m = gw.metrics();
    assert_eq!(m.get("sluice_client_sessions_live"), 0.0);
    assert_eq!(m.get("sluice_client_sessions_opened_total"), 0.0);
    assert!(entries(&m, "backend_slots", "demo") <= 1.0);
    assert!(m.get(r#"sluice_backend_sessions_live{backend="demo"}"#) <= 1.0);
    assert_eq!(entries(&m, "pending_calls", "demo"), 0.0);
    let grown = m.get("process_resident_memory_bytes") - rss_before;
    assert!(grown < 32.0 * 1024.0 * 1024.0, "RSS grew by {grown} bytes");
    assert_eq!(
        m.get(r#"sluice_requests_total{era="legacy",method="initialize",outcome="ok"}"#),
        10_000.0
    );
}

/// `Mcp-Param-*` headers must mirror the arguments that the tool's schema
/// marks with `x-mcp-header`, each sent once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn param_headers_are_checked_against_the_schema() {
    let gw = Gateway::start(&format!(
        "[backends.raw]\ntransport = \"stdio\"\ncommand = \"python3\"\nargs = [\"{RAW}\"]\n"
    ));
    let http = Http::new(gw.url("/mcp"));
    let mut params = json!({"name":"raw__routed","arguments":{"region":"eu-west"}});
    params["_meta"] = meta();
    let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":params}).to_string();
    let base = [
        ("content-type", "application/json"),
        ("accept", ACCEPT_BOTH),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "raw__routed"),
    ];
    let r = http.post_raw(&base, body.clone()).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], -32020);
    let mut wrong = base.to_vec();
    wrong.push(("mcp-param-region", "us-east"));
    let r = http.post_raw(&wrong, body.clone()).await;
    assert_eq!(r.json()["error"]["code"], -32020);
    let mut right = base.to_vec();
    right.push(("Mcp-Param-Region", "eu-west"));
    let r = http.post_raw(&right, body.clone()).await;
    assert_eq!(text_of(&r.json()), "routed");
    // Sent twice, it has no one value: refused even when the first agrees.
    let mut twice = right.clone();
    twice.push(("mcp-param-region", "us-east"));
    let r = http.post_raw(&twice, body).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], -32020);
}
