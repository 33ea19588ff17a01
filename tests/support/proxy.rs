//! A forward proxy on loopback that counts what passes through it: requests
//! in absolute form (`POST http://host:port/path`), forwarded to their
//! origin in origin form, and CONNECT tunnels, each by the `host:port` it
//! was asked for. It may demand Basic credentials, answering 407 without
//! them. Threads of its own; stops accepting when dropped.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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
}

pub struct CountingProxy {
    pub addr: String,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
}

impl CountingProxy {
    /// A proxy that takes anyone.
    pub fn open() -> CountingProxy {
        Self::start(None)
    }

    /// A proxy that wants `Proxy-Authorization: Basic base64(user:pass)`.
    pub fn with_basic(user: &str, pass: &str) -> CountingProxy {
        use base64::Engine as _;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        Self::start(Some(format!("Basic {token}")))
    }

    fn start(wanted: Option<String>) -> CountingProxy {
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
                std::thread::spawn(move || serve(conn, &s, wanted.as_deref()));
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
        let mut lines = head.split("\r\n");
        let request_line = lines.next().unwrap_or_default().to_owned();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let mut parts = request_line.split(' ');
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if let Some(wanted) = wanted
            && header("proxy-authorization") != Some(wanted)
        {
            seen.lock().unwrap().refused += 1;
            let _ = client.write_all(
                b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            break;
        }
        if method == "CONNECT" {
            let Ok(origin) = TcpStream::connect(target) else {
                let _ = client.write_all(
                    b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                break;
            };
            *seen
                .lock()
                .unwrap()
                .tunnels
                .entry(target.to_owned())
                .or_default() += 1;
            client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .unwrap();
            let leftover = reader.buffer().to_vec();
            let mut to_origin = origin.try_clone().unwrap();
            to_origin.write_all(&leftover).unwrap();
            pipe_both(client, origin);
            return;
        }
        let Some(rest) = target.strip_prefix("http://") else {
            let _ = client.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            break;
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        *seen
            .lock()
            .unwrap()
            .forwarded
            .entry(authority.to_owned())
            .or_default() += 1;
        if upstream.as_ref().is_none_or(|(a, _)| a != authority) {
            let Ok(origin) = TcpStream::connect(authority) else {
                let _ = client.write_all(
                    b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
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
        let mut out = format!("{method} {path} HTTP/1.1\r\n");
        for (k, v) in &headers {
            if k != "proxy-authorization" && k != "proxy-connection" {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
        }
        out.push_str("\r\n");
        if origin.write_all(out.as_bytes()).is_err() {
            break;
        }
        let length: u64 = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = (&mut reader).take(length);
        if std::io::copy(&mut body, origin).is_err() {
            break;
        }
    }
    if let Some((_, origin)) = upstream {
        let _ = origin.shutdown(Shutdown::Both);
    }
    let _ = client.shutdown(Shutdown::Both);
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
