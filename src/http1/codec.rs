//! HTTP/1.1 on the wire (RFC 9112), without I/O, for both directions: a
//! request's head read (a client's, by the front) and written (to a
//! backend, by the client), a response's head read (a backend's) and
//! written (to a client), and a body's framing (`body`). Callers read
//! into a buffer of their own and hand it here; nothing here waits, and
//! nothing allocates a buffer of its own.
//!
//! What a peer sends is bounded (a head, a chunk's size line, the
//! trailers) and read strictly. A client's request head that is anything
//! but a plain request and its body goes to hyper, which answers it as it
//! always has (`front/conn.rs`); a backend's malformed frame is an error,
//! never a guess. The limits and rules both directions share are here:
//! one head-size bound, one header count, one reading of `Content-Length`
//! and of `Connection`, one comparison of header names.

mod body;
mod date;
mod request;
mod response;

pub(crate) use body::{Decoder, Step, write_chunk, write_chunk_head};
pub(crate) use request::{ReadRequest, RequestBody, read_request_head};
pub(crate) use request::{is_framing, says_length, write_head as write_request_head};
pub(crate) use response::{Framing, Head, Headers, read_head as read_response_head};
pub(crate) use response::{read_whole, write_head as write_response_head};

/// The largest head read, request or response (its first line and
/// headers); a buffer holding more without a whole head is refused (a
/// request's already at this many bytes, as hyper reads it). A header's
/// place in a head this long fits 16 bits (`Span`). The one head limit
/// of both readers of a client's request: the front's own and hyper's
/// (`front::hyper_builder`), each answering 431 past it
/// (docs/operations.md).
pub(crate) const MAX_HEAD: usize = u16::MAX as usize;
/// Headers a head may have (hyper's default too, given to it anyway: a
/// client's request with more is answered 431 by either reader).
pub(crate) const MAX_HEADERS: usize = 100;

/// Where a header's name and value lie in its head: name start and end,
/// value start and end.
pub(crate) type Span = [u16; 4];

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

/// One `Content-Length` value (a member of a list, for a response):
/// digits only, no sign or space, that fit in 64 bits (hyper's reading).
pub(crate) fn content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, d| {
        let digit = d.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// What a `Connection` value holds (RFC 9110 §7.6.1: a list of options,
/// in any case).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Connection {
    pub(crate) close: bool,
    pub(crate) keep_alive: bool,
    /// An option besides those two: a header named hop-by-hop (`TE`,
    /// `Upgrade`, ...).
    pub(crate) other: bool,
}

impl Connection {
    pub(crate) fn of(value: &[u8]) -> Connection {
        let mut seen = Connection::default();
        for option in value.split(|&b| b == b',') {
            let option = option.trim_ascii();
            if option.eq_ignore_ascii_case(b"close") {
                seen.close = true;
            } else if option.eq_ignore_ascii_case(b"keep-alive") {
                seen.keep_alive = true;
            } else if !option.is_empty() {
                seen.other = true;
            }
        }
        seen
    }

    /// These options and `more`'s, as when a head has two `Connection`
    /// lines.
    pub(crate) fn and(self, more: Connection) -> Connection {
        Connection {
            close: self.close || more.close,
            keep_alive: self.keep_alive || more.keep_alive,
            other: self.other || more.other,
        }
    }
}

/// Whether the header name `name` (a token) is `lower` (lower-case
/// letters and `-`) in any case, eight bytes at a time (four for a short
/// name), the last word overlapping the one before it. Setting 0x20 folds
/// a token's upper-case letters onto lower-case ones, and no other token
/// byte onto a lower-case letter or `-` (only CR would fold onto `-`).
#[inline]
pub(crate) fn folded_eq(name: &[u8], lower: &[u8]) -> bool {
    const FOLD: u64 = 0x2020_2020_2020_2020;
    let n = name.len();
    if n != lower.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap());
    let half = |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().unwrap());
    match n {
        8.. => {
            let mut at = 0;
            while at + 8 < n {
                if word(name, at) | FOLD != word(lower, at) {
                    return false;
                }
                at += 8;
            }
            word(name, n - 8) | FOLD == word(lower, n - 8)
        }
        4.. => {
            half(name, 0) | FOLD as u32 == half(lower, 0)
                && half(name, n - 4) | FOLD as u32 == half(lower, n - 4)
        }
        _ => name.iter().zip(lower).all(|(a, b)| a | 0x20 == *b),
    }
}

/// What a header value may hold (`HeaderValue`'s own rule).
pub(crate) fn is_value_byte(b: u8) -> bool {
    b >= 32 && b != 127 || b == b'\t'
}

#[cfg(test)]
mod tests;
