//! A result as the gateway holds it (`Payload`), and the one copy of a
//! large one: a backend's body read into a buffer of its own becomes its
//! result where it lies (`take_result`), and that result is written to its
//! client between a head and a tail made for it (`Framed`), never copied
//! into a response line.

use std::ops::Deref;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{Outcome, check_response_id};
use crate::budget::Permit;

/// A result's raw JSON, and for a large one the share of the body budget
/// (`crate::budget`) it holds until it drops: once it has been written to
/// its client, or dropped on the way.
#[derive(Debug)]
pub struct Payload {
    raw: Box<RawValue>,
    held: Option<Permit>,
}

impl Payload {
    /// A result that holds `permit` for as long as it lives.
    pub fn held(raw: Box<RawValue>, permit: Permit) -> Payload {
        Payload {
            raw,
            held: Some(permit),
        }
    }

    /// The raw JSON; the budget it held (if any) is given back.
    pub fn into_raw(self) -> Box<RawValue> {
        self.raw
    }

    /// The raw JSON and the budget it holds, apart.
    pub fn into_parts(self) -> (Box<RawValue>, Option<Permit>) {
        (self.raw, self.held)
    }

    /// A result and the budget it holds, together again.
    pub fn from_parts(raw: Box<RawValue>, held: Option<Permit>) -> Payload {
        Payload { raw, held }
    }

    /// The result object with `members` (`"key":value`, comma-separated)
    /// written in front of its own, where it lies: its buffer grown in
    /// place and its bytes moved up once, never copied to another. The
    /// member whose value lies at `dropped` (a range of `get()`) is made
    /// spaces, comma included. Given back unchanged when the result is no
    /// object, or that member's key is not written plainly before its
    /// value (`"key":`, spaces around the colon aside).
    pub fn prepend_members(
        self,
        members: &str,
        dropped: Option<std::ops::Range<usize>>,
    ) -> Result<Payload, Payload> {
        let text = self.raw.get().as_bytes();
        let open = match text.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(at) if text[at] == b'{' => at,
            _ => return Err(self),
        };
        let blank = match dropped.map(|value| member_span(text, value)) {
            None => None,
            Some(Some(span)) => Some(span),
            Some(None) => return Err(self),
        };
        let Payload { raw, held } = self;
        let mut bytes = String::from(Box::<str>::from(raw)).into_bytes();
        let was = blank.clone().map(|span| bytes[span].to_vec());
        if let Some(span) = blank.clone() {
            bytes[span].fill(b' ');
        }
        let close = bytes.iter().rposition(|&b| b == b'}').unwrap_or(open);
        let others = bytes[open + 1..close]
            .iter()
            .any(|b| !b.is_ascii_whitespace());
        let mut front = members.to_owned();
        if others {
            front.push(',');
        }
        // Moved up once, in place (a mapped buffer grows by remapping).
        let (len, n) = (bytes.len(), front.len());
        bytes.reserve_exact(n);
        bytes.resize(len + n, 0);
        bytes.copy_within(open + 1..len, open + 1 + n);
        bytes[open + 1..open + 1 + n].copy_from_slice(front.as_bytes());
        let edited = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok();
        if !edited {
            // Not JSON (members that are not): put back as it came.
            bytes.drain(open + 1..open + 1 + n);
            if let (Some(span), Some(was)) = (blank, was) {
                bytes[span].copy_from_slice(&was);
            }
        }
        // UTF-8 JSON either way: as it came, or checked just above.
        let raw = String::from_utf8(bytes)
            .ok()
            .and_then(|text| RawValue::from_string(text).ok())
            .unwrap_or_default();
        let payload = Payload { raw, held };
        if edited { Ok(payload) } else { Err(payload) }
    }

    /// The raw JSON as bytes, where they lie, on one line (its line ends,
    /// whitespace in JSON, made spaces in place): what a stream of lines
    /// or events writes. The budget it held goes with the bytes, given
    /// back when the last of them (the piece being written) drops.
    pub fn into_line(self) -> Bytes {
        let mut bytes = Box::<str>::from(self.raw).into_boxed_bytes();
        blank_line_ends(&mut bytes);
        match self.held {
            None => Bytes::from(bytes),
            Some(permit) => Bytes::from_owner(Held {
                bytes,
                _permit: permit,
            }),
        }
    }
}

/// Where a member lies in `object` whose value lies at `value`: from its
/// key's quote to its value's end, with the comma before it (or else the
/// one after it), if its key is written plainly.
fn member_span(object: &[u8], value: std::ops::Range<usize>) -> Option<std::ops::Range<usize>> {
    let before = object[..value.start].trim_ascii_end().strip_suffix(b":")?;
    let key_end = before.trim_ascii_end().len();
    if !object[..key_end].ends_with(b"\"") {
        return None;
    }
    let key_start = object[..key_end - 1].iter().rposition(|&b| b == b'"')?;
    // An escape anywhere near: not a key written plainly.
    if object[key_start..key_end].contains(&b'\\') || object[..key_start].ends_with(b"\\") {
        return None;
    }
    let ahead = object[..key_start].trim_ascii_end();
    if ahead.ends_with(b",") {
        return Some(ahead.len() - 1..value.end);
    }
    let after = &object[value.end..];
    let gap = after.len() - after.trim_ascii_start().len();
    Some(match after.get(gap) {
        Some(b',') => key_start..value.end + gap + 1,
        _ => key_start..value.end,
    })
}

/// Bytes that hold their share of the body budget while they live.
struct Held {
    bytes: Box<[u8]>,
    _permit: Permit,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Makes JSON's line ends (`\n`, `\r`: whitespace, since a string holds
/// them escaped) spaces, so that a message stays on one line.
pub fn blank_line_ends(json: &mut [u8]) {
    let mut from = 0;
    while let Some(at) = memchr::memchr2(b'\n', b'\r', &json[from..]) {
        json[from + at] = b' ';
        from += at + 1;
    }
}

impl From<Box<RawValue>> for Payload {
    fn from(raw: Box<RawValue>) -> Payload {
        Payload { raw, held: None }
    }
}

impl Deref for Payload {
    type Target = Box<RawValue>;

    fn deref(&self) -> &Box<RawValue> {
        &self.raw
    }
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(s)
    }
}

/// What a response with a result is, read without copying anything out of
/// the body but its id (`take_result`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Borrowed<'a> {
    #[serde(borrow)]
    jsonrpc: &'a str,
    #[serde(borrow)]
    id: &'a RawValue,
    #[serde(borrow)]
    result: &'a RawValue,
}

/// A backend's response with a result, its whole body given: the id, and
/// the result made of the body's own buffer (moved to its start, trimmed,
/// the buffer shrunk in place: no second buffer is ever allocated). Any
/// other message (an error, a notification, a request, anything unusual:
/// other keys, escapes in `jsonrpc`) is given back whole, to be read the
/// ordinary way.
pub fn take_result(mut body: Vec<u8>) -> Result<(Box<RawValue>, Box<RawValue>), Vec<u8>> {
    let Some((id, at, len)) = result_span(&body) else {
        return Err(body);
    };
    body.copy_within(at..at + len, 0);
    body.truncate(len);
    body.shrink_to_fit();
    // Both hold: serde read the result as UTF-8 JSON, exactly these bytes.
    let Ok(text) = String::from_utf8(body) else {
        return Err(Vec::new());
    };
    match RawValue::from_string(text) {
        Ok(result) => Ok((id, result)),
        Err(_) => Err(Vec::new()),
    }
}

/// The id and where the result lies in `body`, if it is a response with a
/// result that `Incoming::parse` would take.
fn result_span(body: &[u8]) -> Option<(Box<RawValue>, usize, usize)> {
    let m: Borrowed<'_> = serde_json::from_slice(body).ok()?;
    if m.jsonrpc != "2.0" || check_response_id(m.id).is_err() {
        return None;
    }
    let at = (m.result.get().as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
    Some((m.id.to_owned(), at, m.result.get().len()))
}

/// Results at least this long are answered `Framed`, not copied into a
/// line: below it a copy costs less than a second write.
pub const FRAMED_FROM: usize = 64 * 1024;

/// A response as three pieces: the head (`{"jsonrpc":"2.0","id":ID,
/// "result":`), the result as it lies, and the closing brace: the bytes
/// `response` would write, without copying the result.
#[derive(Debug)]
pub struct Framed {
    pub head: String,
    pub result: Payload,
}

impl Framed {
    pub const TAIL: &'static str = "}";

    /// The response's length in bytes.
    pub fn len(&self) -> usize {
        self.head.len() + self.result.get().len() + Self::TAIL.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

/// The response to `id` with this outcome: framed when it is a result of
/// at least `FRAMED_FROM` bytes, else the line `response` writes.
pub fn response_or_framed(id: &RawValue, outcome: Outcome) -> Result<Framed, String> {
    match outcome {
        Outcome::Result(result) if result.get().len() >= FRAMED_FROM => {
            let mut head = String::with_capacity(32 + id.get().len());
            head.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
            head.push_str(id.get());
            head.push_str(",\"result\":");
            Ok(Framed { head, result })
        }
        outcome => Err(super::response(id, &outcome)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_is_taken_where_it_lies() {
        let body =
            br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}"#;
        let (id, result) = take_result(body.to_vec()).unwrap();
        assert_eq!(id.get(), "7");
        assert_eq!(result.get(), r#"{"content":[{"type":"text","text":"hi"}]}"#);
        // Spaced and reordered, still.
        let body = br#" { "result" : [1, 2] , "id" : "a", "jsonrpc" : "2.0" } "#;
        let (id, result) = take_result(body.to_vec()).unwrap();
        assert_eq!((id.get(), result.get()), (r#""a""#, "[1, 2]"));
    }

    #[test]
    fn anything_else_is_given_back_whole() {
        for body in [
            &br#"{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"no"}}"#[..],
            br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#,
            br#"{"jsonrpc":"2.0","id":7,"result":1,"extra":2}"#,
            br#"{"jsonrpc":"2.0","id":7,"result":1,"result":2}"#,
            br#"{"jsonrpc":"1.0","id":7,"result":1}"#,
            br#"{"jsonrpc":"2.0","id":[1],"result":1}"#,
            br#"[{"jsonrpc":"2.0","id":7,"result":1}]"#,
        ] {
            assert_eq!(take_result(body.to_vec()).unwrap_err(), body);
        }
    }

    #[test]
    fn members_are_written_in_front_where_the_result_lies() {
        let read = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
        for (object, want) in [
            (
                r#"{"a":1,"_meta":{"x":2},"b":[3]}"#,
                r#"{"k":0,"a":1,"b":[3]}"#,
            ),
            (r#"{ "_meta" : {"x":"}"} , "b":3 }"#, r#"{"k":0,"b":3}"#),
            (r#"{"a":1 ,"_meta":null}"#, r#"{"k":0,"a":1}"#),
            (r#" {"_meta":[]} "#, r#"{"k":0}"#),
            (r#"{"a":{"_meta":1}}"#, r#"{"k":0,"a":{"_meta":1}}"#),
            ("{}", r#"{"k":0}"#),
        ] {
            let raw = RawValue::from_string(object.to_owned()).unwrap();
            let text = raw.get();
            let fields: indexmap::IndexMap<String, &RawValue> = serde_json::from_str(text).unwrap();
            let dropped = fields.get("_meta").map(|v| {
                let at = v.get().as_ptr() as usize - text.as_ptr() as usize;
                at..at + v.get().len()
            });
            let budget = Box::leak(Box::new(crate::budget::Budget::new()));
            let held = Payload::held(raw, budget.take(9).unwrap());
            let done = held.prepend_members(r#""k":0"#, dropped).unwrap();
            assert_eq!(read(done.get()), read(want), "{object}");
            assert_eq!(budget.held(), 9, "the budget goes with it");
        }
        let given_back = |object: &str, members: &str, dropped| {
            let raw = Payload::from(RawValue::from_string(object.to_owned()).unwrap());
            let back = raw.prepend_members(members, dropped).unwrap_err();
            assert_eq!(back.get(), object);
        };
        given_back("[1]", r#""k":0"#, None);
        given_back(r#"{"\u005fmeta":1,"a":2}"#, r#""k":0"#, Some(14..15));
        given_back(r#"{"a":1,"_meta":2}"#, r#""k":"#, Some(15..16));
    }

    #[test]
    fn a_result_leaves_on_one_line_with_its_budget() {
        let budget = Box::leak(Box::new(crate::budget::Budget::new()));
        let raw = RawValue::from_string("{\"a\":\r\n [1,\n2]}".to_owned()).unwrap();
        let line = Payload::held(raw, budget.take(100).unwrap()).into_line();
        assert_eq!(&line[..], b"{\"a\":   [1, 2]}");
        let piece = line.slice(2..5);
        drop(line);
        assert_eq!(budget.held(), 100, "held while any piece lives");
        drop(piece);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_framed_response_is_the_line_response_writes() {
        let id = crate::jsonrpc::raw(&"x");
        let text = "y".repeat(FRAMED_FROM);
        let raw = crate::jsonrpc::raw(&serde_json::json!({ "text": text }));
        let line = crate::jsonrpc::response(&id, &Outcome::Result(raw.clone().into()));
        let framed = response_or_framed(&id, Outcome::Result(raw.into())).unwrap();
        let joined = format!("{}{}{}", framed.head, framed.result.get(), Framed::TAIL);
        assert_eq!((joined.len(), joined), (framed.len(), line));
        let small = Outcome::Result(crate::jsonrpc::raw(&1).into());
        assert!(response_or_framed(&id, small).is_err());
    }
}
