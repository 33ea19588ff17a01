//! Config reload on SIGHUP: backends added and removed under live client
//! sessions, a bad config refused whole, calls to unchanged backends
//! undisturbed.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn tool_names(reply: &Value) -> Vec<String> {
    reply["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {reply}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

async fn tools(http: &Http, session: &str) -> Vec<String> {
    tool_names(&http.call(session, 90, "tools/list", json!({})).await.json())
}

async fn echo(http: &Http, session: &str, tool: &str, id: u64) -> Value {
    http.tool(session, id, tool, json!({"text": "hi"})).await
}

/// Waits, within a bound, for a GET stream to say the tool list changed.
async fn told_list_changed(stream: &mut ::reqwest::Response) {
    let mut seen = String::new();
    let told = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = stream.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("notifications/tools/list_changed") {
                return;
            }
        }
    })
    .await;
    assert!(told.is_ok(), "no list_changed on the GET stream: {seen:?}");
}

/// Removing a per-session HTTP backend closes its backend sessions (the
/// backend's own count falls to 0) while the client session and the other
/// backend go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_removes_a_backend_closes_its_sessions() {
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let both = format!(
        "{}{}",
        demo_backend("demo"),
        http_backend("web", &fx.url(), "isolation = \"per-session\"")
    );
    let gw = Gateway::start(&both);
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    let r = http.tool(&session, 2, "web__counter", json!({})).await;
    assert_eq!(text_of(&r), "1");
    assert_eq!(fx.live(), 1);

    reload(&gw, &demo_backend("demo"), "ok");
    wait_until(Duration::from_secs(10), || fx.live() == 0);
    wait_until(Duration::from_secs(10), || {
        gw.metrics()
            .get(r#"sluice_backend_sessions_live{backend="web"}"#)
            == 0.0
    });
    let names = tools(&http, &session).await;
    assert!(names.iter().all(|n| !n.starts_with("web__")), "{names:?}");
    let r = http.tool(&session, 3, "web__counter", json!({})).await;
    assert!(
        r["error"].is_object() || r["result"]["isError"] == true,
        "{r}"
    );
    // The same client session still reaches the backend that stayed.
    let r = echo(&http, &session, "demo__echo", 4).await;
    assert_eq!(text_of(&r), "hi", "{r}");
    assert!(
        !gw.metrics().has(r#"sluice_backend_up{backend="web"}"#),
        "a removed backend is no longer reported up or down"
    );
}

/// A backend added by a reload is callable on a session opened before it,
/// and a client's GET stream is told its tool list changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_adds_a_backend_makes_it_callable_on_live_sessions() {
    let gw = Gateway::start(&demo_backend("demo"));
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    assert!(
        tools(&http, &session)
            .await
            .contains(&"demo__echo".to_owned())
    );
    let mut stream = http.get_stream(&session).await;
    assert_eq!(stream.status(), 200);

    reload(
        &gw,
        &format!("{}{}", demo_backend("demo"), demo_backend("extra")),
        "ok",
    );
    told_list_changed(&mut stream).await;
    // The new backend's tools are listed once it is up, and it answers.
    let mut names = Vec::new();
    for _ in 0..100 {
        names = tools(&http, &session).await;
        if names.contains(&"extra__echo".to_owned()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(names.contains(&"extra__echo".to_owned()), "{names:?}");
    assert!(names.contains(&"demo__echo".to_owned()), "{names:?}");
    let r = echo(&http, &session, "extra__echo", 5).await;
    assert_eq!(text_of(&r), "hi", "{r}");
}

/// The reload's log line names the namespaces it added and removed, as it
/// names backends.
#[test]
fn the_reload_log_names_namespaces_added_and_removed() {
    let base = demo_backend("demo") + "[namespaces.default]\nbackends = [\"demo\"]\n";
    let gw = Gateway::start_logged(&base, &[]);
    let with_team = format!("{base}[namespaces.team]\nbackends = [\"demo\"]\n");
    reload(&gw, &with_team, "ok");
    let log = gw.log();
    assert!(log.contains("namespaces added [team], removed []"), "{log}");
    reload(&gw, &base, "ok");
    let log = gw.log();
    assert!(log.contains("namespaces added [], removed [team]"), "{log}");
}

/// A config that does not parse is refused whole, with the error `sluice
/// check` gives; the gateway goes on with the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_with_a_syntax_error_changes_nothing() {
    let good = demo_backend("demo");
    let gw = Gateway::start_logged(&good, &[]);
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;

    let bad = format!("{good}\n[backends.broken\ntransport = \"stdio\"\n");
    reload(&gw, &bad, "error");
    let checked = std::process::Command::new(BIN)
        .args(["check", "--config"])
        .arg(gw.dir.path().join("sluice.toml"))
        .output()
        .unwrap();
    assert_eq!(checked.status.code(), Some(2));
    let check_error = String::from_utf8_lossy(&checked.stderr);
    let first = check_error
        .lines()
        .nth(1)
        .expect("check names the error on its second line")
        .trim();
    let log = gw.log();
    assert!(log.contains("config reload refused"), "{log}");
    assert!(log.contains(first), "the log lacks {first:?}:\n{log}");
    assert_eq!(
        gw.metrics()
            .get_or_untouched(r#"sluice_config_reloads_total{result="ok"}"#),
        0.0
    );
    let r = echo(&http, &session, "demo__echo", 2).await;
    assert_eq!(text_of(&r), "hi", "{r}");

    // A config that parses but does not hold together (a namespace of a
    // backend that is not configured) is refused the same way.
    let dangling = format!("{good}[namespaces.default]\nbackends = [\"missing\"]\n");
    reload(&gw, &dangling, "error");
    let r = echo(&http, &session, "demo__echo", 3).await;
    assert_eq!(text_of(&r), "hi", "{r}");
}

/// 200 concurrent calls to a backend that no reload touches, each in
/// flight across the reloads (a 1.5 s sleep; the reloads start once the
/// gateway has all 200 pending at the backend), while the reloads remove
/// and add another backend: every call succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_during_reloads_see_no_error_on_unchanged_backends() {
    let one = format!("{}{}", demo_backend("demo"), demo_backend("other"));
    let two =
        demo_backend("demo") + "[namespaces.default]\nbackends = [\"demo\"]\nprefix = \"always\"\n";
    let gw = Gateway::start(&one);
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    let calls = futures_util::future::join_all((0..200u64).map(|i| {
        let (http, session) = (&http, &session);
        async move {
            let sleep = json!({"ms": 1500});
            http.tool(session, 100 + i, "demo__sleep_ms", sleep).await
        }
    }));
    let calls = async {
        let replies = calls.await;
        (replies, std::time::Instant::now())
    };
    let reloads = async {
        // Every call is at the backend before the first reload.
        let pending = r#"sluice_bounded_entries{map="pending_calls",owner="demo"}"#;
        // (Polled without blocking this task: it also drives the calls.)
        let mut waited = 0;
        while gw.metrics().get(pending) != 200.0 {
            assert!(waited < 200, "the 200 calls never were all pending");
            waited += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for n in 0..4 {
            let toml = if n % 2 == 0 { two.clone() } else { one.clone() };
            tokio::task::block_in_place(|| reload(&gw, &toml, "ok"));
        }
        std::time::Instant::now()
    };
    let ((replies, calls_done), reloads_done) = tokio::join!(calls, reloads);
    assert!(
        reloads_done < calls_done,
        "the reloads ended while the calls were in flight"
    );
    let failed: Vec<&Value> = replies
        .iter()
        .filter(|r| r["result"]["content"][0]["text"] != "slept 1500ms")
        .collect();
    assert!(
        failed.is_empty(),
        "{} of 200 failed: {:?}",
        failed.len(),
        failed.first()
    );
}

/// A 2026-07-28 client's `subscriptions/listen` stream follows its
/// namespace across a reload: when a backend leaves (so none announces
/// anything), the gateway itself tells it the tool list changed, under its
/// subscription id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_is_told_when_a_reload_changes_its_namespace() {
    let both = format!("{}{}", demo_backend("demo"), demo_backend("extra"));
    let gw = Gateway::start(&both);
    let http = Http::new(gw.url("/mcp"));
    let params = json!({
        "notifications": {"toolsListChanged": true},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }
    });
    let stream = http.listen("sub-1", params).await;
    assert_eq!(stream.status(), 200);
    let mut events = Events::new(stream);
    let ack = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");

    reload(&gw, &demo_backend("demo"), "ok");
    let change = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("no list change on the listen stream");
    assert_eq!(change["method"], "notifications/tools/list_changed");
    assert_eq!(
        change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
}

/// A setting that needs a restart is kept as it was, and said so at every
/// reload that asks for it, not only the first: the gateway runs the
/// config in force, not the file's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_only_settings_are_kept_and_named_at_each_reload() {
    let gw = Gateway::start_logged(&demo_backend("demo"), &[]);
    let longer = format!(
        "[server]\nsession_idle_ttl = \"45m\"\n{}",
        demo_backend("demo")
    );
    reload(&gw, &longer, "ok");
    reload(&gw, &longer, "ok");
    let log = gw.log();
    let warned = log.matches("which takes effect at restart").count();
    assert_eq!(warned, 2, "{log}");
}

/// The key ring of sealed ids, read from `SLUICE_SESSION_KEY_FILE`, is
/// taken anew by a reload: sessions opened after it are sealed with the
/// file's new first key (a gateway holding only that key resumes them, and
/// not one sealed before), the old sessions go on while the old key is
/// still listed, and a file with a bad key is refused whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_takes_the_key_ring_from_its_file() {
    let (old, new) = (keygen(), keygen());
    let keys = tempdir::Dir::new();
    let file = tempdir::write(&keys, "session.key", &format!("{old}\n"));
    let toml = format!(
        "[server]\nsession_ids = \"sealed\"\n{}",
        demo_backend("demo")
    );
    let env = [("SLUICE_SESSION_KEY_FILE", file.to_str().unwrap())];
    let gw = Gateway::start_logged(&toml, &env);
    let http = Http::new(gw.url("/mcp"));
    let before = http.initialize().await;

    tempdir::write(&keys, "session.key", &format!("{new},{old}\n"));
    reload(&gw, &toml, "ok");
    assert!(gw.log().contains("session keys rotated"), "{}", gw.log());
    let after = http.initialize().await;
    // Both open while both keys are loaded.
    for id in [&before, &after] {
        assert_eq!(text_of(&echo(&http, id, "demo__echo", 1).await), "hi");
    }

    tempdir::write(&keys, "session.key", "not-a-key\n");
    reload(&gw, &toml, "error");
    let still = http.initialize().await;
    drop(gw);

    // Only the new key: what the reload sealed opens, what came before not.
    let gw = Gateway::start_with_env(&toml, &[("SLUICE_SESSION_KEY", new.as_str())]);
    let http = Http::new(gw.url("/mcp"));
    for id in [&after, &still] {
        assert_eq!(text_of(&echo(&http, id, "demo__echo", 2).await), "hi");
    }
    let r = http
        .call(
            &before,
            3,
            "tools/call",
            json!({"name": "demo__echo", "arguments": {"text": "x"}}),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
}

/// Issue 49: a reload that changes only a backend's `tools` (a rename and
/// an exclude) is applied to the backend as it runs: its child is the same
/// process and its session the same (`counter` goes on from where it
/// was), a call in flight across the reload completes, the client's GET
/// stream is told its list changed, and the tool is listed and called
/// under its new name alone. A reload that changes `tools` and the command
/// together still restarts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_of_tools_alone_keeps_the_backend_running() {
    let links = tempdir::Dir::new();
    let other = links.path().join("sluice-again");
    std::os::unix::fs::symlink(BIN, &other).unwrap();
    let demo = |command: &str, tools: &str| {
        format!(
            "[backends.demo]\ntransport = \"stdio\"\ncommand = \"{command}\"\nargs = [\"demo-server\"]\n{tools}\n"
        )
    };
    let gw = Gateway::start(&demo(BIN, ""));
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    let r = http.tool(&session, 2, "demo__counter", json!({})).await;
    assert_eq!(text_of(&r), "1", "{r}");
    let child = only_child(&gw);
    let mut stream = http.get_stream(&session).await;
    assert_eq!(stream.status(), 200);
    let slow = http.start_slow_call(&session, json!(3), 3000).await;

    let renamed = "[backends.demo.tools]\nexclude = [\"add\"]\nrename = { echo = \"say\" }";
    reload(&gw, &demo(BIN, renamed), "ok");
    told_list_changed(&mut stream).await;
    let names = tools(&http, &session).await;
    assert!(names.contains(&"demo__say".to_owned()), "{names:?}");
    assert!(
        !names.iter().any(|n| n == "demo__echo" || n == "demo__add"),
        "{names:?}"
    );
    let r = echo(&http, &session, "demo__say", 4).await;
    assert_eq!(text_of(&r), "hi", "{r}");
    let r = echo(&http, &session, "demo__echo", 5).await;
    assert!(
        r["error"].is_object() || r["result"]["isError"] == true,
        "{r}"
    );
    // The same process, the same backend session.
    assert_eq!(only_child(&gw), child);
    let r = http.tool(&session, 6, "demo__counter", json!({})).await;
    assert_eq!(text_of(&r), "2", "{r}");
    let slow = Reply::read(slow).await.messages();
    let done = slow.iter().find(|m| m["id"] == 3).expect("no answer");
    assert!(done["result"].is_object(), "{slow:?}");

    // Another command as well: a new child, and a new session.
    reload(&gw, &demo(other.to_str().unwrap(), renamed), "ok");
    wait_until(Duration::from_secs(10), || {
        children(gw.pid())
            .iter()
            .any(|(p, s)| *p != child && *s != 'Z')
    });
    wait_until(Duration::from_secs(10), || !exists(child));
    let mut counted = Value::Null;
    for id in 7..107 {
        counted = http.tool(&session, id, "demo__counter", json!({})).await;
        if counted["result"].is_object() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(text_of(&counted), "1", "{counted}");
}

/// The one live child of the gateway: its stdio backend.
fn only_child(gw: &Gateway) -> u32 {
    let live: Vec<u32> = children(gw.pid())
        .into_iter()
        .filter(|(_, state)| *state != 'Z')
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(live.len(), 1, "{live:?}");
    live[0]
}
