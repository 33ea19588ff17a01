//! The MCP semantic conventions' operation histograms (issue 42, part 4):
//! `mcp_server_operation_duration_seconds` for what the gateway answers and
//! `mcp_client_operation_duration_seconds` for what it asks a backend, by
//! method, tool (only a name a backend's catalog listed) and error type.

mod support;

use serde_json::json;
use support::*;

fn server(method: &str, tool: &str, error: &str) -> String {
    format!(
        r#"mcp_server_operation_duration_seconds_count{{mcp_method_name="{method}",gen_ai_tool_name="{tool}",error_type="{error}"}}"#
    )
}

fn client(method: &str, tool: &str, error: &str, backend: &str) -> String {
    format!(
        r#"mcp_client_operation_duration_seconds_count{{mcp_method_name="{method}",gen_ai_tool_name="{tool}",error_type="{error}",backend="{backend}"}}"#
    )
}

fn sum(count_key: &str) -> String {
    count_key.replace("_count{", "_sum{")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_observed_by_method_tool_and_error_type() {
    let gw = Gateway::start(&demo_backend("demo"));
    let http = Http::new(gw.url("/mcp"));
    let id = http.initialize().await;
    for n in 0..2 {
        let r = http
            .tool(&id, 10 + n, "demo__echo", json!({"text": "hi"}))
            .await;
        assert_eq!(r["result"]["isError"], json!(null), "{r}");
    }
    // A tool's own failure: a result with `isError`.
    let failed = http.tool(&id, 20, "demo__echo", json!({})).await;
    assert_eq!(failed["result"]["isError"], json!(true), "{failed}");
    // A name no catalog holds: refused before any backend, and never a label.
    let unknown = http.tool(&id, 21, "demo__made_up_name", json!({})).await;
    assert_eq!(unknown["error"]["code"], json!(-32602), "{unknown}");
    // A call that takes a known while: the durations measure it.
    let slow = http
        .tool(&id, 22, "demo__sleep_ms", json!({"ms": 200}))
        .await;
    assert!(slow["result"].is_object(), "{slow}");
    assert_eq!(
        http.call(&id, 23, "tools/list", json!({})).await.status,
        200
    );

    let text = reqwest::get(gw.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !text.contains("made_up_name"),
        "an unlisted name became a label"
    );
    let m = gw.metrics();
    // As the server: by the name the client called.
    assert_eq!(m.get(&server("tools/call", "demo__echo", "")), 2.0);
    assert_eq!(
        m.get(&server("tools/call", "demo__echo", "tool_error")),
        1.0
    );
    assert_eq!(m.get(&server("tools/call", "", "-32602")), 1.0);
    assert_eq!(m.get(&server("tools/list", "", "")), 1.0);
    assert_eq!(m.get(&server("initialize", "", "")), 1.0);
    // As the backend's client: by the backend's own name, and only what
    // reached it.
    assert_eq!(m.get(&client("tools/call", "echo", "", "demo")), 2.0);
    assert_eq!(
        m.get(&client("tools/call", "echo", "tool_error", "demo")),
        1.0
    );
    // Those three, the slow call, and nothing else.
    let asked_calls: f64 = text
        .lines()
        .filter(|l| {
            l.starts_with(
                r#"mcp_client_operation_duration_seconds_count{mcp_method_name="tools/call""#,
            )
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert_eq!(asked_calls, 4.0, "{text}");
    // The slow call's 200 ms, in both, in seconds (the upper bound only
    // tells seconds from milliseconds); the backend's share within the
    // gateway's whole.
    let served = m.get(&sum(&server("tools/call", "demo__sleep_ms", "")));
    let asked = m.get(&sum(&client("tools/call", "sleep_ms", "", "demo")));
    assert!((0.19..100.0).contains(&asked), "asked {asked} s");
    assert!(asked <= served, "asked {asked} s, served {served} s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_does_not_answer_in_time_is_a_timeout() {
    let toml = format!("{}request_timeout = \"300ms\"\n", demo_backend("demo"));
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let id = http.initialize().await;
    let late = http
        .tool(&id, 2, "demo__sleep_ms", json!({"ms": 3000}))
        .await;
    assert_eq!(late["error"]["code"], json!(-32603), "{late}");
    let m = gw.metrics();
    assert_eq!(
        m.get(&client("tools/call", "sleep_ms", "timeout", "demo")),
        1.0
    );
    assert_eq!(
        m.get(&server("tools/call", "demo__sleep_ms", "-32603")),
        1.0
    );
}

/// One backend in two namespaces, each with its own names: each call is
/// observed under the name its client called (the catalog keeps the first
/// namespace's series with the tool, the second finds its own), and both
/// under the backend's name as its client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_namespace_observes_its_own_names() {
    let toml = format!(
        "{}[namespaces.plain]\nbackends = [\"demo\"]\nprefix = \"never\"\n[namespaces.prefixed]\nbackends = [\"demo\"]\nprefix = \"always\"\n",
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    for (path, name) in [
        ("/ns/plain/mcp", "echo"),
        ("/ns/prefixed/mcp", "demo__echo"),
    ] {
        let http = Http::new(gw.url(path));
        let id = http.initialize().await;
        for n in 0..2 {
            let r = http.tool(&id, 2 + n, name, json!({"text": "hi"})).await;
            assert_eq!(r["result"]["isError"], json!(null), "{path}: {r}");
        }
    }
    let m = gw.metrics();
    assert_eq!(m.get(&server("tools/call", "echo", "")), 2.0);
    assert_eq!(m.get(&server("tools/call", "demo__echo", "")), 2.0);
    assert_eq!(m.get(&client("tools/call", "echo", "", "demo")), 4.0);
}
