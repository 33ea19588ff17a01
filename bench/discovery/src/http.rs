//! A gateway process of the bench and a legacy MCP session with it, over
//! one keep-alive HTTP/1.1 connection (plain blocking std I/O: the client
//! should cost as little as it can beside what it measures).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

pub(crate) struct Gateway {
    child: Child,
    addr: String,
}

impl Gateway {
    /// `sluice serve` with `config`, on a loopback port of its choosing;
    /// returns once it says where it listens.
    pub(crate) fn start(bin: &Path, config: &str, dir: &Path) -> Gateway {
        let file = dir.join(format!("sluice-{}.toml", rand_suffix()));
        std::fs::write(&file, config).unwrap();
        let mut child = Command::new(bin)
            .args(["serve", "--config"])
            .arg(&file)
            .args(["--listen", "127.0.0.1:0"])
            .env("SLUICE_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start sluice");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("sluice listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        let gw = Gateway { child, addr };
        gw.wait_ready();
        gw
    }

    /// Until `/readyz` answers 200 (every backend up), at most a minute.
    fn wait_ready(&self) {
        for _ in 0..600 {
            if let Ok(mut s) = TcpStream::connect(&self.addr) {
                let ask = format!(
                    "GET /readyz HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\r\n",
                    self.addr
                );
                let mut answer = String::new();
                if s.write_all(ask.as_bytes()).is_ok()
                    && s.read_to_string(&mut answer).is_ok()
                    && answer.starts_with("HTTP/1.1 200")
                {
                    return;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("the gateway was not ready within a minute");
    }

    pub(crate) fn session(&self, namespace: &str) -> Session {
        let stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_nodelay(true).unwrap();
        let mut s = Session {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
            host: self.addr.clone(),
            path: format!("/ns/{namespace}/mcp"),
            id: None,
            next: 0,
        };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "discovery-bench", "version": "0"}});
        s.request("initialize", init);
        s
    }

    /// User + system CPU seconds of the gateway process (children not
    /// included).
    pub(crate) fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after.split(' ').collect();
        // utime and stime: fields 14 and 15 of stat, 12 and 13 past the name.
        let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
        ticks / 100.0
    }

    pub(crate) fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        // SIGTERM: the gateway ends its children and exits.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

pub(crate) struct Session {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
    host: String,
    path: String,
    id: Option<String>,
    next: u64,
}

impl Session {
    /// One request; its JSON-RPC response. A connection the gateway
    /// closed while it sat idle (the bench tokenizes between requests) is
    /// opened again, once.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        match self.try_request(method, &params) {
            Ok(answer) => answer,
            Err(_) => {
                let stream = TcpStream::connect(&self.host).unwrap();
                stream.set_nodelay(true).unwrap();
                self.reader = BufReader::new(stream.try_clone().unwrap());
                self.stream = stream;
                self.try_request(method, &params).unwrap()
            }
        }
    }

    fn try_request(&mut self, method: &str, params: &Value) -> std::io::Result<Value> {
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
            .to_string();
        let session = self
            .id
            .as_ref()
            .map(|id| format!("mcp-session-id: {id}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "POST {} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n{session}content-length: {}\r\n\r\n",
            self.path,
            self.host,
            body.len()
        );
        self.stream.write_all(head.as_bytes())?;
        self.stream.write_all(body.as_bytes())?;
        let (headers, body) = self.response()?;
        if let Some(id) = headers.lines().find_map(|l| {
            l.strip_prefix("mcp-session-id: ")
                .or(l.strip_prefix("Mcp-Session-Id: "))
        }) {
            self.id = Some(id.trim().to_owned());
        }
        let text = String::from_utf8(body).unwrap();
        // An SSE answer: its last `data:` line is the response.
        let json = match text.lines().rev().find_map(|l| l.strip_prefix("data: ")) {
            Some(line) => line.to_owned(),
            None => text,
        };
        Ok(serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}")))
    }

    /// A `tools/call`; its response.
    pub(crate) fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        assert!(r.get("result").is_some(), "{tool}: {r}");
        r
    }

    /// Every page of `tools/list`, its tools as one result.
    pub(crate) fn whole_list(&mut self) -> Value {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..1000 {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let page = self.request("tools/list", params);
            tools.extend(page["result"]["tools"].as_array().unwrap().iter().cloned());
            match page["result"]["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => break,
            }
        }
        json!({ "tools": tools })
    }

    /// (head, body) of one response: a Content-Length or chunked body.
    fn response(&mut self) -> std::io::Result<(String, Vec<u8>)> {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let lower = head.to_lowercase();
        let length = lower
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .map(|n| n.trim().parse::<usize>().unwrap());
        let mut body = Vec::new();
        match length {
            Some(n) => {
                body.resize(n, 0);
                self.reader.read_exact(&mut body)?;
            }
            None => loop {
                let mut size = String::new();
                self.reader.read_line(&mut size)?;
                let n = usize::from_str_radix(size.trim(), 16).map_err(std::io::Error::other)?;
                let mut chunk = vec![0; n + 2];
                self.reader.read_exact(&mut chunk)?;
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            },
        }
        Ok((head, body))
    }
}
