//! Issue 9: hostile clients and broken backends. Each test is named after
//! the item of the issue it closes and fails on the code before the fix.
//! Backends are real processes: the demo server, and the fault-injection
//! backend (`examples/faulty_backend.rs`) in the mode each case needs.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn echo(id: u64, tool: &str, text: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{"text":text}}})
}

/// Item 3: /metrics, /readyz and /healthz pass the same rebinding guard as
/// /mcp, with Host parsed strictly; /readyz names reason classes only.
#[test]
fn item03_operator_endpoints_are_guarded_and_readyz_says_no_details() {
    let toml = format!(
        "{}[backends.broken]\ncommand = \"/nonexistent/secret-tool-x\"\n",
        demo_backend("demo")
    );
    let gw = Gateway::start_unready(&toml, &[]);
    wait_until(Duration::from_secs(30), || {
        http_get(&gw.base, "/readyz").is_ok_and(|(_, body)| !body.contains("starting"))
    });
    for path in ["/metrics", "/readyz", "/healthz"] {
        let get = |extra: &str| {
            raw_http(
                &gw.base,
                &format!("GET {path} HTTP/1.1\r\n{extra}Connection: close\r\n\r\n"),
            )
        };
        let (ok, _) = get("Host: 127.0.0.1\r\n");
        assert!(
            ok == 200 || (path == "/readyz" && ok == 503),
            "{path}: {ok}"
        );
        assert_eq!(get("Host: evil.com\r\n").0, 403, "{path} Host evil.com");
        assert_eq!(
            get("Host: [::1].evil.com\r\n").0,
            400,
            "{path} [::1].evil.com"
        );
        assert_eq!(
            get("Host: [::1]evil.com:80\r\n").0,
            400,
            "{path} [::1]evil.com:80"
        );
        assert_eq!(
            get("Host: 127.0.0.1\r\nHost: evil.com\r\n").0,
            400,
            "{path} two Hosts"
        );
        assert_eq!(
            get("Host: 127.0.0.1\r\nOrigin: https://evil.example\r\n").0,
            403,
            "{path} Origin"
        );
        let absolute = |host: &str| {
            raw_http(
                &gw.base,
                &format!("GET http://evil.com{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
            )
            .0
        };
        assert_eq!(absolute("evil.com"), 403, "{path} absolute-form");
        assert_eq!(
            absolute("127.0.0.1"),
            400,
            "{path} absolute-form disagreeing with Host"
        );
    }
    let (status, body) = http_get(&gw.base, "/readyz").unwrap();
    assert_eq!(status, 503);
    assert!(
        !body.contains("secret-tool-x") && !body.contains("nonexistent"),
        "{body}"
    );
    // The cause by its class, not "unreachable": a command missing is an
    // operator's to fix, not a network's.
    let problem = || {
        let (_, body) = http_get(&gw.base, "/readyz").unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        v["unhealthy"][0]["problem"].as_str().unwrap().to_owned()
    };
    wait_until(Duration::from_secs(30), || problem() != "restarting");
    assert_eq!(problem(), "command_not_found");
}

/// Item 2: the HTTP+SSE `endpoint` event may not send the configured
/// credentials to another origin, and no backend call follows a redirect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item02_credentials_stay_with_the_backend_origin() {
    let elsewhere = faulty_http("recorder", &[]);
    let target = format!("http://{}/messages", elsewhere.addr);
    let sse = faulty_http("sse-elsewhere", &["--target", &target]);
    let redirect = faulty_http(
        "redirect",
        &["--target", &format!("http://{}/mcp", elsewhere.addr)],
    );
    let toml = format!(
        "{}[backends.sse]\ntransport = \"sse\"\nurl = \"http://{}/sse\"\nheaders = {{ Authorization = \"${{SECRET}}\" }}\n\
         [backends.moved]\ntransport = \"http\"\nurl = \"http://{}/mcp\"\nheaders = {{ Authorization = \"${{SECRET}}\" }}\n",
        demo_backend("demo"),
        sse.addr,
        redirect.addr
    );
    let gw = Gateway::start_unready(&toml, &[("SECRET", "Bearer s3cret-value")]);
    // Both are tried (and retried) and refused; the healthy one serves.
    wait_until(Duration::from_secs(30), || {
        let (_, body) = http_get(&gw.base, "/readyz").unwrap();
        body.contains("\"sse\"") && body.contains("\"moved\"") && !body.contains("starting")
    });
    wait_until(Duration::from_secs(30), || {
        redirect.stats()["requests"].as_u64().unwrap() >= 2
    });
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    let r = http
        .post(Some(&session), &echo(2, "demo__echo", "hi"))
        .await;
    assert_eq!(text_of(&r.messages()[0]), "hi");
    let seen = elsewhere.stats()["requests"].as_u64().unwrap();
    let (_, log) = http_get(&format!("http://{}", elsewhere.addr), "/seen").unwrap();
    assert_eq!(seen, 0, "the other origin was contacted: {log}");
    assert!(!log.contains("s3cret"), "{log}");
}

/// Item 2, continued: credentials in a backend's URL go as Basic auth (as
/// curl sends them), never in the request line, and no health output
/// names them.
#[test]
fn url_credentials_go_as_basic_auth_and_stay_out_of_health() {
    let rec = faulty_http("recorder", &[]);
    let toml = format!(
        "{}[backends.rec]\ntransport = \"http\"\nurl = \"http://us%65r:s3cret@{}/mcp\"\n",
        demo_backend("demo"),
        rec.addr
    );
    let gw = Gateway::start_unready(&toml, &[]);
    // The recorder answers `{}` to everything: no MCP session opens, so
    // the backend is retried and reported unhealthy.
    wait_until(Duration::from_secs(30), || {
        rec.stats()["requests"].as_u64().unwrap() >= 2
            && http_get(&gw.base, "/readyz").is_ok_and(|(_, b)| b.contains("\"rec\""))
    });
    let (_, seen) = http_get(&format!("http://{}", rec.addr), "/seen").unwrap();
    let seen: serde_json::Value = serde_json::from_str(&seen).unwrap();
    let seen = seen.as_array().unwrap();
    assert!(!seen.is_empty());
    for r in seen {
        assert_eq!(r["path"], "/mcp", "{r}");
        assert_eq!(
            r["headers"]["authorization"], "Basic dXNlcjpzM2NyZXQ=",
            "{r}"
        );
        assert!(!r["headers"]["host"].as_str().unwrap().contains('@'), "{r}");
    }
    let (_, health) = http_get(&gw.base, "/readyz").unwrap();
    assert!(
        !health.contains("s3cret") && !health.contains("us%65r"),
        "{health}"
    );
}

/// Item 8: an HTTP backend that accepts and never answers is a timeout,
/// retried with backoff, not "starting" forever; clients of the namespace
/// are served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item08_a_backend_that_never_answers_times_out_and_is_retried() {
    let hang = faulty_http("hang", &[]);
    let toml = format!(
        "{}[backends.hang]\ntransport = \"http\"\nurl = \"http://{}/mcp\"\nrequest_timeout = \"1s\"\n",
        demo_backend("demo"),
        hang.addr
    );
    let gw = Gateway::start_unready(&toml, &[]);
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    let r = http
        .post(Some(&session), &echo(2, "demo__echo", "served"))
        .await;
    assert_eq!(text_of(&r.messages()[0]), "served");
    wait_until(Duration::from_secs(30), || {
        http_get(&gw.base, "/readyz").is_ok_and(|(_, b)| b.contains("timeout"))
    });
    // Retried: the backend sees new attempts after the first one timed out.
    wait_until(Duration::from_secs(30), || {
        hang.stats()["requests"].as_u64().unwrap() >= 3
    });
    assert_eq!(gw.stop(), Some(0));
}

/// Item 9: a stdio backend that exits at once is noticed during its
/// handshake (no wait for the request timeout), reaped, and retried.
#[test]
fn item09_a_child_that_exits_at_once_is_reaped_and_retried() {
    let toml = format!(
        "{}{}",
        demo_backend("demo"),
        faulty_stdio("gone", "exit-at-start", "request_timeout = \"10m\"")
    );
    let gw = Gateway::start_unready(&toml, &[]);
    // With a 10-minute request timeout, only noticing the exit itself can
    // turn the backend from "starting" into "exited".
    wait_until(Duration::from_secs(30), || {
        http_get(&gw.base, "/readyz").is_ok_and(|(_, b)| b.contains("\"exited\""))
    });
    // Each attempt's child is reaped: a zombie seen at any moment (one
    // that has just exited) is gone soon after.
    let mut seen = Vec::new();
    for _ in 0..20 {
        seen.extend(zombies(gw.pid()));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_zombies_reaped(gw.pid(), &seen);
    let m = gw.metrics();
    assert!(
        m.get("sluice_backend_sessions_opened_total{backend=\"gone\"}") >= 2.0,
        "retried"
    );
    assert_eq!(m.get("sluice_backend_sessions_live{backend=\"gone\"}"), 0.0);
}

/// Item 10: a client session that ends while its per-session backend is
/// still opening leaks nothing: the slot, the child and the gauge come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item10_sessions_ended_during_a_backend_open_leak_nothing() {
    let bin = Fixture::bin("faulty_backend");
    // A backend that takes a while to start: the open is in progress when
    // the client's session ends.
    let toml = format!(
        "[backends.slow]\ncommand = \"sh\"\nargs = [\"-c\", \"sleep 1; exec {} --transport stdio --mode ok\"]\n\
         isolation = \"per-session\"\nmax_sessions = 2\n",
        bin.display()
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    for round in 0..4 {
        let session = http.initialize().await;
        let call = {
            let http = http.clone();
            let session = session.clone();
            tokio::spawn(
                async move { http.post(Some(&session), &echo(2, "slow__echo", "x")).await },
            )
        };
        // The open has begun once its child exists.
        wait_until(Duration::from_secs(10), || !children(gw.pid()).is_empty());
        assert_eq!(http.delete(&session).await, 200, "round {round}");
        let _ = call.await;
        // The open finishes on its own task, which then ends what it opened.
        wait_until(Duration::from_secs(30), || children(gw.pid()).is_empty());
    }
    wait_until(Duration::from_secs(30), || {
        gw.metrics()
            .get("sluice_backend_sessions_live{backend=\"slow\"}")
            == 0.0
    });
    let m = gw.metrics();
    assert_eq!(
        m.get("sluice_backend_sessions_opened_total{backend=\"slow\"}"),
        m.get("sluice_backend_sessions_closed_total{backend=\"slow\",reason=\"client_closed\"}")
            + m.get("sluice_backend_sessions_closed_total{backend=\"slow\",reason=\"probe\"}")
    );
    // With max_sessions = 2, four leaked slots would refuse this one.
    let session = http.initialize().await;
    let r = http
        .post(Some(&session), &echo(3, "slow__echo", "after"))
        .await;
    assert_eq!(text_of(&r.messages()[0]), "after");
}

/// Item 11: a call that outlasts the backend's idle TTL keeps its backend
/// session: in use is not idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item11_a_long_call_is_not_reaped_under_itself() {
    let toml = format!(
        "{}isolation = \"per-session\"\nidle_ttl = \"1s\"\n",
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    let r = http
        .call(
            &session,
            2,
            "tools/call",
            json!({"name":"demo__sleep_ms","arguments":{"ms":3000}}),
        )
        .await;
    let msg = r.messages().pop().unwrap();
    assert!(msg.get("result").is_some(), "the call failed: {msg}");
    let m = gw.metrics();
    assert_eq!(
        m.get_or_untouched(
            "sluice_backend_sessions_closed_total{backend=\"demo\",reason=\"idle\"}"
        ),
        0.0,
        "closed while in use"
    );
}

/// Item 13: a backend that prints garbage costs a bounded number of log
/// lines, however much it prints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item13_garbage_from_a_backend_is_logged_at_a_bounded_rate() {
    let toml = format!(
        "{}{}",
        demo_backend("demo"),
        faulty_stdio("noisy", "garbage", "")
            .replace("\"garbage\"]", "\"garbage\", \"--mb\", \"4\"]")
    );
    let gw = Gateway::start_logged(&toml, &[]);
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    // The backend serves normally once its garbage is out.
    wait_until(Duration::from_secs(30), || {
        let log = gw.log();
        log.matches("unparseable message").count() >= 1
    });
    let r = http
        .post(Some(&session), &echo(2, "noisy__echo", "fine"))
        .await;
    assert_eq!(text_of(&r.messages()[0]), "fine");
    let lines = gw.log().matches("unparseable message").count();
    // 4 MB is 4,096 garbage lines; the log may carry a handful.
    assert!(
        (1..=10).contains(&lines),
        "{lines} warnings for 4,096 garbage lines"
    );
}

/// Item 1: a server-to-client request relayed to one client can be
/// answered by that client only; another principal that learns (or
/// guesses) the id is dropped, and the request still waits for the right
/// answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item01_only_the_asked_client_answers_a_server_request() {
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let toml = format!(
        "[auth]\nbearer_tokens_env = \"T\"\n{}",
        http_backend("web", &fx.url(), "")
    );
    let gw = Gateway::start_with_env(&toml, &[("T", "tok-a,tok-b")]);
    let post = |token: &'static str, session: Option<String>, body: Value| {
        let url = gw.url("/mcp");
        async move { post_as(url, token, session, &body).await }
    };
    let session_of =
        |r: &reqwest::Response| r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    // A declares it can be asked for sampling; B declares nothing.
    let mut init_a = init_request(1);
    init_a["params"]["capabilities"] = json!({"sampling": {}});
    let a = session_of(&post("tok-a", None, init_a).await);
    let b = session_of(&post("tok-b", None, init_request(1)).await);
    let mut call = post(
        "tok-a",
        Some(a.clone()),
        json!({"jsonrpc":"2.0","id":"ask-1","method":"tools/call","params":{"name":"web__ask","arguments":{}}}),
    )
    .await;
    let mut seen = String::new();
    let request: Value = loop {
        let chunk = call.chunk().await.unwrap().expect("no sampling request");
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(line) = seen.lines().find(|l| l.contains("sampling/createMessage")) {
            break serde_json::from_str(line.trim_start_matches("data:").trim()).unwrap();
        }
    };
    let id = request["id"].as_str().unwrap().to_owned();
    assert!(id.len() >= "sluice:web:".len() + 32, "guessable id {id}");
    let answer = |text: &str| {
        json!({"jsonrpc":"2.0","id":id,"result":{
            "role":"assistant","content":{"type":"text","text":text},"model":"test"}})
    };
    // The other principal answers first, from its own session: dropped.
    let r = post("tok-b", Some(b.clone()), answer("from the intruder")).await;
    assert_eq!(r.status(), 202);
    assert_eq!(
        gw.metrics()
            .get("sluice_server_answers_dropped_total{reason=\"not_yours\"}"),
        1.0
    );
    let r = post("tok-a", Some(a.clone()), answer("from the right client")).await;
    assert_eq!(r.status(), 202);
    let rest = call.text().await.unwrap();
    assert!(rest.contains("from the right client"), "{rest}");
    assert!(!rest.contains("intruder"), "{rest}");
}

/// Reads from a raw socket until EOF or `limit`; true if the peer closed.
fn closed_by_peer(s: &mut std::net::TcpStream, limit: Duration) -> bool {
    use std::io::Read;
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(_) => return false,
        }
    }
}

/// Item 5: connections are bounded in number and in how long they may
/// take to send a request; those already open keep being served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item05_slow_and_surplus_connections_are_bounded() {
    use std::io::{Read, Write};
    let toml = format!(
        "[server]\nmax_connections = 40\nheader_read_timeout = \"5s\"\nbody_read_timeout = \"1s\"\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    let addr = gw.base.strip_prefix("http://").unwrap().to_owned();
    // A healthy client with a keep-alive connection, opened first.
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    let mut healthy = KeepAlive::connect(&gw.base);
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", ACCEPT_BOTH),
        ("Mcp-Session-Id", session.as_str()),
    ];
    let call = |healthy: &mut KeepAlive, i: u64, text: &str| {
        let (status, body) =
            healthy.post("/mcp", &headers, &echo(i, "demo__echo", text).to_string());
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(text_of(&v), text);
    };
    call(&mut healthy, 1, "first");
    // Partial headers and silent sockets, more than the cap.
    let mut held = Vec::new();
    for i in 0..60 {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        if i % 2 == 0 {
            s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                .unwrap();
        }
        held.push(s);
    }
    // The existing connection is served while the cap is full.
    for i in 0..20 {
        call(&mut healthy, 100 + i, "still");
    }
    // None was served. One address holds at most half the cap: past it
    // the oldest that sent no complete head gave way to the next (issue 38;
    // none was busy, so none was refused); the rest are closed by the
    // header-read timeout.
    for mut s in held {
        let mut text = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.read_to_end(&mut text);
        assert!(!text.starts_with(b"HTTP/1.1 503"), "refused, not displaced");
    }
    wait_until(Duration::from_secs(20), || {
        gw.metrics().get("sluice_connections_open") <= 2.0
    });
    let shed = "sluice_connections_shed_total{reason=\"no_request\"}";
    assert!(gw.metrics().get(shed) >= 40.0);

    // A body that trickles in is cut off by its deadline: 408.
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.write_all(
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\n\
             Content-Length: 100\r\n\r\n{{\"jsonrpc\""
        )
        .as_bytes(),
    )
    .unwrap();
    let mut reply = String::new();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");

    // An idle keep-alive connection is not kept forever either.
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    assert!(
        closed_by_peer(&mut s, Duration::from_secs(20)),
        "idle connection kept open"
    );
    let r = http
        .post(Some(&session), &echo(999, "demo__echo", "after"))
        .await;
    assert_eq!(text_of(&r.messages()[0]), "after");
}

/// Item 6: a batch past the item cap gets one error and costs nothing; a
/// batch within it is answered whole, its requests at bounded concurrency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item06_batches_are_bounded() {
    let gw = Gateway::start(&format!(
        "[server]\nmax_batch_items = 256\n{}",
        demo_backend("demo")
    ));
    let http = Http::new(gw.url("/mcp"));
    let r = http
        .post_raw(
            &[
                ("content-type", "application/json"),
                ("accept", ACCEPT_BOTH),
            ],
            init_request(1)
                .to_string()
                .replace("2025-06-18", "2025-03-26"),
        )
        .await;
    let session = r.session_id().unwrap();
    let rss_before = gw.metrics().get("process_resident_memory_bytes");
    let items = |n: usize| {
        let one = |i: usize| format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"ping"}}"#);
        format!("[{}]", (0..n).map(one).collect::<Vec<_>>().join(","))
    };
    let huge = format!("[{}1]", "1,".repeat(1_000_000));
    for _ in 0..4 {
        let r = http.post_bytes(&session, huge.clone()).await;
        assert_eq!(r.status, 400);
        assert_eq!(r.json()["error"]["code"], -32600);
        assert!(r.body.len() < 512, "one error, not one per item");
    }
    let r = http.post_bytes(&session, items(257)).await;
    assert_eq!(r.status, 400);
    let r = http.post_bytes(&session, items(256)).await;
    assert_eq!(r.status, 200);
    let answers: Vec<Value> = serde_json::from_str(&r.body).unwrap();
    assert_eq!(answers.len(), 256);
    assert!(
        answers
            .iter()
            .enumerate()
            .all(|(i, a)| a["id"] == i && a["result"] == json!({}))
    );
    let grown = gw.metrics().get("process_resident_memory_bytes") - rss_before;
    assert!(grown < 64.0 * 1024.0 * 1024.0, "RSS grew {grown} bytes");
}

/// Item 14: a request still running when the shutdown grace ends gets a
/// JSON-RPC error, not a stream cut without a word: on a session (as JSON
/// or on a stream under way) and without one (2026-07-28).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item14_requests_past_the_grace_are_answered_with_an_error() {
    let gw = Gateway::start(&format!(
        "[server]\nshutdown_grace = \"1s\"\n{}",
        demo_backend("demo")
    ));
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    // One with progress (an SSE reply already under way), one plain (JSON).
    let streaming = http.start_slow_call(&session, json!("sse"), 20_000).await;
    let plain = {
        let http = http.clone();
        let session = session.clone();
        tokio::spawn(async move {
            http.call(
                &session,
                7,
                "tools/call",
                json!({"name":"demo__sleep_ms","arguments":{"ms":20000}}),
            )
            .await
        })
    };
    // And one of 2026-07-28, which has no session to end with.
    let stateless = {
        let http = http.clone();
        tokio::spawn(async move {
            let meta = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "sluice-test", "version": "0"}
            });
            let params = json!({"name":"demo__sleep_ms","arguments":{"ms":20000},"_meta":meta});
            let extra = [
                ("content-type", "application/json"),
                ("accept", ACCEPT_BOTH),
            ];
            http.modern_call(8, "demo__sleep_ms", params, &extra).await
        })
    };
    // All three are in flight at the backend before the signal.
    wait_until(Duration::from_secs(10), || {
        gw.metrics()
            .get(r#"sluice_bounded_entries{map="pending_calls",owner="demo"}"#)
            >= 3.0
    });
    let pid = gw.pid();
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let text = streaming.text().await.unwrap();
    let last = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .next_back()
        .unwrap();
    let last: Value = serde_json::from_str(last.trim()).unwrap();
    assert_eq!(last["id"], "sse");
    assert!(
        last["error"]["message"]
            .as_str()
            .unwrap()
            .contains("shutting down"),
        "{last}"
    );
    let plain = plain.await.unwrap();
    assert!(
        plain.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("shutting down")
    );
    let stateless = stateless.await.unwrap();
    assert!(
        stateless.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("shutting down"),
        "{}",
        stateless.body
    );
    assert_eq!(gw.stop(), Some(0));
}

/// Reads SSE events from a GET stream until `keep_alives` keep-alive
/// comments have passed; returns the JSON-RPC messages seen.
async fn read_stream(resp: &mut reqwest::Response, keep_alives: usize) -> Vec<Value> {
    let mut text = String::new();
    let mut seen = 0;
    let mut messages = Vec::new();
    while seen < keep_alives {
        let chunk = resp.chunk().await.unwrap().expect("stream ended");
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let event: String = text.drain(..end + 2).collect();
            if event.starts_with(':') {
                seen += 1;
            }
            for data in event.lines().filter_map(|l| l.strip_prefix("data:")) {
                messages.push(serde_json::from_str(data.trim()).unwrap());
            }
        }
    }
    messages
}

/// Item 16: `notifications/resources/updated` reaches the sessions that
/// subscribed (and no other), under the URI they know; after an
/// unsubscribe it stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item16_resource_updates_reach_subscribers() {
    for isolation in ["shared", "per-session"] {
        let toml = format!(
            "[server]\nsession_idle_ttl = \"3s\"\n{}",
            faulty_stdio("upd", "updates", &format!("isolation = \"{isolation}\""))
        );
        let gw = Gateway::start(&toml);
        let http = Http::new(gw.url("/mcp"));
        let a = http.initialize().await;
        let b = http.initialize().await;
        let uri = "sluice://upd/faulty://thing";
        let r = http
            .call(&a, 2, "resources/subscribe", json!({ "uri": uri }))
            .await;
        assert!(r.json().get("result").is_some(), "{isolation}: {}", r.body);
        let mut stream_a = http.get_stream(&a).await;
        let mut stream_b = http.get_stream(&b).await;
        // B uses the backend too (per-session: its own backend session).
        let r = http.post(Some(&b), &echo(3, "upd__echo", "b")).await;
        assert_eq!(text_of(&r.messages()[0]), "b");
        let r = http
            .call(
                &a,
                4,
                "tools/call",
                json!({"name":"upd__fault","arguments":{}}),
            )
            .await;
        assert_eq!(text_of(&r.messages()[0]), "fault-ok");
        let got_a = read_stream(&mut stream_a, 1).await;
        let updated: Vec<_> = got_a
            .iter()
            .filter(|m| m["method"] == "notifications/resources/updated")
            .collect();
        assert_eq!(updated.len(), 1, "{isolation}: {got_a:?}");
        assert_eq!(updated[0]["params"]["uri"], uri);
        let got_b = read_stream(&mut stream_b, 2).await;
        assert!(
            got_b
                .iter()
                .all(|m| m["method"] != "notifications/resources/updated"),
            "{isolation}: B never subscribed: {got_b:?}"
        );
        // After unsubscribing, A is told no more.
        let r = http
            .call(&a, 5, "resources/unsubscribe", json!({ "uri": uri }))
            .await;
        assert!(r.json().get("result").is_some());
        let r = http
            .call(
                &a,
                6,
                "tools/call",
                json!({"name":"upd__fault","arguments":{}}),
            )
            .await;
        assert_eq!(text_of(&r.messages()[0]), "fault-ok");
        let got_a = read_stream(&mut stream_a, 2).await;
        assert!(
            got_a
                .iter()
                .all(|m| m["method"] != "notifications/resources/updated"),
            "{isolation}: {got_a:?}"
        );
    }
}

/// Item 5: under a low open-file limit the connection cap is lowered to fit
/// it, so a flood of idle sockets gives way or is refused early instead of
/// exhausting descriptors (and accept never spins on EMFILE); an open
/// connection is served throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item05_the_connection_cap_fits_the_fd_limit() {
    let gw = Gateway::start_with_fd_limit(&demo_backend("demo"), 256);
    let addr = gw.base.strip_prefix("http://").unwrap().to_owned();
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    let mut healthy = KeepAlive::connect(&gw.base);
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", ACCEPT_BOTH),
        ("Mcp-Session-Id", session.as_str()),
    ];
    let (status, _) = healthy.post("/mcp", &headers, &echo(1, "demo__echo", "x").to_string());
    assert_eq!(status, 200);
    let mut held = Vec::new();
    for _ in 0..300 {
        held.push(std::net::TcpStream::connect(&addr).unwrap());
    }
    for i in 0..20 {
        let (status, body) = healthy.post(
            "/mcp",
            &headers,
            &echo(10 + i, "demo__echo", "served").to_string(),
        );
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("served"), "{body}");
    }
    // Read over the connection already open: a new one would take a place.
    // Every held socket is accepted in the end: refused, displaced (one
    // address holds at most half the cap), or open.
    let mut counted = (0.0, 0.0, 0.0);
    wait_until(Duration::from_secs(20), || {
        let r = healthy.response_to("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        let text = r.text();
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
                .unwrap_or(0.0)
        };
        counted = (
            value("sluice_connections_open "),
            value("sluice_connections_refused_total "),
            value("sluice_connections_shed_total{reason=\"no_request\"} "),
        );
        let (open, refused, shed) = counted;
        refused + shed >= 300.0 - open
    });
    let (open, refused, shed) = counted;
    assert!(
        open < 256.0 - 64.0,
        "{open} connections open under a limit of 256 ({refused} refused, {shed} shed)"
    );
    drop(held);
    let log = gw.log();
    assert!(log.contains("max_connections lowered"), "{log}");
    assert_eq!(log.matches("accept failed").count(), 0, "{log}");
}

/// Issue 13 (4): a backend's log message sent outside any request reaches
/// every session that set a level at or below it, and no other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_messages_outside_requests_reach_sessions_by_level() {
    let toml = format!(
        "[server]\nsession_idle_ttl = \"3s\"\n{}",
        faulty_stdio("upd", "updates", "")
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let info = http.initialize().await;
    let unset = http.initialize().await;
    let error = http.initialize().await;
    for (sid, level) in [(&info, "info"), (&error, "error")] {
        let r = http
            .call(sid, 2, "logging/setLevel", json!({ "level": level }))
            .await;
        assert!(r.json().get("result").is_some(), "{}", r.body);
    }
    let mut streams = Vec::new();
    for sid in [&info, &unset, &error] {
        streams.push(http.get_stream(sid).await);
    }
    let r = http
        .call(
            &unset,
            3,
            "tools/call",
            json!({"name":"upd__fault","arguments":{}}),
        )
        .await;
    assert_eq!(text_of(&r.messages()[0]), "fault-ok");
    let mut got = Vec::new();
    for s in &mut streams {
        let logs: Vec<Value> = read_stream(s, 2)
            .await
            .into_iter()
            .filter(|m| m["method"] == "notifications/message")
            .collect();
        got.push(logs);
    }
    assert_eq!(got[0].len(), 1, "info: {:?}", got[0]);
    assert_eq!(got[0][0]["params"]["data"], "thing changed");
    assert!(got[1].is_empty(), "no level set: {:?}", got[1]);
    assert!(got[2].is_empty(), "error level: {:?}", got[2]);
}

/// Issue 13 (7): an HTTP backend killed while nobody calls it is noticed by
/// its health check (it has no GET stream to lose), and none of its lists
/// are served from cache while it is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_http_backend_is_noticed_while_idle() {
    let fx = faulty_http("ok", &[]);
    let toml = format!(
        "{}{}",
        demo_backend("demo"),
        http_backend(
            "web",
            &fx.url(),
            "health_interval = \"1s\"\nrequest_timeout = \"2s\""
        )
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let r = http.call(&sid, 2, "tools/list", json!({})).await;
    let tools = r.json()["result"]["tools"].to_string();
    assert!(tools.contains("web__echo"), "{tools}");
    fx.stop();
    // No call is made: the health check finds it gone.
    wait_until(Duration::from_secs(30), || {
        http_get(&gw.base, "/readyz")
            .is_ok_and(|(status, body)| status == 503 && body.contains("\"web\""))
    });
    assert_eq!(gw.metrics().get(r#"sluice_backend_up{backend="web"}"#), 0.0);
    let r = http.call(&sid, 3, "tools/list", json!({})).await;
    let tools = r.json()["result"]["tools"].to_string();
    assert!(
        !tools.contains("web__"),
        "a down backend's cached tools: {tools}"
    );
    assert!(tools.contains("demo__echo"), "{tools}");
}

/// A client that stops reading its answer gives its connection up after
/// `write_timeout`, however the connection is served (the gateway's own
/// HTTP/1.1 for a plain POST, hyper after a chunked one); the session and
/// other clients are served meanwhile and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_loses_its_connection_to_the_write_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let toml = format!(
        "[server]\nmax_body_bytes = 33554432\nwrite_timeout = \"1s\"\nheader_read_timeout = \"10m\"\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    let addr: std::net::SocketAddr = gw.base.strip_prefix("http://").unwrap().parse().unwrap();
    // Large enough that neither socket's buffers hold the answer.
    let text = "x".repeat(8 << 20);
    let body = echo(7, "demo__echo", &text).to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\n"
    );
    let plain = format!("{head}Content-Length: {}\r\n\r\n{body}", body.len());
    let chunked = format!(
        "{head}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    // (The header-read timeout is long so that no idle connection closes
    // meanwhile: the count of open ones tells when the stalled one ends.)
    for request in [plain, chunked] {
        let open = || gw.metrics().get("sluice_connections_open");
        let before = open();
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut stalled = socket.connect(addr).await.unwrap();
        stalled.write_all(request.as_bytes()).await.unwrap();
        wait_until(Duration::from_secs(20), || open() > before);
        // The answer is not read: the gateway's write waits, then ends.
        wait_until(Duration::from_secs(30), || open() <= before);
        let answer = http
            .tool(&session, 8, "demo__echo", json!({"text": "still"}))
            .await;
        assert_eq!(text_of(&answer), "still");
        // What the client gets now is a cut answer.
        let mut got = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(30), stalled.read_to_end(&mut got)).await;
        assert!(
            got.starts_with(b"HTTP/1.1 200"),
            "{:?}",
            String::from_utf8_lossy(&got[..got.len().min(200)])
        );
        assert!(
            got.len() < text.len(),
            "the whole answer arrived: {} bytes",
            got.len()
        );
    }
}
