use bytes::BytesMut;
use http::header::{ACCEPT, CONTENT_LENGTH, HOST, HeaderName, HeaderValue};
use http::{Method, StatusCode};

use super::{
    Decoder, Error, MAX_HEAD, Step, folded_eq, read_response_head as read_head, read_whole as read,
    write_chunk, write_request_head as write_head,
};

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

#[test]
fn names_fold_as_http_folds_them() {
    // Every way of the comparison: 3, 4-7, 8, and past 8 bytes, whole
    // words and not.
    let spelled = [
        "x-a",
        "host",
        "accept",
        "x-trace",
        "x-tenant",
        "content-type",
        "authorization",
        "content-length",
        "x-forwarded-hosts",
        "mcp-protocol-version",
    ];
    for lower in spelled {
        assert!(lower.bytes().all(|b| b & 0x20 != 0), "{lower}");
        for name in [lower.to_owned(), lower.to_uppercase()] {
            assert!(folded_eq(name.as_bytes(), lower.as_bytes()), "{name}");
        }
        // Each byte of the name replaced by every other token byte:
        // equal exactly when `http` would call the names equal.
        for at in 0..lower.len() {
            for b in 0..=255u8 {
                let mut name = lower.as_bytes().to_vec();
                name[at] = b;
                let Ok(parsed) = HeaderName::from_bytes(&name) else {
                    continue;
                };
                let same = parsed.as_str() == lower;
                assert_eq!(folded_eq(&name, lower.as_bytes()), same, "{name:?}");
            }
        }
    }
    assert!(!folded_eq(b"hos", b"host"));
}

#[test]
fn chunks_are_framed_in_hex() {
    let mut out = Vec::new();
    write_chunk(&mut out, &[b'x'; 26]);
    assert_eq!(out, [b"1a\r\n".as_slice(), &[b'x'; 26], b"\r\n"].concat());
}

/// A request head read, its headers' places as the reader was given them.
fn read_request(wire: &[u8]) -> (String, Vec<(String, String)>) {
    let mut seen = Vec::new();
    let read = super::read_request_head(wire, |name, [ns, ne, vs, ve]| {
        let at = |s: u16, e: u16| String::from_utf8_lossy(&wire[s.into()..e.into()]).into_owned();
        assert_eq!(name, &wire[ns.into()..ne.into()]);
        seen.push((at(ns, ne), at(vs, ve)));
    });
    (format!("{read:?}"), seen)
}

#[test]
fn a_request_head_is_read_with_its_framing_and_headers_in_place() {
    use super::{Connection, ReadRequest, RequestBody, read_request_head};
    let wire = b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nX-Empty:\r\n\r\nhello";
    let (_, headers) = read_request(wire);
    assert_eq!(
        headers,
        [
            ("Host".into(), "a".into()),
            ("Content-Length".into(), "5".into()),
            ("X-Empty".into(), String::new())
        ]
    );
    let ReadRequest::Head(head) = read_request_head(wire, |_, _| {}) else {
        panic!("a whole head")
    };
    assert_eq!(
        (head.method, head.target, head.http11),
        ("POST", "/mcp", true)
    );
    assert_eq!(head.len, wire.len() - 5);
    assert_eq!(head.body, RequestBody::Length(5));
    assert_eq!(head.connection, Connection::default());
    assert!(!head.expect && !head.upgrade);

    let framing = |wire: &[u8]| match read_request_head(wire, |_, _| {}) {
        ReadRequest::Head(head) => head.body,
        other => panic!("{other:?}"),
    };
    let cases: &[(&[u8], RequestBody)] = &[
        (b"GET / HTTP/1.1\r\n\r\n", RequestBody::Empty),
        (
            b"POST / HTTP/1.1\r\ncontent-LENGTH: 0012\r\n\r\n",
            RequestBody::Length(12),
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            RequestBody::Chunked,
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            RequestBody::Invalid,
        ),
        (
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            RequestBody::Invalid,
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
            RequestBody::Invalid,
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n",
            RequestBody::Invalid,
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\n",
            RequestBody::Invalid,
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\n",
            RequestBody::Invalid,
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n",
            RequestBody::Invalid,
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n",
            RequestBody::Length(u64::MAX),
        ),
    ];
    for (wire, body) in cases {
        assert_eq!(framing(wire), *body, "{:?}", String::from_utf8_lossy(wire));
    }
}

#[test]
fn what_a_request_asks_of_its_connection_is_read() {
    use super::{Connection, ReadRequest, read_request_head};
    let head = |wire: &[u8]| match read_request_head(wire, |_, _| {}) {
        ReadRequest::Head(head) => (head.connection, head.expect, head.upgrade),
        other => panic!("{other:?}"),
    };
    let options = |close, keep_alive, other| Connection {
        close,
        keep_alive,
        other,
    };
    let wire = b"GET / HTTP/1.1\r\nConnection: Keep-Alive\r\nconnection: x, CLOSE\r\n\r\n";
    assert_eq!(head(wire), (options(true, true, true), false, false));
    let wire = b"GET / HTTP/1.1\r\nExpect: 100-continue\r\nUpgrade: h2c\r\n\r\n";
    assert_eq!(head(wire), (options(false, false, false), true, true));
}

#[test]
fn a_request_head_is_bounded_and_malformed_ones_refused() {
    use super::{MAX_HEADERS, ReadRequest, read_request_head};
    fn read(wire: &[u8]) -> ReadRequest<'_> {
        read_request_head(wire, |_, _| {})
    }
    let head = b"POST /mcp HTTP/1.1\r\nHost: a\r\n\r\n";
    for cut in 0..head.len() {
        assert!(matches!(read(&head[..cut]), ReadRequest::Partial), "{cut}");
    }
    let mut endless = b"POST /mcp HTTP/1.1\r\nX: ".to_vec();
    endless.resize(MAX_HEAD - 1, b'a');
    assert!(matches!(read(&endless), ReadRequest::Partial));
    // Unfinished at the limit: longer than it.
    endless.push(b'a');
    assert!(matches!(read(&endless), ReadRequest::TooLarge));
    let mut many = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..=MAX_HEADERS {
        many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert!(matches!(read(&many), ReadRequest::TooLarge));
    for wire in [
        &b"POST /mcp HTTP/1.1\r\nBad Name: x\r\n\r\n"[..],
        b"POST /mcp HTTP/1.1\r\nFolded: a\r\n b\r\n\r\n",
        b"POST /mcp HTTP/2.0\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    ] {
        assert!(matches!(read(wire), ReadRequest::Malformed), "{wire:?}");
    }
}

#[test]
fn a_content_length_is_digits_that_fit() {
    use super::content_length;
    assert_eq!(content_length(b"0"), Some(0));
    assert_eq!(content_length(b"007"), Some(7));
    assert_eq!(content_length(b"18446744073709551615"), Some(u64::MAX));
    for bad in [
        &b""[..],
        b"18446744073709551616",
        b"+1",
        b"-1",
        b" 1",
        b"1 ",
        b"0x1",
        b"1,1",
    ] {
        assert_eq!(content_length(bad), None, "{bad:?}");
    }
}
