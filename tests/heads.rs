//! Issue 38 item 2: one head limit for both HTTP readers (the front's own
//! and hyper's, which `scripts/test` runs this suite on again with
//! `SLUICE_HTTP=hyper`): a request head of at most 65,535 bytes and 100
//! headers is read; past either, the answer is 431 and the connection
//! closes, whatever the request, instead of the head being buffered
//! (hyper's default read buffer held ~400 KiB of an unfinished head).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::*;

/// The documented limit (docs/operations.md): a request line and headers.
const MAX_HEAD: usize = 65_535;
const MAX_HEADERS: usize = 100;

/// A gateway whose header-read timeout is far off: a head is refused for
/// its size, never for taking long.
fn gateway() -> Gateway {
    Gateway::start(&format!(
        "[server]\nheader_read_timeout = \"10m\"\n{}",
        demo_backend("demo")
    ))
}

/// Sends `wire` and reads the answer to its end (the gateway closes).
/// The read is bounded only so that a hang fails the test instead of
/// stalling it.
fn exchange(gw: &Gateway, wire: &[u8]) -> String {
    let mut s = TcpStream::connect(gw.base.strip_prefix("http://").unwrap()).unwrap();
    s.write_all(wire).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) => panic!(
                "no end of the answer ({e}); so far: {:?}",
                String::from_utf8_lossy(&answer)
            ),
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// A head `len` bytes long (the blank line that ends it included when
/// `whole`), padded by one header.
fn head(start: &str, len: usize, whole: bool) -> Vec<u8> {
    let mut head = format!("{start}\r\nHost: 127.0.0.1\r\nX-Pad: ").into_bytes();
    let end: &[u8] = if whole { b"\r\n\r\n" } else { b"" };
    assert!(head.len() + end.len() <= len);
    head.resize(len - end.len(), b'a');
    head.extend_from_slice(end);
    head
}

fn status_of(answer: &str) -> &str {
    answer.split(' ').nth(1).unwrap_or(answer)
}

#[test]
fn item38_2_a_head_past_the_limit_is_answered_431_and_closed() {
    let gw = gateway();
    let cases = [
        // Unfinished at the limit (so longer than it): nothing more is read.
        (
            "an unfinished POST",
            head("POST /mcp HTTP/1.1", MAX_HEAD, false),
        ),
        ("one past", head("POST /mcp HTTP/1.1", MAX_HEAD + 1, false)),
        (
            "an unfinished GET",
            head("GET /healthz HTTP/1.1", MAX_HEAD + 1, false),
        ),
        (
            "an unfinished HTTP/1.0 POST",
            head("POST /mcp HTTP/1.0", MAX_HEAD + 1, false),
        ),
        // A whole head one byte too long, with its body behind it.
        ("a whole POST", {
            let mut wire = head(
                "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2",
                MAX_HEAD + 1,
                true,
            );
            wire.extend_from_slice(b"{}");
            wire
        }),
        ("too many headers", {
            let mut wire = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n".to_vec();
            for i in 0..MAX_HEADERS {
                wire.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
            }
            wire.extend_from_slice(b"\r\n");
            wire
        }),
    ];
    for (what, wire) in cases {
        let answer = exchange(&gw, &wire);
        assert_eq!(status_of(&answer), "431", "{what}: {answer}");
    }
    // The gateway serves on.
    let (status, _) = http_get(&gw.base, "/healthz").unwrap();
    assert_eq!(status, 200);
}

#[test]
fn item38_2_a_head_at_the_limit_is_served() {
    let gw = gateway();
    let init = init_request(1).to_string();
    let post = format!(
        "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n\
         Content-Length: {}",
        init.len()
    );
    let mut wire = head(&post, MAX_HEAD, true);
    wire.extend_from_slice(init.as_bytes());
    let answer = exchange(&gw, &wire);
    assert_eq!(status_of(&answer), "200", "{answer}");
    assert!(answer.contains("\"protocolVersion\""), "{answer}");
    // A request the front hands to hyper, at the limit too.
    let wire = head("GET /healthz HTTP/1.1\r\nConnection: close", MAX_HEAD, true);
    let answer = exchange(&gw, &wire);
    assert_eq!(status_of(&answer), "200", "{answer}");
    // As many headers as allowed (Host among them).
    let mut wire = format!("{post}\r\nHost: 127.0.0.1\r\n").into_bytes();
    for i in 0..MAX_HEADERS - 5 {
        wire.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    wire.extend_from_slice(b"\r\n");
    wire.extend_from_slice(init.as_bytes());
    let answer = exchange(&gw, &wire);
    assert_eq!(status_of(&answer), "200", "{answer}");
}
