//! `sluice stdio`: the real binary on pipes, spoken to in lines as a
//! desktop client speaks to it. Both eras, a bad line, cancellation, the
//! namespace flag, and the end: stdin closed, exit 0, no child left.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

/// How long any one line may take to come.
const LINE_WAIT: Duration = Duration::from_secs(30);

/// `sluice stdio` with its pipes: lines in, lines out, stderr kept.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    /// Every stdout line seen, in order.
    seen: Vec<Value>,
    dir: tempdir::Dir,
}

impl Client {
    fn start(args: &[&str], toml: Option<&str>) -> Client {
        let dir = tempdir::Dir::new();
        let mut cmd = Command::new(BIN);
        cmd.arg("stdio").args(args);
        if let Some(toml) = toml {
            cmd.arg("--config")
                .arg(tempdir::write(&dir, "sluice.toml", toml));
        }
        let mut child = cmd
            .env("SLUICE_LOG", "info")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let (etx, stderr) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { return };
                let _ = etx.send(line);
            }
        });
        Client {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            seen: Vec::new(),
            dir,
        }
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string());
    }

    /// The next stdout line, which must be one JSON-RPC message.
    fn next(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(LINE_WAIT)
            .unwrap_or_else(|e| panic!("no line within {LINE_WAIT:?}: {e}"));
        let msg: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
        assert_eq!(msg["jsonrpc"], "2.0", "not JSON-RPC: {line}");
        self.seen.push(msg.clone());
        msg
    }

    /// Lines until the response to `id` (the others stay in `seen`).
    fn response(&mut self, id: &Value) -> Value {
        loop {
            let msg = self.next();
            if &msg["id"] == id && msg.get("method").is_none() {
                return msg;
            }
        }
    }

    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
        self.response(&json!(id))
    }

    fn tool_names(&mut self) -> Vec<String> {
        let list = self.call(1, "tools/list", json!({}));
        let tools = list["result"]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        tools
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    fn initialize(&mut self) {
        let init = self.call(
            0,
            "initialize",
            json!({"protocolVersion":"2025-06-18","capabilities":{},
                   "clientInfo":{"name":"stdio-test","version":"1"}}),
        );
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
        self.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    }

    /// Closes stdin; the exit status within a bound.
    fn close(&mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "sluice stdio did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Writes the config anew and has the gateway read it (SIGHUP).
    fn reload(&self, toml: &str) {
        tempdir::write(&self.dir, "sluice.toml", toml);
        // SAFETY: our own child.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGHUP);
        }
    }

    fn stderr(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The demo backend's text result.
fn text(msg: &Value) -> &str {
    msg["result"]["content"][0]["text"].as_str().unwrap_or("")
}

fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28",
           "io.modelcontextprotocol/clientCapabilities":{}})
}

/// Alive: present and not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, r)| !r.trim_start().starts_with('Z'))
    })
}

/// A 2025 client with the built-in demo: initialize, list, call; every
/// stdout line is JSON-RPC and the logs are on stderr.
#[test]
fn a_2025_client_lists_and_calls_the_demo() {
    let mut c = Client::start(&[], None);
    c.initialize();
    let names = c.tool_names();
    assert!(names.iter().any(|n| n == "demo__echo"), "{names:?}");
    let sum = c.call(
        2,
        "tools/call",
        json!({"name":"demo__add","arguments":{"a":2,"b":3}}),
    );
    assert_eq!(text(&sum), "5", "{sum}");
    assert!(c.close().success());
    // Anything left on stdout is JSON-RPC too.
    while let Ok(line) = c.lines.recv_timeout(Duration::from_secs(5)) {
        let msg: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(msg["jsonrpc"], "2.0", "{line}");
    }
    let logs = c.stderr();
    assert!(logs.contains("sluice serving on stdin"), "{logs}");
}

/// A 2026-07-28 client: no initialize; each request carries its `_meta`.
#[test]
fn a_2026_client_needs_no_initialize() {
    let mut c = Client::start(&[], None);
    let meta = modern_meta();
    let discover = c.call(1, "server/discover", json!({"_meta": meta}));
    assert!(
        discover["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28")),
        "{discover}"
    );
    let echo = c.call(
        2,
        "tools/call",
        json!({"name":"demo__echo","arguments":{"text":"héllo"},"_meta": meta}),
    );
    assert_eq!(echo["result"]["resultType"], "complete", "{echo}");
    assert_eq!(text(&echo), "héllo");
    // Held to the revision's rules: a missing capability key is refused.
    let refused = c.call(
        3,
        "tools/list",
        json!({"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(c.close().success());
}

/// A line that is no JSON is answered with a parse error; the session
/// goes on.
#[test]
fn a_bad_line_is_a_parse_error_and_the_session_goes_on() {
    let mut c = Client::start(&[], None);
    c.initialize();
    c.send_raw("{this is not json");
    // The answer has no id to go by (a notification may come first: a
    // backend that starts as the session opens says its lists changed).
    let error = c.response(&Value::Null);
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert_eq!(error["id"], Value::Null);
    let echo = c.call(
        1,
        "tools/call",
        json!({"name":"demo__echo","arguments":{"text":"still here"}}),
    );
    assert_eq!(text(&echo), "still here", "{echo}");
    // A request before any session is refused under its own id.
    assert!(c.close().success());
    let mut fresh = Client::start(&[], None);
    let refused = fresh.call(5, "tools/list", json!({}));
    assert!(refused["error"]["code"].is_i64(), "{refused}");
    assert!(fresh.close().success());
}

/// Closing stdin ends the gateway with 0, and its backend child with it.
#[test]
fn end_of_input_exits_0_and_leaves_no_child() {
    let mut c = Client::start(&[], None);
    c.initialize();
    let echo = c.call(
        1,
        "tools/call",
        json!({"name":"demo__echo","arguments":{"text":"x"}}),
    );
    assert_eq!(text(&echo), "x");
    let pid = c.child.id();
    let kids: Vec<u32> = children(pid).into_iter().map(|(p, _)| p).collect();
    assert!(!kids.is_empty(), "the demo backend runs as a child");
    let status = c.close();
    assert_eq!(status.code(), Some(0));
    for kid in kids {
        assert!(!alive(kid), "child {kid} outlived sluice stdio");
    }
    let logs = c.stderr();
    assert!(logs.contains("stopped"), "{logs}");
}

/// `notifications/cancelled` ends a request: no answer comes for it, in
/// either era, though a later, longer call is answered.
#[test]
fn a_cancelled_request_is_never_answered() {
    let mut c = Client::start(&[], None);
    c.initialize();
    let meta = modern_meta();
    for (era, extra) in [("2025", json!({})), ("2026", json!({"_meta": meta}))] {
        let mut slow = json!({"name":"demo__sleep_ms","arguments":{"ms":600}});
        let mut slower = json!({"name":"demo__sleep_ms","arguments":{"ms":1500}});
        for p in [&mut slow, &mut slower] {
            if let Some(m) = extra.get("_meta") {
                p["_meta"] = m.clone();
            }
        }
        let (cancelled, later) = match era {
            "2025" => (10, 11),
            _ => (20, 21),
        };
        c.send(&json!({"jsonrpc":"2.0","id":cancelled,"method":"tools/call","params":slow}));
        c.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                       "params":{"requestId":cancelled,"reason":"test"}}));
        let start = c.seen.len();
        let answer = c.call(later, "tools/call", slower);
        assert!(answer["result"].is_object(), "{era}: {answer}");
        assert!(
            !c.seen[start..].iter().any(|m| m["id"] == json!(cancelled)),
            "{era}: the cancelled request was answered: {:?}",
            &c.seen[start..]
        );
    }
    assert!(c.close().success());
}

/// `--namespace` serves that namespace alone; an unknown one is a config
/// error.
#[test]
fn the_namespace_flag_picks_the_namespace() {
    let toml = format!(
        "{}{}[namespaces.default]\nbackends = [\"a\"]\n[namespaces.other]\nbackends = [\"b\"]\n",
        demo_backend("a"),
        demo_backend("b")
    );
    let mut c = Client::start(&["--namespace", "other"], Some(&toml));
    c.initialize();
    let names = c.tool_names();
    assert!(names.iter().any(|n| n == "b__echo"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("a__")), "{names:?}");
    assert!(c.close().success());

    let mut bad = Client::start(&["--namespace", "nowhere"], Some(&toml));
    assert_eq!(bad.close().code(), Some(2));
    assert!(bad.stderr().contains("nowhere"));
}

/// Issue 49: `--namespace` starts only the backends that namespace serves,
/// and a reload keeps to that rule: the children of `sluice stdio` are the
/// served namespace's (told apart by a variable in their environment),
/// before the reload and after it added a backend to each namespace.
#[test]
fn the_namespace_flag_starts_only_its_backends() {
    let tagged = |name: &str| {
        format!(
            "{}env = {{ STDIO_TEST_TAG = \"{name}\" }}\n",
            demo_backend(name)
        )
    };
    let namespaces = |a: &str, b: &str| {
        format!("[namespaces.a]\nbackends = [{a}]\n[namespaces.b]\nbackends = [{b}]\n")
    };
    let toml = format!(
        "{}{}{}",
        tagged("a"),
        tagged("b"),
        namespaces("\"a\"", "\"b\"")
    );
    let mut c = Client::start(&["--namespace", "a"], Some(&toml));
    c.initialize();
    assert!(c.tool_names().iter().any(|n| n == "a__echo"));
    let pid = c.child.id();
    assert_eq!(tags(pid), ["a"], "children of sluice stdio --namespace a");

    let more = format!(
        "{}{}{}{}{}",
        tagged("a"),
        tagged("b"),
        tagged("a2"),
        tagged("b2"),
        namespaces("\"a\", \"a2\"", "\"b\", \"b2\"")
    );
    c.reload(&more);
    let mut logs = String::new();
    let deadline = Instant::now() + LINE_WAIT;
    while !logs.contains("config reloaded") {
        assert!(Instant::now() < deadline, "no reload logged: {logs}");
        if let Ok(line) = c.stderr.recv_timeout(Duration::from_millis(100)) {
            logs.push_str(&line);
            logs.push('\n');
        }
    }
    // `a2` is up once it lists (the reload started it).
    let deadline = Instant::now() + LINE_WAIT;
    while !c.tool_names().iter().any(|n| n == "a2__echo") {
        assert!(Instant::now() < deadline, "a2 never listed");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(tags(pid), ["a", "a2"], "after the reload; log: {logs}");
    assert!(c.close().success());
}

/// The `STDIO_TEST_TAG` of each child of `pid`, sorted.
fn tags(pid: u32) -> Vec<String> {
    let mut tags: Vec<String> = children(pid)
        .into_iter()
        .filter_map(|(kid, _)| {
            let env = std::fs::read(format!("/proc/{kid}/environ")).ok()?;
            env.split(|b| *b == 0).find_map(|var| {
                let tag = var.strip_prefix(b"STDIO_TEST_TAG=")?;
                Some(String::from_utf8_lossy(tag).into_owned())
            })
        })
        .collect();
    tags.sort();
    tags
}

/// A call's progress comes as lines before its result.
#[test]
fn progress_comes_before_the_result() {
    let mut c = Client::start(&[], None);
    c.initialize();
    let start = c.seen.len();
    let done = c.call(
        1,
        "tools/call",
        json!({"name":"demo__sleep_ms","arguments":{"ms":300},"_meta":{"progressToken":"p-1"}}),
    );
    assert!(done["result"].is_object(), "{done}");
    let progress: Vec<&Value> = c.seen[start..]
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 2, "{:?}", &c.seen[start..]);
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "p-1")
    );
    assert!(c.close().success());
}

/// What the gateway says unasked reaches the client: a reload (SIGHUP)
/// that adds a backend is told as `notifications/tools/list_changed`, and
/// the new backend's tools are listed after it.
#[test]
fn a_reload_is_told_as_list_changed() {
    let one = demo_backend("a");
    let mut c = Client::start(&[], Some(&one));
    c.initialize();
    assert!(!c.tool_names().iter().any(|n| n.starts_with("b__")));
    c.reload(&format!("{one}{}", demo_backend("b")));
    // Backend `a` coming up may have been told already (once); the reload
    // is told once more at least (its new namespace, and `b` coming up).
    let told = |seen: &[Value]| {
        seen.iter()
            .filter(|m| m["method"] == "notifications/tools/list_changed")
            .count()
    };
    while told(&c.seen) < 2 {
        c.next();
    }
    let names = c.tool_names();
    assert!(names.iter().any(|n| n == "b__echo"), "{names:?}");
    assert!(c.close().success());
}

/// A client that writes requests faster than they are answered, and
/// reads nothing, meets backpressure: the gateway stops reading stdin, so
/// what the client manages to write stays bounded (pipes and a few
/// queued lines), however long it keeps trying.
#[test]
fn a_flooding_client_meets_backpressure() {
    use std::os::fd::AsRawFd;
    let mut c = Client::start(&[], None);
    let meta = modern_meta();
    let stdin = c.stdin.as_mut().unwrap();
    let fd = stdin.as_raw_fd();
    // SAFETY: our own pipe's descriptor, made non-blocking.
    unsafe {
        libc::fcntl(
            fd,
            libc::F_SETFL,
            libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
        );
    }
    let line = |id: u64| {
        let call = json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"demo__sleep_ms","arguments":{"ms":20000},"_meta":meta}});
        format!("{call}\n").into_bytes()
    };
    // Unbounded reading would take all of this; bounded, the pipe stays
    // full once the gateway stops reading, and the flood ends there.
    const LIMIT: usize = 8 << 20;
    let (mut written, mut id, mut pending) = (0usize, 0u64, line(0));
    while written < LIMIT {
        match stdin.write(&pending) {
            Ok(n) => {
                written += n;
                pending.drain(..n);
                if pending.is_empty() {
                    id += 1;
                    pending = line(id);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // Room comes while the gateway reads; none for 2 s: it
                // has stopped reading.
                let mut poll = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                if unsafe { libc::poll(&mut poll, 1, 2_000) } == 0 {
                    break;
                }
            }
            Err(e) => panic!("write: {e}"),
        }
    }
    assert!(
        written < 1 << 20,
        "the gateway read {written} bytes ({id} requests) of a flood"
    );
    assert!(c.child.try_wait().unwrap().is_none(), "sluice stdio died");
}

/// The requests running may wait on the client's answers to a backend's
/// questions, and those answers come after them on stdin. With every
/// place taken (64 calls, each asking the client to sample) and more calls
/// waiting their turn, stdin is still read: the answers reach the backend,
/// the 64 calls end, and those waiting run after them, the one asking
/// too. A waiting call that is cancelled never runs: a 300 ms one,
/// cancelled, is not answered before a 1.5 s one that waited behind it.
/// Before, stdin was left unread behind the first call that waited, and
/// every call waited for its answer until its deadline.
#[test]
fn answers_are_taken_while_requests_wait_for_a_place() {
    const PLACES: u64 = 64;
    let (cancelled, asking, slower) = (PLACES + 1, PLACES + 2, PLACES + 3);
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let toml = format!(
        "[server]\nrequest_timeout = \"300s\"\n{}",
        http_backend("web", &fx.url(), "")
    );
    let mut c = Client::start(&[], Some(&toml));
    let init = c.call(
        0,
        "initialize",
        json!({"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},
               "clientInfo":{"name":"stdio-test","version":"1"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    c.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    let call = |id: u64, name: &str, arguments: Value| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
               "params":{"name":name,"arguments":arguments}})
    };
    for id in 1..=PLACES {
        c.send(&call(id, "web__ask", json!({})));
    }
    c.send(&call(cancelled, "web__slow", json!({"ms": 300})));
    c.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                   "params":{"requestId":cancelled,"reason":"test"}}));
    c.send(&call(asking, "web__ask", json!({})));
    c.send(&call(slower, "web__slow", json!({"ms": 1500})));
    // Every question is answered as it comes; the calls end once theirs is.
    let (mut asked, mut answered) = (0, Vec::new());
    while answered.len() < PLACES as usize + 2 {
        let msg = c.next();
        if msg["method"] == "sampling/createMessage" {
            asked += 1;
            c.send(&json!({"jsonrpc":"2.0","id":msg["id"],"result":{
                "role":"assistant","content":{"type":"text","text":"sampled"},"model":"test"}}));
        } else if msg.get("method").is_none() && msg["id"].is_u64() {
            let id = msg["id"].as_u64().unwrap();
            assert_ne!(id, cancelled, "the cancelled call ran: {msg}");
            if id != slower {
                assert_eq!(text_of(&msg), "sampled", "{msg}");
            }
            answered.push(id);
        }
    }
    assert_eq!(asked, PLACES + 1, "one question a call that asks");
    answered.sort_unstable();
    let mut expected: Vec<u64> = (1..=PLACES).collect();
    expected.extend([asking, slower]);
    assert_eq!(answered, expected);
    assert!(c.close().success());
}
