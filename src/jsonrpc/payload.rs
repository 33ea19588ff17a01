//! A result as the gateway holds it (`Payload`), and the one copy of a
//! large one: a backend's body read into a buffer of its own becomes its
//! result where it lies (`take_result`), and that result is written to its
//! client between a head and a tail made for it (`Framed`), never copied
//! into a response line.

use std::ops::Deref;

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
