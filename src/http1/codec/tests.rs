use bytes::BytesMut;
use http::header::{ACCEPT, CONTENT_LENGTH, HOST, HeaderName, HeaderValue};
use http::{Method, StatusCode};

use super::{Decoder, Error, MAX_HEAD, Step, read_head, read_whole as read, write_head};

/// Every way of cutting the input gives the same reading.
fn read_any_cut(wire: &[u8]) -> Result<(StatusCode, Vec<u8>, bool), Error> {
    let whole = read(wire, wire.len());
    for cut in 1..wire.len().min(40) {
        assert_eq!(read(wire, cut), whole, "cut every {cut} bytes");
    }
    whole
}

#[test]
fn a_request_head_carries_host_headers_and_length() {
    let mut out = Vec::new();
    let headers = [
        (ACCEPT, HeaderValue::from_static("application/json")),
        // Framing is the gateway's: these are left out.
        (HOST, HeaderValue::from_static("elsewhere")),
        (CONTENT_LENGTH, HeaderValue::from_static("99")),
        (
            HeaderName::from_static("x-team"),
            HeaderValue::from_static("a b"),
        ),
    ];
    write_head(
        &mut out,
        &Method::POST,
        "/mcp?x=1",
        &HeaderValue::from_static("127.0.0.1:8080"),
        headers.iter().map(|(k, v)| (k, v)),
        17,
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "POST /mcp?x=1 HTTP/1.1\r\nhost: 127.0.0.1:8080\r\naccept: application/json\r\n\
         x-team: a b\r\ncontent-length: 17\r\n\r\n"
    );
    let mut out = Vec::new();
    let host = HeaderValue::from_static("h");
    write_head(&mut out, &Method::GET, "/", &host, [].into_iter(), 0);
    assert_eq!(out, b"GET / HTTP/1.1\r\nhost: h\r\n\r\n");
    let mut out = Vec::new();
    write_head(&mut out, &Method::POST, "/", &host, [].into_iter(), 0);
    assert!(out.ends_with(b"content-length: 0\r\n\r\n"));
}

#[test]
fn a_length_framed_response_is_its_bytes_and_keeps_the_connection() {
    let wire = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"jsonrpc\":1}";
    assert_eq!(
        read_any_cut(wire),
        Ok((StatusCode::OK, b"{\"jsonrpc\":1}".to_vec(), true))
    );
}

#[test]
fn the_head_keeps_its_headers_and_length() {
    let mut buf = BytesMut::from(
        &b"HTTP/1.1 202 Accepted\r\nMCP-Session-ID: abc\r\nX-A: 1\r\nX-A: 2\r\ncontent-length: 0\r\n\r\n"[..],
    );
    let head = read_head(&mut buf, &Method::POST).unwrap().unwrap();
    assert_eq!(head.status, StatusCode::ACCEPTED);
    let session = HeaderName::from_static("mcp-session-id");
    assert_eq!(head.headers.get(&session).unwrap(), "abc");
    assert_eq!(head.headers.get_str(&session), Some("abc"));
    assert_eq!(head.headers.all("x-a").collect::<Vec<_>>(), [b"1", b"2"]);
    assert_eq!(head.headers.get(&ACCEPT), None);
    assert_eq!(head.content_length, Some(0));
    assert!(head.body.is_done(), "an empty body has ended unread");
    assert!(buf.is_empty());
}

#[test]
fn empty_header_values_are_values() {
    let mut buf =
        BytesMut::from(&b"HTTP/1.1 200 OK\r\nX-A:\r\nX-B: \r\nContent-Length: 0\r\n\r\n"[..]);
    let head = read_head(&mut buf, &Method::POST).unwrap().unwrap();
    assert_eq!(
        head.headers.get_str(&HeaderName::from_static("x-a")),
        Some("")
    );
    assert_eq!(
        head.headers.get_str(&HeaderName::from_static("x-b")),
        Some("")
    );
}

#[test]
fn a_chunked_response_is_decoded_with_its_extensions_and_trailers() {
    let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
        5;name=value\r\nhello\r\n1 \r\n,\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n";
    assert_eq!(
        read_any_cut(wire),
        Ok((StatusCode::OK, b"hello, world".to_vec(), true))
    );
    // Upper-case hex, bare LFs.
    let wire = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nA\n0123456789\n0\n\n";
    assert_eq!(
        read_any_cut(wire),
        Ok((StatusCode::OK, b"0123456789".to_vec(), true))
    );
}

#[test]
fn a_body_without_length_runs_to_the_close_and_ends_the_connection() {
    let wire = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\ndata: 2\n\n";
    assert_eq!(
        read_any_cut(wire),
        Ok((StatusCode::OK, b"data: 1\n\ndata: 2\n\n".to_vec(), false))
    );
    // A coding other than chunked last: the same.
    let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxyz";
    assert_eq!(
        read_any_cut(wire),
        Ok((StatusCode::OK, b"xyz".to_vec(), false))
    );
}

#[test]
fn connection_close_and_http_1_0_are_not_reused() {
    let close = b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\nok";
    assert_eq!(
        read(close, 100),
        Ok((StatusCode::OK, b"ok".to_vec(), false))
    );
    let old = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
    assert_eq!(read(old, 100), Ok((StatusCode::OK, b"ok".to_vec(), false)));
    let old_kept = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok";
    assert_eq!(
        read(old_kept, 100),
        Ok((StatusCode::OK, b"ok".to_vec(), true))
    );
    // Both framings: chunked wins, the connection is not trusted again.
    let both =
        b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
    assert_eq!(read(both, 100), Ok((StatusCode::OK, b"ok".to_vec(), false)));
    // Bytes after the body: not reused either.
    let extra = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1";
    assert_eq!(
        read(extra, 100),
        Ok((StatusCode::OK, b"ok".to_vec(), false))
    );
}

#[test]
fn informational_heads_are_skipped_and_bodyless_statuses_have_none() {
    let wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n\
        HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n!";
    assert_eq!(
        read_any_cut(wire),
        Ok((StatusCode::OK, b"!".to_vec(), true))
    );
    let wire = b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n";
    assert_eq!(
        read_any_cut(wire),
        Ok((StatusCode::NO_CONTENT, Vec::new(), true))
    );
    let upgrade = b"HTTP/1.1 101 Switching Protocols\r\n\r\n";
    assert!(matches!(read(upgrade, 100), Err(Error::Head(_))));
}

#[test]
fn malformed_responses_are_errors() {
    let cases: &[&[u8]] = &[
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\n",
    ];
    for wire in cases {
        let got = read_any_cut(wire);
        assert!(
            matches!(got, Err(Error::Head(_) | Error::Chunk(_))),
            "{:?}: {got:?}",
            String::from_utf8_lossy(wire)
        );
    }
    // Agreeing lengths, also as a list, are one length.
    let agreeing = b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok";
    assert_eq!(
        read(agreeing, 100),
        Ok((StatusCode::OK, b"ok".to_vec(), true))
    );
}

#[test]
fn a_response_cut_short_is_incomplete() {
    for wire in [
        &b"HTTP/1.1 200 OK\r\nContent-Le"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n",
    ] {
        assert_eq!(read_any_cut(wire), Err(Error::Incomplete));
    }
}

#[test]
fn what_a_backend_sends_is_bounded() {
    // A head that never ends is refused past the bound, not buffered.
    let mut endless = b"HTTP/1.1 200 OK\r\nX-Pad: ".to_vec();
    endless.resize(MAX_HEAD + 1, b'a');
    let mut buf = BytesMut::from(&endless[..]);
    assert_eq!(
        read_head(&mut buf, &Method::POST).unwrap_err(),
        Error::HeadTooLarge
    );
    // So is a chunk-size line, and trailers.
    let mut line = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;".to_vec();
    line.resize(line.len() + 5000, b'x');
    assert!(matches!(read(&line, 1000), Err(Error::Chunk(_))));
    let mut trailers = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n".to_vec();
    for _ in 0..500 {
        trailers.extend_from_slice(b"X-Trailer: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    assert!(matches!(read(&trailers, 1000), Err(Error::Chunk(_))));
}

#[test]
fn a_large_chunk_arrives_as_it_comes_not_whole() {
    let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"[..]);
    let mut body = read_head(&mut buf, &Method::POST).unwrap().unwrap().body;
    buf.extend_from_slice(b"100000\r\nabc");
    assert_eq!(body.step(&mut buf), Ok(Step::Data("abc".into())));
    assert_eq!(body.step(&mut buf), Ok(Step::More));
    assert!(!body.is_done());
    assert!(matches!(body, Decoder::Chunked(_)));
}

/// The fuzz target's seeds, each read cut every way.
#[test]
fn the_fuzz_seeds_read_alike_however_cut() {
    let n = crate::fuzzing::run_seeds("backend_response", crate::fuzzing::backend_response);
    assert!(n >= 5, "{n} seeds");
}
