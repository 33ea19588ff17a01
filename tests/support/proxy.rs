//! A forward proxy on loopback that counts what passes through it: requests
//! in absolute form (`POST http://host:port/path`), forwarded to their
//! origin in origin form, and CONNECT tunnels, each by the `host:port` it
//! was asked for. It may demand Basic credentials, answering 407 without
//! them, or serve one request per connection as tinyproxy does. Threads of
//! its own; stops accepting when dropped.
//!
//! Also Debian's tinyproxy itself (`Tinyproxy`), run with a config of the
//! test's own.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default, Debug, Clone)]
pub struct Seen {
    /// Requests forwarded, by the `host:port` of their absolute-form target.
    pub forwarded: HashMap<String, usize>,
    /// Tunnels opened, by the `host:port` CONNECT named.
    pub tunnels: HashMap<String, usize>,
    /// Requests refused with 407.
    pub refused: usize,
    /// Every request head as it arrived (CONNECT's included).
    pub heads: Vec<String>,
    /// One request per connection (`once`): requests that came on a
    /// connection after its one answer, each refused with 400.
    pub after_answer: usize,
}

/// How a connection is served.
#[derive(Clone, Copy)]
enum Mode {
    /// Requests one after another, each counted; an origin connection
    /// kept for the next.
    Keep,
    /// One request (see `CountingProxy::once`).
    Once,
}

/// How long a `once` proxy keeps a connection open after its answer, at
/// most (it closes sooner when the client does).
const LINGER: Duration = Duration::from_secs(5);

pub struct CountingProxy {
    pub addr: String,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
}

impl CountingProxy {
    /// A proxy that takes anyone.
    pub fn open() -> CountingProxy {
        Self::start(None, Mode::Keep)
    }

    /// A proxy that serves one request per connection, as tinyproxy does:
    /// forwarded with `Connection: close`, its answer relayed with the
    /// origin's `Connection`, `Keep-Alive` and `Proxy-Connection` dropped
    /// and none of its own, so it never says whether it keeps the
    /// connection. The connection is closed once the client closes it, or
    /// `LINGER` after the answer (tinyproxy closes once its origin has,
    /// which may be late), and a request that comes on it meanwhile is
    /// answered 400 (counted in `after_answer`): the reported symptom of
    /// tinyproxy relaying such a request to its origin's closing
    /// connection.
    pub fn once() -> CountingProxy {
        Self::start(None, Mode::Once)
    }

    /// A proxy that wants `Proxy-Authorization: Basic base64(user:pass)`.
    pub fn with_basic(user: &str, pass: &str) -> CountingProxy {
        use base64::Engine as _;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        Self::start(Some(format!("Basic {token}")), Mode::Keep)
    }

    fn start(wanted: Option<String>, mode: Mode) -> CountingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (s, wanted) = (s.clone(), wanted.clone());
                std::thread::spawn(move || match mode {
                    Mode::Keep => serve(conn, &s, wanted.as_deref()),
                    Mode::Once => serve_once(conn, &s),
                });
            }
        });
        CountingProxy { addr, seen, stop }
    }

    /// `http://addr`, for `HTTP_PROXY` or a backend's `proxy`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap().clone()
    }

    /// Requests forwarded and tunnels opened, to anywhere.
    pub fn total(&self) -> usize {
        let seen = self.seen();
        seen.forwarded.values().sum::<usize>() + seen.tunnels.values().sum::<usize>()
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop to see the flag.
        let _ = TcpStream::connect(&self.addr);
    }
}

/// One client connection: requests read one after another, each counted.
fn serve(client: TcpStream, seen: &Mutex<Seen>, wanted: Option<&str>) {
    let mut reader = BufReader::new(client.try_clone().unwrap());
    let mut client = client;
    let mut upstream: Option<(String, TcpStream)> = None;
    while let Some(head) = read_head(&mut reader) {
        seen.lock().unwrap().heads.push(head.clone());
        let request = Request::parse(&head);
        let (method, target) = (request.method.as_str(), request.target.as_str());
        if let Some(wanted) = wanted
            && request.header("proxy-authorization") != Some(wanted)
        {
            seen.lock().unwrap().refused += 1;
            let _ = client.write_all(
                b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            break;
        }
        if method == "CONNECT" {
            let Some(origin) = dial(&mut client, target) else {
                break;
            };
            tally(&mut seen.lock().unwrap().tunnels, target);
            client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .unwrap();
            let leftover = reader.buffer().to_vec();
            let mut to_origin = origin.try_clone().unwrap();
            to_origin.write_all(&leftover).unwrap();
            pipe_both(client, origin);
            return;
        }
        let Some((authority, path)) = request.split_target(&mut client) else {
            break;
        };
        tally(&mut seen.lock().unwrap().forwarded, authority);
        if upstream.as_ref().is_none_or(|(a, _)| a != authority) {
            let Some(origin) = dial(&mut client, authority) else {
                break;
            };
            // The origin's answers go back as they come (an SSE stream
            // included); requests go the other way, one head at a time.
            let (mut from, mut to) = (origin.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from, &mut to);
                let _ = to.shutdown(Shutdown::Write);
            });
            upstream = Some((authority.to_owned(), origin));
        }
        let (_, origin) = upstream.as_mut().unwrap();
        let out = request.forwarded(path, "", |k| {
            k == "proxy-authorization" || k == "proxy-connection"
        });
        if !request.pass_on(out, &mut reader, origin) {
            break;
        }
    }
    if let Some((_, origin)) = upstream {
        let _ = origin.shutdown(Shutdown::Both);
    }
    let _ = client.shutdown(Shutdown::Both);
}

/// One request on the connection, then nothing: see `CountingProxy::once`.
fn serve_once(client: TcpStream, seen: &Mutex<Seen>) {
    let mut reader = BufReader::new(client.try_clone().unwrap());
    let mut client = client;
    let Some(head) = read_head(&mut reader) else {
        return;
    };
    seen.lock().unwrap().heads.push(head.clone());
    let request = Request::parse(&head);
    let Some((authority, path)) = request.split_target(&mut client) else {
        return;
    };
    let Some(mut origin) = dial(&mut client, authority) else {
        return;
    };
    tally(&mut seen.lock().unwrap().forwarded, authority);
    let out = request.forwarded(path, "Connection: close\r\n", hop_by_hop);
    if !request.pass_on(out, &mut reader, &mut origin) {
        return;
    }
    // The answer: its head without what it said of the connection, then
    // its body as it comes, until the origin closes.
    let mut from = BufReader::new(origin);
    let Some(answer) = read_head(&mut from) else {
        return;
    };
    let mut head = String::new();
    for line in answer.split("\r\n") {
        let name = line.split(':').next().unwrap_or("").trim();
        if !hop_by_hop(&name.to_ascii_lowercase()) {
            head.push_str(&format!("{line}\r\n"));
        }
    }
    head.push_str("\r\n");
    if client.write_all(head.as_bytes()).is_err() {
        return;
    }
    let _ = std::io::copy(&mut from, &mut client);
    // Open until the client closes, within a bound; a request meanwhile
    // gets the 400.
    let _ = client.set_read_timeout(Some(LINGER));
    if let Some(late) = read_head(&mut reader) {
        let mut seen = seen.lock().unwrap();
        seen.after_answer += 1;
        seen.heads.push(late);
        drop(seen);
        let _ = client.write_all(BAD_REQUEST);
    }
    let _ = client.shutdown(Shutdown::Both);
}

const BAD_REQUEST: &[u8] =
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// A request head, parsed.
struct Request {
    method: String,
    target: String,
    /// Names in lower case.
    headers: Vec<(String, String)>,
}

impl Request {
    fn parse(head: &str) -> Request {
        let mut lines = head.split("\r\n");
        let mut parts = lines.next().unwrap_or_default().split(' ');
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        Request {
            method: method.to_owned(),
            target: target.to_owned(),
            headers: lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
                .collect(),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// An absolute-form target's authority and path (`/` when it has
    /// none); None, after a 400 to the client, for any other.
    fn split_target(&self, client: &mut TcpStream) -> Option<(&str, &str)> {
        let Some(rest) = self.target.strip_prefix("http://") else {
            let _ = client.write_all(BAD_REQUEST);
            return None;
        };
        Some(match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        })
    }

    /// Its head as forwarded to `path` in origin form: `extra` header
    /// lines, then its own but those `drop` names.
    fn forwarded(&self, path: &str, extra: &str, drop: impl Fn(&str) -> bool) -> String {
        let mut out = format!("{} {path} HTTP/1.1\r\n{extra}", self.method);
        for (k, v) in self.headers.iter().filter(|(k, _)| !drop(k)) {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out + "\r\n"
    }

    /// Writes `head` and the body (its `Content-Length` of bytes from
    /// `reader`) to `origin`; false when that failed.
    fn pass_on(
        &self,
        head: String,
        reader: &mut BufReader<TcpStream>,
        origin: &mut TcpStream,
    ) -> bool {
        let length: u64 = self
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        origin.write_all(head.as_bytes()).is_ok()
            && std::io::copy(&mut reader.take(length), origin).is_ok()
    }
}

/// Headers about the connection, which a proxy does not pass on.
fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection" | "keep-alive" | "proxy-connection" | "proxy-authorization"
    )
}

/// Counts one under `key`.
fn tally(counts: &mut HashMap<String, usize>, key: &str) {
    *counts.entry(key.to_owned()).or_default() += 1;
}

/// A connection to `to`; None, after a 502 to the client, when it fails.
fn dial(client: &mut TcpStream, to: &str) -> Option<TcpStream> {
    let origin = TcpStream::connect(to).ok();
    if origin.is_none() {
        let _ = client.write_all(
            b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    }
    origin
}

/// A request head, without its blank line; None at the connection's end.
fn read_head(reader: &mut BufReader<TcpStream>) -> Option<String> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" || line == "\n" {
            return Some(head.trim_end().to_owned());
        }
        head.push_str(&line);
    }
}

fn pipe_both(a: TcpStream, b: TcpStream) {
    let (mut a2, mut b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
    let t = std::thread::spawn(move || {
        let _ = std::io::copy(&mut a2, &mut b2);
        let _ = b2.shutdown(Shutdown::Write);
    });
    let (mut a, mut b) = (a, b);
    let _ = std::io::copy(&mut b, &mut a);
    let _ = a.shutdown(Shutdown::Write);
    let _ = t.join();
}

/// Debian's tinyproxy (`scripts/test` installs it) on a loopback port of
/// its own, in the foreground with a config in a temporary directory. Its
/// shell wrapper ends it (by its PID) when the wrapper's stdin closes: on
/// drop, or when the test process dies.
pub struct Tinyproxy {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    pub port: u16,
    _dir: super::tempdir::Dir,
}

impl Tinyproxy {
    pub fn start() -> Tinyproxy {
        let dir = super::tempdir::Dir::new();
        let port = super::free_port();
        let conf = format!(
            "Port {port}\nListen 127.0.0.1\nAllow 127.0.0.1\nTimeout 30\nMaxClients 50\nLogLevel Error\n"
        );
        let conf = super::tempdir::write(&dir, "tinyproxy.conf", &conf);
        // (An asynchronous list's stdin is /dev/null: the pipe goes by fd 3.)
        const WRAPPER: &str = r#"exec 3<&0
tinyproxy -d -c "$1" 3<&- &
r=$!
(cat <&3 >/dev/null; kill "$r" 2>/dev/null) &
wait "$r""#;
        let mut child = std::process::Command::new("sh")
            .args(["-c", WRAPPER, "sh"])
            .arg(&conf)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("sh");
        let stdin = child.stdin.take();
        super::wait_until(Duration::from_secs(10), || {
            assert!(
                child.try_wait().unwrap().is_none(),
                "tinyproxy did not start (scripts/test installs it: scripts/need-debian tinyproxy:tinyproxy)"
            );
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Tinyproxy {
            child,
            stdin,
            port,
            _dir: dir,
        }
    }

    /// `http://127.0.0.1:port`, for a backend's `proxy`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
