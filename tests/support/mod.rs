//! Shared fixtures for end-to-end tests: the real `sluice` binary on
//! loopback, and a plain HTTP client that speaks the legacy transport.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

mod metrics;
pub mod pki;
pub use metrics::Metrics;
pub mod proxy;

pub const BIN: &str = env!("CARGO_BIN_EXE_sluice");

/// A running gateway; SIGTERM and reaped on drop.
pub struct Gateway {
    pub child: Child,
    pub base: String,
    pub dir: tempdir::Dir,
}

pub mod tempdir {
    use std::path::{Path, PathBuf};

    /// A directory under the target dir, removed on drop.
    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new() -> Dir {
            let mut bytes = [0u8; 8];
            getrandom::fill(&mut bytes).unwrap();
            let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let path = std::env::temp_dir().join(format!("sluice-test-{name}"));
            std::fs::create_dir_all(&path).unwrap();
            Dir(path)
        }
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    impl Default for Dir {
        fn default() -> Self {
            Self::new()
        }
    }

    pub fn write(dir: &Dir, name: &str, text: &str) -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

/// `sluice check` on this config text, written as `file`: (exit code,
/// stdout, stderr).
pub fn check_config(file: &str, text: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    let dir = tempdir::Dir::new();
    let path = tempdir::write(&dir, file, text);
    let out = Command::new(BIN)
        .args(["check", "--config", path.to_str().unwrap()])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A stdio backend running this binary's demo server.
pub fn demo_backend(name: &str) -> String {
    format!(
        "[backends.{name}]\ntransport = \"stdio\"\ncommand = \"{BIN}\"\nargs = [\"demo-server\"]\n"
    )
}

impl Gateway {
    /// Starts `sluice serve` with this TOML; waits for its readiness line.
    pub fn start(toml: &str) -> Gateway {
        Self::start_with_env(toml, &[])
    }

    pub fn start_with_env(toml: &str, env: &[(&str, &str)]) -> Gateway {
        let gw = Self::start_unready(toml, env);
        gw.wait_ready();
        gw
    }

    /// Starts without waiting for every backend to be healthy.
    pub fn start_unready(toml: &str, env: &[(&str, &str)]) -> Gateway {
        Self::start_at(toml, env, "127.0.0.1:0")
    }

    /// Starts on this address (a restart on the same one, say), without
    /// waiting for every backend to be healthy.
    pub fn start_at(toml: &str, env: &[(&str, &str)], listen: &str) -> Gateway {
        let dir = tempdir::Dir::new();
        let config = tempdir::write(&dir, "sluice.toml", toml);
        let args = [
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--listen",
            listen,
        ];
        Self::spawn(&args, env, dir)
    }

    /// Starts with exactly this environment (nothing of the test's own but
    /// `SLUICE_HTTP`, which picks the HTTP code the whole suite runs on),
    /// and waits for readiness.
    pub fn start_in_env(toml: &str, env: &[(&str, &str)]) -> Gateway {
        let dir = tempdir::Dir::new();
        let config = tempdir::write(&dir, "sluice.toml", toml);
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--config", config.to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0"])
            .env_clear();
        if let Some(http) = std::env::var_os("SLUICE_HTTP") {
            cmd.env("SLUICE_HTTP", http);
        }
        cmd.envs(env.iter().copied());
        let gw = Self::spawn_cmd(cmd, dir, Stdio::inherit());
        gw.wait_ready();
        gw
    }

    /// `start_in_env`, with the log kept (`log`, at `SLUICE_LOG=info`)
    /// and without waiting for every backend to be healthy.
    pub fn start_in_env_logged(toml: &str, env: &[(&str, &str)]) -> Gateway {
        let dir = tempdir::Dir::new();
        let config = tempdir::write(&dir, "sluice.toml", toml);
        let log = std::fs::File::create(dir.path().join("stderr.log")).unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--config", config.to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0"])
            .env_clear()
            .env("SLUICE_LOG", "info");
        if let Some(http) = std::env::var_os("SLUICE_HTTP") {
            cmd.env("SLUICE_HTTP", http);
        }
        cmd.envs(env.iter().copied());
        Self::spawn_cmd(cmd, dir, Stdio::from(log))
    }

    /// The built-in default (no --config).
    pub fn start_default() -> Gateway {
        let gw = Self::spawn(
            &["serve", "--listen", "127.0.0.1:0"],
            &[],
            tempdir::Dir::new(),
        );
        gw.wait_ready();
        gw
    }

    /// Like `start_with_env`, with the gateway's log (stderr) kept in a
    /// file for the test to read (`log`), at `SLUICE_LOG=info`.
    pub fn start_logged(toml: &str, env: &[(&str, &str)]) -> Gateway {
        let dir = tempdir::Dir::new();
        let config = tempdir::write(&dir, "sluice.toml", toml);
        let log = std::fs::File::create(dir.path().join("stderr.log")).unwrap();
        let args = [
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ];
        let mut env = env.to_vec();
        if !env.iter().any(|(k, _)| *k == "SLUICE_LOG") {
            env.push(("SLUICE_LOG", "info"));
        }
        let gw = Self::spawn_with(&args, &env, dir, Stdio::from(log));
        gw.wait_ready();
        gw
    }

    /// What the gateway has logged so far (see `start_logged`).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }

    fn spawn(args: &[&str], env: &[(&str, &str)], dir: tempdir::Dir) -> Gateway {
        Self::spawn_with(args, env, dir, Stdio::inherit())
    }

    /// Like `start_logged`, under an open-file limit of `nofile` (soft and hard).
    pub fn start_with_fd_limit(toml: &str, nofile: u64) -> Gateway {
        let dir = tempdir::Dir::new();
        let config = tempdir::write(&dir, "sluice.toml", toml);
        let log = std::fs::File::create(dir.path().join("stderr.log")).unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args([
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .env("SLUICE_LOG", "info");
        // SAFETY: setrlimit only changes the child's own limits before exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                let lim = libc::rlimit {
                    rlim_cur: nofile,
                    rlim_max: nofile,
                };
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                Ok(())
            });
        }
        let gw = Self::spawn_cmd(cmd, dir, Stdio::from(log));
        gw.wait_ready();
        gw
    }

    fn spawn_with(
        args: &[&str],
        env: &[(&str, &str)],
        dir: tempdir::Dir,
        stderr: Stdio,
    ) -> Gateway {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env("SLUICE_LOG", "warn")
            .envs(env.iter().copied());
        Self::spawn_cmd(cmd, dir, stderr)
    }

    fn spawn_cmd(mut cmd: Command, dir: tempdir::Dir, stderr: Stdio) -> Gateway {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start sluice");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("sluice listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_owned();
        // With `[server] tls` the line says `https://ADDR`.
        let base = match addr.starts_with("https://") {
            true => addr,
            false => format!("http://{addr}"),
        };
        Gateway { child, base, dir }
    }

    /// Starts whatever `cmd` runs (a `sluice serve` behind `setpriv`, say)
    /// and waits for readiness; `dir` lives as long as the gateway.
    pub fn start_command(cmd: Command, dir: tempdir::Dir) -> Gateway {
        let gw = Self::spawn_cmd(cmd, dir, Stdio::inherit());
        gw.wait_ready();
        gw
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has not exited (a zombie counts as exited).
    pub fn is_running(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .is_ok_and(|s| !s.contains(") Z "))
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Backends start asynchronously; readiness is what /readyz says.
    pub fn wait_ready(&self) {
        wait_until(Duration::from_secs(30), || {
            http_get(&self.base, "/readyz").is_ok_and(|(status, _)| status == 200)
        });
    }

    pub fn metrics(&self) -> Metrics {
        let (_, body) = http_get(&self.base, "/metrics").unwrap();
        Metrics::parse(&body)
    }

    /// SIGTERM, then wait; returns the exit code.
    pub fn stop(mut self) -> Option<i32> {
        self.terminate()
    }

    fn terminate(&mut self) -> Option<i32> {
        // SAFETY: signalling our own child by its pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        for _ in 0..300 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate();
        }
    }
}

/// Writes the gateway's config file anew and sends it SIGHUP; waits until
/// the reload has been counted under `result`.
pub fn reload(gw: &Gateway, toml: &str, result: &str) {
    let key = format!(r#"sluice_config_reloads_total{{result="{result}"}}"#);
    // Untouched (absent) until the first reload with this result.
    let before = gw.metrics().get_or_untouched(&key);
    tempdir::write(&gw.dir, "sluice.toml", toml);
    // SAFETY: our own child.
    unsafe {
        libc::kill(gw.pid() as i32, libc::SIGHUP);
    }
    wait_until(Duration::from_secs(10), || {
        gw.metrics().get_or_untouched(&key) > before
    });
}

/// Polls a condition that changes asynchronously in another process, with a
/// bound; panics if it never holds.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "condition not reached within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The IPv4 TCP sockets of this network namespace, from /proc/net/tcp:
/// (local port, remote port) -> (bytes sent and not yet acknowledged,
/// bytes received and not yet read).
fn tcp_queues() -> std::collections::HashMap<(u16, u16), (u64, u64)> {
    let text = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let port = |addr: &str| u16::from_str_radix(addr.rsplit_once(':')?.1, 16).ok();
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (tx, rx) = f.get(4)?.split_once(':')?;
            let queues = (
                u64::from_str_radix(tx, 16).ok()?,
                u64::from_str_radix(rx, 16).ok()?,
            );
            Some(((port(f.get(1)?)?, port(f.get(2)?)?), queues))
        })
        .collect()
}

/// Children of a process, from /proc: (pid, state letter).
pub fn children(pid: u32) -> Vec<(u32, char)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // The command name may hold spaces and parens: parse after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let state = fields[0].chars().next().unwrap_or('?');
        let ppid: u32 = fields[1].parse().unwrap_or(0);
        if ppid == pid {
            out.push((p, state));
        }
    }
    out
}

pub fn exists(pid: u32) -> bool {
    PathBuf::from(format!("/proc/{pid}")).exists()
}

/// A plain blocking GET (HTTP/1.0, Connection: close) for operator
/// endpoints, usable from sync and async tests alike.
pub fn http_get(base: &str, path: &str) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let addr = base.strip_prefix("http://").unwrap();
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut buf = String::new();
    s.read_to_string(&mut buf)?;
    let status = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = buf
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// An HTTP response as tests see it.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: ::reqwest::header::HeaderMap,
    pub body: String,
}

impl Reply {
    /// A response read whole (never one whose body does not end).
    pub async fn read(resp: ::reqwest::Response) -> Reply {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text().await.unwrap();
        Reply {
            status,
            headers,
            body,
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// JSON-RPC messages, from a JSON body or an SSE stream.
    pub fn messages(&self) -> Vec<Value> {
        let ct = self
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if ct.starts_with("text/event-stream") {
            self.body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| serde_json::from_str(d.trim()).unwrap())
                .collect()
        } else {
            vec![self.json()]
        }
    }

    pub fn session_id(&self) -> Option<String> {
        self.headers
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned())
    }
}

#[derive(Clone)]
pub struct Http {
    pub client: ::reqwest::Client,
    pub url: String,
}

impl Http {
    pub fn new(url: String) -> Http {
        Http {
            client: ::reqwest::Client::builder()
                .pool_max_idle_per_host(64)
                .build()
                .unwrap(),
            url,
        }
    }

    pub async fn post_raw(
        &self,
        headers: &[(&str, &str)],
        body: impl Into<::reqwest::Body>,
    ) -> Reply {
        let mut req = self.client.post(&self.url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        Reply::read(req.body(body).send().await.unwrap()).await
    }

    /// POST a JSON-RPC message with correct headers (and the session, if any).
    pub async fn post(&self, session: Option<&str>, msg: &Value) -> Reply {
        self.post_with(session, &[], msg).await
    }

    /// `post`, with these headers too.
    pub async fn post_with(
        &self,
        session: Option<&str>,
        extra: &[(&str, &str)],
        msg: &Value,
    ) -> Reply {
        let mut headers = vec![
            ("content-type", "application/json"),
            ("accept", ACCEPT_BOTH),
        ];
        if let Some(s) = session {
            headers.push(("mcp-session-id", s));
        }
        headers.extend_from_slice(extra);
        self.post_raw(&headers, msg.to_string()).await
    }

    /// A 2026-07-28 `tools/call` of `tool` (`params` whole, its `_meta`
    /// included) with the headers that mirror it, and these too.
    pub async fn modern_call(
        &self,
        id: u64,
        tool: &str,
        params: Value,
        extra: &[(&str, &str)],
    ) -> Reply {
        let mut headers = vec![
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", tool),
        ];
        headers.extend_from_slice(extra);
        let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":params});
        self.post_with(None, &headers, &body).await
    }

    /// POST these exact bytes on a session, with the usual headers.
    pub async fn post_bytes(&self, session: &str, body: String) -> Reply {
        let headers = [
            ("content-type", "application/json"),
            ("accept", ACCEPT_BOTH),
            ("mcp-session-id", session),
        ];
        self.post_raw(&headers, body).await
    }

    pub async fn initialize(&self) -> String {
        self.initialize_with(json!({})).await
    }

    /// A session whose client declares these capabilities (sampling, ...).
    pub async fn initialize_with(&self, capabilities: Value) -> String {
        let mut init = init_request(1);
        init["params"]["capabilities"] = capabilities;
        let r = self.post(None, &init).await;
        assert_eq!(r.status, 200, "initialize failed: {}", r.body);
        r.session_id().expect("initialize returned no session id")
    }

    pub async fn call(&self, session: &str, id: u64, method: &str, params: Value) -> Reply {
        self.post(
            Some(session),
            &json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}),
        )
        .await
    }

    /// `tools/call` of `name`: the JSON-RPC reply.
    pub async fn tool(&self, session: &str, id: u64, name: &str, arguments: Value) -> Value {
        let params = json!({"name": name, "arguments": arguments});
        self.call(session, id, "tools/call", params).await.json()
    }

    /// A 2026-07-28 `subscriptions/listen` request (its `_meta` included in
    /// `params` by the caller): the SSE response, status unchecked.
    pub async fn listen(&self, id: &str, params: Value) -> ::reqwest::Response {
        self.client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "subscriptions/listen")
            .body(
                json!({"jsonrpc":"2.0","id":id,"method":"subscriptions/listen","params":params})
                    .to_string(),
            )
            .send()
            .await
            .unwrap()
    }

    /// Opens the session's GET stream; the caller checks the status.
    pub async fn get_stream(&self, session: &str) -> ::reqwest::Response {
        self.client
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", session)
            .send()
            .await
            .unwrap()
    }

    /// Starts `demo__sleep_ms` with a progress token; see `start_progress_call`.
    pub async fn start_slow_call(&self, session: &str, id: Value, ms: u64) -> ::reqwest::Response {
        self.start_progress_call(session, id, "demo__sleep_ms", json!({ "ms": ms }))
            .await
    }

    /// Starts a tool call with a progress token and returns once the reply's
    /// headers arrive: an SSE reply starts with the backend's first progress
    /// event, so from then on the call is in flight at the backend.
    pub async fn start_progress_call(
        &self,
        session: &str,
        id: Value,
        tool: &str,
        args: Value,
    ) -> ::reqwest::Response {
        let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
            "name":tool,"arguments":args,"_meta":{"progressToken":"slow"}}});
        let resp = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .header("mcp-session-id", session)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        resp
    }

    pub async fn delete(&self, session: &str) -> u16 {
        self.client
            .delete(&self.url)
            .header("mcp-session-id", session)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

pub fn init_request(id: u64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sluice-test","version":"0"}}})
}

/// The text of a tools/call result's first content item.
pub fn text_of(msg: &Value) -> &str {
    msg["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {msg}"))
}

/// The stateful Streamable HTTP test backend (examples/stateful_backend.rs):
/// a real rmcp server that holds an object per session and reports its
/// live-session count on `/stats`. It exits when its stdin closes, so a
/// failed test never leaves it running.
pub struct Fixture {
    pub child: Child,
    pub addr: String,
    _stdin: std::process::ChildStdin,
}

impl Fixture {
    pub fn bin(name: &str) -> PathBuf {
        let sluice = PathBuf::from(BIN);
        sluice.parent().unwrap().join("examples").join(name)
    }

    pub fn start(listen: &str, extra: &[&str]) -> Fixture {
        Self::start_example("stateful_backend", listen, extra)
    }

    /// An example server that prints `{name} listening on ADDR` when bound.
    pub fn start_example(name: &str, listen: &str, extra: &[&str]) -> Fixture {
        let mut child = Command::new(Self::bin(name))
            // rmcp logs its own shutdown races at error level; not ours to see.
            .env("FIXTURE_LOG", "off")
            .args(["--listen", listen, "--max-lifetime", "300"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the example (cargo test builds examples)");
        let stdin = child.stdin.take().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix(&format!("{name} listening on "))
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_owned();
        Fixture {
            child,
            addr,
            _stdin: stdin,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub fn stats(&self) -> Value {
        let (status, body) = http_get(&format!("http://{}", self.addr), "/stats").unwrap();
        assert_eq!(status, 200);
        serde_json::from_str(&body).unwrap()
    }

    pub fn live(&self) -> u64 {
        self.stats()["live_sessions"].as_u64().unwrap()
    }

    /// Forgets every session, as a restart would.
    pub fn forget(&self) {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&self.addr).unwrap();
        write!(
            s,
            "POST /admin/forget HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
        )
        .unwrap();
        let mut buf = String::new();
        s.read_to_string(&mut buf).unwrap();
        assert!(
            buf.starts_with("HTTP/1.0 200") || buf.starts_with("HTTP/1.1 200"),
            "{buf}"
        );
    }

    pub fn stop(mut self) {
        // SAFETY: our own child.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn http_backend(name: &str, url: &str, extra: &str) -> String {
    format!("[backends.{name}]\ntransport = \"http\"\nurl = \"{url}\"\n{extra}\n")
}

/// The fault-injection backend (examples/faulty_backend.rs) over stdio, as
/// a backend table with these extra TOML lines.
pub fn faulty_stdio(name: &str, mode: &str, extra: &str) -> String {
    let bin = Fixture::bin("faulty_backend");
    format!(
        "[backends.{name}]\ntransport = \"stdio\"\ncommand = \"{}\"\nargs = [\"--transport\", \"stdio\", \"--mode\", \"{mode}\"]\n{extra}\n",
        bin.display()
    )
}

/// The fault-injection backend over HTTP, in `mode`.
pub fn faulty_http(mode: &str, extra: &[&str]) -> Fixture {
    let mut args = vec!["--transport", "http", "--mode", mode];
    args.extend_from_slice(extra);
    Fixture::start_example("faulty_backend", "127.0.0.1:0", &args)
}

/// Children of `pid` that are zombies now.
pub fn zombies(pid: u32) -> Vec<u32> {
    children(pid)
        .into_iter()
        .filter(|(_, s)| *s == 'Z')
        .map(|(p, _)| p)
        .collect()
}

/// No child of `pid` stays a zombie: one seen is reaped within 5 s. (A
/// child that has just exited is a zombie until its SIGCHLD is handled;
/// only one that stays so is a leak.)
pub fn assert_no_zombies(pid: u32) {
    assert_zombies_reaped(pid, &zombies(pid));
}

/// Each of `seen` (zombie children of `pid` seen earlier) is reaped
/// within 5 s.
pub fn assert_zombies_reaped(pid: u32, seen: &[u32]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<u32> = zombies(pid)
            .into_iter()
            .filter(|z| seen.contains(z))
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "zombie children not reaped within 5 s: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Raw HTTP/1.1 bytes to the gateway; the reply's status (0 if none).
pub fn raw_http(base: &str, request: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let addr = base.strip_prefix("http://").unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// One HTTP/1.1 keep-alive connection, driven by hand: every request goes
/// over this very socket (a pooled client might silently open another).
pub struct KeepAlive {
    pub stream: std::io::BufReader<std::net::TcpStream>,
}

impl KeepAlive {
    pub fn connect(base: &str) -> KeepAlive {
        let addr = base.strip_prefix("http://").unwrap();
        let s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        KeepAlive {
            stream: std::io::BufReader::new(s),
        }
    }

    /// POSTs `body` to `path` with these headers; (status, body). Panics if
    /// the connection is gone.
    pub fn post(&mut self, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        self.send(post_request(path, headers, body).as_bytes());
        let r = self.response();
        (r.status, r.text())
    }

    /// Writes `raw`, then reads one response.
    pub fn response_to(&mut self, raw: &str) -> RawResponse {
        self.send(raw.as_bytes());
        self.response()
    }

    /// Writes `raw` as it is.
    pub fn send(&mut self, raw: &[u8]) {
        use std::io::Write;
        self.stream.get_mut().write_all(raw).unwrap();
    }

    /// Waits until the gateway has read every byte sent so far: this side
    /// has none the gateway has not acknowledged, and the gateway's end
    /// holds none it has not read (`tx_queue` and `rx_queue` in
    /// /proc/net/tcp, where both ends of a loopback connection are).
    pub fn wait_read(&self) {
        let ours = self.stream.get_ref().local_addr().unwrap().port();
        let theirs = self.stream.get_ref().peer_addr().unwrap().port();
        wait_until(Duration::from_secs(10), || {
            let queues = tcp_queues();
            queues.get(&(ours, theirs)).is_some_and(|(tx, _)| *tx == 0)
                && queues.get(&(theirs, ours)).is_some_and(|(_, rx)| *rx == 0)
        });
    }

    /// Reads one response (its body by `Content-Length` or chunked).
    pub fn response(&mut self) -> RawResponse {
        use std::io::Read;
        let mut status_line = String::new();
        self.stream.read_line(&mut status_line).unwrap();
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {status_line:?}"));
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').unwrap();
            headers.push((k.to_ascii_lowercase(), v.trim().to_owned()));
        }
        let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v);
        let chunked = header("transfer-encoding").is_some_and(|v| v.contains("chunked"));
        let length = header("content-length").and_then(|v| v.parse::<usize>().ok());
        let mut body = Vec::new();
        if status == 100 {
        } else if chunked {
            loop {
                let mut size = String::new();
                self.stream.read_line(&mut size).unwrap();
                let n = usize::from_str_radix(size.trim(), 16).unwrap();
                let mut chunk = vec![0u8; n + 2];
                self.stream.read_exact(&mut chunk).unwrap();
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        } else if let Some(n) = length {
            body.resize(n, 0);
            self.stream.read_exact(&mut body).unwrap();
        }
        RawResponse {
            status,
            headers,
            body,
        }
    }
}

/// A `POST` as a client writes it, `Content-Length` first.
pub fn post_request(path: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    req
}

/// A response read off a `KeepAlive`.
pub struct RawResponse {
    pub status: u16,
    /// Names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A free loopback port (bound, then released for the server to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `redis-server` of the test's own on a loopback port, keeping nothing
/// on disk. Its shell wrapper ends it (by its PID) when the wrapper's stdin
/// closes: on drop, on `stop`, or when the test process dies.
pub struct Redis {
    child: Child,
    pub port: u16,
    stdin: Option<std::process::ChildStdin>,
}

impl Redis {
    pub fn start() -> Redis {
        Self::on_port(free_port())
    }

    /// On this port (a restart on the same address, as after a crash).
    pub fn on_port(port: u16) -> Redis {
        let redis = Self::spawn(port, &["--port", &port.to_string()]);
        wait_until(Duration::from_secs(10), || redis.ping());
        redis
    }

    /// On a new port, with these directives added (`--requirepass`, say);
    /// waits until it listens.
    pub fn start_with(directives: &[&str]) -> Redis {
        let port = free_port();
        let port_arg = port.to_string();
        let mut args = vec!["--port", port_arg.as_str()];
        args.extend(directives);
        let redis = Self::spawn(port, &args);
        wait_until(Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        redis
    }

    /// On a TLS port only (no plain one), clients holding a certificate
    /// `ca` signed, with `directives` added (its ACL users).
    pub fn start_tls(cert: &Path, key: &Path, ca: &Path, directives: &[&str]) -> Redis {
        let port = free_port();
        let path = |p: &Path| p.to_str().unwrap().to_owned();
        let mut args = vec![
            "--port".to_owned(),
            "0".to_owned(),
            "--tls-port".to_owned(),
            port.to_string(),
            "--tls-cert-file".to_owned(),
            path(cert),
            "--tls-key-file".to_owned(),
            path(key),
            "--tls-ca-cert-file".to_owned(),
            path(ca),
            "--tls-auth-clients".to_owned(),
            "yes".to_owned(),
        ];
        args.extend(directives.iter().map(|d| (*d).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let redis = Self::spawn(port, &args);
        // Listening is all a plain connection can see of a TLS port.
        wait_until(Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        redis
    }

    fn spawn(port: u16, args: &[&str]) -> Redis {
        // (An asynchronous list's stdin is /dev/null: the pipe goes by fd 3.)
        const WRAPPER: &str = r#"exec 3<&0
redis-server "$@" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning 3<&- &
r=$!
(cat <&3 >/dev/null; kill "$r" 2>/dev/null) &
wait "$r""#;
        let mut child = Command::new("sh")
            .args(["-c", WRAPPER, "sh"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (scripts/test installs it)");
        let stdin = child.stdin.take();
        Redis { child, port, stdin }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Whether it answers PING.
    pub fn ping(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut buf = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    /// Ends it and waits until it is gone.
    pub fn stop(mut self) {
        self.end();
    }

    fn end(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.end();
    }
}

/// A new session key (`sluice keygen`).
pub fn keygen() -> String {
    let out = Command::new(BIN).arg("keygen").output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// POSTs a JSON-RPC message as the principal of this bearer token (and on
/// this session, if any), with the usual headers.
pub async fn post_as(
    url: String,
    token: &str,
    session: Option<String>,
    body: &Value,
) -> ::reqwest::Response {
    let mut req = ::reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("authorization", format!("Bearer {token}"));
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    req.body(body.to_string()).send().await.unwrap()
}

/// The JSON-RPC messages of an SSE response, one at a time.
pub struct Events {
    stream: ::reqwest::Response,
    seen: String,
}

impl Events {
    pub fn new(stream: ::reqwest::Response) -> Events {
        Events {
            stream,
            seen: String::new(),
        }
    }

    /// The next `data:` message; panics if the stream ends.
    pub async fn next(&mut self) -> Value {
        loop {
            if let Some((event, rest)) = self
                .seen
                .split_once("\n\n")
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
            {
                self.seen = rest;
                if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data:")) {
                    return serde_json::from_str(data.trim()).unwrap();
                }
                continue;
            }
            let chunk = self
                .stream
                .chunk()
                .await
                .unwrap()
                .expect("the stream ended");
            self.seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}
