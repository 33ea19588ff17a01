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
    let r = http.modern_call(id, tool, params, &[]).await;
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

/// The report of the `roots` backend's `fault` tool: what `roots/list`
/// answered after its handshake and during the call.
fn roots_report(msg: &Value) -> Value {
    serde_json::from_str(text_of(msg)).unwrap()
}

/// Item 6: a shared backend gets the roots configured for it, answered by
/// the gateway, whoever calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_backend_gets_its_configured_roots() {
    let toml = faulty_stdio(
        "fs",
        "roots",
        "roots = [\"file:///srv/a\", \"file:///srv/b\"]",
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let r = http
        .call(
            &sid,
            2,
            "tools/call",
            json!({"name":"fs__fault","arguments":{}}),
        )
        .await;
    let report = roots_report(&r.messages().pop().unwrap());
    let want = json!({"roots": [{"uri": "file:///srv/a"}, {"uri": "file:///srv/b"}]});
    assert_eq!(report["early"], want, "{report}");
    assert_eq!(report["during"], want, "{report}");
}

/// Item 6: a per-session backend is told its client's roots capability and
/// asks the client itself: outside any call on the client's GET stream,
/// during a call on that call's stream. A client without the capability
/// is never asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_session_backend_asks_its_own_client_for_roots() {
    let toml = faulty_stdio("fs", "roots", "isolation = \"per-session\"");
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let sid = http
        .initialize_with(json!({"roots": {"listChanged": true}}))
        .await;
    let mut stream = http.get_stream(&sid).await;
    // The first call opens the backend session; it asks right away.
    // Over stdio nothing says whether it belongs to the call in flight: it
    // comes on that call's stream, or else on the GET stream.
    let r = http
        .post(
            Some(&sid),
            &json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
        "params":{"name":"fs__echo","arguments":{"text":"open"}}}),
        )
        .await;
    let messages = r.messages();
    assert_eq!(text_of(messages.last().unwrap()), "open");
    let on_call = messages
        .iter()
        .find(|m| m["method"] == "roots/list")
        .cloned();
    let ask: Value = match on_call {
        Some(ask) => ask,
        None => {
            let mut seen = String::new();
            loop {
                let chunk = stream.chunk().await.unwrap().expect("GET stream ended");
                seen.push_str(&String::from_utf8_lossy(&chunk));
                if let Some(line) = seen.lines().find(|l| l.contains("roots/list")) {
                    break serde_json::from_str(line.trim_start_matches("data:").trim()).unwrap();
                }
            }
        }
    };
    let early = json!({"roots": [{"uri": "file:///home/client", "name": "home"}]});
    let answer = json!({"jsonrpc":"2.0","id":ask["id"],"result":early});
    assert_eq!(http.post(Some(&sid), &answer).await.status, 202);

    // During a call: on the call's own stream.
    let mut call = http
        .client
        .post(&http.url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("mcp-session-id", &sid)
        .body(json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fs__fault","arguments":{}}}).to_string())
        .send()
        .await
        .unwrap();
    let mut seen = String::new();
    let ask: Value = loop {
        let chunk = call.chunk().await.unwrap().expect("call stream ended");
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(line) = seen.lines().find(|l| l.contains("roots/list")) {
            break serde_json::from_str(line.trim_start_matches("data:").trim()).unwrap();
        }
    };
    let during = json!({"roots": [{"uri": "file:///work"}]});
    let answer = json!({"jsonrpc":"2.0","id":ask["id"],"result":during});
    assert_eq!(http.post(Some(&sid), &answer).await.status, 202);
    let rest = call.text().await.unwrap();
    let last: Value = rest
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .next_back()
        .unwrap();
    let report = roots_report(&last);
    assert_eq!(report["early"], early, "{report}");
    assert_eq!(report["during"], during, "{report}");

    // A client that declared no roots: the backend is refused, not left waiting.
    let other = http.initialize().await;
    let r = http
        .post(
            Some(&other),
            &json!({"jsonrpc":"2.0","id":4,"method":"tools/call",
        "params":{"name":"fs__fault","arguments":{}}}),
        )
        .await;
    let report = roots_report(&r.messages().pop().unwrap());
    assert_eq!(report["early"]["error"]["code"], -32601, "{report}");
    assert_eq!(report["during"]["error"]["code"], -32601, "{report}");
}

/// Item 2, the reverse: a 2026-07-28 backend's `input_required` reaches a
/// legacy client as the server-to-client requests it understands; its
/// answers go back as `inputResponses` and the call completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_backends_input_required_reaches_a_legacy_client_as_requests() {
    // A 2026-07-28-only server: a dual-era one would serve a legacy client
    // a legacy session, where input_required does not exist.
    let fx = faulty_http("modern", &[]);
    let gw = Gateway::start(&http_backend("mod", &fx.url(), ""));
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize_with(json!({"elicitation": {}})).await;
    let mut call = http
        .client
        .post(&http.url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("mcp-session-id", &sid)
        .body(
            json!({"jsonrpc":"2.0","id":"e1","method":"tools/call","params":{
                "name":"mod__fault","arguments":{}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let mut seen = String::new();
    let ask: Value = loop {
        let chunk = call
            .chunk()
            .await
            .unwrap()
            .expect("no question before the end");
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(line) = seen.lines().find(|l| l.contains("elicitation/create")) {
            break serde_json::from_str(line.trim_start_matches("data:").trim()).unwrap();
        }
    };
    assert!(
        ask["id"].as_str().unwrap().starts_with("sluice:@:"),
        "{ask}"
    );
    // Another session may not answer it.
    let other = http.initialize_with(json!({"elicitation": {}})).await;
    let forged = json!({"jsonrpc":"2.0","id":ask["id"],"result":{"action":"accept","content":{"name":"Mallory"}}});
    assert_eq!(http.post(Some(&other), &forged).await.status, 202);
    let answer = json!({"jsonrpc":"2.0","id":ask["id"],"result":{"action":"accept","content":{"name":"Ada"}}});
    assert_eq!(http.post(Some(&sid), &answer).await.status, 202);
    let rest = call.text().await.unwrap();
    assert!(rest.contains("Hello, Ada!"), "{rest}");
    // A client that cannot be asked gets an error, not a result it cannot use.
    let plain = http.initialize().await;
    let r = http
        .call(
            &plain,
            2,
            "tools/call",
            json!({"name":"mod__fault","arguments":{}}),
        )
        .await;
    let msg = r.messages().pop().unwrap();
    assert!(
        msg["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("elicitation")),
        "{msg}"
    );
}

/// A `tools/call` of `tool` (id "c1") on a legacy session, its response
/// streaming.
async fn start_call(http: &Http, sid: &str, tool: &str) -> ::reqwest::Response {
    http.client
        .post(&http.url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("mcp-session-id", sid)
        .body(
            json!({"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{
                "name": tool,"arguments":{}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap()
}

/// Calls `tool` on a legacy session, answers the one question it brings on
/// the call's stream with `answer`, and returns the question and the rest
/// of the stream.
async fn answered(http: &Http, sid: &str, tool: &str, answer: Value) -> (Value, String) {
    let mut call = start_call(http, sid, tool).await;
    let mut seen = String::new();
    let ask: Value = loop {
        let chunk = call.chunk().await.unwrap();
        let chunk = chunk.unwrap_or_else(|| panic!("{tool}: no question before the end: {seen}"));
        seen.push_str(&String::from_utf8_lossy(&chunk));
        let asked = seen.lines().find(|l| l.contains("\"id\":\"sluice:@:"));
        if let Some(line) = asked {
            break serde_json::from_str(line.trim_start_matches("data:").trim()).unwrap();
        }
    };
    let reply = json!({"jsonrpc":"2.0","id":ask["id"],"result":answer});
    assert_eq!(http.post(Some(sid), &reply).await.status, 202);
    (ask, call.text().await.unwrap())
}

/// Issue 39, item 1: a 2026-07-28-only backend that checks the request's
/// declared capabilities before asking (as the spec has it) asks a legacy
/// client each kind of question, because the gateway tells it what the
/// client declared in its `initialize`; the answer reaches the backend as
/// `inputResponses` with its `requestState` untouched. Nothing undeclared
/// is claimed: such a client, or one without a session, gets the backend's
/// -32021 refusal, never a question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_clients_declared_capabilities_reach_a_modern_backend() {
    let fx = faulty_http("modern", &[]);
    let gw = Gateway::start(&http_backend("mod", &fx.url(), ""));
    let http = Http::new(gw.url("/mcp"));
    let all = json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}});
    let sid = http.initialize_with(all).await;
    let sampled = json!({"role":"assistant","content":{"type":"text","text":"Paris"},"model":"m"});
    let rooted = json!({"roots":[{"uri":"file:///srv","name":"srv"}]});
    for (tool, method, answer) in [
        ("mod__ask_sampling", "sampling/createMessage", sampled),
        (
            "mod__ask_url",
            "elicitation/create",
            json!({"action":"accept"}),
        ),
        ("mod__ask_roots", "roots/list", rooted),
    ] {
        let (ask, rest) = answered(&http, &sid, tool, answer.clone()).await;
        assert_eq!(ask["method"], method, "{tool}: {ask}");
        assert!(
            rest.contains(&format!("answered: {answer}").replace('"', "\\\"")),
            "{tool}: the backend got the answer as inputResponses, with its state: {rest}"
        );
    }

    // Declared elicitation only: sampling is not claimed for it.
    let some = http.initialize_with(json!({"elicitation": {}})).await;
    let r = http
        .call(
            &some,
            2,
            "tools/call",
            json!({"name":"mod__ask_sampling","arguments":{}}),
        )
        .await;
    let refusal = r.messages().pop().unwrap();
    assert_eq!(refusal["error"]["code"], -32021, "{refusal}");
    assert_eq!(
        refusal["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );
    // Form elicitation is, and the backend asks.
    let (ask, rest) = answered(
        &http,
        &some,
        "mod__fault",
        json!({"action":"accept","content":{"name":"Grace"}}),
    )
    .await;
    assert_eq!(ask["params"]["mode"], "form");
    assert!(rest.contains("Hello, Grace!"), "{rest}");

    // What the backend was told, call by call.
    let (_, seen) = http_get(&format!("http://{}", fx.addr), "/seen").unwrap();
    let seen: Value = serde_json::from_str(&seen).unwrap();
    let told: Vec<Value> = seen
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["body"]["method"] == "tools/call" && r["body"]["params"]["inputResponses"].is_null()
        })
        .map(|r| r["body"]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].clone())
        .collect();
    assert_eq!(
        told,
        [
            json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": false}}),
            json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": false}}),
            json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": false}}),
            json!({"elicitation": {"form": {}}}),
            json!({"elicitation": {"form": {}}}),
        ]
    );
}

/// Without a session (`sessions = "stateless"`) a legacy client's
/// `initialize` is not kept, and no question could reach it: the backend is
/// told it declared nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_legacy_client_is_told_to_declare_nothing() {
    let fx = faulty_http("modern", &[]);
    let toml = format!(
        "[server]\nsessions = \"stateless\"\n{}",
        http_backend("mod", &fx.url(), "")
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let mut init = init_request(1);
    init["params"]["capabilities"] = json!({"elicitation": {}, "sampling": {}});
    assert_eq!(http.post(None, &init).await.status, 200);
    let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mod__fault","arguments":{}}});
    let refusal = http.post(None, &call).await.messages().pop().unwrap();
    assert_eq!(refusal["error"]["code"], -32021, "{refusal}");
}

/// The first SSE message of `stream` whose line contains `needle`, read
/// within 10 s (`seen` keeps what was read, for the next look).
async fn sse_message(stream: &mut ::reqwest::Response, seen: &mut String, needle: &str) -> Value {
    let found = async {
        loop {
            let line = seen.lines().find(|l| l.contains(needle));
            if let Some(line) = line {
                let message =
                    serde_json::from_str(line.trim_start_matches("data:").trim()).unwrap();
                let end = seen.find(line).unwrap() + line.len();
                seen.drain(..end);
                return message;
            }
            let chunk = stream.chunk().await.unwrap();
            let chunk = chunk.unwrap_or_else(|| panic!("stream ended before {needle}: {seen}"));
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), found)
        .await
        .unwrap_or_else(|_| panic!("no {needle} within 10 s: {seen}"))
}

/// Calls `tool` on a legacy session and answers its `elicitation/create`
/// with `accept`: the question, and the call's last message.
async fn accept_url_elicitation(http: &Http, sid: &str, tool: &str) -> (Value, Value) {
    let mut call = start_call(http, sid, tool).await;
    let mut seen = String::new();
    let ask = sse_message(&mut call, &mut seen, "elicitation/create").await;
    let reply = json!({"jsonrpc":"2.0","id":ask["id"],"result":{"action":"accept"}});
    assert_eq!(http.post(Some(sid), &reply).await.status, 202);
    let done = sse_message(&mut call, &mut seen, "\"result\"").await;
    (ask, done)
}

/// Issue 50: through one shared backend session, a URL mode elicitation's
/// `notifications/elicitation/complete`, which the backend (the
/// conformance fixture) sends outside the call, on its GET stream, reaches
/// the GET stream of the client session that was asked, and no other's;
/// the backend's -32042 reaches its caller with its elicitations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_elicitations_completion_reaches_only_the_client_it_was_handed_to() {
    let fx = Fixture::start_example("conformance_fixture", "127.0.0.1:0", &[]);
    let gw = Gateway::start(&http_backend("fx", &fx.url(), ""));
    let http = Http::new(gw.url("/mcp"));
    let url_mode = json!({"elicitation": {"url": {}}});
    let (a, b) = (
        http.initialize_with(url_mode.clone()).await,
        http.initialize_with(url_mode).await,
    );
    let (mut stream_a, mut stream_b) = (http.get_stream(&a).await, http.get_stream(&b).await);
    assert_eq!(
        (stream_a.status().as_u16(), stream_b.status().as_u16()),
        (200, 200)
    );
    let (mut seen_a, mut seen_b) = (String::new(), String::new());
    let completion = "notifications/elicitation/complete";

    let (ask, done) =
        accept_url_elicitation(&http, &a, "fx__test_elicitation_sep1036_complete").await;
    assert_eq!(ask["params"]["mode"], "url", "{ask}");
    assert!(text_of(&done).contains("action=accept"), "{done}");
    let id_a = ask["params"]["elicitationId"].clone();
    let told = sse_message(&mut stream_a, &mut seen_a, completion).await;
    assert_eq!(told["params"]["elicitationId"], id_a, "{told}");

    // B's own completion is the first B hears of: A's never reached it.
    let (ask, _) = accept_url_elicitation(&http, &b, "fx__test_elicitation_sep1036_complete").await;
    let told = sse_message(&mut stream_b, &mut seen_b, completion).await;
    assert_eq!(
        told["params"]["elicitationId"],
        ask["params"]["elicitationId"]
    );
    assert_ne!(told["params"]["elicitationId"], id_a);

    let r = http
        .call(
            &a,
            5,
            "tools/call",
            json!({"name": "fx__test_elicitation_sep1036_error", "arguments": {}}),
        )
        .await;
    let error = &r.messages().pop().unwrap()["error"];
    assert_eq!(error["code"], -32042, "{error}");
    let listed = &error["data"]["elicitations"][0];
    assert_eq!(listed["mode"], "url", "{error}");
    assert!(
        listed["elicitationId"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
}
