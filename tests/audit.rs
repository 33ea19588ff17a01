//! The audit trail (issue 42, part 4): one structured line per tool call,
//! prompt get and resource read under the log target `sluice::audit`,
//! saying who, where, what, how it ended and how long it took; never what
//! a client holds (its token, its session id), and what it sent
//! (arguments) or got (results) only at the target's debug level.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

/// A gateway with two named static tokens whose log is JSON at `audit_level`
/// for the trail, and a session opened by the second token: (gateway,
/// session id).
async fn gateway_with_session(audit_level: &str) -> (Gateway, String) {
    let toml = format!(
        "[auth]\nbearer_tokens_env = \"TEST_TOKENS\"\n{}",
        demo_backend("demo")
    );
    let log = format!("warn,sluice::audit={audit_level}");
    let gw = Gateway::start_logged(
        &toml,
        &[
            ("TEST_TOKENS", "alpha=alpha-token,beta=beta-token"),
            ("SLUICE_LOG", log.as_str()),
            ("SLUICE_LOG_FORMAT", "json"),
        ],
    );
    let init = post_as(gw.url("/mcp"), "beta-token", None, &init_request(1)).await;
    let sid = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    (gw, sid)
}

/// The trail's lines so far.
fn audit_lines(gw: &Gateway) -> Vec<Value> {
    gw.log()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "sluice::audit")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_gets_and_reads_each_leave_one_audit_line() {
    let (gw, sid) = gateway_with_session("info").await;
    let url = gw.url("/mcp");
    let send = |id: u64, method: &str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let (url, sid) = (url.clone(), sid.clone());
        async move { post_as(url, "beta-token", Some(sid), &body).await }
    };
    let requests = [
        (
            "tools/call",
            json!({"name": "demo__echo", "arguments": {"text": "secret-arg"}}),
        ),
        ("tools/call", json!({"name": "demo__echo", "arguments": {}})),
        (
            "tools/call",
            json!({"name": "demo__ECHO", "arguments": {"text": "x"}}),
        ),
        (
            "prompts/get",
            json!({"name": "demo__greeting", "arguments": {"name": "Ada"}}),
        ),
        (
            "resources/read",
            json!({"uri": "sluice://demo/demo://readme"}),
        ),
        // Not on the trail: a list names nothing the client acts on.
        ("tools/list", json!({})),
    ];
    for (i, (method, params)) in requests.into_iter().enumerate() {
        let r = send(10 + i as u64, method, params).await;
        assert_eq!(r.status(), 200, "{method}");
        r.text().await.unwrap();
    }

    wait_until(Duration::from_secs(10), || audit_lines(&gw).len() >= 5);
    let lines = audit_lines(&gw);
    assert_eq!(lines.len(), 5, "{lines:#?}");
    let field = |v: &Value, k: &str| v[k].as_str().unwrap_or("").to_owned();
    let seen: Vec<(String, String, String, String)> = lines
        .iter()
        .map(|v| {
            (
                field(v, "method"),
                field(v, "name"),
                field(v, "backend"),
                field(v, "outcome"),
            )
        })
        .collect();
    let want = |m: &str, n: &str, b: &str, o: &str| (m.into(), n.into(), b.into(), o.into());
    assert_eq!(
        seen,
        [
            want("tools/call", "demo__echo", "demo", "ok"),
            want("tools/call", "demo__echo", "demo", "tool_error"),
            want("tools/call", "demo__ECHO", "demo", "unlisted"),
            want("prompts/get", "demo__greeting", "demo", "ok"),
            want(
                "resources/read",
                "sluice://demo/demo://readme",
                "demo",
                "ok"
            ),
        ]
    );
    for v in &lines {
        // By its name, not its position (issue 49).
        assert_eq!(v["principal"], "beta", "{v}");
        assert_eq!(v["namespace"], "default", "{v}");
        assert!(v["duration_ms"].as_f64().is_some_and(|d| d >= 0.0), "{v}");
        assert!(v["timestamp"].is_string(), "{v}");
    }
    let text = lines.iter().map(Value::to_string).collect::<String>();
    for never in [sid.as_str(), "beta-token", "secret-arg", "Ada"] {
        assert!(!text.contains(never), "{never} in the trail: {text}");
    }
}

/// Off unless asked for by name: at `SLUICE_LOG=info` no line is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trail_is_off_by_default() {
    let gw = Gateway::start_logged(&demo_backend("demo"), &[("SLUICE_LOG_FORMAT", "json")]);
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let r = http
        .tool(&sid, 2, "demo__echo", json!({"text": "hi"}))
        .await;
    assert_eq!(text_of(&r), "hi");
    // The call's own answer came after its trail line would have.
    assert!(!gw.log().contains("sluice::audit"), "{}", gw.log());
}

/// Asked for by the target's level (`sluice::audit=debug`), a line carries
/// the call's arguments and its result, each cut at 2,048 bytes; still
/// never the token or the session id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_debug_the_trail_carries_arguments_and_results_cut_short() {
    let (gw, sid) = gateway_with_session("debug").await;
    let url = gw.url("/mcp");
    let long = "L".repeat(5_000);
    for (id, text) in [(2, "shown-arg"), (3, long.as_str())] {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "demo__echo", "arguments": {"text": text}}});
        let r = post_as(url.clone(), "beta-token", Some(sid.clone()), &body).await;
        assert_eq!(r.status(), 200);
        r.text().await.unwrap();
    }
    wait_until(Duration::from_secs(10), || audit_lines(&gw).len() >= 2);
    let lines = audit_lines(&gw);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let (short, cut) = (&lines[0], &lines[1]);
    assert_eq!(short["arguments"], r#"{"text":"shown-arg"}"#, "{short}");
    let result = short["result"].as_str().unwrap();
    assert!(result.contains("shown-arg"), "{short}");
    let arguments = cut["arguments"].as_str().unwrap();
    let mark = format!("… ({} bytes)", format!(r#"{{"text":"{long}"}}"#).len());
    assert!(arguments.ends_with(&mark), "{arguments}");
    assert_eq!(arguments.len(), 2048 + mark.len(), "{arguments}");
    assert!(cut["result"].as_str().unwrap().contains(" bytes)"), "{cut}");
    let text = lines.iter().map(Value::to_string).collect::<String>();
    for never in [sid.as_str(), "beta-token"] {
        assert!(!text.contains(never), "{never} in the trail: {text}");
    }
}
