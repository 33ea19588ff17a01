//! A request's head: read off the front of a buffer (a client's, by the
//! front), with how its body is framed and what else it asks of the
//! connection; and written (to a backend, by the client).

use std::mem::MaybeUninit;

use http::Method;
use http::header::{CONNECTION, CONTENT_LENGTH, HOST, HeaderName, HeaderValue, TRANSFER_ENCODING};

use super::body::is_chunked;
use super::{Connection, MAX_HEAD, MAX_HEADERS, Span, content_length, folded_eq};

/// What the front of a buffer holds.
#[derive(Debug)]
pub(crate) enum ReadRequest<'b> {
    Head(RequestHead<'b>),
    /// Not all of a head yet.
    Partial,
    /// A head longer than `MAX_HEAD`, or with more than `MAX_HEADERS`
    /// headers.
    TooLarge,
    /// Not an HTTP/1.x request head (httparse's refusal).
    Malformed,
}

/// A request head as read, borrowed from the buffer. Its headers are
/// given to the reader's own sink as they are walked, so nothing is
/// collected here.
#[derive(Debug)]
pub(crate) struct RequestHead<'b> {
    /// The head's length: its body (if any) starts there.
    pub(crate) len: usize,
    pub(crate) method: &'b str,
    /// The request target as sent.
    pub(crate) target: &'b str,
    /// HTTP/1.1; else 1.0.
    pub(crate) http11: bool,
    pub(crate) body: RequestBody,
    /// Every `Connection` line's options together.
    pub(crate) connection: Connection,
    /// An `Expect` header, whatever its value.
    pub(crate) expect: bool,
    /// An `Upgrade` header.
    pub(crate) upgrade: bool,
}

/// How a request's body is framed (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestBody {
    /// Neither `Content-Length` nor `Transfer-Encoding`: no body.
    Empty,
    /// One `Content-Length`.
    Length(u64),
    /// `Transfer-Encoding` with `chunked` last, on HTTP/1.1, without a
    /// `Content-Length`.
    Chunked,
    /// A framing that is an error or that could be read two ways, which
    /// this reader leaves to hyper: a `Content-Length` that is not one run
    /// of digits, or more than one (equal ones too); a `Transfer-Encoding`
    /// whose last coding is not chunked, on HTTP/1.0, or beside a
    /// `Content-Length`.
    Invalid,
}

/// Reads the request head at the front of `buf`, giving each header's
/// name and place in the head to `header` as it goes (one pass over the
/// headers both frames the request and lets the caller index them).
pub(crate) fn read_request_head<'b>(
    buf: &'b [u8],
    mut header: impl FnMut(&'b [u8], Span),
) -> ReadRequest<'b> {
    // Uninitialised: zeroing a hundred slots per request costs more than
    // reading the few that are there.
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, &mut slots) {
        // However it arrived: whole or in pieces, the same bound. A head
        // unfinished at `MAX_HEAD` bytes is longer (hyper's reading).
        Ok(httparse::Status::Complete(len)) if len > MAX_HEAD => return ReadRequest::TooLarge,
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => return ReadRequest::TooLarge,
        Ok(httparse::Status::Partial) => return ReadRequest::Partial,
        Err(httparse::Error::TooManyHeaders) => return ReadRequest::TooLarge,
        Err(_) => return ReadRequest::Malformed,
    };
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return ReadRequest::Malformed; // not after a complete parse
    };
    let mut head = RequestHead {
        len,
        method,
        target,
        http11: version == 1,
        body: RequestBody::Empty,
        connection: Connection::default(),
        expect: false,
        upgrade: false,
    };
    let (mut length, mut lengths, mut coding) = (None, 0u32, None);
    let base = buf.as_ptr() as usize;
    // Within a head of at most `MAX_HEAD` bytes: 16 bits.
    let at = |s: &[u8]| (s.as_ptr() as usize - base) as u16;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        let (n, v) = (at(name), at(h.value));
        header(
            name,
            [n, n + name.len() as u16, v, v + h.value.len() as u16],
        );
        // By length first: most names are none of these.
        match name.len() {
            14 if folded_eq(name, b"content-length") => {
                lengths += 1;
                length = content_length(h.value);
            }
            17 if folded_eq(name, b"transfer-encoding") => coding = Some(h.value),
            10 if folded_eq(name, b"connection") => {
                head.connection = head.connection.and(Connection::of(h.value));
            }
            6 if folded_eq(name, b"expect") => head.expect = true,
            7 if folded_eq(name, b"upgrade") => head.upgrade = true,
            _ => {}
        }
    }
    head.body = match (coding, lengths) {
        (None, 0) => RequestBody::Empty,
        (None, 1) => length.map_or(RequestBody::Invalid, RequestBody::Length),
        (Some(coding), 0) if head.http11 && is_chunked(coding) => RequestBody::Chunked,
        _ => RequestBody::Invalid,
    };
    ReadRequest::Head(head)
}

/// Appends a request's head: request line, `Host`, the headers given, and
/// the body's length. Framing is the gateway's: a `Host`, `Content-Length`,
/// `Transfer-Encoding` or `Connection` among `headers` is left out.
pub(crate) fn write_head<'a>(
    out: &mut Vec<u8>,
    method: &Method,
    path: &str,
    host: &HeaderValue,
    headers: impl Iterator<Item = (&'a HeaderName, &'a HeaderValue)>,
    body_len: usize,
) {
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        if is_framing(name) {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if says_length(method, body_len) {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(body_len).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// A header the writer of a request sets itself, never taken from the
/// headers it is given.
pub(crate) fn is_framing(name: &HeaderName) -> bool {
    name == HOST || name == CONTENT_LENGTH || name == TRANSFER_ENCODING || name == CONNECTION
}

/// Whether a request says its body's length. RFC 9110 §8.6: a POST says
/// it even when it is zero; a GET or DELETE without a body says nothing.
pub(crate) fn says_length(method: &Method, body_len: usize) -> bool {
    body_len > 0 || *method == Method::POST || *method == Method::PUT
}
