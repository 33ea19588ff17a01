//! HTTP/1.1 on the wire to a backend (RFC 9112), without I/O: a request's
//! head written out, a response's head read, its body's framing undone.
//! The connection in `http_client` reads into one buffer per connection
//! and hands it here; nothing here waits or allocates a buffer of its own.
//!
//! A backend is configured, not trusted: every length it sends is bounded
//! (the head, a chunk's size line, the trailers) and every malformed frame
//! is an error, never a guess.

use std::mem::MaybeUninit;
use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};
use http::header::{CONNECTION, CONTENT_LENGTH, HeaderName, HeaderValue};
use http::{Method, StatusCode};

/// The largest response head taken (status line and headers).
pub(super) const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 100;
/// A chunk's size line (with its extensions) or one trailer line.
const MAX_LINE: usize = 4 * 1024;
/// All of a chunked body's trailers together.
const MAX_TRAILERS: usize = 16 * 1024;

/// Why a response could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum Error {
    #[error("malformed response head: {0}")]
    Head(&'static str),
    #[error("response head larger than {MAX_HEAD} bytes")]
    HeadTooLarge,
    #[error("malformed chunked body: {0}")]
    Chunk(&'static str),
    #[error("connection closed before the response ended")]
    Incomplete,
}

/// Appends a request's head: request line, `Host`, the headers given, and
/// the body's length. Framing is the gateway's: a `Host`, `Content-Length`,
/// `Transfer-Encoding` or `Connection` among `headers` is left out.
pub(super) fn write_head<'a>(
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
    // RFC 9110 §8.6: a POST says its length even when it is zero; a GET or
    // DELETE without a body says nothing.
    if body_len > 0 || *method == Method::POST || *method == Method::PUT {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(body_len).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

fn is_framing(name: &HeaderName) -> bool {
    name == http::header::HOST
        || name == CONTENT_LENGTH
        || name == http::header::TRANSFER_ENCODING
        || name == CONNECTION
}

/// A response's head, and how its body is framed.
#[derive(Debug)]
pub(super) struct Head {
    pub(super) status: StatusCode,
    pub(super) headers: Headers,
    pub(super) content_length: Option<u64>,
    pub(super) body: Decoder,
    /// The connection may carry another request once this body has ended.
    pub(super) keep_alive: bool,
}

/// Takes a response's head off the front of `buf` (informational 1xx
/// heads before it too); `None` until the whole head is there.
pub(super) fn read_head(buf: &mut BytesMut, method: &Method) -> Result<Option<Head>, Error> {
    loop {
        // Asked first before anything arrived (the wait for a response
        // begins with a look at the buffer).
        if buf.is_empty() {
            return Ok(None);
        }
        // Uninitialised: zeroing a hundred slots per response costs more
        // than reading the few that are there.
        let mut slots = [const { MaybeUninit::uninit() }; MAX_HEADERS];
        let mut parsed = httparse::Response::new(&mut []);
        let parsing = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut parsed,
            buf,
            &mut slots,
        );
        let len = match parsing {
            // However it arrived: whole or in pieces, the same bound.
            Ok(httparse::Status::Complete(len)) if len > MAX_HEAD => {
                return Err(Error::HeadTooLarge);
            }
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                return Err(Error::HeadTooLarge);
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(Error::Head("too many headers")),
            Err(_) => return Err(Error::Head("not HTTP/1.x")),
        };
        let code = parsed.code.unwrap_or_default();
        let status = StatusCode::from_u16(code).map_err(|_| Error::Head("bad status code"))?;
        if status.is_informational() {
            if status == StatusCode::SWITCHING_PROTOCOLS {
                return Err(Error::Head("an upgrade nobody asked for"));
            }
            buf.advance(len);
            continue;
        }
        let http11 = parsed.version == Some(1);
        // Offsets, not slices: the head is split off `buf` and its values
        // shared from it, not copied.
        let base = buf.as_ptr() as usize;
        let at = |s: &[u8]| {
            let start = s.as_ptr() as usize - base;
            start..start + s.len()
        };
        let fields = parsed
            .headers
            .iter()
            .map(|h| Field {
                name: at(h.name.as_bytes()),
                value: at(h.value),
            })
            .collect();
        let headers = Headers {
            head: buf.split_to(len).freeze(),
            fields,
        };
        return frame(status, headers, http11, method).map(Some);
    }
}

/// A response's header fields as they came, looked up by name: a response
/// is asked for two or three of them, so no map is built.
#[derive(Debug)]
pub(crate) struct Headers {
    head: Bytes,
    fields: Vec<Field>,
}

#[derive(Debug)]
struct Field {
    name: Range<usize>,
    value: Range<usize>,
}

impl Headers {
    /// The first value of `name`, shared from the head.
    pub(crate) fn get(&self, name: &HeaderName) -> Option<HeaderValue> {
        let value = self.all(name.as_str()).next()?;
        HeaderValue::from_maybe_shared(self.head.slice_ref(value)).ok()
    }

    /// The first value of `name`, if it is visible ASCII.
    pub(crate) fn get_str(&self, name: &HeaderName) -> Option<&str> {
        crate::http1::header_text::visible_str(self.all(name.as_str()).next()?)
    }

    /// Every value of `name` (lower case), in order.
    fn all<'a, 'n>(
        &'a self,
        name: &'n str,
    ) -> impl DoubleEndedIterator<Item = &'a [u8]> + use<'a, 'n> {
        self.fields
            .iter()
            .filter(move |f| self.head[f.name.clone()].eq_ignore_ascii_case(name.as_bytes()))
            .map(|f| &self.head[f.value.clone()])
    }
}

/// RFC 9112 §6.3: how the body's end is known.
fn frame(
    status: StatusCode,
    headers: Headers,
    http11: bool,
    method: &Method,
) -> Result<Head, Error> {
    let content_length = content_length(&headers)?;
    let chunked = headers
        .all("transfer-encoding")
        .next_back()
        .map(|v| last_token(v).eq_ignore_ascii_case(b"chunked"));
    let close = has_token(&headers, b"close");
    let mut keep_alive = if http11 {
        !close
    } else {
        !close && has_token(&headers, b"keep-alive")
    };
    let body = if *method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        Decoder::Length(0)
    } else {
        match (chunked, content_length) {
            (Some(true), length) => {
                // Both framings: the length is ignored, and the connection
                // not trusted with another request (§6.3 item 3).
                keep_alive &= length.is_none();
                Decoder::Chunked(Chunked::Size)
            }
            (Some(false), _) | (None, None) => {
                keep_alive = false;
                Decoder::UntilClose
            }
            (None, Some(n)) => Decoder::Length(n),
        }
    };
    Ok(Head {
        status,
        headers,
        content_length,
        body,
        keep_alive,
    })
}

/// All `Content-Length` values (and the members of a list) must agree.
fn content_length(headers: &Headers) -> Result<Option<u64>, Error> {
    let mut length = None;
    for value in headers.all("content-length") {
        for part in value.split(|b| *b == b',') {
            let part = part.trim_ascii();
            if part.is_empty() || part.len() > 19 || !part.iter().all(u8::is_ascii_digit) {
                return Err(Error::Head("bad content-length"));
            }
            let n = part.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
            if length.is_some_and(|l| l != n) {
                return Err(Error::Head("conflicting content-length"));
            }
            length = Some(n);
        }
    }
    Ok(length)
}

fn last_token(value: &[u8]) -> &[u8] {
    value
        .rsplit(|b| *b == b',')
        .next()
        .unwrap_or(value)
        .trim_ascii()
}

fn has_token(headers: &Headers, token: &[u8]) -> bool {
    headers.all("connection").any(|v| {
        v.split(|b| *b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
    })
}

/// Where a body's reading stands.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Decoder {
    /// This many bytes still to come.
    Length(u64),
    Chunked(Chunked),
    /// Everything until the backend closes the connection.
    UntilClose,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Chunked {
    /// A chunk's size line is next.
    Size,
    /// This many bytes of the chunk still to come.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// Trailer lines, this many bytes of them read so far.
    Trailers(usize),
    Done,
}

/// What the next look at the buffer gave.
#[derive(Debug, PartialEq)]
pub(super) enum Step {
    Data(Bytes),
    /// Nothing more until more is read.
    More,
    Done,
}

impl Decoder {
    /// The body has ended (before any of it is read, too: an empty one).
    pub(super) fn is_done(&self) -> bool {
        matches!(self, Decoder::Length(0) | Decoder::Chunked(Chunked::Done))
    }

    /// The next piece of the body from the front of `buf`.
    pub(super) fn step(&mut self, buf: &mut BytesMut) -> Result<Step, Error> {
        match self {
            Decoder::Length(0) => Ok(Step::Done),
            Decoder::Length(left) => {
                if buf.is_empty() {
                    return Ok(Step::More);
                }
                let take = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
                *left -= take as u64;
                Ok(Step::Data(buf.split_to(take).freeze()))
            }
            Decoder::UntilClose if buf.is_empty() => Ok(Step::More),
            Decoder::UntilClose => Ok(Step::Data(buf.split().freeze())),
            Decoder::Chunked(state) => state.step(buf),
        }
    }

    /// The connection ended: the end of a body framed by it, an error for
    /// any other.
    pub(super) fn eof(&mut self) -> Result<(), Error> {
        match self {
            Decoder::UntilClose => {
                *self = Decoder::Length(0);
                Ok(())
            }
            _ if self.is_done() => Ok(()),
            _ => Err(Error::Incomplete),
        }
    }
}

impl Chunked {
    fn step(&mut self, buf: &mut BytesMut) -> Result<Step, Error> {
        loop {
            match self {
                Chunked::Size => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(Step::More);
                    };
                    let size = chunk_size(&line)?;
                    *self = if size == 0 {
                        Chunked::Trailers(0)
                    } else {
                        Chunked::Data(size)
                    };
                }
                Chunked::Data(left) => {
                    if buf.is_empty() {
                        return Ok(Step::More);
                    }
                    let take = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
                    *left -= take as u64;
                    if *left == 0 {
                        *self = Chunked::DataEnd;
                    }
                    return Ok(Step::Data(buf.split_to(take).freeze()));
                }
                Chunked::DataEnd => match buf.first() {
                    None => return Ok(Step::More),
                    Some(b'\n') => {
                        buf.advance(1);
                        *self = Chunked::Size;
                    }
                    Some(b'\r') => match buf.get(1) {
                        None => return Ok(Step::More),
                        Some(b'\n') => {
                            buf.advance(2);
                            *self = Chunked::Size;
                        }
                        Some(_) => return Err(Error::Chunk("no CRLF after a chunk")),
                    },
                    Some(_) => return Err(Error::Chunk("no CRLF after a chunk")),
                },
                Chunked::Trailers(read) => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(Step::More);
                    };
                    *read += line.len();
                    if line.is_empty() {
                        *self = Chunked::Done;
                    } else if *read > MAX_TRAILERS {
                        return Err(Error::Chunk("trailers too large"));
                    }
                }
                Chunked::Done => return Ok(Step::Done),
            }
        }
    }
}

/// One line off the front of `buf`, without its CRLF (or bare LF).
fn take_line(buf: &mut BytesMut) -> Result<Option<BytesMut>, Error> {
    let Some(at) = memchr::memchr(b'\n', buf) else {
        if buf.len() > MAX_LINE {
            return Err(Error::Chunk("line too long"));
        }
        return Ok(None);
    };
    if at > MAX_LINE {
        return Err(Error::Chunk("line too long"));
    }
    let mut line = buf.split_to(at + 1);
    line.truncate(at);
    if line.last() == Some(&b'\r') {
        line.truncate(at - 1);
    }
    Ok(Some(line))
}

/// `1a3f` with optional extensions (`;name=value`), which are ignored.
fn chunk_size(line: &[u8]) -> Result<u64, Error> {
    let end = line
        .iter()
        .position(|b| *b == b';' || *b == b' ' || *b == b'\t')
        .unwrap_or(line.len());
    let digits = &line[..end];
    if digits.is_empty() || digits.len() > 15 {
        return Err(Error::Chunk("bad chunk size"));
    }
    let mut size = 0u64;
    for d in digits {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return Err(Error::Chunk("bad chunk size")),
        };
        size = size << 4 | u64::from(v);
    }
    let rest = line[end..].trim_ascii_start();
    if !rest.is_empty() && rest[0] != b';' {
        return Err(Error::Chunk("bad chunk size"));
    }
    Ok(size)
}

/// A whole response arriving `cut` bytes at a time, read as a connection
/// reads it: its status, its body, and whether the connection could carry
/// another request. For the fuzz target and the tests.
pub(crate) fn read_whole(wire: &[u8], cut: usize) -> Result<(StatusCode, Vec<u8>, bool), Error> {
    let mut buf = BytesMut::new();
    let mut pieces = wire.chunks(cut.max(1));
    let head = loop {
        if let Some(head) = read_head(&mut buf, &Method::POST)? {
            break head;
        }
        match pieces.next() {
            Some(p) => buf.extend_from_slice(p),
            None => return Err(Error::Incomplete),
        }
    };
    let mut body = head.body;
    let mut data = Vec::new();
    loop {
        match body.step(&mut buf)? {
            Step::Data(d) => data.extend_from_slice(&d),
            Step::Done => {
                // Anything after the body, now or later, spoils the
                // connection (`Conn::reusable` sees it either way).
                let after = !buf.is_empty() || pieces.next().is_some();
                return Ok((head.status, data, head.keep_alive && !after));
            }
            Step::More => match pieces.next() {
                Some(p) => buf.extend_from_slice(p),
                None => {
                    body.eof()?;
                    return Ok((head.status, data, false));
                }
            },
        }
    }
}

#[cfg(test)]
mod tests;
