//! A request's params read generically: its members as raw values, one
//! string member, and one string member found without copying the rest
//! (the hot path reads one name and passes everything else through).

use std::borrow::Cow;

use indexmap::IndexMap;
use serde_json::value::RawValue;

use super::object::{Value, members};

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
