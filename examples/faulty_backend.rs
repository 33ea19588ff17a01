//! A misbehaving MCP backend for fault-injection tests of the gateway.
//!
//! ```text
//! faulty_backend --transport stdio --mode MODE [--mb N] [--count N] [--max-lifetime SECS]
//! faulty_backend --transport http --listen 127.0.0.1:0 --mode MODE [--mb N] [--count N]
//!                [--target URL] [--max-lifetime SECS]
//! ```
//!
//! It speaks MCP JSON-RPC 2.0 over stdio (one JSON message per line), over
//! legacy Streamable HTTP (`POST /mcp` with `Mcp-Session-Id` sessions) or over
//! the old HTTP+SSE transport (`GET /sse` + `POST /messages`). Every mode
//! serves `initialize`, `ping`, `tools/list` (tools `echo` and `fault`) and
//! `tools/call echo` normally; the misbehaviour is triggered by
//! `tools/call fault` unless stated otherwise:
//!
//! The tool `meta` answers with the `params._meta` it received, as its
//! `structuredContent` (`{}` without one).
//!
//! - `ok`: nothing odd; `fault` answers `fault-ok`.
//! - `hang`: never writes anything (stdio) / never answers any request (http).
//! - `exit-at-start`: exits with code 3 before reading (or binding) anything.
//! - `exit-mid-call`: `fault` makes the process exit with code 4, unanswered.
//! - `garbage`: stdio: `--mb` MB (default 1) of non-JSON lines right after the
//!   initialize answer; http: `fault` gets a 200 `application/json` body of
//!   `--mb` MB of `x`.
//! - `huge-line`: `fault`'s answer carries a text of `--mb` MB (default 80);
//!   over stdio, a call that carries a `progressToken` gets one progress
//!   notification first.
//! - `huge-sse` (http only): as `huge-line`, the answer one event of an SSE
//!   response (as the Python SDK's servers answer).
//! - `close-stdout` (stdio only): `fault` closes stdout; stdin is still read.
//! - `http-500` (http only): every `POST /mcp` answers 500 `boom`.
//! - `never-answer`: `fault` is never answered (http: an SSE stream that sends
//!   its headers and then nothing).
//! - `endless-sse`: `fault` starts a `notifications/message` every 50 ms,
//!   forever, and is never answered.
//! - `slow-drip`: `fault`'s answer is written one byte every 100 ms.
//! - `loop-cursor`: `tools/list` always answers `nextCursor: "again"`.
//! - `flood`: `fault` first sends `--count` (default 10000) server-to-client
//!   `sampling/createMessage` requests, then answers `fault-ok`.
//! - `stubborn` (stdio only): ignores SIGTERM/SIGINT and stdin EOF, and runs a
//!   `sleep 600` grandchild in its process group (pid printed to stderr as
//!   `grandchild pid N`).
//! - `redirect` (http only): every `POST /mcp` answers 307 to `--target`.
//! - `sse-elsewhere` (http only): HTTP+SSE whose `endpoint` event names
//!   `--target` (another origin).
//! - `sse-ok` (http only): a working HTTP+SSE backend (`/messages?session=N`).
//! - `recorder` (http only): answers every request with 200 `{}`; used as the
//!   "other origin" whose `/seen` shows what reached it.
//! - `modern` (http only): a 2026-07-28-only server (refuses `initialize`);
//!   `fault` answers `input_required` asking a name by elicitation, and the
//!   retry that brings it gets `Hello, NAME!`; `ask_url`, `ask_sampling` and
//!   `ask_roots` ask by URL elicitation, sampling and roots/list, and their
//!   retries get `answered: ANSWER`. As the spec has servers do, each first
//!   checks that the request's `clientCapabilities` declare what it asks
//!   (400, -32021 with `data.requiredCapabilities` if not).
//! - `roots` (stdio only): asks `roots/list` right after its handshake and
//!   again during `fault`, which answers `{"early": .., "during": ..}`
//!   with what it got each time.
//! - `updates` (stdio only): offers one subscribable resource,
//!   `faulty://thing`; `fault` sends a `warning` log message and
//!   `notifications/resources/updated` for it (both unsolicited), then
//!   answers `fault-ok`.
//!
//! Over http it prints `faulty_backend listening on ADDR` once bound and also
//! serves `GET /stats` (counters) and `GET /seen` (the last 1000 requests with
//! their headers; the /stats and /seen probes themselves are not recorded).
//!
//! Nothing outlives a test: the process exits after `--max-lifetime` seconds
//! (default 300) whatever the mode, and on stdin EOF (except `stubborn`, whose
//! point is to need killing). Diagnostics go to stderr only.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    convert::Infallible,
    io::{BufRead, Read, Write},
    net::SocketAddr,
    process::Stdio,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::SeqCst},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header, request::Parts},
    response::{IntoResponse, Response},
};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json, value::RawValue};
use tokio::sync::mpsc;

const USAGE: &str = "usage: faulty_backend --transport stdio|http --mode MODE \
    [--listen ADDR] [--mb N] [--count N] [--target URL] [--max-lifetime SECS]";

/// The protocol revision answered when `initialize` names none.
const DEFAULT_VERSION: &str = "2025-11-25";
const MIB: usize = 1 << 20;
/// How many requests `/seen` remembers.
const SEEN_LIMIT: usize = 1000;
/// Request bodies larger than this are refused (413).
const BODY_LIMIT: usize = 64 * MIB;

// ---------------------------------------------------------------------------
// Command line

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Ok,
    Hang,
    ExitAtStart,
    ExitMidCall,
    Garbage,
    HugeLine,
    HugeSse,
    CloseStdout,
    Http500,
    NeverAnswer,
    EndlessSse,
    SlowDrip,
    LoopCursor,
    Flood,
    Stubborn,
    Redirect,
    SseElsewhere,
    SseOk,
    Recorder,
    Updates,
    Roots,
    Modern,
}

const MODES: &[(&str, Mode)] = &[
    ("ok", Mode::Ok),
    ("hang", Mode::Hang),
    ("exit-at-start", Mode::ExitAtStart),
    ("exit-mid-call", Mode::ExitMidCall),
    ("garbage", Mode::Garbage),
    ("huge-line", Mode::HugeLine),
    ("huge-sse", Mode::HugeSse),
    ("close-stdout", Mode::CloseStdout),
    ("http-500", Mode::Http500),
    ("never-answer", Mode::NeverAnswer),
    ("endless-sse", Mode::EndlessSse),
    ("slow-drip", Mode::SlowDrip),
    ("loop-cursor", Mode::LoopCursor),
    ("flood", Mode::Flood),
    ("stubborn", Mode::Stubborn),
    ("redirect", Mode::Redirect),
    ("sse-elsewhere", Mode::SseElsewhere),
    ("sse-ok", Mode::SseOk),
    ("recorder", Mode::Recorder),
    ("updates", Mode::Updates),
    ("roots", Mode::Roots),
    ("modern", Mode::Modern),
];

impl Mode {
    fn parse(name: &str) -> Option<Mode> {
        MODES.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
    }

    fn name(self) -> &'static str {
        MODES
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("?", |(n, _)| n)
    }

    /// Modes that only make sense with a pipe for stdout / a process to kill.
    fn stdio_only(self) -> bool {
        matches!(
            self,
            Mode::CloseStdout | Mode::Stubborn | Mode::Updates | Mode::Roots
        )
    }

    /// Modes about HTTP status codes, redirects, origins or the SSE transport.
    fn http_only(self) -> bool {
        matches!(
            self,
            Mode::Http500
                | Mode::Redirect
                | Mode::SseElsewhere
                | Mode::SseOk
                | Mode::Recorder
                | Mode::Modern
        )
    }

    /// Modes that serve the 2024-11-05 HTTP+SSE transport instead of /mcp.
    fn legacy_sse(self) -> bool {
        matches!(self, Mode::SseElsewhere | Mode::SseOk)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Transport {
    Stdio,
    Http,
}

#[derive(Clone)]
struct Config {
    transport: Transport,
    mode: Mode,
    mb: Option<usize>,
    count: usize,
    listen: Option<SocketAddr>,
    target: Option<String>,
    max_lifetime: Duration,
}

impl Config {
    /// `--mb` in bytes, with the mode's own default.
    fn bytes(&self, default_mb: usize) -> usize {
        self.mb.unwrap_or(default_mb) * MIB
    }

    fn target(&self) -> &str {
        self.target.as_deref().unwrap_or_default()
    }
}

fn parse_args() -> Result<Config, String> {
    let mut transport = None;
    let mut mode = None;
    let mut cfg = Config {
        transport: Transport::Stdio,
        mode: Mode::Ok,
        mb: None,
        count: 10_000,
        listen: None,
        target: None,
        max_lifetime: Duration::from_secs(300),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--transport" => {
                transport = Some(match value()?.as_str() {
                    "stdio" => Transport::Stdio,
                    "http" => Transport::Http,
                    other => return Err(format!("unknown transport {other:?}")),
                })
            }
            "--mode" => {
                let name = value()?;
                mode = Some(Mode::parse(&name).ok_or(format!("unknown mode {name:?}"))?);
            }
            "--mb" => cfg.mb = Some(value()?.parse().map_err(|e| format!("--mb: {e}"))?),
            "--count" => cfg.count = value()?.parse().map_err(|e| format!("--count: {e}"))?,
            "--listen" => {
                cfg.listen = Some(value()?.parse().map_err(|e| format!("--listen: {e}"))?)
            }
            "--target" => cfg.target = Some(value()?),
            "--max-lifetime" => {
                let secs = value()?
                    .parse()
                    .map_err(|e| format!("--max-lifetime: {e}"))?;
                cfg.max_lifetime = Duration::from_secs(secs);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    cfg.transport = transport.ok_or("--transport is required")?;
    cfg.mode = mode.ok_or("--mode is required")?;
    let name = cfg.mode.name();
    match cfg.transport {
        Transport::Stdio if cfg.mode.http_only() => {
            return Err(format!("mode {name} needs --transport http"));
        }
        Transport::Http if cfg.mode.stdio_only() => {
            return Err(format!("mode {name} needs --transport stdio"));
        }
        Transport::Http => match cfg.listen {
            None => return Err("--transport http needs --listen".into()),
            // A test helper only: never expose it beyond this machine.
            Some(addr) if !addr.ip().is_loopback() => {
                return Err(format!("--listen {addr} is not a loopback address"));
            }
            Some(_) => {}
        },
        Transport::Stdio => {}
    }
    if matches!(cfg.mode, Mode::Redirect | Mode::SseElsewhere) && cfg.target.is_none() {
        return Err(format!("mode {name} needs --target URL"));
    }
    Ok(cfg)
}

fn main() {
    let cfg = match parse_args() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("faulty_backend: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    if cfg.mode == Mode::ExitAtStart {
        // Before reading stdin or binding: the gateway sees a dead process at
        // its first write or connect.
        eprintln!("faulty_backend: exit-at-start, exiting with 3");
        std::process::exit(3);
    }
    match cfg.transport {
        Transport::Stdio => run_stdio(&cfg),
        Transport::Http => run_http(cfg),
    }
}

// ---------------------------------------------------------------------------
// Protocol core, shared by both transports

// Counters for /stats (also kept, unread, under stdio).
static INITIALIZE: AtomicU64 = AtomicU64::new(0);
static DELETED: AtomicU64 = AtomicU64::new(0);
static REQUESTS: AtomicU64 = AtomicU64::new(0);
static ANSWERS: AtomicU64 = AtomicU64::new(0);
static FAULTS: AtomicU64 = AtomicU64::new(0);

/// One incoming JSON-RPC message. The id stays raw so it is echoed byte for
/// byte, whether a number, a string or something a gateway should not send.
#[derive(Deserialize)]
struct Incoming {
    #[serde(default)]
    id: Option<Box<RawValue>>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Value,
    /// A response's result or error (to our own requests).
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

/// What the normal ("ok") server does with a message.
enum Outcome {
    /// A notification, or the client's answer to one of our requests.
    Nothing,
    /// A complete JSON-RPC response, serialized on one line.
    Reply(String),
    /// `tools/call fault`: the transport applies the mode's misbehaviour.
    Fault(Box<RawValue>),
}

fn handle(mode: Mode, msg: Incoming) -> Outcome {
    let Some(method) = msg.method else {
        // id without method: a response to a server-initiated request.
        if msg.id.is_some() {
            ANSWERS.fetch_add(1, SeqCst);
        }
        return Outcome::Nothing;
    };
    let Some(id) = msg.id else {
        return Outcome::Nothing; // notifications, notifications/initialized included
    };
    let params = &msg.params;
    let result = match method.as_str() {
        "initialize" => {
            INITIALIZE.fetch_add(1, SeqCst);
            let version = params["protocolVersion"]
                .as_str()
                .unwrap_or(DEFAULT_VERSION);
            let capabilities = if mode == Mode::Updates {
                json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}, "logging": {}})
            } else {
                json!({"tools": {"listChanged": true}})
            };
            json!({
                "protocolVersion": version,
                "capabilities": capabilities,
                "serverInfo": {"name": "faulty", "version": "0"},
            })
        }
        "ping" => json!({}),
        "resources/list" if mode == Mode::Updates => json!({"resources": [
            {"uri": UPDATED_URI, "name": "thing"},
        ]}),
        "resources/read" if mode == Mode::Updates => json!({"contents": [
            {"uri": UPDATED_URI, "text": "thing"},
        ]}),
        "resources/subscribe" | "resources/unsubscribe" | "logging/setLevel"
            if mode == Mode::Updates =>
        {
            json!({})
        }
        // Whatever cursor comes back, there is always another page.
        "tools/list" if mode == Mode::LoopCursor => json!({"tools": [], "nextCursor": "again"}),
        "tools/list" => json!({"tools": [
            {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
            {"name": "fault", "inputSchema": {"type": "object"}},
            {"name": "meta", "inputSchema": {"type": "object"}},
        ]}),
        "tools/call" => match params["name"].as_str() {
            // Always healthy, so a test can prove the link still works.
            Some("echo") => text_result(params["arguments"]["text"].as_str().unwrap_or_default()),
            Some("meta") => meta_result(params),
            Some("fault") => {
                FAULTS.fetch_add(1, SeqCst);
                return Outcome::Fault(id);
            }
            other => return Outcome::Reply(error(&id, -32602, &format!("unknown tool {other:?}"))),
        },
        _ => return Outcome::Reply(error(&id, -32601, &format!("method not found: {method}"))),
    };
    Outcome::Reply(response(&id, &result))
}

/// The one resource of `updates` mode, whose `fault` announces a change.
const UPDATED_URI: &str = "faulty://thing";

/// `meta`: what the request's `_meta` held, as the gateway sent it.
fn meta_result(params: &Value) -> Value {
    let meta = match &params["_meta"] {
        Value::Null => json!({}),
        m => m.clone(),
    };
    json!({"content": [{"type": "text", "text": meta.to_string()}], "structuredContent": meta})
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn response(id: &RawValue, result: &Value) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#, id.get())
}

fn error(id: &RawValue, code: i64, message: &str) -> String {
    let error = json!({"code": code, "message": message});
    format!(r#"{{"jsonrpc":"2.0","id":{},"error":{error}}}"#, id.get())
}

/// The normal answer to `fault`.
fn fault_ok(id: &RawValue) -> String {
    response(id, &text_result("fault-ok"))
}

/// A `fault` answer whose text alone is `bytes` long, built without
/// intermediate `Value`s so 80 MB cost 80 MB (plus the string's copy).
fn huge_answer(id: &RawValue, bytes: usize) -> String {
    let text = "x".repeat(bytes);
    format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#,
        id.get()
    )
}

fn tick_notification(n: u64) -> String {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "data": format!("tick {n}")},
    })
    .to_string()
}

fn flood_request(n: usize) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": format!("srv-{n}"),
        "method": "sampling/createMessage",
        "params": {"messages": [], "maxTokens": 1},
    })
    .to_string()
}

fn exit_mid_call() -> ! {
    eprintln!("faulty_backend: exit-mid-call, exiting with 4");
    std::process::exit(4);
}

// ---------------------------------------------------------------------------
// stdio transport: plain threads, since tokio's stdin/stdout need the
// io-std feature, which this crate does not enable.

/// Set once `close-stdout` closed fd 1: nothing may write to it afterwards
/// (the fd number could be reused).
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// The `stubborn` grandchild, killed when --max-lifetime runs out.
static GRANDCHILD: AtomicI32 = AtomicI32::new(0);

fn run_stdio(cfg: &Config) -> ! {
    spawn_watchdog(cfg.max_lifetime);
    if cfg.mode == Mode::Stubborn {
        stubborn_setup();
    }
    let mut stdin = std::io::stdin().lock();
    let mut line = Vec::new();
    let mut roots = RootsProbe::default();
    loop {
        line.clear();
        match stdin.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if cfg.mode == Mode::Hang {
            continue; // read, and never write a byte
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        let msg: Incoming = match serde_json::from_slice(text) {
            Ok(msg) => msg,
            Err(e) => {
                eprintln!("faulty_backend: ignoring unparsable line: {e}");
                continue;
            }
        };
        if cfg.mode == Mode::Roots && roots.step(&msg) {
            continue;
        }
        let initialize = msg.method.as_deref() == Some("initialize");
        let progress = msg.params["_meta"]["progressToken"].clone();
        match handle(cfg.mode, msg) {
            Outcome::Nothing => {}
            Outcome::Reply(reply) => {
                send(&reply);
                if initialize && cfg.mode == Mode::Garbage {
                    stdio_garbage(cfg.bytes(1));
                }
            }
            Outcome::Fault(id) => {
                if cfg.mode == Mode::HugeLine && !progress.is_null() {
                    let params = json!({"progressToken": progress, "progress": 1});
                    send(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}).to_string());
                }
                stdio_fault(cfg, &id)
            }
        }
    }
    eprintln!("faulty_backend: stdin EOF");
    if cfg.mode == Mode::Stubborn {
        // A stubborn server outlives its stdin; only a kill (or the
        // watchdog) ends it.
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    std::process::exit(0);
}

/// `roots` mode: asks `roots/list` right after `notifications/initialized`
/// (outside any call) and again during `fault`, whose answer reports both:
/// `{"early": <answer or error>, "during": <answer or error>}`.
#[derive(Default)]
struct RootsProbe {
    early: Option<Value>,
    fault: Option<Box<RawValue>>,
}

impl RootsProbe {
    /// Handles what belongs to the probe; true when `msg` was consumed.
    fn step(&mut self, msg: &Incoming) -> bool {
        let id = msg.id.as_ref().map(|i| i.get().to_owned());
        match (msg.method.as_deref(), id.as_deref()) {
            (Some("notifications/initialized"), None) => {
                send(r#"{"jsonrpc":"2.0","id":"roots-0","method":"roots/list"}"#);
                true
            }
            (Some("tools/call"), Some(_)) if msg.params["name"] == "fault" => {
                self.fault = msg.id.clone();
                send(r#"{"jsonrpc":"2.0","id":"roots-1","method":"roots/list"}"#);
                true
            }
            (None, Some(r#""roots-0""#)) => {
                self.early = Some(answer_of(msg));
                true
            }
            (None, Some(r#""roots-1""#)) => {
                if let Some(fault) = self.fault.take() {
                    let report = json!({"early": self.early, "during": answer_of(msg)});
                    send(&response(&fault, &text_result(&report.to_string())));
                }
                true
            }
            _ => false,
        }
    }
}

fn answer_of(msg: &Incoming) -> Value {
    match (&msg.result, &msg.error) {
        (Some(r), _) => r.clone(),
        (None, Some(e)) => json!({ "error": e }),
        (None, None) => Value::Null,
    }
}

/// Applies the mode's misbehaviour to a `fault` call over stdio. Work that
/// lasts goes on a thread so stdin is still read (cancellations, answers).
fn stdio_fault(cfg: &Config, id: &RawValue) {
    match cfg.mode {
        Mode::ExitMidCall => exit_mid_call(),
        Mode::HugeLine => send(&huge_answer(id, cfg.bytes(80))),
        Mode::CloseStdout => close_stdout(),
        Mode::NeverAnswer => eprintln!("faulty_backend: never answering fault"),
        Mode::EndlessSse => stdio_endless_ticks(),
        Mode::SlowDrip => stdio_slow_drip(fault_ok(id)),
        Mode::Flood => stdio_flood(cfg.count, fault_ok(id)),
        // Unsolicited: nothing on the wire ties it to the request.
        Mode::Updates => {
            let log = json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "warning", "logger": "faulty", "data": "thing changed"}});
            send(&log.to_string());
            send(
                &json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                "params": {"uri": UPDATED_URI}})
                .to_string(),
            );
            send(&fault_ok(id));
        }
        _ => send(&fault_ok(id)),
    }
}

/// Writes whole lines under one lock, so concurrent writers never interleave
/// inside a line. Write errors (the gateway went away) are ignored: stdin EOF
/// or the watchdog ends the process.
fn write_lines<'a>(lines: impl IntoIterator<Item = &'a [u8]>) {
    let mut out = std::io::stdout().lock();
    if STDOUT_CLOSED.load(SeqCst) {
        return;
    }
    for line in lines {
        if out
            .write_all(line)
            .and_then(|()| out.write_all(b"\n"))
            .is_err()
        {
            break;
        }
    }
    let _ = out.flush();
}

fn send(line: &str) {
    write_lines([line.as_bytes()]);
}

/// `garbage`: lines of 1023 printable non-JSON bytes, `bytes` in all.
fn stdio_garbage(bytes: usize) {
    let pattern = b"this is not json, ";
    let line: Vec<u8> = pattern.iter().copied().cycle().take(1023).collect();
    let lines = bytes.div_ceil(1024);
    eprintln!("faulty_backend: writing {lines} garbage lines");
    write_lines(std::iter::repeat_n(line.as_slice(), lines));
}

/// `close-stdout`: closes fd 1 so the gateway reads EOF while the process
/// lives on, reading stdin. Under the stdout lock, so no line is cut short.
fn close_stdout() {
    let mut out = std::io::stdout().lock();
    let _ = out.flush();
    STDOUT_CLOSED.store(true, SeqCst);
    // std's Stdout is a global that cannot be dropped; closing the fd is the
    // only way to hang up on the reader.
    unsafe { libc::close(1) };
    eprintln!("faulty_backend: closed stdout");
}

/// `endless-sse` over stdio: a log notification every 50 ms until exit.
fn stdio_endless_ticks() {
    std::thread::spawn(|| {
        for n in 1.. {
            send(&tick_notification(n));
            std::thread::sleep(Duration::from_millis(50));
        }
    });
}

/// `slow-drip` over stdio: the answer line one byte per 100 ms, holding the
/// stdout lock throughout so the line stays whole.
fn stdio_slow_drip(reply: String) {
    std::thread::spawn(move || {
        let mut out = std::io::stdout().lock();
        for byte in reply.bytes().chain([b'\n']) {
            if STDOUT_CLOSED.load(SeqCst) || out.write_all(&[byte]).is_err() {
                return;
            }
            let _ = out.flush();
            std::thread::sleep(Duration::from_millis(100));
        }
    });
}

/// `flood` over stdio: `count` sampling requests in one write, then the
/// answer. On a thread, so the client's answers keep being read (and counted)
/// even if it answers faster than it reads.
fn stdio_flood(count: usize, reply: String) {
    std::thread::spawn(move || {
        let requests: Vec<String> = (1..=count).map(flood_request).collect();
        let mut batch = requests.join("\n");
        batch.push('\n');
        batch.push_str(&reply);
        send(&batch);
    });
}

/// `stubborn`: a grandchild in our process group, then deaf to SIGTERM and
/// SIGINT. The grandchild is spawned first because an ignored signal stays
/// ignored across exec; it is an ordinary `sleep` that inherits stdout and
/// stderr (as a wrapper's child would), so the gateway's pipe stays open until
/// the whole group is gone.
fn stubborn_setup() {
    let child = std::process::Command::new("sleep")
        .arg("600")
        .stdin(Stdio::null())
        .spawn();
    match child {
        Ok(child) => {
            GRANDCHILD.store(child.id() as i32, SeqCst);
            eprintln!("grandchild pid {}", child.id());
            // Deliberately never waited for: it must outlive anything but a
            // group kill. Dropping a Child neither kills nor waits.
            drop(child);
        }
        Err(e) => eprintln!("faulty_backend: cannot spawn sleep: {e}"),
    }
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
}

/// Ends the process after `max_lifetime`, whatever the mode is doing, and
/// takes the `stubborn` grandchild along.
fn spawn_watchdog(max_lifetime: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(max_lifetime);
        eprintln!("faulty_backend: --max-lifetime reached, exiting");
        let grandchild = GRANDCHILD.load(SeqCst);
        if grandchild > 0 {
            unsafe { libc::kill(grandchild, libc::SIGKILL) };
        }
        std::process::exit(0);
    });
}

// ---------------------------------------------------------------------------
// HTTP transports

struct App {
    cfg: Config,
    /// Live Streamable HTTP sessions (Mcp-Session-Id values).
    sessions: Mutex<HashSet<String>>,
    seen: Mutex<VecDeque<Value>>,
    legacy: Mutex<LegacyStreams>,
}

/// Open `GET /sse` streams of the HTTP+SSE transport.
#[derive(Default)]
struct LegacyStreams {
    next: u64,
    latest: Option<u64>,
    open: HashMap<u64, mpsc::Sender<Bytes>>,
}

fn run_http(cfg: Config) -> ! {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = match runtime.block_on(serve_http(cfg)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("faulty_backend: {e}");
            1
        }
    };
    // Not a return from main: held-open connections must not delay the exit.
    std::process::exit(code);
}

async fn serve_http(cfg: Config) -> Result<(), Box<dyn std::error::Error>> {
    let listen = cfg.listen.ok_or("no --listen")?;
    let max_lifetime = cfg.max_lifetime;
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let mut stdout = std::io::stdout();
    writeln!(
        stdout,
        "faulty_backend listening on {}",
        listener.local_addr()?
    )?;
    stdout.flush()?;

    let app = Arc::new(App {
        cfg,
        sessions: Mutex::default(),
        seen: Mutex::default(),
        legacy: Mutex::default(),
    });
    // One fallback handler sees every request on every path, so /seen misses
    // nothing and each mode decides for itself.
    let router = Router::new().fallback(entry).with_state(app);
    tokio::select! {
        served = async { axum::serve(listener, router).await } => served?,
        why = lifetime(max_lifetime) => eprintln!("faulty_backend: exiting on {why}"),
    }
    Ok(())
}

/// Resolves on stdin EOF (the test's pipe closed) or after `max_lifetime`.
async fn lifetime(max_lifetime: Duration) -> &'static str {
    let (eof_tx, eof_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while matches!(std::io::stdin().read(&mut buf), Ok(n) if n > 0) {}
        let _ = eof_tx.send(());
    });
    tokio::select! {
        _ = eof_rx => "stdin EOF",
        _ = tokio::time::sleep(max_lifetime) => "--max-lifetime reached",
    }
}

async fn entry(State(app): State<Arc<App>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    // The test's own probes answer in every mode and are not recorded.
    if parts.method == Method::GET && path == "/stats" {
        return json_response(StatusCode::OK, stats(&app).to_string());
    }
    if parts.method == Method::GET && path == "/seen" {
        let seen: Vec<Value> = app.seen.lock().unwrap().iter().cloned().collect();
        return json_response(StatusCode::OK, Value::from(seen).to_string());
    }
    if parts.method == Method::POST {
        REQUESTS.fetch_add(1, SeqCst);
    }
    let Ok(body) = axum::body::to_bytes(body, BODY_LIMIT).await else {
        app.record(&parts, &[]);
        return (StatusCode::PAYLOAD_TOO_LARGE, "body too large").into_response();
    };
    app.record(&parts, &body);
    match app.cfg.mode {
        Mode::Hang => return http_hang().await,
        Mode::Recorder => return json_response(StatusCode::OK, "{}".into()),
        _ => {}
    }
    let legacy = app.cfg.mode.legacy_sse();
    match (&parts.method, path) {
        // An HTTP+SSE-only server knows nothing of /mcp.
        (_, "/mcp") if legacy => StatusCode::NOT_FOUND.into_response(),
        (&Method::POST, "/mcp") => mcp_post(&app, &parts.headers, &body),
        (&Method::DELETE, "/mcp") => mcp_delete(&app, &parts.headers),
        // No standalone stream: the legacy spec allows 405 here.
        (_, "/mcp") => {
            let mut response = StatusCode::METHOD_NOT_ALLOWED.into_response();
            let allow = HeaderValue::from_static("POST, DELETE");
            response.headers_mut().insert(header::ALLOW, allow);
            response
        }
        (&Method::GET, "/sse") if legacy => sse_open(&app),
        // What a 2024-11-05 server answers to a Streamable HTTP probe.
        (_, "/sse") if legacy => StatusCode::METHOD_NOT_ALLOWED.into_response(),
        (&Method::POST, "/messages") if legacy => sse_post(&app, parts.uri.query(), &body).await,
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

impl App {
    /// Adds a request to /seen: method, path, query (if any), headers, and
    /// its body when that is JSON.
    fn record(&self, parts: &Parts, body: &[u8]) {
        let mut headers = serde_json::Map::new();
        for (name, value) in &parts.headers {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            // Repeated headers are joined, as HTTP allows.
            match headers.get_mut(name.as_str()) {
                Some(Value::String(prev)) => *prev = format!("{prev}, {value}"),
                _ => {
                    headers.insert(name.as_str().to_owned(), Value::String(value));
                }
            }
        }
        let mut entry = json!({
            "method": parts.method.as_str(),
            "path": parts.uri.path(),
            "headers": headers,
        });
        if let Some(query) = parts.uri.query() {
            entry["query"] = Value::from(query);
        }
        if let Ok(json) = serde_json::from_slice::<Value>(body) {
            entry["body"] = json;
        }
        let mut seen = self.seen.lock().unwrap();
        if seen.len() >= SEEN_LIMIT {
            seen.pop_front();
        }
        seen.push_back(entry);
    }
}

fn stats(app: &App) -> Value {
    let live = app.sessions.lock().unwrap().len() + app.legacy.lock().unwrap().open.len();
    json!({
        "initialize": INITIALIZE.load(SeqCst),
        "live_sessions": live,
        "deleted": DELETED.load(SeqCst),
        "requests": REQUESTS.load(SeqCst),
        "answers": ANSWERS.load(SeqCst),
        "faults": FAULTS.load(SeqCst),
    })
}

fn json_response(status: StatusCode, body: String) -> Response {
    let content_type = [(header::CONTENT_TYPE, "application/json")];
    (status, content_type, body).into_response()
}

fn sse_response(body: Body) -> Response {
    let headers = [
        (header::CONTENT_TYPE, "text/event-stream"),
        (header::CACHE_CONTROL, "no-cache"),
    ];
    (StatusCode::OK, headers, body).into_response()
}

fn sse_event(json: &str) -> Bytes {
    Bytes::from(format!("event: message\ndata: {json}\n\n"))
}

/// A body fed through a channel: it ends when every sender is gone, and its
/// receiver (with `guard`) is dropped when hyper drops the body, i.e. when the
/// client leaves, which makes the producer's next send fail.
fn channel_body<G: Send + 'static>(capacity: usize, guard: G) -> (mpsc::Sender<Bytes>, Body) {
    let (tx, rx) = mpsc::channel(capacity);
    let stream = futures_util::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        let chunk = rx.recv().await?;
        Some((Ok::<_, Infallible>(chunk), (rx, guard)))
    });
    (tx, Body::from_stream(stream))
}

fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers.get("mcp-session-id")?.to_str().ok()
}

/// A fresh session id: unique within the process, unguessable enough for a
/// test double.
fn new_session_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let n = NEXT.fetch_add(1, SeqCst);
    format!("faulty-{}-{n}-{nanos:08x}", std::process::id())
}

// --- Streamable HTTP (legacy sessions) on /mcp

/// `modern` mode: a 2026-07-28-only server. `initialize` is refused with
/// the versions it speaks; `server/discover` answers; `fault` asks for a
/// name by elicitation (`input_required`, with a `requestState`) and, on the
/// retry that brings it, greets: `Hello, NAME!` (`bad state` if the state
/// did not come back unchanged).
fn modern_post(msg: Incoming) -> Response {
    let Some(id) = msg.id.clone() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let ok = |result: Value| json_response(StatusCode::OK, response(&id, &result));
    match msg.method.as_deref() {
        Some("initialize") => json_response(
            StatusCode::BAD_REQUEST,
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": ["2026-07-28"], "requested": msg.params["protocolVersion"]}}})
            .to_string(),
        ),
        Some("server/discover") => ok(json!({"resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": true}},
            "ttlMs": 0, "cacheScope": "public",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "faulty", "version": "0"}}})),
        Some("tools/list") => ok(
            json!({"resultType": "complete", "ttlMs": 0, "cacheScope": "public",
            "tools": [
                {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
                {"name": "fault", "inputSchema": {"type": "object"}},
                {"name": "ask_url", "inputSchema": {"type": "object"}},
                {"name": "ask_sampling", "inputSchema": {"type": "object"}},
                {"name": "ask_roots", "inputSchema": {"type": "object"}},
                {"name": "meta", "inputSchema": {"type": "object"}}]}),
        ),
        Some("tools/call") if msg.params["name"] == "echo" => ok(text_result(
            msg.params["arguments"]["text"].as_str().unwrap_or_default(),
        )),
        Some("tools/call") if msg.params["name"] == "meta" => ok(meta_result(&msg.params)),
        Some("tools/call") => {
            let tool = msg.params["name"].as_str().unwrap_or_default();
            let Some((request, required)) = modern_question(tool) else {
                return ok(json!({"resultType": "complete", "isError": true,
                    "content": [{"type": "text", "text": format!("unknown tool {tool:?}")}]}));
            };
            if tool == "fault" {
                FAULTS.fetch_add(1, SeqCst);
            }
            let state = format!("ask-{tool}");
            let answer = &msg.params["inputResponses"]["who"];
            if !answer.is_null() {
                return ok(match (tool, msg.params["requestState"] == state.as_str()) {
                    (_, false) => text_result("bad state"),
                    ("fault", true) => text_result(&format!(
                        "Hello, {}!",
                        answer["content"]["name"].as_str().unwrap_or("?")
                    )),
                    (_, true) => text_result(&format!("answered: {answer}")),
                });
            }
            // The spec's check before asking: only what the request's
            // client declared may be asked of it.
            let declared = &msg.params["_meta"]["io.modelcontextprotocol/clientCapabilities"];
            if !declares(declared, &required) {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32021,
                        "message": format!("Cannot request input 'who' ({}): the request's client capabilities do not declare the required capability", request["method"].as_str().unwrap_or_default()),
                        "data": {"requiredCapabilities": required}}})
                    .to_string(),
                );
            }
            ok(json!({"resultType": "input_required",
                "inputRequests": {"who": request}, "requestState": state}))
        }
        Some(other) => json_response(
            StatusCode::NOT_FOUND,
            error(&id, -32601, &format!("method not found: {other}")),
        ),
        None => StatusCode::ACCEPTED.into_response(),
    }
}

/// `modern` mode: what each asking tool asks (an input request), and the
/// client capability that needs.
fn modern_question(tool: &str) -> Option<(Value, Value)> {
    Some(match tool {
        "fault" => (
            json!({"method": "elicitation/create", "params": {
                "mode": "form", "message": "Your name?",
                "requestedSchema": {"type": "object",
                    "properties": {"name": {"type": "string"}}, "required": ["name"]}}}),
            json!({"elicitation": {"form": {}}}),
        ),
        "ask_url" => (
            json!({"method": "elicitation/create", "params": {
                "mode": "url", "message": "Consent, please",
                "url": "https://example.invalid/consent", "elicitationId": "faulty-1"}}),
            json!({"elicitation": {"url": {}}}),
        ),
        "ask_sampling" => (
            json!({"method": "sampling/createMessage", "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}],
                "maxTokens": 16}}),
            json!({"sampling": {}}),
        ),
        "ask_roots" => (
            json!({"method": "roots/list", "params": {}}),
            json!({"roots": {}}),
        ),
        _ => return None,
    })
}

/// Whether `declared` client capabilities hold `required` (an empty
/// `elicitation` object is form mode, as before modes existed).
fn declares(declared: &Value, required: &Value) -> bool {
    let Some(required) = required.as_object() else {
        return true;
    };
    required
        .iter()
        .all(|(cap, sub)| match (cap.as_str(), &declared[cap]) {
            (_, Value::Null) => false,
            ("elicitation", Value::Object(modes)) if modes.is_empty() => sub.get("url").is_none(),
            ("elicitation", modes) => sub
                .as_object()
                .is_none_or(|s| s.keys().all(|mode| !modes[mode].is_null())),
            _ => true,
        })
}

fn mcp_post(app: &App, headers: &HeaderMap, body: &[u8]) -> Response {
    match app.cfg.mode {
        Mode::Http500 => return (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
        Mode::Redirect => {
            let location = [(header::LOCATION, app.cfg.target())];
            return (StatusCode::TEMPORARY_REDIRECT, location).into_response();
        }
        _ => {}
    }
    let msg: Incoming = match serde_json::from_slice(body) {
        Ok(msg) => msg,
        Err(e) => {
            let error = json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": format!("Parse error: {e}")}});
            return json_response(StatusCode::BAD_REQUEST, error.to_string());
        }
    };
    if app.cfg.mode == Mode::Modern {
        return modern_post(msg);
    }
    let initialize = msg.method.as_deref() == Some("initialize");
    if !initialize {
        let Some(sid) = session_id(headers) else {
            return (StatusCode::BAD_REQUEST, "missing Mcp-Session-Id").into_response();
        };
        if !app.sessions.lock().unwrap().contains(sid) {
            return (StatusCode::NOT_FOUND, "unknown session").into_response();
        }
    }
    match handle(app.cfg.mode, msg) {
        Outcome::Nothing => StatusCode::ACCEPTED.into_response(),
        Outcome::Reply(reply) if initialize => {
            let sid = new_session_id();
            app.sessions.lock().unwrap().insert(sid.clone());
            let mut response = json_response(StatusCode::OK, reply);
            let value = HeaderValue::from_str(&sid).expect("session ids are ASCII");
            response.headers_mut().insert("mcp-session-id", value);
            response
        }
        Outcome::Reply(reply) => json_response(StatusCode::OK, reply),
        Outcome::Fault(id) => http_fault(&app.cfg, &id),
    }
}

fn mcp_delete(app: &App, headers: &HeaderMap) -> Response {
    let Some(sid) = session_id(headers) else {
        return (StatusCode::BAD_REQUEST, "missing Mcp-Session-Id").into_response();
    };
    if !app.sessions.lock().unwrap().remove(sid) {
        return (StatusCode::NOT_FOUND, "unknown session").into_response();
    }
    DELETED.fetch_add(1, SeqCst);
    StatusCode::OK.into_response()
}

/// Applies the mode's misbehaviour to a `fault` call over Streamable HTTP.
fn http_fault(cfg: &Config, id: &RawValue) -> Response {
    match cfg.mode {
        Mode::ExitMidCall => exit_mid_call(),
        Mode::Garbage => http_not_json(cfg.bytes(1)),
        Mode::HugeLine => json_response(StatusCode::OK, huge_answer(id, cfg.bytes(80))),
        Mode::HugeSse => sse_response(Body::from(sse_event(&huge_answer(id, cfg.bytes(80))))),
        Mode::NeverAnswer => http_silent_sse(),
        Mode::EndlessSse => http_endless_sse(),
        Mode::SlowDrip => http_slow_drip(fault_ok(id)),
        Mode::Flood => http_flood(cfg.count, fault_ok(id)),
        _ => json_response(StatusCode::OK, fault_ok(id)),
    }
}

/// `hang`: the request was read; the answer never comes. hyper drops this
/// future when the client closes the connection.
async fn http_hang() -> Response {
    std::future::pending().await
}

/// `garbage`: claims JSON, is not.
fn http_not_json(bytes: usize) -> Response {
    json_response(StatusCode::OK, "x".repeat(bytes))
}

/// `never-answer`: the SSE headers go out, then nothing, until the client
/// leaves.
fn http_silent_sse() -> Response {
    let stream = futures_util::stream::pending::<Result<Bytes, Infallible>>();
    sse_response(Body::from_stream(stream))
}

/// `endless-sse`: a log notification every 50 ms, never the response.
fn http_endless_sse() -> Response {
    let (tx, body) = channel_body(4, ());
    tokio::spawn(async move {
        for n in 1.. {
            if tx.send(sse_event(&tick_notification(n))).await.is_err() {
                return; // the client left
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    sse_response(body)
}

/// `slow-drip`: a JSON body streamed one byte per 100 ms.
fn http_slow_drip(reply: String) -> Response {
    let (tx, body) = channel_body(1, ());
    tokio::spawn(async move {
        for byte in reply.into_bytes() {
            if tx.send(Bytes::copy_from_slice(&[byte])).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let content_type = [(header::CONTENT_TYPE, "application/json")];
    (StatusCode::OK, content_type, body).into_response()
}

/// `flood`: `count` sampling requests as SSE events, as fast as the client
/// reads them, then the answer, then the end of the stream.
fn http_flood(count: usize, reply: String) -> Response {
    let (tx, body) = channel_body(16, ());
    tokio::spawn(async move {
        // Chunks of 256 events: fast, yet still a stream rather than one blob.
        for start in (1..=count).step_by(256) {
            let end = (start + 255).min(count);
            let chunk: String = (start..=end)
                .map(|n| format!("event: message\ndata: {}\n\n", flood_request(n)))
                .collect();
            if tx.send(Bytes::from(chunk)).await.is_err() {
                return;
            }
        }
        let _ = tx.send(sse_event(&reply)).await;
    });
    sse_response(body)
}

// --- HTTP+SSE (2024-11-05) on /sse and /messages

/// Forgets a `GET /sse` stream when hyper drops its body.
struct LegacyGuard {
    app: Arc<App>,
    id: u64,
}

impl Drop for LegacyGuard {
    fn drop(&mut self) {
        let mut legacy = self.app.legacy.lock().unwrap();
        legacy.open.remove(&self.id);
        if legacy.latest == Some(self.id) {
            legacy.latest = None;
        }
    }
}

/// `GET /sse`: the `endpoint` event, then answers as `message` events and a
/// keep-alive comment every 5 s.
fn sse_open(app: &Arc<App>) -> Response {
    let id = {
        let mut legacy = app.legacy.lock().unwrap();
        legacy.next += 1;
        legacy.next
    };
    let guard = LegacyGuard {
        app: app.clone(),
        id,
    };
    let (tx, body) = channel_body(64, guard);
    // sse-ok: a working endpoint here (the first stream gets session=1);
    // sse-elsewhere: whatever --target says, typically another origin.
    let endpoint = match app.cfg.mode {
        Mode::SseElsewhere => app.cfg.target().to_owned(),
        _ => format!("/messages?session={id}"),
    };
    let first = Bytes::from(format!("event: endpoint\ndata: {endpoint}\n\n"));
    tx.try_send(first).expect("fresh channel has room");
    {
        let mut legacy = app.legacy.lock().unwrap();
        legacy.open.insert(id, tx.clone());
        legacy.latest = Some(id);
    }
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            if tx
                .send(Bytes::from_static(b": keep-alive\n\n"))
                .await
                .is_err()
            {
                return; // the client left
            }
        }
    });
    sse_response(body)
}

/// `POST /messages?session=N`: served normally, the answer goes out on the
/// session's `/sse` stream and the POST itself gets 202. Without a session
/// parameter the newest stream is used.
async fn sse_post(app: &App, query: Option<&str>, body: &[u8]) -> Response {
    let session = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("session="));
    let stream = {
        let legacy = app.legacy.lock().unwrap();
        let id = match session {
            Some(s) => s.parse().ok(),
            None => legacy.latest,
        };
        id.and_then(|id| legacy.open.get(&id).cloned())
    };
    let Some(stream) = stream else {
        return (StatusCode::NOT_FOUND, "unknown session").into_response();
    };
    let msg: Incoming = match serde_json::from_slice(body) {
        Ok(msg) => msg,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("Parse error: {e}")).into_response(),
    };
    // These modes misbehave in their transport, not in `fault`.
    let reply = match handle(app.cfg.mode, msg) {
        Outcome::Nothing => None,
        Outcome::Reply(reply) => Some(reply),
        Outcome::Fault(id) => Some(fault_ok(&id)),
    };
    if let Some(reply) = reply
        && stream.send(sse_event(&reply)).await.is_err()
    {
        return (StatusCode::GONE, "the /sse stream is closed").into_response();
    }
    (StatusCode::ACCEPTED, "Accepted").into_response()
}
