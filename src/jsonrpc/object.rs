//! A JSON object's members in one pass: the keys read in place, each value
//! validated by serde and handed over as the raw text it is.
//!
//! serde's derived visitors cost about 3,800 instructions for a 100-byte
//! JSON-RPC message (every key decoded and matched, every string checked as
//! UTF-8 again, one allocation per string field). Here the keys are compared
//! where they lie and only the values go through serde, borrowed. Anything
//! out of the ordinary (a key with an escape, a top level that is not an
//! object, trailing bytes) is left to the caller's serde path, so both paths
//! agree on every input: this one only ever answers the common case sooner.

use serde::Deserialize;
use serde_json::value::RawValue;

/// A member's value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value<'a> {
    /// A string without escapes, by its contents: read here, no serde.
    Str(&'a str),
    /// Anything else, validated by serde.
    Raw(&'a RawValue),
}

impl Value<'_> {
    /// The value as JSON text of its own.
    pub(crate) fn to_raw(self) -> Box<RawValue> {
        match self {
            Value::Raw(raw) => raw.to_owned(),
            Value::Str(s) => super::raw(s),
        }
    }

    pub(crate) fn is_null(self) -> bool {
        matches!(self, Value::Raw(raw) if raw.get() == "null")
    }
}

/// Calls `each` with every member of the object `text`, in order, and
/// returns Some when `text` is exactly one object (whitespace around it
/// allowed). None: not read here (not an object, a key with an escape or a
/// control character, invalid JSON, or `each` gave up), and nothing can be
/// concluded from it.
pub(crate) fn members<'a>(
    text: &'a str,
    mut each: impl FnMut(&'a str, Value<'a>) -> Option<()>,
) -> Option<()> {
    let bytes = text.as_bytes();
    let mut at = whitespace(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = whitespace(bytes, at + 1);
    if bytes.get(at) == Some(&b'}') {
        return end(bytes, at + 1);
    }
    loop {
        let (key, past) = plain_string(text, at)?;
        at = whitespace(bytes, past);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = whitespace(bytes, at + 1);
        let value = value_at(text, at)?;
        at = whitespace(bytes, value.1);
        each(key, value.0)?;
        match bytes.get(at) {
            Some(b',') => at = whitespace(bytes, at + 1),
            Some(b'}') => return end(bytes, at + 1),
            _ => return None,
        }
    }
}

/// The string starting at `at` if it has no escapes and no control
/// characters (then it is valid JSON: `text` is UTF-8), and the offset just
/// past it.
fn plain_string(text: &str, at: usize) -> Option<(&str, usize)> {
    let bytes = text.as_bytes();
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let start = at + 1;
    let len = bytes
        .get(start..)?
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
    if bytes[start + len] != b'"' {
        return None;
    }
    Some((text.get(start..start + len)?, start + len + 1))
}

/// The value starting at `at`, and the offset just past it: a plain string
/// read here, anything else validated by serde (borrowed, no copy).
fn value_at(text: &str, at: usize) -> Option<(Value<'_>, usize)> {
    if let Some((s, past)) = plain_string(text, at) {
        return Some((Value::Str(s), past));
    }
    let rest = text.get(at..)?;
    let mut de = serde_json::Deserializer::from_str(rest);
    let value = <&RawValue>::deserialize(&mut de).ok()?;
    // serde starts a raw value at its first byte, which is `at`.
    let start = value.get().as_ptr() as usize - text.as_ptr() as usize;
    (start == at).then_some((Value::Raw(value), at + value.get().len()))
}

/// JSON's whitespace (RFC 8259: space, tab, line feed, carriage return).
fn whitespace(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(at) {
        at += 1;
    }
    at
}

fn end(bytes: &[u8], at: usize) -> Option<()> {
    (whitespace(bytes, at) == bytes.len()).then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Option<Vec<(String, String)>> {
        let mut out = Vec::new();
        members(text, |k, v| {
            out.push((k.to_owned(), v.to_raw().get().to_owned()));
            Some(())
        })?;
        Some(out)
    }

    #[test]
    fn reads_members_in_order_with_their_raw_text() {
        let text = " {\"a\" : [1, {\"b\":\"}\"}] ,\"\":null,\"c\":\"x\\\"y\"}\n";
        let got = all(text).unwrap();
        let want = [
            ("a", "[1, {\"b\":\"}\"}]"),
            ("", "null"),
            ("c", "\"x\\\"y\""),
        ];
        assert_eq!(got.len(), want.len());
        for ((k, v), (wk, wv)) in got.iter().zip(want) {
            assert_eq!((k.as_str(), v.as_str()), (wk, wv));
        }
        assert_eq!(all("{}"), Some(Vec::new()));
        assert_eq!(all(" { } "), Some(Vec::new()));
    }

    #[test]
    fn leaves_everything_unusual_to_serde() {
        for text in [
            "",
            "[]",
            "\"a\"",
            "{",
            "{\"a\":1",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "{\"a\":}",
            "{\"a\":1} x",
            "{\"a\":1}{}",
            "{a:1}",
            "{\"\\u0061\":1}",
            "{\"a\\n\":1}",
            "{\"a\tb\":1}",
            "{\"a\":01}",
            "{\"a\":[1,]}",
            "{\"a\":nul}",
            "{\"a\":\"\u{1}\"}",
        ] {
            assert_eq!(all(text), None, "{text:?}");
        }
    }

    #[test]
    fn stops_when_told() {
        let mut seen = 0;
        let read = members(r#"{"a":1,"b":2,"c":3}"#, |k, _| {
            seen += 1;
            (k != "b").then_some(())
        });
        assert_eq!((read, seen), (None, 2));
    }

    #[test]
    fn plain_strings_are_read_here() {
        let value = |t: &str| {
            let mut got = None;
            members(&format!("{{\"k\":{t}}}"), |_, v| {
                got = Some(format!("{v:?}"));
                Some(())
            })?;
            got
        };
        assert_eq!(value("\"2.0\"").unwrap(), "Str(\"2.0\")");
        assert_eq!(value("\"\"").unwrap(), "Str(\"\")");
        assert_eq!(value("\"é\"").unwrap(), "Str(\"é\")");
        assert!(value("\"a\\u0062\"").unwrap().starts_with("Raw("));
        assert!(value("2.0").unwrap().starts_with("Raw("));
        assert_eq!(value("\"a\tb\""), None);
    }
}
