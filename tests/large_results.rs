//! Issue 38, item 3, and issue 49, item 3: a large result from an HTTP
//! or a stdio backend is held once, its memory is given back once it has
//! been written, and bodies in flight stay within `[server]
//! max_inflight_body_bytes`. Asserted on the gateway's own memory
//! (`/proc/PID/status`) against the payload's size, and by counts; the
//! only waits are bounded polls.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MIB: u64 = 1 << 20;

/// A `/proc/PID/status` field, in bytes.
fn status_bytes(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Resets the process's peak RSS (`VmHWM`) to its RSS now.
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}

fn fault(id: u64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
        "params":{"name":"big__fault","arguments":{}}})
}

/// Where the large result comes from: the fault backend over HTTP
/// answering `fault` with a text of `mb` MiB (`huge-line`, as
/// `application/json` with its length; `huge-sse`, as one event of an SSE
/// response), or over stdio, as one line.
#[derive(Clone, Copy, Debug)]
enum Source {
    Http(&'static str),
    Stdio,
}

/// A gateway (with these `[server]` lines) in front of the fault backend
/// as `big`, and a session.
async fn gateway(
    source: Source,
    mb: u64,
    server: &str,
) -> (Gateway, Option<Fixture>, Http, String) {
    let mb = mb.to_string();
    let (backend, table) = match source {
        Source::Http(mode) => {
            let backend = faulty_http(mode, &["--mb", &mb]);
            let table = http_backend("big", &backend.url(), "");
            (Some(backend), table)
        }
        Source::Stdio => (None, big_stdio(&mb)),
    };
    let gw = Gateway::start(&format!("{server}\n{table}"));
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    (gw, backend, http, session)
}

/// The fault backend over stdio as `big`, its `fault` a line of `mb` MiB.
fn big_stdio(mb: &str) -> String {
    faulty_stdio("big", "huge-line", "").replace(
        "\"huge-line\"]",
        &format!("\"huge-line\", \"--mb\", \"{mb}\"]"),
    )
}

/// The text of a `fault` result, checked to be the backend's whole answer.
fn text_len(reply: &Reply) -> usize {
    assert_eq!(reply.status, 200);
    let v = reply.json();
    assert!(v["error"].is_null(), "{}", v["error"]);
    let text = text_of(&v);
    assert!(text.bytes().all(|b| b == b'x'));
    text.len()
}

/// A 48 MiB result raised the gateway's peak RSS by 117 MiB (2.4 times)
/// and RSS stayed that much higher 20 s later. Now the peak rises by at
/// most the payload plus 16 MiB, and RSS comes back within 16 MiB of
/// before (polled for at most 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_json_result_is_held_once_and_given_back() {
    held_once_and_given_back(Source::Http("huge-line")).await;
}

/// The same, the result one event of the backend's SSE response (as the
/// Python SDK's servers answer): 4 copies of it were held before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_sse_result_is_held_once_and_given_back() {
    held_once_and_given_back(Source::Http("huge-sse")).await;
}

/// Issue 49: from a stdio backend, a 48 MiB result raised the peak by 145
/// MiB and left 48 MiB resident 20 s later (the line reader's buffer,
/// grown to the line and kept; the line copied into a string, the result
/// out of it, the response out of that). Now as from an HTTP backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_stdio_result_is_held_once_and_given_back() {
    held_once_and_given_back(Source::Stdio).await;
}

async fn held_once_and_given_back(source: Source) {
    let (gw, _backend, http, session) = gateway(source, 48, "").await;
    warm(&http, &session).await;
    let watch = Watch::new(gw.pid(), &format!("{source:?}"));
    let reply = http.post(Some(&session), &fault(10)).await;
    assert_eq!(text_len(&reply) as u64, 48 * MIB);
    watch.held_once(reply.body.len() as u64);
    watch.given_back().await;
    warm(&http, &session).await;
}

/// Small calls, answered: every connection and buffer a call uses exists
/// after them (and the gateway serves on).
async fn warm(http: &Http, session: &str) {
    for id in 1..=3 {
        let echo = json!({"name":"big__echo","arguments":{"text":"hi"}});
        let r = http.call(session, id, "tools/call", echo).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(text_of(&r.json()), "hi");
    }
}

/// A process's memory while one large answer passes through it.
struct Watch {
    pid: u32,
    what: String,
    before: u64,
}

impl Watch {
    /// From now: RSS now, and the peak reset to it.
    fn new(pid: u32, what: &str) -> Watch {
        let before = status_bytes(pid, "VmRSS:");
        reset_peak(pid);
        Watch {
            pid,
            what: what.to_owned(),
            before,
        }
    }

    /// The peak rose by at most the answer's bytes and 16 MiB.
    fn held_once(&self, payload: u64) {
        let rise = status_bytes(self.pid, "VmHWM:").saturating_sub(self.before);
        eprintln!(
            "{} MiB answer ({}): RSS before {} MiB, peak +{} MiB",
            payload / MIB,
            self.what,
            self.before / MIB,
            rise / MIB
        );
        assert!(
            rise <= payload + 16 * MIB,
            "{}: peak RSS rose by {} MiB for a {} MiB payload",
            self.what,
            rise / MIB,
            payload / MIB
        );
    }

    /// RSS comes back within 16 MiB of before (polled for at most 30 s).
    async fn given_back(&self) {
        let limit = Instant::now() + Duration::from_secs(30);
        let mut after = status_bytes(self.pid, "VmRSS:");
        while after > self.before + 16 * MIB && Instant::now() < limit {
            tokio::time::sleep(Duration::from_millis(200)).await;
            after = status_bytes(self.pid, "VmRSS:");
        }
        eprintln!("{}: after, RSS {} MiB", self.what, after / MIB);
        assert!(
            after <= self.before + 16 * MIB,
            "{}: RSS stayed {} MiB above before",
            self.what,
            (after - self.before) / MIB
        );
    }
}

/// Issue 49: an answer that became an SSE stream (the backend sent
/// progress first) copied its result into a line, then into the event's
/// buffer, then behind its chunk's head. Now its result is one frame of
/// the stream, as it lies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_result_on_an_sse_answer_is_held_once() {
    let (gw, _backend, http, session) = gateway(Source::Stdio, 48, "").await;
    warm(&http, &session).await;
    let watch = Watch::new(gw.pid(), "an SSE answer");
    let mut call = fault(10);
    call["params"]["_meta"] = json!({"progressToken": "p"});
    let reply = http.post(Some(&session), &call).await;
    let content_type = reply.headers["content-type"].to_str().unwrap();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let messages = reply.messages();
    assert_eq!(
        messages[0]["method"], "notifications/progress",
        "{}",
        messages[0]
    );
    assert_eq!(text_of(&messages[1]).len() as u64, 48 * MIB);
    watch.held_once(reply.body.len() as u64);
    watch.given_back().await;
    warm(&http, &session).await;
}

/// A client that sends its request and reads the head of its answer,
/// then nothing (through a receive buffer too small to take a large
/// body), until told to read the rest.
struct SlowClient {
    socket: tokio::net::TcpStream,
    got: Vec<u8>,
    status: u16,
    length: usize,
}

impl SlowClient {
    async fn call(gw: &Gateway, session: &str, msg: &Value) -> SlowClient {
        let addr: std::net::SocketAddr = gw
            .url("")
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .unwrap();
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(16 * 1024).unwrap();
        let mut socket = socket.connect(addr).await.unwrap();
        let request = post_request(
            "/mcp",
            &[
                ("content-type", "application/json"),
                ("accept", ACCEPT_BOTH),
                ("mcp-session-id", session),
            ],
            &msg.to_string(),
        );
        socket.write_all(request.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        let head_end = loop {
            let mut buf = [0u8; 4096];
            let n = tokio::time::timeout(Duration::from_secs(60), socket.read(&mut buf))
                .await
                .expect("no answer")
                .unwrap();
            assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
            if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
        };
        let head = String::from_utf8_lossy(&got[..head_end]).to_lowercase();
        let status = head[9..12].parse().unwrap();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .unwrap_or_else(|| panic!("no length: {head}"))
            .trim()
            .parse()
            .unwrap();
        SlowClient {
            socket,
            got: got.split_off(head_end),
            status,
            length,
        }
    }

    /// Whether the answer is large (a result, not an error).
    fn is_large(&self) -> bool {
        self.length >= MIB as usize
    }

    /// The answer, read whole.
    async fn read(mut self) -> Reply {
        while self.got.len() < self.length {
            let mut buf = vec![0u8; 1 << 20];
            let n = tokio::time::timeout(Duration::from_secs(30), self.socket.read(&mut buf))
                .await
                .expect("the answer stalled")
                .unwrap();
            assert!(
                n > 0,
                "cut after {} of {} bytes",
                self.got.len(),
                self.length
            );
            self.got.extend_from_slice(&buf[..n]);
        }
        Reply {
            status: self.status,
            headers: Default::default(),
            body: String::from_utf8(self.got).unwrap(),
        }
    }
}

/// The error a call refused by the budget gets.
fn assert_refused(reply: &Reply) {
    assert_eq!(reply.status, 200, "{}", reply.body);
    let error = &reply.json()["error"];
    assert_eq!(error["code"], -32603, "{}", reply.body);
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("max_inflight_body_bytes"), "{message}");
    assert!(message.contains("retry later"), "{message}");
}

/// Under a budget of 10 MiB, two 8 MiB results cannot be held at once:
/// while the first is held (its client reads nothing, through a receive
/// buffer too small to take it), the second call gets a JSON-RPC error
/// that names the budget; the first is then read whole, and once it has
/// been written the budget is free again: the next call is served.
/// Before, both were held (and without a bound, any number of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_in_flight_stay_within_the_budget() {
    let (gw, _backend, http, session) = gateway(
        Source::Http("huge-line"),
        8,
        "[server]\nmax_inflight_body_bytes = 10485760",
    )
    .await;
    let slow = SlowClient::call(&gw, &session, &fault(1)).await;
    assert_eq!(slow.status, 200);

    // The first is held: the second does not fit.
    let second = http.post(Some(&session), &fault(2)).await;
    assert_refused(&second);
    let m = gw.metrics();
    assert_eq!(m.get("sluice_bodies_refused_total"), 1.0);
    assert!(m.get("sluice_inflight_body_bytes") >= (8 * MIB) as f64);

    // The first, read whole, is the backend's answer.
    assert_eq!(text_len(&slow.read().await) as u64, 8 * MIB);
    served_again(&gw, &http, &session, 8).await;
}

/// Once every large answer has been written, the budget is free: the
/// next call is served (polled: the last one's budget goes back as its
/// last bytes are written), and nothing is held.
async fn served_again(gw: &Gateway, http: &Http, session: &str, mb: u64) {
    let limit = Instant::now() + Duration::from_secs(10);
    loop {
        let again = http.post(Some(session), &fault(1000)).await;
        if again.json()["error"].is_null() {
            assert_eq!(text_len(&again) as u64, mb * MIB);
            break;
        }
        assert!(Instant::now() < limit, "the budget was never given back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_until(Duration::from_secs(10), || {
        gw.metrics().get("sluice_inflight_body_bytes") == 0.0
    });
}

/// Issue 49: twelve 30 MiB results from a stdio backend all passed a 64
/// MiB budget (its lines were not counted). Now, while their clients read
/// nothing, the two that fit are held and the ten others are refused as
/// they are read, each with the error that says why (none lost, none
/// left waiting, the child serving on); the two are then read whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_results_in_flight_stay_within_the_budget() {
    let (gw, _backend, http, session) = gateway(
        Source::Stdio,
        30,
        "[server]\nmax_inflight_body_bytes = 67108864",
    )
    .await;
    let calls = (0..12).map(|i| {
        let (gw, session) = (&gw, &session);
        async move { SlowClient::call(gw, session, &fault(i)).await }
    });
    let answers = futures_util::future::join_all(calls).await;
    let (held, refused): (Vec<_>, Vec<_>) = answers.into_iter().partition(SlowClient::is_large);
    assert_eq!((held.len(), refused.len()), (2, 10));
    for answer in refused {
        assert_refused(&answer.read().await);
    }
    let m = gw.metrics();
    assert_eq!(m.get("sluice_bodies_refused_total"), 10.0);
    assert!(m.get("sluice_inflight_body_bytes") >= (60 * MIB) as f64);
    for answer in held {
        assert_eq!(text_len(&answer.read().await) as u64, 30 * MIB);
    }
    served_again(&gw, &http, &session, 30).await;
}

/// Issue 49: in a batch (2025-03-26), a result was copied into its line,
/// and again behind its comma. Now the batch's body is written around it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_result_in_a_batch_is_held_once() {
    let (gw, _backend, http, _) = gateway(Source::Stdio, 48, "").await;
    let mut init = init_request(1);
    init["params"]["protocolVersion"] = json!("2025-03-26");
    let session = http.post(None, &init).await.session_id().unwrap();
    warm(&http, &session).await;
    let watch = Watch::new(gw.pid(), "a batch");
    let echo = json!({"jsonrpc":"2.0","id":11,"method":"tools/call",
        "params":{"name":"big__echo","arguments":{"text":"hi"}}});
    let reply = http.post(Some(&session), &json!([fault(10), echo])).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        &reply.body[..200.min(reply.body.len())]
    );
    let answers = reply.json();
    let by_id = |id: u64| {
        let answers = answers.as_array().unwrap();
        answers.iter().find(|a| a["id"] == id).unwrap().clone()
    };
    assert_eq!(text_of(&by_id(10)).len() as u64, 48 * MIB);
    assert_eq!(text_of(&by_id(11)), "hi");
    watch.held_once(reply.body.len() as u64);
    watch.given_back().await;
    warm(&http, &session).await;
}

/// Issue 49: to a 2026-07-28 client, a result was taken apart to be
/// decorated (`resultType`, `_meta`'s `serverInfo`) and written again:
/// two copies, outside the budget. Now the members go in front of the
/// result where it lies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_result_to_a_2026_07_28_client_is_held_once() {
    let (gw, _backend, http, session) = gateway(Source::Stdio, 48, "").await;
    warm(&http, &session).await;
    let watch = Watch::new(gw.pid(), "a 2026-07-28 client");
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let params = json!({"name": "big__fault", "arguments": {}, "_meta": meta});
    let reply = http.modern_call(10, "big__fault", params, &[]).await;
    assert_eq!(text_len(&reply) as u64, 48 * MIB);
    let result = &reply.json()["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "sluice"
    );
    watch.held_once(reply.body.len() as u64);
    watch.given_back().await;
    warm(&http, &session).await;
}

/// `sluice stdio` on its pipes, spoken to in lines.
struct StdioClient {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
    _dir: tempdir::Dir,
}

impl StdioClient {
    fn start(toml: &str) -> StdioClient {
        use std::io::BufRead;
        let dir = tempdir::Dir::new();
        let config = tempdir::write(&dir, "sluice.toml", toml);
        let mut child = std::process::Command::new(BIN)
            .args(["stdio", "--config"])
            .arg(config)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        StdioClient {
            stdin: child.stdin.take(),
            child,
            lines,
            _dir: dir,
        }
    }

    /// Sends a message; its answer (the line with its id) when it has one.
    fn call(&mut self, msg: &Value) -> Option<String> {
        use std::io::Write;
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
        let id = msg.get("id")?;
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .expect("no answer within 60 s");
            let head: Value = serde_json::from_str(&line).unwrap();
            if &head["id"] == id && head.get("method").is_none() {
                return Some(line);
            }
        }
    }

    fn echo(&mut self, id: u64) {
        let echo = json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"big__echo","arguments":{"text":"hi"}}});
        let line = self.call(&echo).unwrap();
        assert_eq!(text_of(&serde_json::from_str(&line).unwrap()), "hi");
    }

    /// Stdin closed: the gateway ends, 0 (waited for at most 30 s).
    fn end(mut self) {
        drop(self.stdin.take());
        let limit = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{status}");
                return;
            }
            assert!(Instant::now() < limit, "sluice stdio did not end");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Issue 49: `sluice stdio` read each answer whole out of the front's
/// response (a copy of the result, outside the budget) and copied it
/// again into its line. Now the answer's pieces are written to stdout as
/// they lie.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_result_relayed_by_sluice_stdio_is_held_once() {
    let mut client = StdioClient::start(&big_stdio("48"));
    client.call(&init_request(1)).unwrap();
    client.call(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    for id in 2..=4 {
        client.echo(id);
    }
    let watch = Watch::new(client.child.id(), "sluice stdio");
    let line = client.call(&fault(10)).unwrap();
    let answer = Reply {
        status: 200,
        headers: Default::default(),
        body: line,
    };
    assert_eq!(text_len(&answer) as u64, 48 * MIB);
    watch.held_once(answer.body.len() as u64);
    watch.given_back().await;
    client.echo(11);
    client.end();
}

/// The HTTP+SSE transport's stream, as its client reads it.
struct SseClient {
    body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: Vec<u8>,
    /// Bytes of `buf` known to hold no event's end.
    scanned: usize,
}

impl SseClient {
    async fn open(url: &str) -> SseClient {
        let resp = reqwest::Client::new()
            .get(url)
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        SseClient {
            body: Box::pin(resp.bytes_stream()),
            buf: Vec::new(),
            scanned: 0,
        }
    }

    /// The next event's data (comments skipped), within 60 s.
    async fn data(&mut self) -> String {
        use futures_util::StreamExt;
        loop {
            let from = self.scanned.saturating_sub(1);
            if let Some(at) = memchr::memmem::find(&self.buf[from..], b"\n\n") {
                let event: Vec<u8> = self.buf.drain(..from + at + 2).collect();
                self.scanned = 0;
                let text = String::from_utf8(event).unwrap();
                let data: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                if !data.is_empty() {
                    return data.join("\n");
                }
                continue;
            }
            self.scanned = self.buf.len();
            let chunk = tokio::time::timeout(Duration::from_secs(60), self.body.next())
                .await
                .expect("nothing on the stream within 60 s")
                .expect("the stream ended")
                .unwrap();
            self.buf.extend_from_slice(&chunk);
        }
    }
}

/// Issue 49: the HTTP+SSE transport read each answer whole (a copy of
/// the result, outside the budget), then copied it into its event. Now
/// the answer's pieces go onto the stream as they lie.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_result_relayed_on_the_sse_transport_is_held_once() {
    let (gw, _backend, _, _) = gateway(Source::Stdio, 48, "").await;
    let mut stream = SseClient::open(&gw.url("/sse")).await;
    let endpoint = gw.url(&stream.data().await);
    let client = reqwest::Client::new();
    let post = |msg: Value| {
        let request = client
            .post(&endpoint)
            .header("content-type", "application/json")
            .body(msg.to_string());
        async move {
            let status = request.send().await.unwrap().status();
            assert_eq!(status, 202);
        }
    };
    post(init_request(1)).await;
    assert!(stream.data().await.contains("protocolVersion"));
    post(json!({"jsonrpc":"2.0","method":"notifications/initialized"})).await;
    let echo = json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
        "params":{"name":"big__echo","arguments":{"text":"hi"}}});
    for _ in 0..3 {
        post(echo.clone()).await;
        assert_eq!(
            text_of(&serde_json::from_str(&stream.data().await).unwrap()),
            "hi"
        );
    }
    let watch = Watch::new(gw.pid(), "the HTTP+SSE transport");
    post(fault(10)).await;
    let answer = Reply {
        status: 200,
        headers: Default::default(),
        body: stream.data().await,
    };
    assert_eq!(text_len(&answer) as u64, 48 * MIB);
    watch.held_once(answer.body.len() as u64);
    watch.given_back().await;
    post(echo).await;
    assert_eq!(
        text_of(&serde_json::from_str(&stream.data().await).unwrap()),
        "hi"
    );
}
