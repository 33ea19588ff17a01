//! Issue 38 item 5: a backend request sent on a reused keep-alive
//! connection that the backend closes at that moment (uvicorn, every
//! Python MCP server, closes connections idle for 5 s) is sent again on a
//! new connection, instead of failing the client's call. The backend here
//! makes the race certain: it answers one request per connection, keeping
//! the connection open in its answer, and resets it as the next request
//! arrives, unread. Run on both HTTP engines by `scripts/test`.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use support::*;

/// Requests answered and connections accepted by the backend.
#[derive(Default)]
struct Counts {
    answered: AtomicUsize,
    accepted: AtomicUsize,
}

/// A request's head and its `Content-Length` body, off the socket.
async fn read_request(tcp: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut wire = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(at) = wire.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = tcp.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        wire.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&wire[..end]).into_owned();
    let length = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while wire.len() < end + length {
        let n = tcp.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        wire.extend_from_slice(&buf[..n]);
    }
    Some((head, wire[end..end + length].to_vec()))
}

/// A legacy MCP server without sessions, one tool (`echo`).
fn answer(head: &str, body: &[u8]) -> String {
    let respond = |status: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    if !head.starts_with("POST ") {
        return respond("405 Method Not Allowed", "");
    }
    let Ok(msg) = serde_json::from_slice::<Value>(body) else {
        return respond("400 Bad Request", "");
    };
    let Some(id) = msg.get("id") else {
        return respond("202 Accepted", "");
    };
    let reply = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    let body = match msg["method"].as_str().unwrap_or_default() {
        "initialize" => reply(json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "closer", "version": "1"},
        })),
        "tools/list" => reply(json!({"tools": [{
            "name": "echo",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }]})),
        "tools/call" => reply(json!({"content": [{
            "type": "text",
            "text": msg["params"]["arguments"]["text"],
        }]})),
        "ping" => reply(json!({})),
        _ => json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}})
            .to_string(),
    };
    respond("200 OK", &body)
}

/// The backend: one request answered per connection, then the connection
/// reset as the next request arrives, unread.
async fn closing_backend() -> (String, Arc<Counts>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let counts = Arc::new(Counts::default());
    let counted = counts.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            counted.accepted.fetch_add(1, Ordering::SeqCst);
            let counted = counted.clone();
            tokio::spawn(async move {
                let Some((head, body)) = read_request(&mut tcp).await else {
                    return;
                };
                if tcp
                    .write_all(answer(&head, &body).as_bytes())
                    .await
                    .is_err()
                {
                    return;
                }
                counted.answered.fetch_add(1, Ordering::SeqCst);
                let _ = tcp.readable().await;
                // Closed with the next request unread: a reset.
                drop(tcp);
            });
        }
    });
    (url, counts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item38_5_a_reused_connection_the_backend_closes_costs_no_call() {
    let (url, counts) = closing_backend().await;
    let gw = Gateway::start(&format!(
        "[backends.closer]\ntransport = \"http\"\nurl = \"{url}\"\n"
    ));
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    let calls = 20;
    for i in 0..calls {
        let text = format!("call {i}");
        let reply = http
            .tool(&session, 10 + i, "closer__echo", json!({"text": text}))
            .await;
        assert_eq!(text_of(&reply), text, "call {i}: {reply}");
    }
    // Every call reached the backend, each on a connection of its own
    // after a reused one was closed on it.
    let answered = counts.answered.load(Ordering::SeqCst);
    assert!(answered >= calls as usize, "{answered} answered");
    assert_eq!(counts.accepted.load(Ordering::SeqCst), answered);
}
