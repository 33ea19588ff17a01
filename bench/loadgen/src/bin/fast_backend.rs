//! A minimal, fast Streamable HTTP MCP server for the forwarding benchmark:
//! stateless (no session id), JSON responses only, one `echo {text}` tool.
//! hyper directly, the request body parsed once with borrowed slices and
//! the echoed text copied into the answer as raw JSON, so the backend is
//! never what limits a forwarding measurement.
//!
//! ```text
//! fast_backend [--listen 127.0.0.1:0] [--threads 1]
//! ```
//! prints `fast_backend listening on ADDR` once it accepts connections.
//! POST /mcp serves JSON-RPC; GET and DELETE /mcp answer 405 (no streams,
//! no sessions); anything else 404. Only loopback addresses are accepted.

use std::borrow::Cow;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::net::TcpListener;

const VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
const MAX_BODY: usize = 1 << 20;

#[derive(Deserialize)]
struct Msg<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct InitParams<'a> {
    #[serde(rename = "protocolVersion", borrow)]
    protocol_version: Cow<'a, str>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct EchoArgs<'a> {
    #[serde(borrow)]
    text: &'a RawValue,
}

const TOOLS: &str = r#"{"tools":[{"name":"echo","description":"Returns the text it is given","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}"#;

fn ok(id: &str, result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

fn err(id: &str, code: i64, message: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":"{message}"}}}}"#)
}

/// The JSON-RPC answer to one message, or None for a notification/response.
fn answer(body: &[u8]) -> Result<Option<String>, String> {
    let msg: Msg<'_> =
        serde_json::from_slice(body).map_err(|_| err("null", -32700, "Parse error"))?;
    let (Some(id), Some(method)) = (msg.id, msg.method.as_deref()) else {
        return Ok(None);
    };
    let id = id.get();
    let params = msg.params.map(|p| p.get());
    Ok(Some(match method {
        "initialize" => {
            let asked = params.and_then(|p| serde_json::from_str::<InitParams<'_>>(p).ok());
            let version = asked
                .as_ref()
                .map(|a| a.protocol_version.as_ref())
                .filter(|v| VERSIONS.contains(v))
                .unwrap_or(VERSIONS[0]);
            ok(
                id,
                &format!(
                    r#"{{"protocolVersion":"{version}","capabilities":{{"tools":{{"listChanged":false}}}},"serverInfo":{{"name":"fast_backend","version":"0.1.0"}}}}"#
                ),
            )
        }
        "ping" => ok(id, "{}"),
        "tools/list" => ok(id, TOOLS),
        "tools/call" => match params.and_then(|p| serde_json::from_str::<CallParams<'_>>(p).ok()) {
            Some(c) if c.name == "echo" => {
                match c
                    .arguments
                    .and_then(|a| serde_json::from_str::<EchoArgs<'_>>(a.get()).ok())
                {
                    Some(a) => ok(
                        id,
                        &format!(
                            r#"{{"content":[{{"type":"text","text":{}}}]}}"#,
                            a.text.get()
                        ),
                    ),
                    None => err(id, -32602, "echo needs {text}"),
                }
            }
            Some(_) => err(id, -32602, "Unknown tool"),
            None => err(id, -32602, "Invalid params"),
        },
        _ => err(id, -32601, "Method not found"),
    }))
}

fn respond(status: StatusCode, body: Option<String>) -> Response<Full<Bytes>> {
    let mut r = Response::builder().status(status);
    if body.is_some() {
        r = r.header(header::CONTENT_TYPE, "application/json");
    }
    r.body(Full::new(body.map(Bytes::from).unwrap_or_default()))
        .expect("valid response")
}

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path() != "/mcp" {
        return Ok(respond(StatusCode::NOT_FOUND, None));
    }
    if req.method() != Method::POST {
        return Ok(respond(StatusCode::METHOD_NOT_ALLOWED, None));
    }
    let body = match http_body_util::Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => return Ok(respond(StatusCode::PAYLOAD_TOO_LARGE, None)),
    };
    Ok(match answer(&body) {
        Ok(Some(text)) => respond(StatusCode::OK, Some(text)),
        Ok(None) => respond(StatusCode::ACCEPTED, None),
        Err(text) => respond(StatusCode::BAD_REQUEST, Some(text)),
    })
}

fn main() {
    let mut listen: SocketAddr = "127.0.0.1:0".parse().expect("addr");
    let mut threads = 1usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => {
                listen = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| usage())
            }
            "--threads" => {
                threads = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| usage())
            }
            _ => usage(),
        }
    }
    if !listen.ip().is_loopback() {
        eprintln!("fast_backend: refusing to listen on a non-loopback address {listen}");
        std::process::exit(2);
    }
    let rt = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    }
    .enable_all()
    .build()
    .expect("tokio runtime");
    rt.block_on(async move {
        let listener = TcpListener::bind(listen).await.unwrap_or_else(|e| {
            eprintln!("fast_backend: bind {listen}: {e}");
            std::process::exit(1);
        });
        let addr = listener.local_addr().expect("local addr");
        println!("fast_backend listening on {addr}");
        let _ = std::io::stdout().flush();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(handle))
                    .await;
            });
        }
    });
}

fn usage() -> ! {
    eprintln!("usage: fast_backend [--listen 127.0.0.1:PORT] [--threads N]");
    std::process::exit(2);
}

#[cfg(test)]
mod tests {
    use super::answer;

    #[test]
    fn echo_and_lifecycle() {
        let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}"#;
        assert!(
            answer(init)
                .unwrap()
                .unwrap()
                .contains(r#""protocolVersion":"2025-06-18""#)
        );
        let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(answer(note).unwrap(), None);
        let call = br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"text":"h\"i"}}}"#;
        assert_eq!(
            answer(call).unwrap().unwrap(),
            r#"{"jsonrpc":"2.0","id":"a","result":{"content":[{"type":"text","text":"h\"i"}]}}"#
        );
        let bad = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope"}}"#;
        assert!(answer(bad).unwrap().unwrap().contains("-32602"));
        assert!(answer(b"{").is_err());
    }
}
