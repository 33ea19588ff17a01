//! Issue 13: what real clients see through the gateway when a backend asks
//! them something (sampling, elicitation, roots), in both eras. A legacy
//! backend's question during a 2026-07-28 client's call becomes an
//! `input_required` result; the client's retry with `inputResponses`
//! answers the backend and completes the call.

mod support;

use serde_json::{Value, json};
use support::*;

fn meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "bridging-test", "version": "0"}
    })
}

/// A modern tools/call with its mirrored headers.
async fn modern_call(http: &Http, id: u64, tool: &str, caps: Value, extra: Value) -> Value {
    let mut params = json!({"name": tool, "arguments": {}, "_meta": meta(caps)});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            params[k] = v;
        }
    }
    let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":params});
    let r = http
        .post_raw(
            &[
                ("content-type", "application/json"),
                ("accept", ACCEPT_BOTH),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", tool),
            ],
            body.to_string(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.messages().pop().unwrap()
}

/// Item 2: sampling asked by a legacy backend reaches a 2026-07-28 client
/// as `input_required`; its retry completes the very same backend call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_backends_question_reaches_a_modern_client_as_input_required() {
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let gw = Gateway::start(&http_backend("web", &fx.url(), ""));
    let http = Http::new(gw.url("/mcp"));

    let first = modern_call(&http, 1, "web__ask", json!({"sampling": {}}), json!({})).await;
    assert_eq!(first["id"], 1);
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let requests = result["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1);
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "sampling/createMessage");
    assert!(request["params"]["messages"].is_array(), "{request}");
    let state = result["requestState"].as_str().unwrap().to_owned();

    // A state the gateway never issued, or one presented twice, is refused.
    let bogus = modern_call(
        &http,
        2,
        "web__ask",
        json!({"sampling": {}}),
        json!({"requestState": "sluice-mrtr.00000000000000000000000000000000", "inputResponses": {}}),
    )
    .await;
    assert_eq!(bogus["error"]["code"], -32602, "{bogus}");

    let answer = json!({"role":"assistant","content":{"type":"text","text":"Paris, via the bridge"},"model":"test"});
    let done = modern_call(
        &http,
        3,
        "web__ask",
        json!({"sampling": {}}),
        json!({"requestState": state, "inputResponses": { key.clone(): answer }}),
    )
    .await;
    assert_eq!(done["id"], 3, "the retry's own id");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(done.to_string().contains("Paris, via the bridge"), "{done}");
    let again = modern_call(
        &http,
        4,
        "web__ask",
        json!({"sampling": {}}),
        json!({"requestState": state, "inputResponses": {}}),
    )
    .await;
    assert_eq!(
        again["error"]["code"], -32602,
        "a state is good for one retry"
    );
    let m = gw.metrics();
    assert_eq!(
        m.get(r#"sluice_bounded_entries{map="parked_calls",owner="gateway"}"#),
        0.0
    );
    assert_eq!(
        m.get(r#"sluice_bounded_entries{map="server_requests",owner="web"}"#),
        0.0
    );
}

/// Item 3: a client that did not declare sampling is never asked; the
/// backend gets the refusal the client itself would have given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_capability_is_not_asked() {
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let gw = Gateway::start(&http_backend("web", &fx.url(), ""));
    let http = Http::new(gw.url("/mcp"));
    // Modern, declaring nothing.
    let r = modern_call(&http, 1, "web__ask", json!({}), json!({})).await;
    assert_ne!(r["result"]["resultType"], "input_required", "{r}");
    assert!(r.to_string().contains("sampling failed"), "{r}");
    // Legacy, declaring nothing: no request on its stream either.
    let sid = http.initialize().await;
    let r = http
        .call(
            &sid,
            2,
            "tools/call",
            json!({"name":"web__ask","arguments":{}}),
        )
        .await;
    assert!(
        r.messages()
            .iter()
            .all(|m| m["method"] != "sampling/createMessage"),
        "{}",
        r.body
    );
    assert!(r.body.contains("sampling failed"), "{}", r.body);
}
