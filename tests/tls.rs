//! `[server] tls` (issue 41, part 3): the gateway serves MCP over TLS with
//! a certificate from a CA made here, to curl and to a rustls client that
//! trust only that CA; a reload swaps the certificate for new connections
//! and keeps the open ones; a bad file on reload keeps the old one; plain
//! HTTP and a handshake that never ends are let go within the deadline.
//! Run with the default engine and with `SLUICE_HTTP=hyper` (scripts/test):
//! under both, hyper serves a TLS connection once its handshake is done.

mod support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use support::pki::Pki;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

/// A gateway on TLS, its files, and the CA its clients trust.
struct Tls {
    gw: Gateway,
    /// The files, read again at each reload.
    _dir: tempdir::Dir,
    addr: SocketAddr,
    pki: Pki,
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
    /// The certificate served now (PEM).
    served: String,
}

const HEADER_READ_TIMEOUT: &str = "1s";

impl Tls {
    /// Writes the CA, a certificate and key, and starts the demo backend
    /// behind `[server] tls`; waits until `/readyz` answers over TLS.
    async fn start() -> Tls {
        let pki = Pki::new();
        let dir = tempdir::Dir::new();
        let (cert_pem, key_pem) = pki.issue_as("127.0.0.1", "sluice first", Some(1001));
        let cert = tempdir::write(&dir, "cert.pem", &cert_pem);
        let key = tempdir::write(&dir, "key.pem", &key_pem);
        let ca = tempdir::write(&dir, "ca.pem", &pki.ca_pem);
        let toml = format!(
            "[server]\nheader_read_timeout = \"{HEADER_READ_TIMEOUT}\"\nmax_connections = 8\nmax_body_bytes = 33554432\n\
             tls = {{ cert_file = \"{}\", key_file = \"{}\" }}\n{}",
            cert.display(),
            key.display(),
            demo_backend("demo")
        );
        let gw = Gateway::start_at(&toml, &[], "127.0.0.1:0");
        let addr: SocketAddr = gw
            .base
            .strip_prefix("https://")
            .unwrap_or_else(|| panic!("the readiness line says https: {}", gw.base))
            .parse()
            .unwrap();
        let tls = Tls {
            gw,
            _dir: dir,
            addr,
            pki,
            cert,
            key,
            ca,
            served: cert_pem,
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut c) = tls.connect().await
                && c.get("/readyz").await.0 == 200
            {
                break tls;
            }
            assert!(tokio::time::Instant::now() < deadline, "never ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn connect(&self) -> std::io::Result<Client> {
        Client::connect(self.addr, &self.pki.ca_pem, &[]).await
    }

    async fn metric(&self, key: &str) -> f64 {
        let (status, body) = self.connect().await.unwrap().get("/metrics").await;
        assert_eq!(status, 200);
        let metrics = Metrics::parse(&body);
        match key.contains('{') {
            true => metrics.get_or_untouched(key),
            false => metrics.get(key),
        }
    }

    /// Writes the files, sends SIGHUP, and waits for the reload to be
    /// counted under `result`.
    async fn reload(&self, cert: &str, key: &str, result: &str) {
        let counted = format!(r#"sluice_config_reloads_total{{result="{result}"}}"#);
        let before = self.metric(&counted).await;
        std::fs::write(&self.cert, cert).unwrap();
        std::fs::write(&self.key, key).unwrap();
        // SAFETY: our own child.
        unsafe {
            libc::kill(self.gw.pid() as i32, libc::SIGHUP);
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.metric(&counted).await <= before {
            assert!(tokio::time::Instant::now() < deadline, "reload not counted");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// One TLS connection, kept alive, and what its handshake saw.
struct Client {
    send: SendRequest<Full<Bytes>>,
    leaf: Vec<u8>,
    alpn: Option<Vec<u8>>,
    version: rustls::ProtocolVersion,
    host: String,
    session: Option<String>,
}

impl Client {
    /// Trusts `ca` alone; `versions` empty: 1.3 and 1.2.
    async fn connect(
        addr: SocketAddr,
        ca: &str,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> std::io::Result<Client> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca.as_bytes()).unwrap())
            .unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider);
        let builder = match versions {
            [] => builder.with_safe_default_protocol_versions(),
            v => builder.with_protocol_versions(v),
        };
        let mut config = builder
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(addr).await?;
        let name = ServerName::IpAddress(addr.ip().into());
        let tls = tokio::time::timeout(Duration::from_secs(10), connector.connect(name, tcp))
            .await
            .map_err(|_| std::io::Error::other("handshake timed out"))??;
        let (_, conn) = tls.get_ref();
        let leaf = conn.peer_certificates().unwrap()[0].to_vec();
        let alpn = conn.alpn_protocol().map(<[u8]>::to_vec);
        let version = conn.protocol_version().unwrap();
        let (send, driver) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(driver);
        Ok(Client {
            send,
            leaf,
            alpn,
            version,
            host: addr.to_string(),
            session: None,
        })
    }

    async fn send(&mut self, req: http::Request<Full<Bytes>>) -> (u16, http::HeaderMap, String) {
        let call = async {
            self.send.ready().await.unwrap();
            let resp = self.send.send_request(req).await.unwrap();
            let (parts, body) = resp.into_parts();
            let body = body.collect().await.unwrap().to_bytes();
            (
                parts.status.as_u16(),
                parts.headers,
                String::from_utf8_lossy(&body).into_owned(),
            )
        };
        tokio::time::timeout(Duration::from_secs(20), call)
            .await
            .expect("an answer within 20 s")
    }

    async fn get(&mut self, path: &str) -> (u16, String) {
        let req = http::Request::get(path)
            .header("host", &self.host)
            .body(Full::new(Bytes::new()))
            .unwrap();
        let (status, _, body) = self.send(req).await;
        (status, body)
    }

    /// POSTs a JSON-RPC message to `/mcp` on this connection's session.
    async fn post(&mut self, msg: Value) -> (u16, Value) {
        let mut req = http::Request::post("/mcp")
            .header("host", &self.host)
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH);
        if let Some(s) = &self.session {
            req = req.header("mcp-session-id", s);
        }
        let req = req.body(Full::new(Bytes::from(msg.to_string()))).unwrap();
        let (status, headers, body) = self.send(req).await;
        if let Some(id) = headers.get("mcp-session-id") {
            self.session = Some(id.to_str().unwrap().to_owned());
        }
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    async fn initialize(&mut self) {
        let (status, reply) = self.post(init_request(1)).await;
        assert_eq!(status, 200, "{reply}");
        assert!(self.session.is_some());
    }

    async fn echo(&mut self, id: u64, text: &str) -> String {
        let call = json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"demo__echo","arguments":{"text":text}}});
        let (status, reply) = self.post(call).await;
        assert_eq!(status, 200, "{reply}");
        text_of(&reply).to_owned()
    }
}

/// curl, trusting the test's CA alone, initializes and lists the tools;
/// a rustls client does so over TLS 1.3 and over 1.2, ALPN http/1.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_and_a_rustls_client_verify_against_the_test_ca() {
    let tls = Tls::start().await;
    let url = format!("https://{}/mcp", tls.addr);
    let curl = |args: &[&str]| {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "20", "--cacert"])
            .arg(&tls.ca)
            .args(["-H", "content-type: application/json"])
            .args(["-H", &format!("accept: {ACCEPT_BOTH}")])
            .args(args)
            .output()
            .expect("curl runs");
        assert!(
            out.status.success(),
            "curl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let headers = curl(&[
        "-D",
        "-",
        "-o",
        "/dev/null",
        "-d",
        &init_request(1).to_string(),
        &url,
    ]);
    let session = headers
        .lines()
        .find_map(|l| {
            l.strip_prefix("mcp-session-id: ")
                .or_else(|| l.strip_prefix("Mcp-Session-Id: "))
        })
        .unwrap_or_else(|| panic!("no session id in {headers}"))
        .trim()
        .to_owned();
    let list = json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}).to_string();
    let session_header = format!("mcp-session-id: {session}");
    for version in ["--tlsv1.3", "--tls-max"] {
        let mut args = vec![version];
        if version == "--tls-max" {
            args.push("1.2");
        }
        args.extend(["-H", &session_header, "-d", &list, &url]);
        let body = curl(&args);
        let reply: Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{body}"));
        let tools = reply["result"]["tools"].as_array().unwrap();
        assert!(tools.iter().any(|t| t["name"] == "demo__echo"), "{reply}");
    }
    // The status page says what the listener speaks.
    let (status, page) = tls.connect().await.unwrap().get("/status").await;
    assert_eq!(status, 200);
    assert!(page.contains("listener https"), "{page}");
    // Without the CA, curl refuses the certificate: it is verified.
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", &url])
        .output()
        .unwrap();
    assert!(!out.status.success());

    for (versions, want) in [
        (
            &[&rustls::version::TLS13][..],
            rustls::ProtocolVersion::TLSv1_3,
        ),
        (
            &[&rustls::version::TLS12][..],
            rustls::ProtocolVersion::TLSv1_2,
        ),
    ] {
        let mut c = Client::connect(tls.addr, &tls.pki.ca_pem, versions)
            .await
            .unwrap();
        assert_eq!(c.version, want);
        assert_eq!(c.alpn.as_deref(), Some(&b"http/1.1"[..]));
        c.initialize().await;
        // Several calls on one connection: keep-alive over TLS.
        for id in 2..5 {
            assert_eq!(c.echo(id, &format!("hi {id}")).await, format!("hi {id}"));
        }
    }
}

/// A reload swaps the certificate: new connections get the new one, a
/// connection open before it goes on; a bad file (not PEM, or a key of
/// another certificate) is refused and the certificate in force kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_swaps_the_certificate_and_keeps_open_connections() {
    let mut tls = Tls::start().await;
    let mut open = tls.connect().await.unwrap();
    assert_eq!(open.leaf, der(&tls.served));
    open.initialize().await;
    assert_eq!(open.echo(2, "before").await, "before");

    let (cert, key) = tls.pki.issue_as("127.0.0.1", "sluice second", Some(2002));
    tls.reload(&cert, &key, "ok").await;
    let fresh = tls.connect().await.unwrap();
    assert_eq!(
        fresh.leaf,
        der(&cert),
        "a new connection gets the new certificate"
    );
    assert_ne!(fresh.leaf, open.leaf);
    // The connection made before the reload is served on, as it was.
    assert_eq!(open.echo(3, "after").await, "after");
    tls.served = cert;

    let (other_cert, _) = tls.pki.issue_as("127.0.0.1", "sluice third", Some(3003));
    let (_, other_key) = tls.pki.issue_as("127.0.0.1", "sluice fourth", Some(4004));
    for (cert, key) in [
        ("not a certificate".to_owned(), "nor a key".to_owned()),
        (other_cert, other_key),
    ] {
        tls.reload(&cert, &key, "error").await;
        let c = tls.connect().await.unwrap();
        assert_eq!(
            c.leaf,
            der(&tls.served),
            "the bad file left the old one served"
        );
    }
    assert_eq!(open.echo(4, "still").await, "still");
}

/// An SSE reply over TLS: each event reaches the client as it is sent,
/// not when the next write pushes it out (a TLS record held back would
/// leave the first progress event waiting for the result).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_reply_over_tls_delivers_each_event_as_it_comes() {
    let tls = Tls::start().await;
    let mut c = tls.connect().await.unwrap();
    c.initialize().await;
    let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{
        "name":"demo__sleep_ms","arguments":{"ms":3000},"_meta":{"progressToken":"p"}}});
    let req = http::Request::post("/mcp")
        .header("host", &c.host)
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("mcp-session-id", c.session.clone().unwrap())
        .body(Full::new(Bytes::from(call.to_string())))
        .unwrap();
    c.send.ready().await.unwrap();
    let resp = c.send.send_request(req).await.unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut body = resp.into_body();
    let mut seen = String::new();
    while !seen.contains("notifications/progress") {
        let frame = tokio::time::timeout(Duration::from_secs(20), body.frame())
            .await
            .expect("no progress event at all")
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(frame.data_ref().unwrap()));
    }
    // The event came while the call still ran: the backend's call is
    // still pending, and its result not yet sent.
    assert!(!seen.contains("\"result\""), "{seen}");
    let pending = r#"sluice_bounded_entries{map="pending_calls",owner="demo"}"#;
    assert_eq!(
        tls.metric(pending).await,
        1.0,
        "the call ended before its event came"
    );
    let rest = tokio::time::timeout(Duration::from_secs(20), body.collect())
        .await
        .unwrap()
        .unwrap()
        .to_bytes();
    seen.push_str(&String::from_utf8_lossy(&rest));
    assert!(seen.contains("\"result\""), "{seen}");
}

/// A reply larger than the socket takes at once, to a client that reads
/// it only later, arrives whole: what TLS held back when the socket was
/// full is sent without waiting for the client's next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_reply_to_a_late_reader_arrives_whole() {
    let tls = Tls::start().await;
    let mut c = tls.connect().await.unwrap();
    c.initialize().await;
    let text = "x".repeat(12 << 20);
    let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
        "params":{"name":"demo__echo","arguments":{"text":text}}})
    .to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         accept: {ACCEPT_BOTH}\r\nmcp-session-id: {}\r\ncontent-length: {}\r\n\r\n",
        tls.addr,
        c.session.as_ref().unwrap(),
        call.len()
    );
    let mut raw = tls_stream(&tls).await;
    raw.write_all(head.as_bytes()).await.unwrap();
    raw.write_all(call.as_bytes()).await.unwrap();
    raw.flush().await.unwrap();
    // Nobody reads until the reply is made (the call is counted when its
    // outcome is known, and written from then on): 12 MiB fill the
    // socket's buffers long before the reader starts.
    let answered = r#"sluice_requests_total{era="legacy",method="tools/call",outcome="ok"}"#;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while tls.metric(answered).await < 1.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the call never ended"
        );
        tokio::task::yield_now().await;
    }
    let read = async {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = raw.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed early");
            got.extend_from_slice(&buf[..n]);
            let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .expect("a reply of known length")
                .parse()
                .unwrap();
            if got.len() >= end + 4 + length {
                return got[end + 4..end + 4 + length].to_vec();
            }
        }
    };
    let body = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("the whole reply within 10 s");
    let reply: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(text_of(&reply).len(), text.len());
}

/// A TLS stream to the gateway, trusting the test's CA.
async fn tls_stream(tls: &Tls) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(tls.pki.ca_pem.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(tls.addr).await.unwrap();
    let name = ServerName::IpAddress(tls.addr.ip().into());
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap()
}

/// Reads what the gateway sends until it closes; None if it is still
/// open after `limit`.
async fn until_closed(tcp: &mut TcpStream, limit: Duration) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 1024];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(limit, read).await.ok().map(|()| got)
}

/// Plain HTTP to the TLS port is answered 400 and closed at once; other
/// bytes, or a handshake begun and never finished, are closed within the
/// header-read timeout; none keeps its place, and TLS clients are served
/// throughout (8 places, more refusals than that).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_and_stalled_handshakes_are_let_go_in_time() {
    let tls = Tls::start().await;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         content-length: 2\r\n\r\n{{}}",
        tls.addr
    );
    for _ in 0..10 {
        let mut tcp = TcpStream::connect(tls.addr).await.unwrap();
        tcp.write_all(request.as_bytes()).await.unwrap();
        let got = until_closed(&mut tcp, Duration::from_secs(5))
            .await
            .expect("closed, not left open");
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
        assert!(text.contains("https://"), "{text}");
    }
    // Not a handshake, nor HTTP: closed at once.
    let mut tcp = TcpStream::connect(tls.addr).await.unwrap();
    tcp.write_all(&[0u8; 16]).await.unwrap();
    let got = until_closed(&mut tcp, Duration::from_secs(5)).await;
    assert_eq!(got.as_deref(), Some(&[][..]));

    // Handshakes begun (a record header, no more) and silent connections:
    // more than the places there are, all let go by the deadline.
    let started = tokio::time::Instant::now();
    let mut stalled = Vec::new();
    for i in 0..6 {
        let mut tcp = TcpStream::connect(tls.addr).await.unwrap();
        if i % 2 == 0 {
            tcp.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00])
                .await
                .unwrap();
        }
        stalled.push(tcp);
    }
    for tcp in &mut stalled {
        assert!(
            until_closed(tcp, Duration::from_secs(5)).await.is_some(),
            "a stalled handshake still open"
        );
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(800),
        "closed before the deadline: {waited:?}"
    );
    let mut c = tls.connect().await.unwrap();
    c.initialize().await;
    assert_eq!(c.echo(2, "served").await, "served");
    // Every refused or stalled connection gave its place back: open now
    // are this client's and the one reading the metric.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let open = tls.metric("sluice_connections_open").await;
        if open <= 2.0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{open} connections still open"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A bad file at start: exit 2, the message naming the key.
#[test]
fn a_bad_file_at_start_is_a_config_error() {
    let dir = tempdir::Dir::new();
    let cert = tempdir::write(&dir, "cert.pem", "not pem");
    let (_, key) = Pki::new().issue("x");
    let key = tempdir::write(&dir, "key.pem", &key);
    let toml = format!(
        "[server]\ntls = {{ cert_file = \"{}\", key_file = \"{}\" }}\n{}",
        cert.display(),
        key.display(),
        demo_backend("demo")
    );
    let config = tempdir::write(&dir, "sluice.toml", &toml);
    for command in ["serve", "check"] {
        let out = Command::new(BIN)
            .args([command, "--config", config.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{command}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("server.tls.cert_file"), "{command}: {err}");
    }
}
