//! A stdio MCP backend that tries to escape its sandbox, one tool per escape,
//! for the tests of issue 53 (kernel sandbox for stdio children).
//!
//! `escape_backend [--max-lifetime SECS]`
//!
//! It speaks MCP JSON-RPC 2.0 over stdio (one JSON message per line) and
//! serves `initialize`, `ping`, `tools/list` and `tools/call` with the tools:
//!
//! - `allocate {mib}`: allocates `mib` MiB in 1 MiB chunks, touches every
//!   page and holds it all until exit. A refused allocation (rlimit) is
//!   reported; under a cgroup memory limit the OOM killer ends the process
//!   instead, with no answer.
//! - `fork {count}`: forks `count` children that sleep until killed (or until
//!   this process dies: each has `PR_SET_PDEATHSIG` SIGKILL).
//! - `reap {}`: SIGKILLs and waits for every child `fork` made.
//! - `open_files {count}`: opens `/dev/null` `count` times, holding the fds.
//! - `close_files {}`: closes every fd `open_files` holds.
//! - `connect {host, port}`: a TCP connect, 2 s timeout.
//! - `bind {host, port}`: binds a TCP listener (port 0 allowed), then drops it.
//! - `read {path}`: reads a file.
//! - `write {path, text}`: writes `text` to a file.
//! - `env {}`: adds `vars`, the whole environment, to its result.
//! - `pid {}`: adds `pid` to its result.
//! - `signal {pid, signal}`: `kill(pid, signal)`; signal 0 only asks whether
//!   it may.
//!
//! Every call answers with `structuredContent`
//! `{"ok": bool, "done": N, "error": "<os error>" | null}` (the same JSON as
//! its text content, and `isError` when not ok), where `done` counts what
//! was achieved before the first failure: MiB, children, fds, bytes, or 1
//! for a connect or bind. Bad arguments get a JSON-RPC error (-32602).
//!
//! Nothing outlives a test: it exits on stdin EOF or after `--max-lifetime`
//! seconds (default 300), and its children die with it.

use std::{
    fs::File,
    io::{BufRead, Write},
    net::{TcpListener, TcpStream, ToSocketAddrs},
    time::Duration,
};

use serde_json::{Value, json};

const USAGE: &str = "usage: escape_backend [--max-lifetime SECS]";
const VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];
const DEFAULT_VERSION: &str = "2025-11-25";
const MIB: usize = 1 << 20;
const PAGE: usize = 4096;

/// What the escapes hold, for the life of the process (or until `reap` and
/// `close_files`).
#[derive(Default)]
struct Held {
    memory: Vec<Vec<u8>>,
    children: Vec<libc::pid_t>,
    files: Vec<File>,
}

/// A tool's outcome: how far it got, and the first failure.
struct Outcome {
    done: u64,
    error: Option<String>,
    extra: Option<(&'static str, Value)>,
}

impl Outcome {
    fn new(done: u64, error: Option<String>) -> Outcome {
        Outcome {
            done,
            error,
            extra: None,
        }
    }

    fn of<T>(result: std::io::Result<T>, done: impl FnOnce(&T) -> u64) -> Outcome {
        match result {
            Ok(value) => Outcome::new(done(&value), None),
            Err(e) => Outcome::new(0, Some(e.to_string())),
        }
    }
}

fn main() {
    let max_lifetime = match parse_args() {
        Ok(secs) => secs,
        Err(e) => {
            eprintln!("escape_backend: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(max_lifetime));
        eprintln!("escape_backend: --max-lifetime reached, exiting");
        std::process::exit(0);
    });
    let mut held = Held::default();
    let mut stdin = std::io::stdin().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        match stdin.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let msg: Value = match serde_json::from_slice(line.trim_ascii()) {
            Ok(msg) => msg,
            Err(e) => {
                eprintln!("escape_backend: ignoring unparsable line: {e}");
                continue;
            }
        };
        // Notifications (initialized included) and answers need nothing.
        let (Some(method), Some(id)) = (msg["method"].as_str(), msg.get("id")) else {
            continue;
        };
        let reply = match answer(&mut held, method, &msg["params"]) {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            }
        };
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    // Exiting kills the children too (their parent-death signal).
    std::process::exit(0);
}

fn parse_args() -> Result<u64, String> {
    let mut max_lifetime = 300;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--max-lifetime" => {
                let value = args.next().ok_or("--max-lifetime needs a value")?;
                max_lifetime = value.parse().map_err(|e| format!("--max-lifetime: {e}"))?;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(max_lifetime)
}

fn answer(held: &mut Held, method: &str, params: &Value) -> Result<Value, (i64, String)> {
    Ok(match method {
        "initialize" => {
            let asked = params["protocolVersion"].as_str().unwrap_or_default();
            let version = VERSIONS
                .into_iter()
                .find(|v| *v == asked)
                .unwrap_or(DEFAULT_VERSION);
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "escape", "version": "0"},
            })
        }
        "ping" => json!({}),
        "tools/list" => json!({"tools": tools()}),
        "tools/call" => {
            let name = params["name"].as_str().unwrap_or_default();
            call_result(call(held, name, &params["arguments"])?)
        }
        other => return Err((-32601, format!("method not found: {other}"))),
    })
}

fn tools() -> Vec<Value> {
    let number = json!({"type": "integer", "minimum": 0});
    let string = json!({"type": "string"});
    let tool = |name: &str, props: &[(&str, &Value)]| {
        let properties: serde_json::Map<String, Value> = props
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).clone()))
            .collect();
        let required: Vec<&str> = props.iter().map(|(k, _)| *k).collect();
        json!({"name": name, "inputSchema":
            {"type": "object", "properties": properties, "required": required}})
    };
    vec![
        tool("allocate", &[("mib", &number)]),
        tool("fork", &[("count", &number)]),
        tool("reap", &[]),
        tool("open_files", &[("count", &number)]),
        tool("close_files", &[]),
        tool("connect", &[("host", &string), ("port", &number)]),
        tool("bind", &[("host", &string), ("port", &number)]),
        tool("read", &[("path", &string)]),
        tool("write", &[("path", &string), ("text", &string)]),
        tool("env", &[]),
        tool("pid", &[]),
        tool("signal", &[("pid", &number), ("signal", &number)]),
    ]
}

fn call(held: &mut Held, name: &str, args: &Value) -> Result<Outcome, (i64, String)> {
    let number = |key: &str| {
        args[key].as_u64().ok_or((
            -32602,
            format!("{name}: `{key}` must be a non-negative integer"),
        ))
    };
    let string = |key: &str| {
        args[key]
            .as_str()
            .ok_or((-32602, format!("{name}: `{key}` must be a string")))
    };
    let port = || {
        u16::try_from(number("port")?).map_err(|_| (-32602, format!("{name}: `port` too large")))
    };
    Ok(match name {
        "allocate" => allocate(held, number("mib")?),
        "fork" => fork(held, number("count")?),
        "reap" => reap(held),
        "open_files" => open_files(held, number("count")?),
        "close_files" => {
            let closed = held.files.len() as u64;
            held.files.clear();
            Outcome::new(closed, None)
        }
        "connect" => connect(string("host")?, port()?),
        "bind" => {
            let bound = TcpListener::bind((string("host")?, port()?));
            let addr = bound.as_ref().ok().and_then(|l| l.local_addr().ok());
            let mut outcome = Outcome::of(bound, |_| 1);
            outcome.extra = addr.map(|a| ("addr", json!(a.to_string())));
            outcome
        }
        "read" => Outcome::of(std::fs::read(string("path")?), |b| b.len() as u64),
        "write" => {
            let text = string("text")?;
            Outcome::of(std::fs::write(string("path")?, text), |()| {
                text.len() as u64
            })
        }
        "env" => {
            let vars: serde_json::Map<String, Value> = std::env::vars_os()
                .map(|(k, v)| {
                    let value = v.to_string_lossy().into_owned();
                    (k.to_string_lossy().into_owned(), Value::String(value))
                })
                .collect();
            let mut outcome = Outcome::new(vars.len() as u64, None);
            outcome.extra = Some(("vars", Value::Object(vars)));
            outcome
        }
        "signal" => {
            let pid = i32::try_from(number("pid")?).map_err(|_| (-32602, "pid".to_owned()))?;
            let sig =
                i32::try_from(number("signal")?).map_err(|_| (-32602, "signal".to_owned()))?;
            // SAFETY: kill only sends a signal (0: checks that it may).
            let sent = unsafe { libc::kill(pid, sig) };
            let result = match sent {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            };
            Outcome::of(result, |()| 1)
        }
        "pid" => {
            let mut outcome = Outcome::new(1, None);
            outcome.extra = Some(("pid", json!(std::process::id())));
            outcome
        }
        other => return Err((-32602, format!("unknown tool {other:?}"))),
    })
}

fn call_result(outcome: Outcome) -> Value {
    let ok = outcome.error.is_none();
    let mut structured = json!({"ok": ok, "done": outcome.done, "error": outcome.error});
    if let Some((key, value)) = outcome.extra {
        structured[key] = value;
    }
    json!({
        "content": [{"type": "text", "text": structured.to_string()}],
        "structuredContent": structured,
        "isError": !ok,
    })
}

/// Fallible per chunk, so an rlimit's refusal (malloc returning NULL) is an
/// answer rather than Rust's abort on allocation failure.
fn allocate(held: &mut Held, mib: u64) -> Outcome {
    for done in 0..mib {
        let mut chunk = Vec::new();
        if let Err(e) = held
            .memory
            .try_reserve(1)
            .and_then(|()| chunk.try_reserve_exact(MIB))
        {
            // malloc's errno (ENOMEM) is the OS's word; Rust's error has none.
            let os = std::io::Error::last_os_error();
            let error = match os.raw_os_error() {
                Some(0) | None => e.to_string(),
                Some(_) => os.to_string(),
            };
            return Outcome::new(done, Some(error));
        }
        // Untouched pages cost nothing: write one byte per page so each is
        // really backed and counted (RSS, cgroup memory).
        chunk.resize(MIB, 0);
        for byte in chunk.iter_mut().step_by(PAGE) {
            *byte = 1;
        }
        held.memory.push(chunk);
    }
    Outcome::new(mib, None)
}

fn fork(held: &mut Held, count: u64) -> Outcome {
    let parent = unsafe { libc::getpid() };
    for done in 0..count {
        match unsafe { libc::fork() } {
            -1 => {
                let e = std::io::Error::last_os_error();
                return Outcome::new(done, Some(e.to_string()));
            }
            0 => child(parent),
            pid => held.children.push(pid),
        }
    }
    Outcome::new(count, None)
}

/// The forked child: raw system calls only (this process has threads, so
/// after fork only async-signal-safe calls are allowed). The death signal
/// follows the forking thread, the main one, which lives as long as the
/// process; the getppid check covers a parent that died before prctl.
/// Closing stdin and stdout keeps the gateway's pipes from outliving the
/// backend's own end.
fn child(parent: libc::pid_t) -> ! {
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(0);
        }
        libc::close(0);
        libc::close(1);
        loop {
            libc::pause();
        }
    }
}

fn reap(held: &mut Held) -> Outcome {
    let mut reaped = 0;
    let mut error = None;
    for pid in held.children.drain(..) {
        unsafe { libc::kill(pid, libc::SIGKILL) };
        if unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) } == pid {
            reaped += 1;
        } else if error.is_none() {
            error = Some(std::io::Error::last_os_error().to_string());
        }
    }
    Outcome::new(reaped, error)
}

fn open_files(held: &mut Held, count: u64) -> Outcome {
    for done in 0..count {
        match File::open("/dev/null") {
            Ok(file) => held.files.push(file),
            Err(e) => return Outcome::new(done, Some(e.to_string())),
        }
    }
    Outcome::new(count, None)
}

/// Tries each address the host resolves to; the first error is reported if
/// none connects.
fn connect(host: &str, port: u16) -> Outcome {
    let addrs = match (host, port).to_socket_addrs() {
        Ok(addrs) => addrs,
        Err(e) => return Outcome::new(0, Some(e.to_string())),
    };
    let mut first_error = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(_) => return Outcome::new(1, None),
            Err(e) => {
                first_error.get_or_insert(e.to_string());
            }
        }
    }
    let error = first_error.unwrap_or_else(|| format!("{host} resolves to no address"));
    Outcome::new(0, Some(error))
}
