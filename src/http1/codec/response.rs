//! A response's head: read off the front of a buffer (a backend's, by the
//! client), with how its body is framed; and written (to a client, by the
//! front), its framing headers the front's own.

use std::mem::MaybeUninit;
use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue};
use http::{Method, StatusCode};

use super::body::{Chunked, Decoder, Step};
use super::{Connection, Error, MAX_HEAD, MAX_HEADERS, folded_eq};

/// A response's head, and how its body is framed.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) status: StatusCode,
    pub(crate) headers: Headers,
    pub(crate) content_length: Option<u64>,
    pub(crate) body: Decoder,
    /// The connection may carry another request once this body has ended.
    pub(crate) keep_alive: bool,
}

/// Takes a response's head off the front of `buf` (informational 1xx
/// heads before it too); `None` until the whole head is there.
pub(crate) fn read_head(buf: &mut BytesMut, method: &Method) -> Result<Option<Head>, Error> {
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
        // The framing headers are noted as the fields are: one walk of
        // the head, not one per header asked for (three walks cost about
        // 100 instructions a response).
        let mut framing = Framed::default();
        let mut fields = Vec::with_capacity(parsed.headers.len());
        for h in parsed.headers.iter() {
            framing.note(h.name.as_bytes(), h.value)?;
            fields.push(Field {
                name: at(h.name.as_bytes()),
                value: at(h.value),
            });
        }
        let headers = Headers {
            head: buf.split_to(len).freeze(),
            fields,
        };
        return Ok(Some(frame(status, headers, framing, http11, method)));
    }
}

/// What a response's header fields say of its framing, as they pass.
#[derive(Default)]
struct Framed {
    /// All `Content-Length` values (and the members of a list) must agree.
    content_length: Option<u64>,
    /// Whether the last `Transfer-Encoding` ends in `chunked`.
    chunked: Option<bool>,
    connection: Connection,
}

impl Framed {
    #[inline]
    fn note(&mut self, name: &[u8], value: &[u8]) -> Result<(), Error> {
        // By length first: most fields are none of the three.
        match name.len() {
            14 if folded_eq(name, b"content-length") => {
                for part in value.split(|b| *b == b',') {
                    let n = super::content_length(part.trim_ascii())
                        .ok_or(Error::Head("bad content-length"))?;
                    if self.content_length.is_some_and(|l| l != n) {
                        return Err(Error::Head("conflicting content-length"));
                    }
                    self.content_length = Some(n);
                }
            }
            17 if folded_eq(name, b"transfer-encoding") => {
                self.chunked = Some(super::body::is_chunked(value));
            }
            10 if folded_eq(name, b"connection") => {
                self.connection = self.connection.and(Connection::of(value));
            }
            _ => {}
        }
        Ok(())
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

    /// The options of every `name` line (lower case: `connection`, or the
    /// `proxy-connection` some proxies answer with), taken together.
    pub(crate) fn options(&self, name: &str) -> Connection {
        self.all(name).fold(Connection::default(), |seen, value| {
            seen.and(Connection::of(value))
        })
    }

    /// Every value of `name` (lower case), in order.
    pub(super) fn all<'a, 'n>(
        &'a self,
        name: &'n str,
    ) -> impl DoubleEndedIterator<Item = &'a [u8]> + use<'a, 'n> {
        self.fields
            .iter()
            .filter(move |f| folded_eq(&self.head[f.name.clone()], name.as_bytes()))
            .map(|f| &self.head[f.value.clone()])
    }
}

/// RFC 9112 §6.3: how the body's end is known.
fn frame(
    status: StatusCode,
    headers: Headers,
    framed: Framed,
    http11: bool,
    method: &Method,
) -> Head {
    let Framed {
        content_length,
        chunked,
        connection,
    } = framed;
    let mut keep_alive = !connection.close && (http11 || connection.keep_alive);
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
    Head {
        status,
        headers,
        content_length,
        body,
        keep_alive,
    }
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

/// How a response written to a client frames its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body (1xx, 204, 304).
    None,
    Length(u64),
    Chunked,
}

/// Appends a response's status line and headers, `headers` by their
/// (lower-case) names and values. The framing headers are the writer's
/// (`framing`; any among `headers` are left out), and `date` is added
/// unless `headers` has one. Returns whether the connection closes after
/// the response: `close`, or a `Connection` among `headers` says so (any
/// option but `keep-alive`: the hop-by-hop headers it names are not the
/// writer's to forward).
pub(crate) fn write_head<'a>(
    out: &mut Vec<u8>,
    status: StatusCode,
    headers: impl Iterator<Item = (&'a str, &'a [u8])>,
    framing: Framing,
    mut close: bool,
) -> bool {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    let mut dated = false;
    for (name, value) in headers {
        match name {
            "connection" => {
                let options = Connection::of(value);
                close |= options.close || options.other;
                continue;
            }
            "content-length" | "transfer-encoding" => continue,
            "date" => dated = true,
            _ => {}
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    match framing {
        Framing::None => {}
        Framing::Length(n) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Framing::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    if !dated {
        out.extend_from_slice(b"date: ");
        super::date::now(out);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    close
}
