//! The JSON-RPC 2.0 envelope, parsed once at the edge.
//!
//! Only the fields the gateway routes on are typed; `params`, `result` and
//! `error` stay raw JSON so that whatever a client or backend sends travels
//! byte for byte (typed SDK models drop unknown fields).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

mod needle;
mod object;
mod outcome;
mod params;
mod payload;
mod repeated;
mod shape;
mod skim;
pub(crate) use needle::Needle;
pub(crate) use object::Value;
use object::{Keys, Unwatched};
pub(crate) use outcome::{error_code, is_tool_error};
pub use params::Routed;
pub(crate) use params::routed_string;
pub(crate) use params::{Fields, parse_fields, peek_string, peek_string_with_serde, string_field};
pub use payload::{FRAMED_FROM, Framed, Payload, blank_line_ends, response_or_framed, take_result};
use repeated::{Repeated, Repeats};
use shape::{check_request_id, check_response_id};
pub(crate) use skim::{Skim, Skimmed};

/// A JSON-RPC id exactly as the peer wrote it (number or string).
pub type RawId = Box<RawValue>;

/// The longest id the gateway accepts, as written (quotes and escapes
/// included). Ids are echoed back, so a peer cannot make the gateway
/// hold or repeat an arbitrarily large one; real clients use counters or
/// UUIDs.
pub const MAX_ID_LEN: usize = 256;

/// One JSON-RPC message, classified.
#[derive(Debug)]
pub enum Message {
    Request(Request),
    Notification(Notification),
    Response(Response),
}

#[derive(Debug)]
pub struct Request {
    pub id: RawId,
    pub method: String,
    pub params: Option<Box<RawValue>>,
    /// Where the one pass of a client's message found what the router
    /// routes on in `params` (empty for any other reading).
    pub routed: Routed,
}

#[derive(Debug)]
pub struct Notification {
    pub method: String,
    pub params: Option<Box<RawValue>>,
}

#[derive(Debug)]
pub struct Response {
    pub id: RawId,
    pub outcome: Outcome,
}

/// A response's payload: the raw `result` or the raw `error` object.
#[derive(Debug)]
pub enum Outcome {
    Result(Payload),
    Error(Box<RawValue>),
}

#[derive(Deserialize, Default)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<Cow<'a, str>>,
    /// `Some("null")` when the peer wrote `"id": null`: absent and null
    /// differ. Borrowed: a backend's response is looked up by it, not kept.
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default)]
    params: Option<Box<RawValue>>,
    /// Where `params` starts in the text the one pass read (not serde's).
    #[serde(skip)]
    params_at: usize,
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<Box<RawValue>>,
}

/// Why a body is not a JSON-RPC message.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("parse error: {0}")]
    Json(#[from] serde_json::Error),
    #[error("invalid request: {0}")]
    Invalid(&'static str),
    #[error("invalid request: a batch holds at most {0} messages")]
    TooManyItems(usize),
}

impl ParseError {
    pub fn code(&self) -> i64 {
        match self {
            ParseError::Json(_) => PARSE_ERROR,
            ParseError::Invalid(_) | ParseError::TooManyItems(_) => INVALID_REQUEST,
        }
    }
}

/// A JSON array's items as raw values, stopping at the first item past
/// `max`: a 4 MB body of 2 million tiny items costs nothing to refuse.
fn bounded_array(bytes: &[u8], max: usize) -> Result<Vec<Box<RawValue>>, ParseError> {
    use serde::de::{DeserializeSeed, Error as _, SeqAccess, Visitor};

    struct Items {
        max: usize,
        over: std::cell::Cell<bool>,
    }
    impl<'de> Visitor<'de> for &Items {
        type Value = Vec<Box<RawValue>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an array of JSON-RPC messages")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element::<Box<RawValue>>()? {
                if out.len() == self.max {
                    self.over.set(true);
                    return Err(A::Error::custom("too many items"));
                }
                out.push(item);
            }
            Ok(out)
        }
    }
    impl<'de> DeserializeSeed<'de> for &Items {
        type Value = Vec<Box<RawValue>>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(self)
        }
    }

    let items = Items {
        max,
        over: std::cell::Cell::new(false),
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = (&items)
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    match parsed {
        Ok(v) => Ok(v),
        Err(_) if items.over.get() => Err(ParseError::TooManyItems(max)),
        Err(e) => Err(ParseError::Json(e)),
    }
}

/// Keeps a field's raw value even when it is `null` (serde's `Option` would
/// read `null` as absent).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(d).map(Some)
}

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// The TypeScript SDK's "Session not found"; spec clients re-initialize on the 404 it rides on.
pub const SESSION_NOT_FOUND: i64 = -32001;
/// Legacy transport-level error code used by the SDKs for header problems.
pub const TRANSPORT_ERROR: i64 = -32000;

impl<'a> Envelope<'a> {
    /// The common message read in one pass (`object::members`), `params`
    /// shown to `watch` as it is walked; None: for serde to read, and to
    /// say what is wrong with it.
    fn read(text: &'a str, watch: &mut impl Keys<'a>) -> Option<Envelope<'a>> {
        let mut w = Envelope::default();
        let mut seen = 0u8;
        object::members_watching(text, "params", watch, |key, value| {
            // `Option`'s reading: null is absent.
            let string = || match value {
                Value::Str(s, _) => Some(Some(Cow::Borrowed(s))),
                _ if value.is_null() => Some(None),
                // Not a string, or one with escapes: serde's to read.
                Value::Raw(_) => None,
            };
            let raw = || (!value.is_null()).then(|| value.to_raw());
            // One bit a field, for serde's "duplicate field".
            let field: u8 = match key {
                "jsonrpc" => {
                    w.jsonrpc = string()?;
                    1
                }
                "id" => {
                    w.id = Some(value.raw());
                    2
                }
                "method" => {
                    w.method = string()?;
                    4
                }
                "params" => {
                    w.params_at = value.raw().get().as_ptr() as usize;
                    w.params = raw();
                    8
                }
                "result" => {
                    w.result = raw();
                    16
                }
                "error" => {
                    w.error = raw();
                    32
                }
                _ => 0,
            };
            if field & seen != 0 {
                return None;
            }
            seen |= field;
            Some(())
        })?;
        Some(w)
    }

    /// The message read in one pass (true), or else by serde (which says
    /// what is wrong with it).
    #[inline]
    fn of(bytes: &'a [u8], watch: &mut impl Keys<'a>) -> Result<(Envelope<'a>, bool), ParseError> {
        match std::str::from_utf8(bytes)
            .ok()
            .and_then(|t| Envelope::read(t, watch))
        {
            Some(envelope) => Ok((envelope, true)),
            None => Ok((serde_json::from_slice(bytes)?, false)),
        }
    }
}

impl Message {
    pub fn parse(bytes: &[u8]) -> Result<Message, ParseError> {
        Incoming::parse(bytes).map(Incoming::owned)
    }

    /// serde's reading of a message; `parse` agrees with it on every input.
    pub(crate) fn parse_with_serde(bytes: &[u8]) -> Result<Message, ParseError> {
        let envelope: Envelope = serde_json::from_slice(bytes)?;
        Incoming::sort(envelope).map(Incoming::owned)
    }

    /// Parses a body that may be a batch (array) of at most `max_items`
    /// messages; a longer batch is refused before its items are read.
    pub fn parse_body(bytes: &[u8], max_items: usize) -> Result<Body, ParseError> {
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        if first == Some(&b'[') {
            let raws = bounded_array(bytes, max_items)?;
            if raws.is_empty() {
                return Err(ParseError::Invalid("empty batch"));
            }
            let msgs = raws
                .iter()
                .map(|r| Message::parse_client(r.get().as_bytes()))
                .collect();
            Ok(Body::Batch(msgs))
        } else {
            Ok(Body::Single(Message::parse_client(bytes)?))
        }
    }

    /// A client's message: as `parse`, and a key repeated inside its
    /// params where the gateway reads keys (`repeated`) is refused as a
    /// repeated top-level key is.
    pub(crate) fn parse_client(bytes: &[u8]) -> Result<Message, ParseError> {
        let mut repeats = Repeats::new();
        let (envelope, one_pass) = Envelope::of(bytes, &mut repeats)?;
        let params_at = envelope.params_at;
        let routed = repeats.routed();
        let repeated = match one_pass {
            true => repeats.finish(),
            false => Repeated::Unknown,
        };
        let mut message = Incoming::sort(envelope)?.owned();
        let key = match repeated {
            Repeated::None => {
                if let Message::Request(r) = &mut message
                    && let Some(params) = &r.params
                    && let Some(key) = match Routed::key_of(&r.method) {
                        Some("name") => routed[0],
                        Some(_) => routed[1],
                        None => None,
                    }
                {
                    r.routed = Routed::of(params.get(), params_at, key);
                }
                return Ok(message);
            }
            Repeated::Key(key) => Some(String::from_utf8_lossy(key).into_owned()),
            Repeated::Unknown => message.params().and_then(repeated::repeated_key_with_serde),
        };
        match key {
            None => Ok(message),
            Some(key) => Err(repeated_error(&key)),
        }
    }

    /// `parse_client` read by serde alone (the fuzz target compares them).
    pub(crate) fn parse_client_with_serde(bytes: &[u8]) -> Result<Message, ParseError> {
        let message = Message::parse_with_serde(bytes)?;
        match message.params().and_then(repeated::repeated_key_with_serde) {
            None => Ok(message),
            Some(key) => Err(repeated_error(&key)),
        }
    }

    fn params(&self) -> Option<&RawValue> {
        match self {
            Message::Request(r) => r.params.as_deref(),
            Message::Notification(n) => n.params.as_deref(),
            Message::Response(_) => None,
        }
    }
}

/// A message as a backend's reader takes it: a response's id borrowed
/// (the reader looks its call up by it and keeps only the outcome).
#[derive(Debug)]
pub enum Incoming<'a> {
    Request(Request),
    Notification(Notification),
    Response { id: &'a RawValue, outcome: Outcome },
}

impl<'a> Incoming<'a> {
    /// `Message::parse`, a response's id left in `bytes`.
    pub fn parse(bytes: &'a [u8]) -> Result<Incoming<'a>, ParseError> {
        Self::sort(Envelope::of(bytes, &mut Unwatched)?.0)
    }

    /// The message, owned whole.
    pub fn owned(self) -> Message {
        match self {
            Incoming::Request(r) => Message::Request(r),
            Incoming::Notification(n) => Message::Notification(n),
            Incoming::Response { id, outcome } => Message::Response(Response {
                id: id.to_owned(),
                outcome,
            }),
        }
    }

    #[inline]
    fn sort(w: Envelope<'a>) -> Result<Incoming<'a>, ParseError> {
        if w.jsonrpc.as_deref() != Some("2.0") {
            return Err(ParseError::Invalid("jsonrpc must be \"2.0\""));
        }
        match (w.id, w.method.is_some()) {
            (Some(id), true) => check_request_id(id)?,
            (Some(id), false) => check_response_id(id)?,
            (None, _) => {}
        }
        match (w.id, w.method, w.result, w.error) {
            (Some(id), Some(method), None, None) => Ok(Incoming::Request(Request {
                id: id.to_owned(),
                method: method.into_owned(),
                params: w.params,
                routed: Routed::default(),
            })),
            (None, Some(method), None, None) => Ok(Incoming::Notification(Notification {
                method: method.into_owned(),
                params: w.params,
            })),
            (Some(id), None, Some(result), None) => Ok(Incoming::Response {
                id,
                outcome: Outcome::Result(result.into()),
            }),
            (Some(id), None, None, Some(error)) => Ok(Incoming::Response {
                id,
                outcome: Outcome::Error(error),
            }),
            _ => Err(ParseError::Invalid(
                "not a request, notification or response",
            )),
        }
    }
}

/// A POST body: one message, or (2025-03-26 only) a batch.
#[derive(Debug)]
pub enum Body {
    Single(Message),
    Batch(Vec<Result<Message, ParseError>>),
}

/// The refusal of a key repeated inside a client's params: the error a
/// repeated top-level key gets.
#[cold]
fn repeated_error(key: &str) -> ParseError {
    ParseError::Json(serde::de::Error::custom(format_args!(
        "duplicate field `{key}` in params"
    )))
}

/// A message to write; `id`, `params`, `result` and `error` are JSON text
/// (a `RawValue`'s, or digits the gateway wrote).
struct Outgoing<'a> {
    jsonrpc: &'static str,
    id: Option<&'a str>,
    method: Option<&'a str>,
    params: Option<&'a str>,
    result: Option<&'a str>,
    error: Option<&'a str>,
}

/// The line serde would write for `w`, byte for byte, written by hand: the
/// raw values are copied once into a buffer of the right size (serde grows
/// its buffer as it goes, and walks every field through its machinery).
/// Exactly the right size, unless the method needs escaping: a line whose
/// capacity is its length becomes `Bytes` (a body) without another
/// allocation for a shared header.
fn to_line(w: &Outgoing<'_>) -> String {
    let raw = [
        (",\"id\":", w.id),
        (",\"params\":", w.params),
        (",\"result\":", w.result),
        (",\"error\":", w.error),
    ];
    // `{"jsonrpc":"` 12, the closing quote and brace 2; `,"method":""` 12.
    let size = 14
        + w.jsonrpc.len()
        + w.method.map_or(0, |m| m.len() + 12)
        + raw
            .iter()
            .map(|(k, v)| v.map_or(0, |v| k.len() + v.len()))
            .sum::<usize>();
    let mut out = String::with_capacity(size);
    out.push_str("{\"jsonrpc\":\"");
    out.push_str(w.jsonrpc);
    out.push('"');
    let [id, rest @ ..] = raw;
    push_raw(&mut out, id);
    if let Some(method) = w.method {
        out.push_str(",\"method\":");
        push_str(&mut out, method);
    }
    for field in rest {
        push_raw(&mut out, field);
    }
    out.push('}');
    out
}

fn push_raw(out: &mut String, (key, value): (&str, Option<&str>)) {
    if let Some(v) = value {
        out.push_str(key);
        out.push_str(v);
    }
}

/// A JSON string; serde does the escaping when there is any to do.
fn push_str(out: &mut String, s: &str) {
    if s.bytes()
        .all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b < 0x7f)
    {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        // Serialising a string cannot fail.
        out.push_str(&serde_json::to_string(s).unwrap_or_default());
    }
}

pub fn request(id: &RawValue, method: &str, params: Option<&RawValue>) -> String {
    request_with_id(id.get(), method, params)
}

fn request_with_id(id: &str, method: &str, params: Option<&RawValue>) -> String {
    to_line(&Outgoing {
        jsonrpc: "2.0",
        id: Some(id),
        method: Some(method),
        params: params.map(RawValue::get),
        result: None,
        error: None,
    })
}

/// A request under a numeric id the gateway chose (a backend call's): the
/// id's digits are written from the stack, as they are (a `RawValue` of
/// them would be parsed by serde first).
pub fn numbered_request(id: u64, method: &str, params: Option<&RawValue>) -> String {
    request_with_id(itoa::Buffer::new().format(id), method, params)
}

pub fn notification(method: &str, params: Option<&RawValue>) -> String {
    to_line(&Outgoing {
        jsonrpc: "2.0",
        id: None,
        method: Some(method),
        params: params.map(RawValue::get),
        result: None,
        error: None,
    })
}

pub fn response(id: &RawValue, outcome: &Outcome) -> String {
    let (result, error) = match outcome {
        Outcome::Result(r) => (Some(r.get()), None),
        Outcome::Error(e) => (None, Some(e.get())),
    };
    to_line(&Outgoing {
        jsonrpc: "2.0",
        id: Some(id.get()),
        method: None,
        params: None,
        result,
        error,
    })
}

/// Builds a raw JSON-RPC error object.
pub fn error_object(code: i64, message: &str, data: Option<serde_json::Value>) -> Box<RawValue> {
    let mut obj = serde_json::json!({ "code": code, "message": message });
    if let Some(data) = data {
        obj["data"] = data;
    }
    raw(&obj)
}

/// An error response with a null id, for bodies whose id is unknown.
pub fn error_response(id: Option<&RawValue>, code: i64, message: &str) -> String {
    let null = raw_null();
    response(
        id.unwrap_or(&null),
        &Outcome::Error(error_object(code, message, None)),
    )
}

pub fn raw<T: Serialize + ?Sized>(v: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(v).unwrap_or_else(|_| raw_null())
}

pub fn raw_null() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).unwrap_or_else(|_| unreachable!("null is JSON"))
}

/// Serialized, not parsed back (`RawValue::from_string` would validate
/// the digits it was just given, and `to_string` goes through `fmt`).
pub fn raw_u64(n: u64) -> Box<RawValue> {
    raw(&n)
}

#[cfg(test)]
mod tests;
