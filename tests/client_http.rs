//! The client side's HTTP/1.1, byte by byte: the gateway serves the common
//! `POST /mcp` itself and hands a connection to hyper at its first request
//! of any other kind; either way a client sees one HTTP/1.1 server. Each
//! test drives one socket by hand, so every request goes over that very
//! connection.

mod support;

use std::io::Read;

use serde_json::{Value, json};
use support::*;

fn echo(id: u64, text: &str) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
        "params":{"name":"demo__echo","arguments":{"text":text}}})
    .to_string()
}

/// A gateway, an open session and its request headers.
async fn gateway() -> (Gateway, String) {
    let gw = Gateway::start(&demo_backend("demo"));
    let sid = Http::new(gw.url("/mcp")).initialize().await;
    (gw, sid)
}

fn headers(sid: &str) -> [(&str, &str); 3] {
    [
        ("Content-Type", "application/json"),
        ("Accept", ACCEPT_BOTH),
        ("Mcp-Session-Id", sid),
    ]
}

fn echoed(r: &RawResponse) -> String {
    assert_eq!(r.status, 200, "{}", r.text());
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    text_of(&v).to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order_on_one_connection() {
    let (gw, sid) = gateway().await;
    let mut c = KeepAlive::connect(&gw.base);
    let mut wire = String::new();
    for i in 0..5 {
        wire.push_str(&post_request(
            "/mcp",
            &headers(&sid),
            &echo(i, &format!("n{i}")),
        ));
    }
    c.send(wire.as_bytes());
    for i in 0..5 {
        let r = c.response();
        assert_eq!(echoed(&r), format!("n{i}"));
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert!(
            r.header("date").is_some(),
            "a server with a clock sends Date"
        );
        assert_eq!(r.header("connection"), None);
    }
    // Still open for more.
    let (status, _) = c.post("/mcp", &headers(&sid), &echo(9, "more"));
    assert_eq!(status, 200);
}

/// The head with the body's first bytes, then the body in two more
/// pieces, each sent once the gateway has read everything before it: the
/// request is taken with most of its body still to come, and the
/// connection reads on and feeds the rest to it (`front/conn/feed.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_sent_after_its_head_is_read_as_it_comes() {
    let (gw, sid) = gateway().await;
    let mut c = KeepAlive::connect(&gw.base);
    let body = echo(1, "in pieces");
    let wire = post_request("/mcp", &headers(&sid), &body);
    let split = wire.len() - body.len() + 7;
    c.send(&wire.as_bytes()[..split]);
    c.wait_read();
    c.send(&wire.as_bytes()[split..split + 10]);
    c.wait_read();
    c.send(&wire.as_bytes()[split + 10..]);
    assert_eq!(echoed(&c.response()), "in pieces");
    let (status, _) = c.post("/mcp", &headers(&sid), &echo(2, "after"));
    assert_eq!(status, 200, "the connection is still good");
}

/// Requests of other kinds on a connection that began with the common
/// one: hyper answers them, and the common one after them too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_carries_on_after_a_request_of_another_kind() {
    let (gw, sid) = gateway().await;
    let mut c = KeepAlive::connect(&gw.base);
    assert_eq!(
        echoed(&c.response_to(&post_request("/mcp", &headers(&sid), &echo(1, "a")))),
        "a"
    );

    c.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    assert_eq!(c.response().status, 200);

    // A chunked body.
    let body = echo(2, "chunked");
    let (a, b) = body.split_at(10);
    let mut wire = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: {ACCEPT_BOTH}\r\nMcp-Session-Id: {sid}\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    wire.push_str(&format!(
        "{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    ));
    assert_eq!(echoed(&c.response_to(&wire)), "chunked");

    // `Expect: 100-continue`: the interim answer, then the real one.
    let body = echo(3, "expected");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: {ACCEPT_BOTH}\r\nMcp-Session-Id: {sid}\r\nExpect: 100-continue\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    c.send(head.as_bytes());
    assert_eq!(c.response().status, 100);
    c.send(body.as_bytes());
    assert_eq!(echoed(&c.response()), "expected");

    assert_eq!(
        echoed(&c.response_to(&post_request("/mcp", &headers(&sid), &echo(4, "b")))),
        "b"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_close_is_answered_then_the_connection_closes() {
    let (gw, sid) = gateway().await;
    let mut c = KeepAlive::connect(&gw.base);
    let mut h = headers(&sid).to_vec();
    h.push(("Connection", "close"));
    let r = c.response_to(&post_request("/mcp", &h, &echo(1, "last")));
    assert_eq!(echoed(&r), "last");
    assert_eq!(r.header("connection"), Some("close"));
    let mut rest = Vec::new();
    c.stream.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "closed after the answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_1_0_and_a_target_with_a_query_are_still_served() {
    let (gw, sid) = gateway().await;
    let body = echo(1, "old");
    let wire = post_request("/mcp", &headers(&sid), &body).replacen("HTTP/1.1", "HTTP/1.0", 1);
    let mut c = KeepAlive::connect(&gw.base);
    assert_eq!(echoed(&c.response_to(&wire)), "old");

    let wire = post_request("/mcp?x=1", &headers(&sid), &echo(2, "query"));
    let mut c = KeepAlive::connect(&gw.base);
    assert_eq!(echoed(&c.response_to(&wire)), "query");
}

/// A request refused before its body is read leaves that body on the
/// wire: the answer says the connection closes, and it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_refused_unread_closes_the_connection() {
    let (gw, sid) = gateway().await;
    let mut c = KeepAlive::connect(&gw.base);
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: {ACCEPT_BOTH}\r\nMcp-Session-Id: {sid}\r\nContent-Length: 999999999\r\n\r\n{{"
    );
    let r = c.response_to(&head);
    assert_eq!(r.status, 413, "{}", r.text());
    assert_eq!(r.header("connection"), Some("close"));
    let mut rest = Vec::new();
    let _ = c.stream.read_to_end(&mut rest);
    assert!(rest.is_empty());
    // Other connections are not disturbed.
    let mut d = KeepAlive::connect(&gw.base);
    assert_eq!(
        echoed(&d.response_to(&post_request("/mcp", &headers(&sid), &echo(2, "ok")))),
        "ok"
    );
}

/// A chunked body declares no length: it is counted as it arrives, and
/// refused once it passes `max_body_bytes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_body_past_the_limit_is_refused() {
    let gw = Gateway::start(&format!(
        "[server]\nmax_body_bytes = 1000\n{}",
        demo_backend("demo")
    ));
    let sid = Http::new(gw.url("/mcp")).initialize().await;
    let mut c = KeepAlive::connect(&gw.base);
    let chunk = "x".repeat(800);
    let wire = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: {ACCEPT_BOTH}\r\nMcp-Session-Id: {sid}\r\nTransfer-Encoding: chunked\r\n\r\n\
         320\r\n{chunk}\r\n320\r\n{chunk}\r\n0\r\n\r\n"
    );
    let r = c.response_to(&wire);
    assert_eq!(r.status, 413, "{}", r.text());
    // Within the limit, in pieces, it is read whole.
    let body = echo(1, &"y".repeat(600));
    let (a, b) = body.split_at(300);
    let wire = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: {ACCEPT_BOTH}\r\nMcp-Session-Id: {sid}\r\nTransfer-Encoding: chunked\r\n\r\n\
         {:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    let mut d = KeepAlive::connect(&gw.base);
    assert_eq!(echoed(&d.response_to(&wire)), "y".repeat(600));
}

/// A request with these header lines (no Host unless they have one) and
/// body, read by the gateway's own HTTP/1.1 (a body with its length) and
/// by hyper (the same body chunked).
fn both_readers(target: &str, lines: &str, body: &str) -> [String; 2] {
    [
        format!(
            "POST {target} HTTP/1.1\r\n{lines}Content-Length: {}\r\n\r\n{body}",
            body.len()
        ),
        format!(
            "POST {target} HTTP/1.1\r\n{lines}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
            body.len()
        ),
    ]
}

/// `wire` on a connection of its own, answered 400: its JSON-RPC body.
fn refused(gw: &Gateway, wire: &str) -> Value {
    let r = KeepAlive::connect(&gw.base).response_to(wire);
    assert_eq!(r.status, 400, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

/// RFC 9112 section 3.2: an HTTP/1.1 request without Host is answered 400
/// on every endpoint, by either reader; with Host the same requests are
/// not. HTTP/1.0 has no Host to require, and is served without one.
/// Before, every one of them was served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_1_1_request_without_host_is_refused_everywhere() {
    let (gw, sid) = gateway().await;
    for (method, path, more) in [
        ("GET", "/healthz", ""),
        ("GET", "/readyz", ""),
        ("GET", "/metrics", ""),
        ("GET", "/status", ""),
        ("GET", "/.well-known/oauth-protected-resource", ""),
        ("GET", "/mcp", "Mcp-Session-Id: gone\r\n"),
        ("DELETE", "/mcp", "Mcp-Session-Id: gone\r\n"),
        ("GET", "/ns/default/mcp", "Mcp-Session-Id: gone\r\n"),
    ] {
        let get = |host: &str| {
            raw_http(
                &gw.base,
                &format!("{method} {path} HTTP/1.1\r\n{host}{more}Connection: close\r\n\r\n"),
            )
        };
        let (with, _) = get("Host: 127.0.0.1\r\n");
        assert_ne!(with, 400, "{method} {path} with Host");
        let (without, text) = get("");
        assert_eq!(without, 400, "{method} {path} without Host: {text}");
    }
    let lines = format!(
        "Content-Type: application/json\r\nAccept: {ACCEPT_BOTH}\r\nMcp-Session-Id: {sid}\r\n"
    );
    for wire in both_readers("/mcp", &lines, &echo(1, "no host")) {
        let v = refused(&gw, &wire);
        assert!(
            v["error"]["message"].as_str().unwrap().contains("Host"),
            "{v}"
        );
        let with_host = wire.replacen("\r\n", "\r\nHost: 127.0.0.1\r\n", 1);
        let r = KeepAlive::connect(&gw.base).response_to(&with_host);
        assert_eq!(echoed(&r), "no host");
    }
    let (status, _) = raw_http(&gw.base, "GET /healthz HTTP/1.0\r\n\r\n");
    assert_eq!(status, 200, "HTTP/1.0 without Host");
    let wire = format!(
        "POST /mcp HTTP/1.0\r\n{lines}Content-Length: {}\r\n\r\n{}",
        echo(2, "old").len(),
        echo(2, "old")
    );
    assert_eq!(
        echoed(&KeepAlive::connect(&gw.base).response_to(&wire)),
        "old"
    );
}

/// `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` sent twice are
/// refused (400, -32020, the request's id) by either reader, whether the
/// two agree or not: a router in front that reads one of them must not
/// see another value than the gateway checked. Joined in one header they
/// were refused already (they disagree with the body). Before, only the
/// first was checked and the request was served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrored_headers_sent_twice_are_refused_by_either_reader() {
    let (gw, sid) = gateway().await;
    let call = json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{
        "name":"demo__add","arguments":{"a":1,"b":2},
        "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
            "io.modelcontextprotocol/clientCapabilities":{}}}})
    .to_string();
    let base =
        format!("Host: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: {ACCEPT_BOTH}\r\n");
    let version = "MCP-Protocol-Version: 2026-07-28\r\n";
    let method = "Mcp-Method: tools/call\r\n";
    let name = "Mcp-Name: demo__add\r\n";
    let served = format!("{base}{version}{method}{name}");
    for wire in both_readers("/mcp", &served, &call) {
        let r = KeepAlive::connect(&gw.base).response_to(&wire);
        assert_eq!(echoed(&r), "3", "the request as it should be");
    }
    for (case, lines) in [
        ("Mcp-Name", format!("{served}Mcp-Name: demo__echo\r\n")),
        ("Mcp-Name", format!("{served}mcp-name: demo__add\r\n")),
        (
            "Mcp-Method",
            format!("{base}{version}{method}{method}{name}"),
        ),
        (
            "MCP-Protocol-Version",
            format!("{base}{version}{method}{version}{name}"),
        ),
    ] {
        for wire in both_readers("/mcp", &lines, &call) {
            let v = refused(&gw, &wire);
            assert_eq!(v["error"]["code"], -32020, "{case}: {v}");
            assert_eq!(v["id"], 7, "{case}: {v}");
            assert!(
                v["error"]["message"].as_str().unwrap().contains(case),
                "{v}"
            );
        }
    }
    // A legacy request too: its version header twice.
    let lines = format!(
        "{base}Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-06-18\r\nMCP-Protocol-Version: 2025-06-18\r\n"
    );
    for wire in both_readers("/mcp", &lines, &echo(8, "twice")) {
        assert_eq!(refused(&gw, &wire)["error"]["code"], -32020);
    }
    // The session was not disturbed.
    let (status, _) = KeepAlive::connect(&gw.base).post("/mcp", &headers(&sid), &echo(9, "after"));
    assert_eq!(status, 200);
}

/// The bearer scheme is case-insensitive (RFC 9110 section 11.1) on
/// `/mcp`, `/metrics` and `/status` alike. Before, `bearer` was refused
/// by the operator endpoints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_read_in_any_case_everywhere() {
    let toml = format!(
        "[auth]\nbearer_tokens_env = \"T\"\n[metrics]\ntoken_env = \"MTOKEN\"\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start_with_env(&toml, &[("T", "client-token"), ("MTOKEN", "scrape-me")]);
    let client = reqwest::Client::new();
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let r = client
            .post(gw.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .header("authorization", format!("{scheme} client-token"))
            .body(init_request(1).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "/mcp with {scheme}");
        for path in ["/metrics", "/status"] {
            let get = |token: &str| {
                client
                    .get(gw.url(path))
                    .header("authorization", format!("{scheme} {token}"))
                    .send()
            };
            assert_eq!(
                get("scrape-me").await.unwrap().status(),
                200,
                "{path} with {scheme}"
            );
            assert_eq!(
                get("wrong").await.unwrap().status(),
                401,
                "{path} with {scheme}"
            );
        }
    }
}
