use super::*;
use crate::front::headers::HeaderLookup;
use crate::http1::codec::{MAX_HEAD, MAX_HEADERS};
use axum::http::{HeaderName, HeaderValue};

fn taken(wire: &[u8]) -> (Take, BytesMut) {
    let mut buf = BytesMut::from(wire);
    let t = take(&mut buf);
    (t, buf)
}

const CALL: &[u8] = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
Mcp-Session-Id: abc\r\nContent-Length: 5\r\n\r\nhello";

#[test]
fn a_whole_post_to_mcp_is_taken_with_its_headers_and_body() {
    let mut wire = CALL.to_vec();
    wire.extend_from_slice(b"POST /mcp HT");
    let (t, rest) = taken(&wire);
    let Take::Ready(t) = t else {
        panic!("not taken")
    };
    assert_eq!(&rest[..], b"POST /mcp HT", "the next request stays");
    assert!(!t.close);
    assert_eq!(t.head.iter().count(), 4);
    let session = crate::protocol::SESSION_HEADER;
    assert_eq!(t.head.get(&session), Some(&b"abc"[..]));
    assert_eq!(t.head.get(&header::HOST), Some(&b"127.0.0.1"[..]));
    assert_eq!(t.body.size_hint().exact(), Some(5));
}

#[test]
fn a_named_namespace_is_taken_with_its_name() {
    let long = "n".repeat(64);
    for (path, namespace) in [
        ("/mcp", "default"),
        ("/ns/x/mcp", "x"),
        ("/ns/Team_a-2/mcp", "Team_a-2"),
        ("/ns/default/mcp", "default"),
        (&*format!("/ns/{long}/mcp"), &*long),
    ] {
        let wire = format!("POST {path} HTTP/1.1\r\nContent-Length: 2\r\n\r\n{{}}");
        let Take::Ready(t) = taken(wire.as_bytes()).0 else {
            panic!("{path} not taken")
        };
        assert_eq!(t.namespace, namespace, "{path}");
        assert_eq!(t.body.size_hint().exact(), Some(2));
    }
    // Longer than a name can be: axum's router answers it, as before.
    let wire = format!("POST /ns/{long}n/mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert!(matches!(taken(wire.as_bytes()).0, Take::Other));
}

#[test]
fn a_head_cut_anywhere_waits_for_the_rest_and_leaves_the_buffer() {
    let head_len = CALL.len() - 5;
    for cut in 0..head_len {
        let (t, rest) = taken(&CALL[..cut]);
        assert!(matches!(t, Take::Partial), "cut at {cut}");
        assert_eq!(&rest[..], &CALL[..cut], "cut at {cut}");
    }
}

#[test]
fn a_body_still_coming_is_fed_with_what_is_here() {
    for cut in CALL.len() - 5..CALL.len() {
        let (t, rest) = taken(&CALL[..cut]);
        let Take::Ready(t) = t else {
            panic!("cut at {cut}: the head is whole")
        };
        assert!(rest.is_empty());
        let feed = t.feed.expect("a body still coming");
        assert_eq!(feed.left(), CALL.len() - cut);
        assert_eq!(t.body.size_hint().exact(), Some(5));
    }
    let Take::Ready(t) = taken(CALL).0 else {
        panic!("not taken")
    };
    assert!(t.feed.is_none(), "a whole body is one piece");
}

#[test]
fn anything_unusual_goes_to_hyper_with_every_byte() {
    let cases: &[&[u8]] = &[
        b"GET /mcp HTTP/1.1\r\nHost: a\r\n\r\n",
        b"POST /ns/a%2Db/mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b"POST /ns//mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b"POST /ns/a/b/mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b"POST /ns/x/mcp/ HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b"POST /ns/x/mcp?x=1 HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b"POST /ns/x.y/mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b"POST /ns/mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b"POST /NS/x/mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b"POST /mcp?x=1 HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b"POST http://a/mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b"POST /mcp HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
        b"post /mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab",
        b"POST /mcp HTTP/1.1\r\nContent-Length: +2\r\n\r\nab",
        b"POST /mcp HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\nab",
        b"POST /mcp HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nConnection: keep-alive, TE\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nBad Name: x\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nFolded: a\r\n b\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nX: a\x01b\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    ];
    for wire in cases {
        let (t, rest) = taken(wire);
        assert!(
            matches!(t, Take::Other),
            "{:?}",
            String::from_utf8_lossy(wire)
        );
        assert_eq!(&rest[..], *wire, "the bytes are kept for hyper");
    }
}

#[test]
fn too_many_headers_or_too_long_a_head_are_refused() {
    let mut many = b"POST /mcp HTTP/1.1\r\n".to_vec();
    for i in 0..=MAX_HEADERS {
        many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert!(matches!(taken(&many).0, Take::TooLarge));
    let mut long = b"POST /mcp HTTP/1.1\r\nX: ".to_vec();
    long.resize(MAX_HEAD, b'a');
    assert!(matches!(taken(&long).0, Take::TooLarge), "an endless head");
    // Whatever the request: no reader takes it.
    let mut get = b"GET /healthz HTTP/1.1\r\nX: ".to_vec();
    get.resize(MAX_HEAD + 1, b'a');
    assert!(matches!(taken(&get).0, Take::TooLarge));
    // A whole head one byte long at the limit is read.
    let mut whole = b"POST /mcp HTTP/1.1\r\nX: ".to_vec();
    whole.resize(MAX_HEAD - 4, b'a');
    whole.extend_from_slice(b"\r\n\r\n");
    assert!(
        matches!(taken(&whole).0, Take::Ready(_)),
        "a head at the limit"
    );
    whole.insert(20, b'a');
    assert!(matches!(taken(&whole).0, Take::TooLarge), "one past");
    let mut fewer = b"POST /mcp HTTP/1.1\r\n".to_vec();
    for i in 0..MAX_HEADERS {
        fewer.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    fewer.extend_from_slice(b"\r\n");
    let Take::Ready(t) = taken(&fewer).0 else {
        panic!("{MAX_HEADERS} headers are taken")
    };
    assert_eq!(t.head.iter().count(), MAX_HEADERS);
    let last = format!("x-{}", MAX_HEADERS - 1);
    let last = HeaderName::from_bytes(last.as_bytes()).unwrap();
    assert_eq!(t.head.get(&last), Some(&b"v"[..]));
}

#[test]
fn connection_close_is_honoured_and_keep_alive_allowed() {
    for (value, close) in [
        ("close", true),
        ("Close", true),
        ("keep-alive", false),
        ("Keep-Alive, close", true),
        ("", false),
    ] {
        let wire =
            format!("POST /mcp HTTP/1.1\r\nConnection: {value}\r\nContent-Length: 0\r\n\r\n");
        let Take::Ready(t) = taken(wire.as_bytes()).0 else {
            panic!("{value:?} not taken")
        };
        assert_eq!(t.close, close, "{value:?}");
    }
}

#[test]
fn repeated_headers_are_all_kept() {
    let wire = b"POST /mcp HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: 0\r\n\r\n";
    let Take::Ready(t) = taken(wire).0 else {
        panic!("not taken")
    };
    let hosts: Vec<_> = t.head.all(&header::HOST).collect();
    assert_eq!(hosts, [b"a", b"b"], "the guard refuses two Host headers");
}

#[test]
fn a_head_names_its_framing_once_and_the_date() {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("99"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
    let mut out = Vec::new();
    write_head(
        &mut out,
        StatusCode::OK,
        &headers,
        Framing::Length(12),
        false,
    );
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(
        text.contains("\r\ncontent-type: application/json\r\n"),
        "{text}"
    );
    assert!(text.contains("\r\ncontent-length: 12\r\n"), "{text}");
    assert!(
        !text.contains("99") && !text.contains("keep-alive"),
        "{text}"
    );
    assert!(
        text.contains("\r\ndate: ") && text.ends_with(" GMT\r\n\r\n"),
        "{text}"
    );

    let mut out = Vec::new();
    write_head(
        &mut out,
        StatusCode::ACCEPTED,
        &HeaderMap::new(),
        Framing::Chunked,
        true,
    );
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("HTTP/1.1 202 Accepted\r\n"), "{text}");
    assert!(
        text.contains("\r\ntransfer-encoding: chunked\r\nconnection: close\r\n"),
        "{text}"
    );

    let mut out = Vec::new();
    write_head(
        &mut out,
        StatusCode::NO_CONTENT,
        &HeaderMap::new(),
        Framing::None,
        false,
    );
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("content-length") && !text.contains("transfer-encoding"));
}

#[test]
fn a_response_asks_to_close_by_its_connection_header_and_may_bring_its_date() {
    let mut headers = HeaderMap::new();
    assert!(!write_head(
        &mut Vec::new(),
        StatusCode::OK,
        &headers,
        Framing::None,
        false
    ));
    assert!(write_head(
        &mut Vec::new(),
        StatusCode::OK,
        &headers,
        Framing::None,
        true
    ));
    headers.insert(
        header::DATE,
        HeaderValue::from_static("Tue, 01 Dec 2026 00:00:00 GMT"),
    );
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    let mut out = Vec::new();
    assert!(write_head(
        &mut out,
        StatusCode::OK,
        &headers,
        Framing::None,
        false
    ));
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.matches("date: ").count(), 1, "{text}");
    assert_eq!(text.matches("connection: close\r\n").count(), 1, "{text}");
}

/// The fuzz target's seeds, each read cut every way.
#[test]
fn the_fuzz_seeds_read_alike_however_cut() {
    let n = crate::fuzzing::run_seeds("client_request", crate::fuzzing::client_request);
    assert!(n >= 5, "{n} seeds");
}

#[test]
fn pipelined_requests_then_another_kind_read_alike_in_pieces() {
    let wire = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/corpus/client_request/pipelined"
    ))
    .unwrap();
    let (taken, rest) = read_whole(&wire, 1);
    assert_eq!(taken.len(), 2);
    assert_eq!(taken[0].body, b"ab");
    assert!(!taken[0].close);
    assert_eq!(taken[1].body, b"xyz");
    assert!(taken[1].close);
    let (at, handed) = rest.expect("the GET goes to hyper");
    assert_eq!(&wire[at..], b"GET /healthz HTTP/1.1\r\n\r\n");
    assert_eq!(handed, b"GET /healthz HTTP/1.1\r\n\r\n");
}

/// The differential target's seeds, and what the own path takes besides:
/// hyper reads each request alike.
#[test]
fn what_this_path_takes_hyper_reads_alike() {
    let seeds = crate::fuzzing::seeds("client_request_vs_hyper");
    assert!(seeds.len() >= 8, "{} seeds", seeds.len());
    let more: [&[u8]; 4] = [
        CALL,
        b"POST /mcp HTTP/1.1\r\nConnection: Close\r\nContent-Length: 1\r\n\r\naPOST /mcp HTTP/1.1\r\n\r\n",
        b"\r\n\r\nPOST /ns/x/mcp HTTP/1.1\r\nContent-LENGTH: 2\r\n\r\nab",
        b"POST /mcp HTTP/1.1\r\nContent-Length: 5\r\n\r\nab",
    ];
    for wire in seeds.iter().map(Vec::as_slice).chain(more) {
        crate::fuzzing::client_request_vs_hyper(wire);
    }
}
