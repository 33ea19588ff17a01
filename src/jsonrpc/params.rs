//! A request's params read generically: its members as raw values, one
//! string member, and one string member found without copying the rest
//! (the hot path reads one name and passes everything else through).

use std::borrow::Cow;

use indexmap::IndexMap;
use serde_json::value::RawValue;

use super::object::{Value, members, plain_string, whitespace};

/// An object's members, in order, each value raw.
pub(crate) type Fields = IndexMap<String, Box<RawValue>>;

/// The members of a params object (`None` reads as `{}`); `None` when it
/// is not an object. A repeated key's last value counts.
pub(crate) fn parse_fields(raw: Option<&RawValue>) -> Option<Fields> {
    serde_json::from_str(raw.map_or("{}", RawValue::get)).ok()
}

pub(crate) fn string_field(fields: &Fields, key: &str) -> Option<String> {
    serde_json::from_str(fields.get(key)?.get()).ok()
}

/// The string at `key` of a params object, found without copying the other
/// fields (the hot path reads one name and passes the rest through).
/// `Err(())`: params is not an object; `Ok(None)`: no such string. As with
/// `parse_fields`, a repeated key's last value counts. A string without
/// escapes is borrowed, not copied.
pub(crate) fn peek_string<'a>(
    raw: Option<&'a RawValue>,
    key: &str,
) -> Result<Option<Cow<'a, str>>, ()> {
    let text = raw.map_or("{}", RawValue::get);
    let mut last = None;
    let read = members(text, |k, v| {
        if k == key {
            last = Some(v);
        }
        Some(())
    });
    match read {
        Some(()) => Ok(last.and_then(|v| match v {
            Value::Str(s, _) => Some(Cow::Borrowed(s)),
            Value::Raw(raw) => serde_json::from_str(raw.get()).ok().map(Cow::Owned),
        })),
        // Keys with escapes in them: serde decodes them.
        None => peek_string_with_serde(raw, key).map(|s| s.map(Cow::Owned)),
    }
}

/// Where a client's `params.name` (or `params.uri`, by its method) lies
/// in its params text, when the one pass that read the message saw it as
/// a plain string (and saw no key repeated there, so it is the only one):
/// the router reads the name it routes on from here, not by walking the
/// params again (389 instructions a `tools/call`, bench/profile). Kept
/// small, as it rides in every request's future: offsets into the params
/// text as parsed, checked again where they are used.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Routed {
    /// The value's first byte (0: none; a string's follows its quote).
    start: u32,
    end: u32,
    /// The params text's length: offsets into other text are not used.
    len: u32,
}

/// Not the message's content (serde's reading has none), so not shown:
/// the fuzz target checks what it finds against serde's reading itself.
impl std::fmt::Debug for Routed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Routed")
    }
}

impl Routed {
    /// The key a method routes on, if the router reads one.
    pub(crate) fn key_of(method: &str) -> Option<&'static str> {
        match method {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("uri"),
            _ => None,
        }
    }

    /// From where the one pass saw the key: `key` is a slice of the same
    /// text as `params`, which starts at `params_at` in it.
    pub(super) fn of(params: &str, params_at: usize, key: &[u8]) -> Routed {
        let span = || {
            // The key's closing quote, then the colon, then the value.
            let quote = (key.as_ptr() as usize + key.len()).checked_sub(params_at)?;
            let bytes = params.as_bytes();
            if bytes.get(quote) != Some(&b'"') {
                return None;
            }
            let colon = whitespace(bytes, quote + 1);
            if bytes.get(colon) != Some(&b':') {
                return None;
            }
            let at = whitespace(bytes, colon + 1);
            let (value, _) = plain_string(params, at)?;
            let start = u32::try_from(at + 1).ok()?;
            Some(Routed {
                start,
                end: start.checked_add(u32::try_from(value.len()).ok()?)?,
                len: u32::try_from(params.len()).ok()?,
            })
        };
        span().unwrap_or_default()
    }

    /// `params.{key}` as found in the one pass (`key`: the one its method
    /// routes on).
    pub(crate) fn get<'p>(&self, params: Option<&'p RawValue>) -> Option<&'p str> {
        if self.start == 0 {
            return None;
        }
        let text = params?.get();
        if text.len() != self.len as usize {
            return None;
        }
        let (start, end) = (self.start as usize, self.end as usize);
        let bytes = text.as_bytes();
        // A plain string's bounds: quotes on both sides.
        if bytes.get(start - 1) != Some(&b'"') || bytes.get(end) != Some(&b'"') {
            return None;
        }
        text.get(start..end)
    }
}

/// `peek_string`, first from where the one pass found it (`routed`).
pub(crate) fn routed_string<'a>(
    raw: Option<&'a RawValue>,
    key: &str,
    routed: Routed,
) -> Result<Option<Cow<'a, str>>, ()> {
    match routed.get(raw) {
        Some(s) => Ok(Some(Cow::Borrowed(s))),
        None => peek_string(raw, key),
    }
}

/// What `peek_string` reads, read by serde (the fuzz target compares them).
pub(crate) fn peek_string_with_serde(
    raw: Option<&RawValue>,
    key: &str,
) -> Result<Option<String>, ()> {
    let fields = parse_fields(raw).ok_or(())?;
    Ok(string_field(&fields, key))
}

#[cfg(test)]
mod tests {
    use super::{RawValue, parse_fields, peek_string, string_field};

    fn peek(json: &str) -> Result<Option<String>, ()> {
        let raw: Box<RawValue> = serde_json::from_str(json).unwrap();
        peek_string(Some(&raw), "name").map(|s| s.map(String::from))
    }

    #[test]
    fn reads_what_the_full_parse_reads() {
        for json in [
            r#"{"name":"a__echo","arguments":{"name":"inner"}}"#,
            r#"{"arguments":{"x":[1,{"name":"no"}]},"n\u0061me":"escaped"}"#,
            r#"{"name":"first","name":"last"}"#,
            r#"{"name":7}"#,
            r#"{"other":"x"}"#,
            r#"{}"#,
        ] {
            let raw: Box<RawValue> = serde_json::from_str(json).unwrap();
            let full = parse_fields(Some(&raw)).and_then(|f| string_field(&f, "name"));
            assert_eq!(peek(json), Ok(full), "{json}");
        }
        assert_eq!(peek(r#"{"name":"last","name":"x"}"#), Ok(Some("x".into())));
        assert_eq!(peek_string(None, "name"), Ok(None));
    }

    #[test]
    fn refuses_what_is_not_an_object() {
        for json in [r#"["name"]"#, r#""name""#, "7", "null"] {
            assert_eq!(peek(json), Err(()), "{json}");
            let raw: Box<RawValue> = serde_json::from_str(json).unwrap();
            assert!(parse_fields(Some(&raw)).is_none(), "{json}");
        }
    }
}
