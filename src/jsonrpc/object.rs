//! A JSON object's members in one pass: the keys read in place, each value
//! validated by serde and handed over as the raw text it is.
//!
//! serde's derived visitors cost about 3,800 instructions for a 100-byte
//! JSON-RPC message (every key decoded and matched, every string checked as
//! UTF-8 again, one allocation per string field). Here the keys are compared
//! where they lie, and a value is checked by a walk that knows only the
//! plain cases (strings without escapes, numbers, literals, shallow arrays
//! and objects of those: `skip_value`), a quarter of serde's cost; any other
//! value goes through serde, borrowed. Anything out of the ordinary (a key
//! with an escape, a top level that is not an object, trailing bytes) is
//! left to the caller's serde path, so both paths agree on every input: this
//! one only ever answers the common case sooner.

use serde::Deserialize;
use serde_json::value::RawValue;

/// A member's value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value<'a> {
    /// A string without escapes, by its contents (read here, no serde),
    /// and its JSON text, quotes and all.
    Str(&'a str, &'a RawValue),
    /// Anything else, validated by serde.
    Raw(&'a RawValue),
}

impl<'a> Value<'a> {
    /// The value's JSON text, where it lies.
    pub(crate) fn raw(self) -> &'a RawValue {
        match self {
            Value::Str(_, raw) | Value::Raw(raw) => raw,
        }
    }

    /// The value as JSON text of its own.
    pub(crate) fn to_raw(self) -> Box<RawValue> {
        self.raw().to_owned()
    }

    pub(crate) fn is_null(self) -> bool {
        matches!(self, Value::Raw(raw) if raw.get() == "null")
    }
}

/// What a walk over a value shows of the objects inside it, as it passes
/// them: each key (its bytes, plain) and each container it opens. Told
/// nothing more, a walk costs what it did: the unwatched walk's calls are
/// empty and vanish.
pub(crate) trait Keys<'a> {
    /// Whether there is anything to show (a walk nobody watches does not
    /// even look for the watched member).
    const WATCHING: bool = true;
    /// A key of an object `depth` deep (1: the value's own members).
    fn key(&mut self, depth: u32, key: &'a [u8]);
    /// A container that is not empty (an object if `object`) opened, now
    /// `depth` deep.
    fn open(&mut self, depth: u32, object: bool);
    /// The value was not walked here (serde reads it): what was shown of
    /// it is not all there is.
    fn unwalked(&mut self);
}

/// A walk nobody watches.
pub(crate) struct Unwatched;

impl Keys<'_> for Unwatched {
    const WATCHING: bool = false;
    #[inline(always)]
    fn key(&mut self, _: u32, _: &[u8]) {}
    #[inline(always)]
    fn open(&mut self, _: u32, _: bool) {}
    #[inline(always)]
    fn unwalked(&mut self) {}
}

/// Calls `each` with every member of the object `text`, in order, and
/// returns Some when `text` is exactly one object (whitespace around it
/// allowed). None: not read here (not an object, a key with an escape or a
/// control character, invalid JSON, or `each` gave up), and nothing can be
/// concluded from it.
pub(crate) fn members<'a>(
    text: &'a str,
    each: impl FnMut(&'a str, Value<'a>) -> Option<()>,
) -> Option<()> {
    members_watching(text, "", &mut Unwatched, each)
}

/// `members`, with `watch` shown the value of the member named `watched`
/// as it is walked (`Keys`).
pub(crate) fn members_watching<'a, W: Keys<'a>>(
    text: &'a str,
    watched: &str,
    watch: &mut W,
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
        let value = match W::WATCHING && key == watched {
            true => value_at(text, at, watch)?,
            false => value_at(text, at, &mut Unwatched)?,
        };
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
pub(super) fn plain_string(text: &str, at: usize) -> Option<(&str, usize)> {
    let past = plain_string_end(text.as_bytes(), at)?;
    Some((text.get(at + 1..past - 1)?, past))
}

/// The value starting at `at`, and the offset just past it: a plain string
/// read here, a plain value checked here, anything else validated by serde
/// (borrowed, no copy).
fn value_at<'a>(text: &'a str, at: usize, watch: &mut impl Keys<'a>) -> Option<(Value<'a>, usize)> {
    if let Some((s, past)) = plain_string(text, at) {
        return Some((Value::Str(s, raw_value(text.get(at..past)?)), past));
    }
    if let Some(past) = skip_value(text.as_bytes(), at, watch) {
        return Some((Value::Raw(raw_value(text.get(at..past)?)), past));
    }
    watch.unwalked();
    let rest = text.get(at..)?;
    let mut de = serde_json::Deserializer::from_str(rest);
    let value = <&RawValue>::deserialize(&mut de).ok()?;
    // serde starts a raw value at its first byte, which is `at`.
    let start = value.get().as_ptr() as usize - text.as_ptr() as usize;
    (start == at).then_some((Value::Raw(value), at + value.get().len()))
}

/// How deep `skip_value` follows arrays and objects (serde, which takes
/// the deeper ones, allows 128).
const MAX_DEPTH: u32 = 32;

/// The offset just past the JSON value at `at`, if it is made only of
/// strings without escapes or control characters, numbers, `true`, `false`,
/// `null`, and arrays and objects of those at most `MAX_DEPTH` deep. None:
/// something else (an escape, a deeper nesting) or not JSON; serde decides.
/// What it accepts serde accepts too (RFC 8259's grammar, nothing looser).
/// A loop over the bytes with the open containers as bits (1: an object),
/// not a call per value: the values it sees are small, the calls were most
/// of the cost. `watch` is shown the keys and containers as they pass.
fn skip_value<'a>(bytes: &'a [u8], mut at: usize, watch: &mut impl Keys<'a>) -> Option<usize> {
    let mut open: u64 = 0;
    let mut depth = 0;
    loop {
        // A value starts at `at`.
        match *bytes.get(at)? {
            b'"' => at = plain_string_end(bytes, at)?,
            c @ (b'{' | b'[') => {
                if depth == MAX_DEPTH {
                    return None;
                }
                let object = c == b'{';
                at = whitespace(bytes, at + 1);
                if bytes.get(at) == Some(if object { &b'}' } else { &b']' }) {
                    at += 1;
                } else {
                    open = open << 1 | u64::from(object);
                    depth += 1;
                    watch.open(depth, object);
                    if object {
                        at = member_value(bytes, at, depth, watch)?;
                    }
                    continue;
                }
            }
            b't' => at = literal(bytes, at, b"true")?,
            b'f' => at = literal(bytes, at, b"false")?,
            b'n' => at = literal(bytes, at, b"null")?,
            _ => at = number_end(bytes, at)?,
        }
        // A value ended: the containers it ends, then the next value.
        loop {
            if depth == 0 {
                return Some(at);
            }
            at = whitespace(bytes, at);
            let object = open & 1 == 1;
            match (*bytes.get(at)?, object) {
                (b',', _) => {
                    at = whitespace(bytes, at + 1);
                    if object {
                        at = member_value(bytes, at, depth, watch)?;
                    }
                    break;
                }
                (b'}', true) | (b']', false) => {
                    at += 1;
                    open >>= 1;
                    depth -= 1;
                }
                _ => return None,
            }
        }
    }
}

/// Past a member's key and colon (and the whitespace after): where its
/// value starts.
/// `watch` is shown the key, of an object `depth` deep. Inlined: a call
/// per member was a tenth of the walk.
#[inline(always)]
fn member_value<'a>(
    bytes: &'a [u8],
    at: usize,
    depth: u32,
    watch: &mut impl Keys<'a>,
) -> Option<usize> {
    let past = plain_string_end(bytes, at)?;
    watch.key(depth, &bytes[at + 1..past - 1]);
    let colon = whitespace(bytes, past);
    (bytes.get(colon) == Some(&b':')).then(|| whitespace(bytes, colon + 1))
}

/// The bytes that end a plain string's scan: its closing quote, or what
/// makes it not plain (a backslash, a control character).
const STRING_STOPS: [bool; 256] = {
    let mut stops = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        stops[b] = true;
        b += 1;
    }
    stops[b'"' as usize] = true;
    stops[b'\\' as usize] = true;
    stops
};

/// Past the string at `at` if it is plain (see `plain_string`).
// Inlined: the walk has two instances (`Keys`), and beside two the
// compiler called this once per string (bench/profile), where it had
// inlined it into the one.
#[inline(always)]
fn plain_string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let len = bytes
        .get(at + 1..)?
        .iter()
        .position(|&b| STRING_STOPS[usize::from(b)])?;
    (bytes[at + 1 + len] == b'"').then_some(at + len + 2)
}

fn literal(bytes: &[u8], at: usize, word: &[u8]) -> Option<usize> {
    bytes
        .get(at..)?
        .starts_with(word)
        .then_some(at + word.len())
}

/// Past the number at `at`: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
/// A digit right after a leading zero ends it here, and the caller then
/// finds no delimiter: left to serde, which refuses it.
// Inlined, as `plain_string_end` is.
#[inline(always)]
fn number_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    let digits = |from: usize| {
        let n = bytes
            .get(from..)
            .map_or(0, |b| b.iter().take_while(|b| b.is_ascii_digit()).count());
        (n > 0).then_some(from + n)
    };
    if bytes.get(at) == Some(&b'-') {
        at += 1;
    }
    at = match bytes.get(at)? {
        b'0' => at + 1,
        b'1'..=b'9' => digits(at)?,
        _ => return None,
    };
    if bytes.get(at) == Some(&b'.') {
        at = digits(at + 1)?;
    }
    if let Some(b'e' | b'E') = bytes.get(at) {
        at += 1;
        if let Some(b'+' | b'-') = bytes.get(at) {
            at += 1;
        }
        at = digits(at)?;
    }
    Some(at)
}

/// `json`, just checked to be one JSON value, as serde's raw value.
fn raw_value(json: &str) -> &RawValue {
    // SAFETY: `RawValue` is `#[repr(transparent)]` over `str`; serde_json
    // converts its own `&str` to `&RawValue` this way (`from_borrowed`), and
    // `json` is what a `RawValue` holds: one JSON value, no whitespace around.
    unsafe { &*(json as *const str as *const RawValue) }
}

/// JSON's whitespace (RFC 8259: space, tab, line feed, carriage return).
pub(super) fn whitespace(bytes: &[u8], mut at: usize) -> usize {
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

    /// What `skip_value` accepts, serde accepts (it must never pass what
    /// serde refuses); and the plain cases are taken here, not by serde.
    #[test]
    fn plain_values_are_checked_here_as_serde_would() {
        let whole = |t: &str| skip_value(t.as_bytes(), 0, &mut Unwatched) == Some(t.len());
        let serde = |t: &str| serde_json::from_str::<&RawValue>(t).is_ok();
        let plain = [
            "0",
            "-0",
            "12",
            "-1.5e+10",
            "2E-3",
            "0.25",
            "true",
            "false",
            "null",
            "\"\"",
            "\"é ü\"",
            "[]",
            "{}",
            "[ 1 , [\"a\" , {}] ,null ]",
            "{\"content\":[{\"type\":\"text\",\"text\":\"hello\"}],\"isError\":false}",
            "{ \"a\" : { \"b\" : [ ] } }",
            "{\"a\":1,\"a\":2}",
        ];
        for t in plain {
            assert!(whole(t) && serde(t), "{t:?}");
        }
        let not_here = [
            "",
            " ",
            "01",
            "-",
            "1.",
            ".5",
            "1e",
            "1e+",
            "+1",
            "tru",
            "nul",
            "truex",
            "[1,]",
            "[,1]",
            "{,}",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "{a:1}",
            "{\"a\" 1}",
            "[1 2]",
            "[1}",
            "{\"a\":1]",
            "\"a\\\"b\"",
            "\"\\u0041\"",
            "\"a\u{1}\"",
            "\"a\tb\"",
            "[\"x\\n\"]",
            "\"open",
            "[",
            "{",
            "NaN",
            "Infinity",
            "[1]x",
        ];
        for t in not_here {
            assert!(!whole(t), "{t:?}");
        }
        for t in plain.iter().chain(&not_here) {
            assert!(!whole(t) || serde(t), "{t:?}");
        }
        // Nested past MAX_DEPTH: left to serde, which takes it.
        let deep = |n: usize| "[".repeat(n) + &"]".repeat(n);
        assert!(whole(&deep(32)));
        assert!(!whole(&deep(33)) && serde(&deep(33)));
        let objects = |n: usize| "{\"k\":".repeat(n) + "1" + &"}".repeat(n);
        assert!(whole(&objects(32)));
        assert!(!whole(&objects(33)) && serde(&objects(33)));
    }

    /// The raw value made without serde is the very text it was made from.
    #[test]
    fn a_raw_value_is_its_text() {
        let text = "{\"a\":[1,2]}";
        let raw = raw_value(text);
        assert_eq!(raw.get().as_ptr(), text.as_ptr());
        assert_eq!(raw.get(), text);
        assert_eq!(raw.to_owned().get(), text);
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
                // A plain string's JSON text is the whole of it, quotes too.
                assert_eq!(v.raw().get(), t);
                got = Some(match v {
                    Value::Str(s, _) => format!("Str({s})"),
                    Value::Raw(r) => format!("Raw({})", r.get()),
                });
                Some(())
            })?;
            got
        };
        assert_eq!(value("\"2.0\"").unwrap(), "Str(2.0)");
        assert_eq!(value("\"\"").unwrap(), "Str()");
        assert_eq!(value("\"é\"").unwrap(), "Str(é)");
        assert!(value("\"a\\u0062\"").unwrap().starts_with("Raw("));
        assert!(value("2.0").unwrap().starts_with("Raw("));
        assert_eq!(value("\"a\tb\""), None);
    }
}
