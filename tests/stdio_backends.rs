//! Shared stdio backends: one child serves every client, responses and
//! progress reach the client that asked, and a dying child is restarted
//! without leaving zombies.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::json;
use support::*;

/// 50 client sessions call concurrently through one shared child: every
/// response and every progress notification reaches the client that asked,
/// and the backend saw exactly one process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_sessions_share_one_child() {
    let gw = Gateway::start(&demo_backend("demo"));
    let http = Http::new(gw.url("/mcp"));
    let sessions = join_all((0..50).map(|_| http.initialize())).await;

    let calls = sessions.iter().enumerate().map(|(n, sid)| {
        let http = http.clone();
        async move {
            // Same JSON-RPC id and progress token in every session: only the
            // gateway's remapping keeps them apart on the shared child.
            let echo = http
                .call(sid, 1, "tools/call", json!({"name":"demo__echo","arguments":{"text":format!("client-{n}")}}))
                .await;
            let slow = http
                .call(sid, 1, "tools/call", json!({"name":"demo__sleep_ms","arguments":{"ms":50 + n * 3},"_meta":{"progressToken":"same"}}))
                .await;
            (n, echo, slow)
        }
    });
    for (n, echo, slow) in join_all(calls).await {
        assert_eq!(echo.status, 200);
        let m = echo.messages();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0]["id"], 1);
        assert_eq!(text_of(&m[0]), format!("client-{n}"));

        let msgs = slow.messages();
        let (progress, rest): (Vec<_>, Vec<_>) = msgs
            .iter()
            .partition(|m| m["method"] == "notifications/progress");
        assert_eq!(progress.len(), 5, "client {n} got {msgs:?}");
        for p in &progress {
            assert_eq!(p["params"]["progressToken"], "same");
            assert!(
                p["params"]["message"]
                    .as_str()
                    .unwrap()
                    .ends_with(&format!(" of {}ms", 50 + n * 3))
            );
        }
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0]["id"], 1);
        assert_eq!(text_of(rest[0]), format!("slept {}ms", 50 + n * 3));
    }

    let m = gw.metrics();
    assert_eq!(
        m.get(r#"sluice_backend_sessions_opened_total{backend="demo"}"#),
        1.0
    );
    assert_eq!(
        m.get(r#"sluice_backend_sessions_live{backend="demo"}"#),
        1.0
    );
    assert_eq!(
        children(gw.pid()).len(),
        1,
        "one child process for all clients"
    );
    // The counter lives in the one child: 50 sessions see one sequence.
    let values: HashSet<String> = join_all(sessions.iter().map(|sid| {
        let http = http.clone();
        async move {
            let r = http
                .call(
                    sid,
                    3,
                    "tools/call",
                    json!({"name":"demo__counter","arguments":{}}),
                )
                .await;
            text_of(&r.json()).to_owned()
        }
    }))
    .await
    .into_iter()
    .collect();
    assert_eq!(values.len(), 50);
    assert!(values.contains("50"));
}

/// A backend that exits mid-call: that call gets a JSON-RPC error naming
/// the backend; the backend is restarted; the next call succeeds; no zombie.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_exit_mid_call_is_reported_and_recovered() {
    let gw = Gateway::start(&demo_backend("demo"));
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let first = children(gw.pid());
    assert_eq!(first.len(), 1);
    let child = first[0].0;

    let pending = http.start_slow_call(&sid, json!(5), 30_000).await;
    // SAFETY: signalling the gateway's child, which this test started.
    unsafe {
        libc::kill(child as i32, libc::SIGKILL);
    }
    let body = pending.text().await.unwrap();
    let last: serde_json::Value = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .next_back()
        .unwrap();
    assert_eq!(last["id"], 5);
    let message = last["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error: {last}"));
    assert!(
        message.contains("`demo`"),
        "error names the backend: {message}"
    );

    gw.wait_ready();
    let r = http
        .call(
            &sid,
            6,
            "tools/call",
            json!({"name":"demo__echo","arguments":{"text":"back"}}),
        )
        .await;
    assert_eq!(text_of(&r.json()), "back", "{}", r.body);
    let now = children(gw.pid());
    assert_eq!(now.len(), 1, "exactly one child after restart: {now:?}");
    assert_ne!(now[0].0, child);
    assert!(
        now.iter().all(|(_, state)| *state != 'Z'),
        "no zombie: {now:?}"
    );
    assert!(!exists(child), "the killed child was reaped");
    let m = gw.metrics();
    assert_eq!(
        m.get(r#"sluice_backend_sessions_opened_total{backend="demo"}"#),
        2.0
    );
    assert_eq!(
        m.get(r#"sluice_backend_sessions_closed_total{backend="demo",reason="exited"}"#),
        1.0
    );
}

/// SIGTERM: the gateway exits 0 and its children are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_children() {
    let gw = Gateway::start(&format!("{}{}", demo_backend("one"), demo_backend("two")));
    let kids: Vec<u32> = children(gw.pid()).into_iter().map(|(p, _)| p).collect();
    assert_eq!(kids.len(), 2);
    assert_eq!(gw.stop(), Some(0));
    for k in kids {
        assert!(!exists(k), "child {k} outlived the gateway");
    }
}

/// One backend failing to start never takes the others down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_backend_does_not_take_others_down() {
    let toml = format!(
        "{}[backends.broken]\ntransport = \"stdio\"\ncommand = \"/nonexistent/sluice-test-binary\"\n",
        demo_backend("demo")
    );
    let gw = Gateway::start_unready(&toml, &[]);
    wait_until(Duration::from_secs(10), || {
        gw.metrics().get(r#"sluice_backend_up{backend="demo"}"#) == 1.0
    });
    let (status, body) = http_get(&gw.base, "/readyz").unwrap();
    assert_eq!(status, 503);
    assert!(body.contains("\"broken\""), "{body}");
    assert!(!body.contains("\"demo\""), "{body}");
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let r = http.call(&sid, 2, "tools/list", json!({})).await;
    let tools = r.json()["result"]["tools"].as_array().unwrap().len();
    assert_eq!(tools, 4);
    let r = http
        .call(
            &sid,
            3,
            "tools/call",
            json!({"name":"broken__anything","arguments":{}}),
        )
        .await;
    let err = &r.json()["error"];
    assert!(
        err["message"].as_str().unwrap().contains("`broken`"),
        "{err}"
    );
}

/// A child's own children run in its process group and end with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descendants_end_with_the_gateway() {
    let toml = format!(
        "[backends.wrapped]\ntransport = \"stdio\"\ncommand = \"sh\"\nargs = [\"-c\", \"sleep 300 & exec {BIN} demo-server\"]\n"
    );
    let gw = Gateway::start(&toml);
    let kids = children(gw.pid());
    assert_eq!(kids.len(), 1);
    let grandchildren = children(kids[0].0);
    assert_eq!(grandchildren.len(), 1, "the wrapper's sleep");
    assert_eq!(gw.stop(), Some(0));
    assert!(!exists(kids[0].0));
    wait_until(Duration::from_secs(5), || !exists(grandchildren[0].0));
}

/// A call the backend does not answer within its request_timeout gets an
/// error naming the backend; the backend itself keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_backend_call_times_out() {
    let toml = format!("{}request_timeout = \"300ms\"\n", demo_backend("demo"));
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let r = http
        .call(
            &sid,
            2,
            "tools/call",
            json!({"name":"demo__sleep_ms","arguments":{"ms":20000}}),
        )
        .await;
    let msg = r.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(msg.contains("`demo`") && msg.contains("in time"), "{msg}");
    let r = http
        .call(
            &sid,
            3,
            "tools/call",
            json!({"name":"demo__echo","arguments":{"text":"fine"}}),
        )
        .await;
    assert_eq!(text_of(&r.json()), "fine");
    assert_eq!(children(gw.pid()).len(), 1, "no restart for a timeout");
}

/// `[metrics] token_env` gates /metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_can_require_a_token() {
    let toml = format!(
        "[metrics]\ntoken_env = \"MTOKEN\"\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start_with_env(&toml, &[("MTOKEN", "scrape-me")]);
    let client = reqwest::Client::new();
    let open = client.get(gw.url("/metrics")).send().await.unwrap();
    assert_eq!(open.status(), 401);
    let authed = client
        .get(gw.url("/metrics"))
        .bearer_auth("scrape-me")
        .send()
        .await
        .unwrap();
    assert_eq!(authed.status(), 200);
    assert!(
        authed
            .text()
            .await
            .unwrap()
            .contains("sluice_client_sessions_live")
    );
}

const ENV_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/env_backend.py");

/// A config whose stdio backend reports its environment, with every kind of
/// secret the gateway can hold named: the session key, the clients' tokens,
/// the metrics token.
fn env_reporting(inherit: &str) -> String {
    // The interpreter itself: a launcher (pyenv's shim, say) would add
    // variables of its own between the gateway and the backend.
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8(out.stdout).unwrap();
    let python = python.trim();
    format!(
        "[server]\nsession_ids = \"sealed\"\n\
         [auth]\nbearer_tokens_env = \"GW_TOKENS\"\n\
         [metrics]\ntoken_env = \"SCRAPE_TOKEN\"\n\
         [backends.env]\ncommand = \"{python}\"\nargs = [\"{ENV_FIXTURE}\"]\n\
         inherit_env = [{inherit}]\nenv = {{ SET_BY_CONFIG = \"yes\" }}\n"
    )
}

/// Issue 37, item 1: a stdio child starts with only what a program needs
/// (and the locale and time zone), the names its `inherit_env` adds and its
/// `env`, though the gateway's environment holds every secret it has, their
/// `_FILE` forms and other `SLUICE_*` variables besides.
#[tokio::test]
async fn a_child_gets_no_secret_of_the_gateway() {
    let key = keygen();
    let path = std::env::var("PATH").unwrap();
    let env = [
        ("PATH", path.as_str()),
        ("HOME", "/nonexistent/home"),
        ("LOGNAME", "someone"),
        ("USER", "someone"),
        ("SHELL", "/bin/sh"),
        ("TERM", "dumb"),
        ("LANG", "C.UTF-8"),
        ("LC_ALL", "C.UTF-8"),
        ("TZ", "UTC"),
        ("PASSED_ON", "by-name"),
        ("UNRELATED", "not-asked-for"),
        ("GW_TOKENS", "client-token"),
        ("GW_TOKENS_FILE", "/nonexistent/tokens"),
        ("SCRAPE_TOKEN", "scrape-token"),
        ("SLUICE_SESSION_KEY", key.as_str()),
        ("SLUICE_SESSION_KEY_FILE", "/nonexistent/key"),
        ("SLUICE_LOG", "warn"),
    ];
    let gw = Gateway::start_in_env(&env_reporting("\"PASSED_ON\""), &env);
    let auth = ("authorization", "Bearer client-token");
    let http = Http::new(gw.url("/mcp"));
    let init = http.post_with(None, &[auth], &init_request(1)).await;
    assert_eq!(init.status, 200, "{}", init.body);
    let sid = init.session_id().unwrap();
    let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{
        "name":"env__environment","arguments":{"values":["PASSED_ON","SET_BY_CONFIG","LANG"]}}});
    let reply = http.post_with(Some(&sid), &[auth], &call).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let report: serde_json::Value = serde_json::from_str(text_of(&reply.json())).unwrap();
    let names: Vec<&str> = report["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "HOME",
            "LANG",
            "LC_ALL",
            "LOGNAME",
            "PASSED_ON",
            "PATH",
            "SET_BY_CONFIG",
            "SHELL",
            "TERM",
            "TZ",
            "USER"
        ]
    );
    assert_eq!(
        report["values"],
        json!({"PASSED_ON":"by-name","SET_BY_CONFIG":"yes","LANG":"C.UTF-8"})
    );
}

/// Asking for a secret of the gateway's by name is refused at start, with
/// the key and the reason, before any child runs.
#[test]
fn a_config_asking_for_a_secret_does_not_start() {
    let dir = tempdir::Dir::new();
    let config = tempdir::write(&dir, "sluice.toml", &env_reporting("\"GW_TOKENS\""));
    let out = std::process::Command::new(BIN)
        .args(["serve", "--config", config.to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0"])
        .env("GW_TOKENS", "client-token")
        .env("SCRAPE_TOKEN", "scrape-token")
        .env("SLUICE_SESSION_KEY", keygen())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`backends.env.inherit_env[0]`: `GW_TOKENS` holds the gateway's secret `auth.bearer_tokens_env`, and is never passed to a child"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "started: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A child killed by a signal (issue 49, part 4): the log says so in words,
/// `sluice_backend_restarts_total` counts it under `signal`, and the status
/// page shows it beside the backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_child_is_told_by_its_signal() {
    let gw = Gateway::start_logged(&demo_backend("demo"), &[]);
    let kids = children(gw.pid());
    assert_eq!(kids.len(), 1, "{kids:?}");
    // SAFETY: signalling the gateway's child, which this test started.
    unsafe {
        libc::kill(kids[0].0 as i32, libc::SIGKILL);
    }
    let restarted = r#"sluice_backend_restarts_total{backend="demo",reason="signal"}"#;
    wait_until(Duration::from_secs(15), || {
        gw.metrics().get_or_untouched(restarted) == 1.0
    });
    gw.wait_ready();
    let m = gw.metrics();
    for other in ["exited", "closed", "unhealthy"] {
        let key = restarted.replace("signal", other);
        assert_eq!(m.get_or_untouched(&key), 0.0, "{key}");
    }
    let log = gw.log();
    assert!(
        log.contains("backend session ended: killed by signal 9 (SIGKILL)"),
        "{log}"
    );
    assert!(!log.contains("unix_wait_status"), "{log}");
    let (status, page) = http_get(&gw.base, "/status").unwrap();
    assert_eq!(status, 200);
    assert!(
        page.contains("<br>killed by signal 9 (SIGKILL) at "),
        "{page}"
    );
}

/// A command that exits 3 at once: every start is told as "exited with 3"
/// and counted under `exited`, and the status page says why the backend is
/// down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_exits_is_told_by_its_code() {
    let toml = "[backends.quits]\ntransport = \"stdio\"\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"exit 3\"]\n";
    let gw = Gateway::start_in_env_logged(toml, &[]);
    let exited = r#"sluice_backend_restarts_total{backend="quits",reason="exited"}"#;
    // Restarted with backoff (100 ms, then 200 ms): two starts, two exits.
    wait_until(Duration::from_secs(15), || {
        gw.metrics().get_or_untouched(exited) >= 2.0
    });
    let log = gw.log();
    assert!(
        log.contains("backend session ended: exited with 3"),
        "{log}"
    );
    let (status, body) = http_get(&gw.base, "/readyz").unwrap();
    assert_eq!(status, 503, "{body}");
    let (_, page) = http_get(&gw.base, "/status").unwrap();
    assert!(page.contains("class=\"down\">down: "), "{page}");
    assert!(page.contains("<br>exited with 3 at "), "{page}");
}
