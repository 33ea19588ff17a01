//! A request's headers as the front reads them. A request hyper served
//! carries hyper's `HeaderMap`; the common `POST /mcp`, read by the
//! connection itself (`conn.rs`), keeps its head's bytes and where each
//! header lies in them (`Head`), which is all the dozen lookups a request
//! makes need. Building a map for it cost two allocations, a parse and a
//! hash per name and a shared `Bytes` (two atomic operations) per value,
//! and dropping it as much again (bench/analysis.md).

use std::borrow::Cow;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use bytes::Bytes;

use crate::http1::codec::{MAX_HEAD, MAX_HEADERS, Span, folded_eq};

pub(super) use crate::http1::header_text::visible_str;

/// Lookups by name; a name matches whatever its case in the request.
pub(crate) trait HeaderLookup {
    /// Every value of `name`, in the order the request sent them.
    fn all(&self, name: &HeaderName) -> Values<'_>;

    /// The first value of `name`.
    fn get(&self, name: &HeaderName) -> Option<&[u8]> {
        self.all(name).next()
    }

    /// The first value of `name`, if it is visible ASCII (what
    /// `HeaderValue::to_str` accepts).
    fn get_str(&self, name: &HeaderName) -> Option<&str> {
        self.get(name).and_then(visible_str)
    }
}

/// The values `HeaderLookup::all` finds.
pub(crate) enum Values<'a> {
    Map(axum::http::header::ValueIter<'a, HeaderValue>),
    Head {
        head: &'a Head,
        /// Bit `i` set: the `i`th header has the name, and is not yet taken.
        matching: u128,
    },
}

impl<'a> Iterator for Values<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        match self {
            Values::Map(values) => values.next().map(HeaderValue::as_bytes),
            Values::Head { head, matching } => {
                if *matching == 0 {
                    return None;
                }
                let i = matching.trailing_zeros() as usize;
                *matching &= *matching - 1;
                let [_, _, start, end] = head.span(i);
                Some(&head.bytes[usize::from(start)..usize::from(end)])
            }
        }
    }
}

impl HeaderLookup for HeaderMap {
    fn all(&self, name: &HeaderName) -> Values<'_> {
        Values::Map(self.get_all(name).iter())
    }
}

/// Spans a `Head` holds inline; a head with more keeps the rest in a
/// `Vec`. A client sends about ten; what a request's future holds is
/// paid for at every request (`reply.rs`, `a_request_future_stays_small`).
const INLINE: usize = 16;

/// A head the connection parsed itself: its bytes, and where each header
/// lies in them (names as httparse checked them: tokens, which `http`
/// accepts as they are; values as httparse checked them, which is what a
/// `HeaderValue` may hold).
pub(crate) struct Head {
    bytes: Bytes,
    spans: Spans,
}

/// Where a head's headers lie, gathered while the connection walks the
/// head (`http1::codec::read_request_head`), before its bytes are cut from the buffer: one
/// pass over the headers both checks the request's framing and indexes it.
pub(super) struct Spans {
    inline: [Span; INLINE],
    more: Vec<Span>,
    count: u8,
    /// By `Known`: where its first header is, plus one (0: none).
    first: [u8; KNOWN],
    /// By `Known`'s bit: sent more than once.
    repeated: u16,
}

impl Spans {
    pub(super) fn new() -> Spans {
        Spans {
            inline: [[0; 4]; INLINE],
            more: Vec::new(),
            count: 0,
            first: [0; KNOWN],
            repeated: 0,
        }
    }

    /// Adds the next header, `name` its name's bytes (a head has at most
    /// `MAX_HEADERS`), and notes it if it is one of the known headers.
    pub(super) fn push(&mut self, name: &[u8], span: Span) {
        let i = usize::from(self.count);
        assert!(i < MAX_HEADERS);
        match self.inline.get_mut(i) {
            Some(slot) => *slot = span,
            None => self.more.push(span),
        }
        self.count += 1;
        let Some(k) = Known::of(name) else {
            return;
        };
        match self.first[k as usize] {
            0 => self.first[k as usize] = i as u8 + 1,
            _ => self.repeated |= k.bit(),
        }
    }
}

impl Head {
    /// The head `bytes` with its headers at `spans` (every offset within
    /// `bytes`).
    pub(super) fn new(bytes: Bytes, spans: Spans) -> Head {
        const { assert!(MAX_HEAD <= u16::MAX as usize) };
        assert!(bytes.len() <= MAX_HEAD);
        Head { bytes, spans }
    }

    fn span(&self, i: usize) -> Span {
        match i.checked_sub(INLINE) {
            None => self.spans.inline[i],
            Some(past) => self.spans.more[past],
        }
    }

    fn spans(&self) -> impl Iterator<Item = Span> + '_ {
        let here = usize::from(self.spans.count).min(INLINE);
        self.spans.inline[..here]
            .iter()
            .chain(&self.spans.more)
            .copied()
    }

    /// The request target, as its request line has it (for the fuzz
    /// targets: a request this module indexes is not asked for it).
    pub(super) fn target(&self) -> &[u8] {
        // httparse skips empty lines before a request line.
        let start = self.bytes.iter().position(|b| !matches!(b, b'\r' | b'\n'));
        let line = &self.bytes[start.unwrap_or(0)..];
        line.split(|&b| b == b' ').nth(1).unwrap_or_default()
    }

    /// Every header, its name as the request spelled it.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.spans().map(|[ns, ne, vs, ve]| {
            let at = |s: u16, e: u16| &self.bytes[usize::from(s)..usize::from(e)];
            (at(ns, ne), at(vs, ve))
        })
    }

    /// The same headers as a `HeaderMap`, for the paths that hand one on.
    pub(super) fn to_map(&self) -> HeaderMap {
        let mut map = HeaderMap::with_capacity(usize::from(self.spans.count));
        for [ns, ne, vs, ve] in self.spans() {
            let name = &self.bytes[usize::from(ns)..usize::from(ne)];
            let value = self.bytes.slice(usize::from(vs)..usize::from(ve));
            // Tokens, as httparse checked them: `http` takes every one; the
            // known ones without the copy a name it does not know costs.
            let name = match Known::of(name) {
                Some(k) => k.name(),
                None => match HeaderName::from_bytes(name) {
                    Ok(name) => name,
                    Err(_) => continue,
                },
            };
            // SAFETY: httparse has checked the value: visible ASCII,
            // spaces, tabs and obs-text, which is what a `HeaderValue` may
            // hold (hyper relies on the same check).
            let value = unsafe { HeaderValue::from_maybe_shared_unchecked(value) };
            map.append(name, value);
        }
        map
    }
}

impl HeaderLookup for Head {
    fn all(&self, name: &HeaderName) -> Values<'_> {
        const { assert!(MAX_HEADERS <= 128) };
        let want = name.as_str().as_bytes();
        let matching = match Known::of(want) {
            Some(k) if self.spans.repeated & k.bit() == 0 => match self.spans.first[k as usize] {
                0 => 0,
                at => 1 << (at - 1),
            },
            _ => self.scan(want),
        };
        Values::Head {
            head: self,
            matching,
        }
    }
}

impl Head {
    /// The headers named `want` (lower-case), one bit each.
    fn scan(&self, want: &[u8]) -> u128 {
        let mut matching = 0;
        for (i, [ns, ne, _, _]) in self.spans().enumerate() {
            let name = &self.bytes[usize::from(ns)..usize::from(ne)];
            if name.len() == want.len() && name.eq_ignore_ascii_case(want) {
                matching |= 1 << i;
            }
        }
        matching
    }
}

/// The headers every request is checked for, found once as its head is
/// walked: each of the dozen lookups a request makes is then an index, not
/// a pass over every header compared by name, and whether one was sent
/// twice is a bit. Others are looked for by that pass.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Known {
    Host,
    Origin,
    ContentType,
    ContentLength,
    Accept,
    Authorization,
    Session,
    Version,
    Method,
    Name,
}

const KNOWN: usize = 10;

impl Known {
    /// The header `name` is, in any case.
    fn of(name: &[u8]) -> Option<Known> {
        let (known, spelled): (Known, &[u8]) = match name.len() {
            4 => (Known::Host, b"host"),
            6 if name[0] | 0x20 == b'o' => (Known::Origin, b"origin"),
            6 => (Known::Accept, b"accept"),
            8 => (Known::Name, b"mcp-name"),
            10 => (Known::Method, b"mcp-method"),
            12 => (Known::ContentType, b"content-type"),
            13 => (Known::Authorization, b"authorization"),
            14 if name[0] | 0x20 == b'c' => (Known::ContentLength, b"content-length"),
            14 => (Known::Session, b"mcp-session-id"),
            20 => (Known::Version, b"mcp-protocol-version"),
            _ => return None,
        };
        folded_eq(name, spelled).then_some(known)
    }

    fn bit(self) -> u16 {
        1 << self as u16
    }

    fn name(self) -> HeaderName {
        use axum::http::header;
        match self {
            Known::Host => header::HOST,
            Known::Origin => header::ORIGIN,
            Known::ContentType => header::CONTENT_TYPE,
            Known::ContentLength => header::CONTENT_LENGTH,
            Known::Accept => header::ACCEPT,
            Known::Authorization => header::AUTHORIZATION,
            Known::Session => crate::protocol::SESSION_HEADER,
            Known::Version => crate::protocol::VERSION_HEADER,
            Known::Method => crate::protocol::METHOD_HEADER,
            Known::Name => crate::protocol::NAME_HEADER,
        }
    }
}

/// A POST's headers, whoever read them.
pub(crate) enum RequestHeaders {
    Hyper(HeaderMap),
    Own(Head),
}

impl RequestHeaders {
    /// As a `HeaderMap` (made for a head the connection read).
    pub(super) fn map(&self) -> Cow<'_, HeaderMap> {
        match self {
            RequestHeaders::Hyper(map) => Cow::Borrowed(map),
            RequestHeaders::Own(head) => Cow::Owned(head.to_map()),
        }
    }
}

/// The headers that mirror the body (and that an intermediary may route
/// on), by the names the revision spells them with.
const MIRRORS: [(Known, &str); 3] = [
    (Known::Version, "MCP-Protocol-Version"),
    (Known::Method, "Mcp-Method"),
    (Known::Name, "Mcp-Name"),
];
const MIRROR_BITS: u16 =
    1 << Known::Version as u16 | 1 << Known::Method as u16 | 1 << Known::Name as u16;

impl RequestHeaders {
    /// The first header that mirrors the body sent more than once:
    /// reading only the first of two would let the gateway and a reader
    /// in front of it act on different values. A head the connection
    /// read knows already (a bit per header, set as it was walked).
    #[inline]
    pub(super) fn repeated_mirror(&self) -> Option<&'static str> {
        // The common answer, for a head: one test of its bits.
        if let RequestHeaders::Own(head) = self
            && head.spans.repeated & MIRROR_BITS == 0
        {
            return None;
        }
        let twice = |k: Known| match self {
            RequestHeaders::Own(head) => head.spans.repeated & k.bit() != 0,
            RequestHeaders::Hyper(map) => map.get_all(k.name()).iter().nth(1).is_some(),
        };
        MIRRORS
            .iter()
            .find(|(k, _)| twice(*k))
            .map(|(_, spelled)| *spelled)
    }
}

impl HeaderLookup for RequestHeaders {
    fn all(&self, name: &HeaderName) -> Values<'_> {
        match self {
            RequestHeaders::Hyper(map) => map.all(name),
            RequestHeaders::Own(head) => head.all(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header;

    /// A head of `lines` and the spans of its headers, as `conn.rs` makes them.
    fn head(lines: &[(&str, &str)]) -> Head {
        let mut text = String::from("POST /mcp HTTP/1.1\r\n");
        let mut spans = Vec::new();
        let mut names = Vec::new();
        for (name, value) in lines {
            let ns = text.len() as u16;
            text.push_str(name);
            let ne = text.len() as u16;
            text.push_str(": ");
            let vs = text.len() as u16;
            text.push_str(value);
            let ve = text.len() as u16;
            text.push_str("\r\n");
            spans.push([ns, ne, vs, ve]);
            names.push(name.as_bytes());
        }
        text.push_str("\r\n");
        let mut found = Spans::new();
        for (name, span) in names.into_iter().zip(spans) {
            found.push(name, span);
        }
        Head::new(Bytes::from(text), found)
    }

    #[test]
    fn a_head_is_read_as_its_map_would_be() {
        let lines = [
            ("Host", "127.0.0.1:7400"),
            ("ACCEPT", "application/json"),
            ("x-other", "1"),
            ("accept", "text/event-stream"),
            ("Mcp-Session-Id", "abc"),
            ("authorization", "Bearer caf\u{e9}"),
        ];
        let head = head(&lines);
        let map = head.to_map();
        assert_eq!(map.len(), lines.len());
        for name in [
            header::HOST,
            header::ACCEPT,
            header::ORIGIN,
            header::AUTHORIZATION,
            crate::protocol::SESSION_HEADER,
            HeaderName::from_static("x-other"),
        ] {
            let ours: Vec<_> = head.all(&name).collect();
            let theirs: Vec<_> = HeaderLookup::all(&map, &name).collect();
            assert_eq!(ours, theirs, "{name}");
            assert_eq!(
                head.get_str(&name),
                map.get(&name).and_then(|v| v.to_str().ok()),
                "{name}"
            );
        }
        let accepts: Vec<_> = head.all(&header::ACCEPT).collect();
        assert_eq!(accepts, [&b"application/json"[..], b"text/event-stream"]);
        // Not visible ASCII: a value, but no `str`.
        assert!(head.get(&header::AUTHORIZATION).is_some());
        assert_eq!(head.get_str(&header::AUTHORIZATION), None);
    }

    #[test]
    fn each_known_header_is_its_name() {
        use Known::*;
        let all = [
            Host,
            Origin,
            ContentType,
            ContentLength,
            Accept,
            Authorization,
            Session,
            Version,
            Method,
            Name,
        ];
        assert_eq!(all.len(), KNOWN);
        for k in all {
            let name = k.name();
            assert!(
                matches!(Known::of(name.as_str().as_bytes()), Some(j) if j as u8 == k as u8),
                "{name}"
            );
        }
    }

    /// Each header the index knows, in other cases, once and twice, among
    /// others: found as a pass over every header finds it.
    #[test]
    fn known_headers_are_found_as_any_other() {
        let known = [
            "Host",
            "ORIGIN",
            "Content-Type",
            "content-LENGTH",
            "Accept",
            "Authorization",
            "MCP-Session-Id",
            "Mcp-Protocol-Version",
            "MCP-Method",
            "mcp-NAME",
        ];
        for twice in [false, true] {
            let mut lines = vec![("x-first", "0"), ("Content-Lengtx", "no")];
            for (i, name) in known.iter().enumerate() {
                lines.push((name, ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"][i]));
                lines.push(("x-between", "1"));
                if twice {
                    lines.push((name, "again"));
                }
            }
            let head = head(&lines);
            let map = head.to_map();
            for name in known
                .iter()
                .chain(&["content-lengtx", "x-between", "x-none"])
            {
                let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
                let ours: Vec<_> = head.all(&name).collect();
                let theirs: Vec<_> = HeaderLookup::all(&map, &name).collect();
                assert_eq!(ours, theirs, "{name}, twice: {twice}");
                assert_eq!(
                    head.scan(name.as_str().as_bytes()).count_ones() as usize,
                    ours.len()
                );
            }
        }
    }

    /// A mirroring header sent twice is found alike in a head and in its
    /// map, in any case, whether or not the values agree.
    #[test]
    fn a_mirror_sent_twice_is_found_by_either_reader() {
        type Lines<'a> = &'a [(&'a str, &'a str)];
        let cases: [(Lines<'_>, Option<&str>); 5] = [
            (&[("Mcp-Name", "a"), ("x-other", "1")], None),
            (&[("Mcp-Name", "a"), ("mcp-NAME", "b")], Some("Mcp-Name")),
            (
                &[("MCP-METHOD", "m"), ("mcp-method", "m")],
                Some("Mcp-Method"),
            ),
            (
                &[
                    ("Mcp-Protocol-Version", "v"),
                    ("Mcp-Name", "a"),
                    ("MCP-Protocol-Version", "v"),
                ],
                Some("MCP-Protocol-Version"),
            ),
            (
                &[("Mcp-Names", "a"), ("Mcp-Names", "a"), ("Connection", "x")],
                None,
            ),
        ];
        for (lines, twice) in cases {
            let head = head(lines);
            let map = RequestHeaders::Hyper(head.to_map());
            assert_eq!(map.repeated_mirror(), twice, "{lines:?}");
            assert_eq!(
                RequestHeaders::Own(head).repeated_mirror(),
                twice,
                "{lines:?}"
            );
        }
    }

    #[test]
    fn a_full_head_finds_every_header() {
        let names: Vec<String> = (0..MAX_HEADERS).map(|i| format!("x-h{i}")).collect();
        let values: Vec<String> = (0..MAX_HEADERS).map(|i| i.to_string()).collect();
        let lines: Vec<(&str, &str)> = names
            .iter()
            .map(String::as_str)
            .zip(values.iter().map(String::as_str))
            .collect();
        let head = head(&lines);
        assert_eq!(head.iter().count(), MAX_HEADERS);
        for (name, value) in names.iter().zip(&values) {
            let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
            let found: Vec<_> = head.all(&name).collect();
            assert_eq!(found, [value.as_bytes()]);
        }
    }
}
