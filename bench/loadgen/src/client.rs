//! One virtual user's view of an MCP server over Streamable HTTP: one
//! HTTP/1.1 keep-alive connection (hyper's low-level client, no pool), the
//! session id and protocol version the server gave, and a JSON-RPC id
//! counter. Every reply is checked: HTTP 2xx, a JSON or SSE body holding a
//! JSON-RPC response with our id and a `result` (and for `tools/call`, no
//! `isError`). Anything else is a `Failure`, which the workloads count.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HOST};
use http::{HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::net::TcpStream;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// The newest legacy revision; servers answer with the one they speak.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// No request waits longer than this (the run stays bounded in time).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// For an `https://` URL: the CA (PEM) its certificate is checked against.
pub const CA_ENV: &str = "LOADGEN_CA_FILE";

/// Where requests go: a loopback address only.
pub struct Target {
    pub addr: SocketAddr,
    pub host: HeaderValue,
    pub path: String,
    /// `https://`: every connection opens with a TLS handshake (TLS 1.3,
    /// ALPN http/1.1), verified against the CA in `LOADGEN_CA_FILE`.
    pub tls: Option<tokio_rustls::TlsConnector>,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("addr", &self.addr)
            .field("path", &self.path)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// A client of the CA in `LOADGEN_CA_FILE` alone.
fn tls_connector() -> Result<tokio_rustls::TlsConnector, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let path = std::env::var(CA_ENV).map_err(|_| format!("an https:// URL needs {CA_ENV}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&path).map_err(|e| format!("{path}: {e}"))? {
        roots
            .add(cert.map_err(|e| format!("{path}: {e}"))?)
            .map_err(|e| format!("{path}: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

impl Target {
    pub fn parse(url: &str) -> Result<Arc<Target>, String> {
        let uri: http::Uri = url.parse().map_err(|e| format!("bad url {url}: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("http") => None,
            Some("https") => Some(tls_connector()?),
            _ => return Err(format!("{url}: only http:// and https:// are supported")),
        };
        let authority = uri.authority().ok_or_else(|| format!("{url}: no host"))?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let ip: IpAddr = if host == "localhost" {
            IpAddr::from([127, 0, 0, 1])
        } else {
            host.parse()
                .map_err(|_| format!("{url}: host must be a loopback IP"))?
        };
        // The benchmark only ever talks to servers on this machine.
        if !ip.is_loopback() {
            return Err(format!("{url}: refusing a non-loopback address"));
        }
        let port = authority
            .port_u16()
            .unwrap_or(if tls.is_some() { 443 } else { 80 });
        Ok(Arc::new(Target {
            addr: SocketAddr::new(ip, port),
            host: HeaderValue::from_str(authority.as_str()).map_err(|e| e.to_string())?,
            path: uri.path_and_query().map_or("/", |p| p.as_str()).to_owned(),
            tls,
        }))
    }
}

/// Why a request did not count as a success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    Connect,
    Transport,
    Timeout,
    Http(u16),
    BadBody,
    NoAnswer,
    RpcError(i64),
    ToolError,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Connect => write!(f, "connect"),
            Failure::Transport => write!(f, "transport"),
            Failure::Timeout => write!(f, "timeout"),
            Failure::Http(s) => write!(f, "http_{s}"),
            Failure::BadBody => write!(f, "bad_body"),
            Failure::NoAnswer => write!(f, "no_answer"),
            Failure::RpcError(c) => write!(f, "rpc_error_{c}"),
            Failure::ToolError => write!(f, "tool_error"),
        }
    }
}

/// HTTP/1.1 over `io`, its connection driven by a task of its own.
async fn handshake<IO>(io: IO) -> Result<SendRequest<Full<Bytes>>, Failure>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|_| Failure::Connect)?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// A raw HTTP reply.
pub struct Reply {
    pub status: StatusCode,
    pub session: Option<HeaderValue>,
    pub event_stream: bool,
    pub body: Bytes,
}

/// One keep-alive HTTP/1.1 connection, re-opened when the server closes it.
pub struct Conn {
    target: Arc<Target>,
    sender: Option<SendRequest<Full<Bytes>>>,
    pub reconnects: u64,
}

impl Conn {
    pub fn new(target: Arc<Target>) -> Conn {
        Conn {
            target,
            sender: None,
            reconnects: 0,
        }
    }

    async fn connect(&mut self) -> Result<(), Failure> {
        if self.sender.is_some() {
            self.reconnects += 1;
        }
        self.sender = None;
        let stream = tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect(self.target.addr))
            .await
            .map_err(|_| Failure::Timeout)?
            .map_err(|_| Failure::Connect)?;
        stream.set_nodelay(true).map_err(|_| Failure::Connect)?;
        let Some(tls) = &self.target.tls else {
            self.sender = Some(handshake(stream).await?);
            return Ok(());
        };
        let name = rustls::pki_types::ServerName::IpAddress(self.target.addr.ip().into());
        let stream = tokio::time::timeout(REQUEST_TIMEOUT, tls.connect(name, stream))
            .await
            .map_err(|_| Failure::Timeout)?
            .map_err(|_| Failure::Connect)?;
        self.sender = Some(handshake(stream).await?);
        Ok(())
    }

    /// Sends one request; a connection the server closed meanwhile is
    /// re-opened and the request sent once more.
    pub async fn send(
        &mut self,
        method: Method,
        body: Bytes,
        headers: &[(&'static str, HeaderValue)],
    ) -> Result<Reply, Failure> {
        let fut = async {
            for attempt in 0..2 {
                if self.sender.as_ref().is_none_or(|s| s.is_closed()) {
                    self.connect().await?;
                }
                let sender = self.sender.as_mut().expect("connected above");
                if sender.ready().await.is_err() {
                    self.connect().await?;
                }
                let mut req = Request::builder()
                    .method(method.clone())
                    .uri(self.target.path.as_str())
                    .header(HOST, self.target.host.clone());
                for (k, v) in headers {
                    req = req.header(*k, v.clone());
                }
                let req = req
                    .body(Full::new(body.clone()))
                    .map_err(|_| Failure::Transport)?;
                let sender = self.sender.as_mut().expect("connected above");
                let resp = match sender.send_request(req).await {
                    Ok(r) => r,
                    Err(_) if attempt == 0 => {
                        self.connect().await?;
                        continue;
                    }
                    Err(_) => return Err(Failure::Transport),
                };
                let status = resp.status();
                let session = resp.headers().get(SESSION_HEADER).cloned();
                let event_stream = resp
                    .headers()
                    .get(CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.starts_with("text/event-stream"));
                let body = resp
                    .into_body()
                    .collect()
                    .await
                    .map_err(|_| Failure::Transport)?
                    .to_bytes();
                return Ok(Reply {
                    status,
                    session,
                    event_stream,
                    body,
                });
            }
            Err(Failure::Transport)
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, fut).await {
            Ok(r) => r,
            Err(_) => {
                // The connection is in an unknown state: start over next time.
                self.sender = None;
                Err(Failure::Timeout)
            }
        }
    }
}

#[derive(Deserialize)]
struct RpcResponse<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<RpcErr>,
}

#[derive(Deserialize)]
struct RpcErr {
    #[serde(default)]
    code: i64,
}

#[derive(Deserialize)]
struct ToolResult {
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
}

#[derive(Deserialize)]
struct InitResult {
    #[serde(rename = "protocolVersion")]
    protocol_version: String,
}

/// The `result` of the response with JSON-RPC id `id` in a reply body.
pub fn answer(reply: &Reply, id: u64) -> Result<&str, Failure> {
    let body = std::str::from_utf8(&reply.body).map_err(|_| Failure::BadBody)?;
    if reply.event_stream {
        let want = id.to_string();
        // Skip the notifications and requests that may precede the answer.
        let found = sse_data(body).find(|d| {
            serde_json::from_str::<RpcResponse<'_>>(d)
                .is_ok_and(|r| r.id.map(|i| i.get()) == Some(want.as_str()))
        });
        answer_text(found.ok_or(Failure::NoAnswer)?, id)
    } else {
        answer_text(body.trim(), id)
    }
}

/// The `result` of one JSON-RPC response text, which must carry id `id`.
pub fn answer_text(text: &str, id: u64) -> Result<&str, Failure> {
    let r: RpcResponse<'_> = serde_json::from_str(text).map_err(|_| Failure::BadBody)?;
    if r.id.map(|i| i.get()) != Some(id.to_string().as_str()) {
        return Err(Failure::BadBody);
    }
    match (r.result, r.error) {
        (Some(result), None) => Ok(result.get()),
        (_, Some(e)) => Err(Failure::RpcError(e.code)),
        _ => Err(Failure::BadBody),
    }
}

/// For `tools/call`: a result flagged `isError` is a failure too.
pub fn check_tool_result(method: &str, result: &str) -> Result<(), Failure> {
    if method == "tools/call" {
        let r: ToolResult = serde_json::from_str(result).map_err(|_| Failure::BadBody)?;
        if r.is_error == Some(true) {
            return Err(Failure::ToolError);
        }
    }
    Ok(())
}

/// The data of each event of an SSE body (multi-line data joined with '\n').
/// Returned as borrowed slices when an event has one data line (the usual case).
fn sse_data(body: &str) -> impl Iterator<Item = &str> {
    // Events are separated by a blank line; MCP servers put one JSON message
    // on one `data:` line.
    body.split('\n').filter_map(|line| {
        let line = line.strip_suffix('\r').unwrap_or(line);
        line.strip_prefix("data:")
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
    })
}

/// An MCP client of one virtual user.
pub struct Mcp {
    pub conn: Conn,
    pub session: Option<HeaderValue>,
    pub version: Option<HeaderValue>,
    next_id: u64,
}

fn base_headers() -> Vec<(&'static str, HeaderValue)> {
    static AUTHORIZATION: std::sync::OnceLock<Option<HeaderValue>> = std::sync::OnceLock::new();
    let authorization = AUTHORIZATION.get_or_init(|| {
        let value = std::env::var("LOADGEN_AUTHORIZATION").ok()?;
        Some(HeaderValue::try_from(value).expect("LOADGEN_AUTHORIZATION is not a header value"))
    });
    let mut headers = vec![
        (
            CONTENT_TYPE.as_str(),
            HeaderValue::from_static("application/json"),
        ),
        (
            ACCEPT.as_str(),
            HeaderValue::from_static("application/json, text/event-stream"),
        ),
    ];
    if let Some(value) = authorization {
        headers.push(("authorization", value.clone()));
    }
    headers
}

impl Mcp {
    pub fn new(target: Arc<Target>) -> Mcp {
        Mcp {
            conn: Conn::new(target),
            session: None,
            version: None,
            next_id: 0,
        }
    }

    fn headers(&self) -> Vec<(&'static str, HeaderValue)> {
        let mut h = base_headers();
        if let Some(s) = &self.session {
            h.push((SESSION_HEADER, s.clone()));
        }
        if let Some(v) = &self.version {
            h.push((VERSION_HEADER, v.clone()));
        }
        h
    }

    /// `initialize` only (no `notifications/initialized`): opens a session
    /// on a stateful server. Returns the session id the server gave, if any.
    pub async fn initialize_only(&mut self) -> Result<Option<HeaderValue>, Failure> {
        self.session = None;
        self.version = None;
        self.next_id += 1;
        let id = self.next_id;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"{PROTOCOL_VERSION}","capabilities":{{}},"clientInfo":{{"name":"sluice-loadgen","version":"0.1.0"}}}}}}"#
        );
        let reply = self
            .conn
            .send(Method::POST, Bytes::from(body), &base_headers())
            .await?;
        if !reply.status.is_success() {
            return Err(Failure::Http(reply.status.as_u16()));
        }
        let result = answer(&reply, id)?;
        let init: InitResult = serde_json::from_str(result).map_err(|_| Failure::BadBody)?;
        self.version = HeaderValue::from_str(&init.protocol_version).ok();
        self.session = reply.session.clone();
        Ok(reply.session)
    }

    /// `initialize` then `notifications/initialized`, as every SDK client does.
    pub async fn initialize(&mut self) -> Result<Option<HeaderValue>, Failure> {
        let session = self.initialize_only().await?;
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let reply = self
            .conn
            .send(
                Method::POST,
                Bytes::from_static(note.as_bytes()),
                &self.headers(),
            )
            .await?;
        if !reply.status.is_success() {
            return Err(Failure::Http(reply.status.as_u16()));
        }
        Ok(session)
    }

    /// Ends the session the polite way (HTTP DELETE). Returns the status.
    pub async fn delete(&mut self) -> Result<u16, Failure> {
        let Some(session) = self.session.take() else {
            return Ok(0);
        };
        let mut h = vec![(SESSION_HEADER, session)];
        if let Some(v) = self.version.take() {
            h.push((VERSION_HEADER, v));
        }
        let reply = self.conn.send(Method::DELETE, Bytes::new(), &h).await?;
        Ok(reply.status.as_u16())
    }

    /// Sends a request and checks it succeeded; returns the raw reply too.
    pub async fn request_raw(
        &mut self,
        method: &str,
        params: &str,
    ) -> (Result<(), Failure>, Option<Reply>) {
        self.next_id += 1;
        let id = self.next_id;
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
        let reply = match self
            .conn
            .send(Method::POST, Bytes::from(body), &self.headers())
            .await
        {
            Ok(r) => r,
            Err(f) => return (Err(f), None),
        };
        if !reply.status.is_success() {
            let status = reply.status.as_u16();
            return (Err(Failure::Http(status)), Some(reply));
        }
        let outcome = answer(&reply, id).and_then(|result| check_tool_result(method, result));
        (outcome, Some(reply))
    }

    pub async fn request(&mut self, method: &str, params: &str) -> Result<(), Failure> {
        self.request_raw(method, params).await.0
    }
}

/// The server's own figures: a Prometheus text page (GET `target`), every
/// `sluice_*` or `process_*` sample but histogram buckets, by series name
/// (labels included).
pub async fn scrape_metrics(
    target: &Arc<Target>,
) -> Result<std::collections::BTreeMap<String, f64>, Failure> {
    let mut conn = Conn::new(target.clone());
    let reply = conn.send(Method::GET, Bytes::new(), &[]).await?;
    if !reply.status.is_success() {
        return Err(Failure::Http(reply.status.as_u16()));
    }
    let text = std::str::from_utf8(&reply.body).map_err(|_| Failure::BadBody)?;
    Ok(parse_metrics(text))
}

fn parse_metrics(text: &str) -> std::collections::BTreeMap<String, f64> {
    text.lines()
        .filter(|l| l.starts_with("sluice_") || l.starts_with("process_"))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let name = series.split('{').next()?;
            if name.ends_with("_bucket") {
                return None;
            }
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// The JSON-RPC error code in a reply body, if it holds an error response.
pub fn error_code(reply: &Reply) -> Option<i64> {
    let body = std::str::from_utf8(&reply.body).ok()?;
    let parse = |t: &str| {
        serde_json::from_str::<RpcResponse<'_>>(t)
            .ok()?
            .error
            .map(|e| e.code)
    };
    if reply.event_stream {
        sse_data(body).find_map(parse)
    } else {
        parse(body.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(body: &str, sse: bool) -> Reply {
        Reply {
            status: StatusCode::OK,
            session: None,
            event_stream: sse,
            body: Bytes::from(body.to_owned()),
        }
    }

    #[test]
    fn json_and_sse_answers() {
        let ok = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#;
        assert_eq!(answer(&reply(ok, false), 7).unwrap(), r#"{"content":[]}"#);
        assert_eq!(answer(&reply(ok, false), 8), Err(Failure::BadBody));
        let sse = format!(
            "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}}\n\nevent: message\r\ndata: {ok}\r\n\r\n"
        );
        assert!(answer(&reply(&sse, true), 7).is_ok());
        assert_eq!(
            answer(&reply("event: x\n\n", true), 7),
            Err(Failure::NoAnswer)
        );
        let err =
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"Session not found"}}"#;
        assert_eq!(
            answer(&reply(err, false), 7),
            Err(Failure::RpcError(-32001))
        );
        assert_eq!(error_code(&reply(err, false)), Some(-32001));
    }

    #[test]
    fn metrics_text() {
        let m = parse_metrics(
            "# HELP x y\nsluice_client_sessions_live 0\nsluice_backend_sessions_live{backend=\"c\"} 3\nsluice_request_duration_seconds_bucket{le=\"1\"} 5\nother 1\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m["sluice_client_sessions_live"], 0.0);
        assert_eq!(m[r#"sluice_backend_sessions_live{backend="c"}"#], 3.0);
    }

    #[test]
    fn only_loopback_targets() {
        assert!(Target::parse("http://127.0.0.1:8080/mcp").is_ok());
        assert!(Target::parse("http://[::1]:8080/mcp").is_ok());
        assert!(Target::parse("http://localhost:8080/mcp").is_ok());
        assert!(Target::parse("http://10.0.0.1:8080/mcp").is_err());
        assert!(Target::parse("https://127.0.0.1/mcp").is_err());
        let t = Target::parse("http://127.0.0.1:9/ns/a/mcp").unwrap();
        assert_eq!(t.path, "/ns/a/mcp");
        assert_eq!(t.host, "127.0.0.1:9");
    }
}
