//! A key repeated inside a client's `params`, where the gateway reads it.
//!
//! The envelope refuses a repeated top-level key (serde's "duplicate
//! field"); inside `params` each reader took a repeated key's last value.
//! An inspector in front of the gateway that takes the first would then
//! see another tool, resource or progress token than the one the gateway
//! acts on, so a repeat is refused there too, the same way: at the top
//! level of `params`, and in the objects under it that the gateway reads
//! keys of (`_meta`, `ref`). Other values travel untouched, as their
//! backend reads them.
//!
//! A client's message is read in one pass (`object`), and that pass shows
//! `params`'s keys to `Repeats` as it walks them: a second walk of the
//! params cost about 950 instructions for a small `tools/call` (a third
//! of reading the whole message; callgrind, release without LTO), noting
//! each key as the one walk passes it about 500 (about 300 in the
//! forwarding path's LTO build, bench/profile). A message the one pass
//! leaves to serde is asked again of serde (`repeated_key_with_serde`).

use std::collections::HashSet;

use serde::Deserializer as _;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::object::Keys;

/// The objects under `params` whose keys the gateway reads.
const READ_INSIDE: [&[u8]; 2] = [b"_meta", b"ref"];

/// Keys an object has shown, up to a few compared in place, more in a
/// set (an object of thousands of keys costs no more than its walk).
struct Seen<'a> {
    few: [&'a [u8]; FEW],
    n: u8,
    more: Option<HashSet<&'a [u8]>>,
}

const FEW: usize = 4;

impl<'a> Seen<'a> {
    fn new() -> Seen<'a> {
        Seen {
            few: [b""; FEW],
            n: 0,
            more: None,
        }
    }

    /// Notes `key`; false if it was seen before.
    #[inline]
    fn first(&mut self, key: &'a [u8]) -> bool {
        let n = usize::from(self.n);
        if n < FEW {
            if self.few[..n].contains(&key) {
                return false;
            }
            self.few[n] = key;
            self.n += 1;
            return true;
        }
        let more = self
            .more
            .get_or_insert_with(|| self.few.iter().copied().collect());
        more.insert(key)
    }
}

/// What the one-pass reading of a message saw of a key repeated in its
/// `params` where the gateway reads keys.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Repeated<'a> {
    /// Not walked there (serde read it): `with_serde` says.
    Unknown,
    None,
    /// The first repeated key, plain (no escapes).
    Key(&'a [u8]),
}

/// Watches the walk over `params` (`object::Keys`), as the envelope's one
/// pass makes it: what it costs is a comparison of each key with the few
/// before it, not a second walk.
pub(crate) struct Repeats<'a> {
    top: Seen<'a>,
    /// The keys of the `READ_INSIDE` object being walked, if one is.
    inner: Option<Seen<'a>>,
    /// The last key at the top.
    last: &'a [u8],
    found: Option<&'a [u8]>,
    walked: bool,
    /// `name` and `uri` at the top, as the walk passed them: what the
    /// router routes on, found here so that it need not walk the params
    /// again (`params::Routed`).
    routed: [Option<&'a [u8]>; 2],
}

impl<'a> Repeats<'a> {
    pub(crate) fn new() -> Repeats<'a> {
        Repeats {
            top: Seen::new(),
            inner: None,
            last: b"",
            found: None,
            walked: true,
            routed: [None; 2],
        }
    }

    /// The keys `name` and `uri` at the top of `params`, as slices of the
    /// text walked (see `params::Routed`).
    pub(crate) fn routed(&self) -> [Option<&'a [u8]>; 2] {
        self.routed
    }

    pub(crate) fn finish(self) -> Repeated<'a> {
        match (self.walked, self.found) {
            (false, _) => Repeated::Unknown,
            (true, None) => Repeated::None,
            (true, Some(key)) => Repeated::Key(key),
        }
    }
}

impl<'a> Keys<'a> for Repeats<'a> {
    #[inline]
    fn key(&mut self, depth: u32, key: &'a [u8]) {
        let seen = match (depth, &mut self.inner) {
            (1, _) => {
                self.last = key;
                // Compared as bytes: a slice comparison here called
                // `memcmp` for every key at the top.
                match *key {
                    [b'n', b'a', b'm', b'e'] => self.routed[0] = Some(key),
                    [b'u', b'r', b'i'] => self.routed[1] = Some(key),
                    _ => {}
                }
                &mut self.top
            }
            (2, Some(inner)) => inner,
            _ => return,
        };
        if !seen.first(key) && self.found.is_none() {
            self.found = Some(key);
        }
    }

    #[inline]
    fn open(&mut self, depth: u32, object: bool) {
        // A container two deep is the value of the last key at the top.
        if depth == 2 {
            self.inner = (object && READ_INSIDE.contains(&self.last)).then(Seen::new);
        }
    }

    fn unwalked(&mut self) {
        self.walked = false;
    }
}

/// The first key `params` repeats where the gateway reads it (see the
/// module's doc), by its name, read by serde (keys decoded): for a
/// message the one pass did not read. None when none is (or `params` is
/// not an object: its readers refuse that themselves).
pub(crate) fn repeated_key_with_serde(params: &RawValue) -> Option<String> {
    with_serde(params.get(), true)
}

fn with_serde(text: &str, outer: bool) -> Option<String> {
    struct Keys {
        outer: bool,
    }
    impl<'de> Visitor<'de> for Keys {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut seen = HashSet::new();
            let mut found = None;
            // Read to the end even after a find: serde checks the object
            // closes.
            while let Some(key) = map.next_key::<String>()? {
                if found.is_some() {
                    map.next_value::<IgnoredAny>()?;
                } else if !seen.insert(key.clone()) {
                    map.next_value::<IgnoredAny>()?;
                    found = Some(key);
                } else if self.outer && READ_INSIDE.contains(&key.as_bytes()) {
                    let value = map.next_value::<&'de RawValue>()?;
                    found = with_serde(value.get(), false);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(found)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    // Not an object (or not JSON): nothing repeated to speak of.
    de.deserialize_map(Keys { outer }).ok().flatten()
}

#[cfg(test)]
mod tests {
    use crate::jsonrpc::Message;

    /// The key a request with these params is refused for, read in one
    /// pass and by serde alike.
    fn repeated(params: &str) -> Option<String> {
        let text = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{params}}}"#);
        let read = Message::parse_client(text.as_bytes());
        let by_serde = Message::parse_client_with_serde(text.as_bytes());
        assert_eq!(format!("{read:?}"), format!("{by_serde:?}"), "{text}");
        let message = read.err()?.to_string();
        let key = message.strip_prefix("parse error: duplicate field `")?;
        Some(key.strip_suffix("` in params")?.to_owned())
    }

    #[test]
    fn a_repeated_key_is_found_where_the_gateway_reads() {
        for (text, key) in [
            (r#"{"name":"a","name":"b"}"#, "name"),
            (r#"{"name":"a","arguments":{},"name":"b"}"#, "name"),
            (r#"{"uri":"x","_meta":{"p":1},"uri":"y"}"#, "uri"),
            (
                r#"{"_meta":{"progressToken":1,"progressToken":2}}"#,
                "progressToken",
            ),
            (
                r#"{"ref":{"type":"ref/prompt","name":"a","name":"b"}}"#,
                "name",
            ),
            (r#"{"_meta":{},"_meta":{}}"#, "_meta"),
            // The same key, spelled with an escape: serde's reading.
            (r#"{"name":"a","na\u006de":"b"}"#, "name"),
            (r#"{"_meta":{"a":1,"\u0061":2}}"#, "a"),
            // Strings that look like structure are strings.
            (
                r#"{"arguments":{"t":"}\"{,\"name\":[","u":["{"]},"name":"a","name":"b"}"#,
                "name",
            ),
            (r#" { "x" : [ {"name":1}, "name" ] , "x" : 2 } "#, "x"),
            (r#"{"_meta":{"k":[{"k":1}],"k":2}}"#, "k"),
        ] {
            assert_eq!(repeated(text).as_deref(), Some(key), "{text}");
        }
    }

    #[test]
    fn what_the_gateway_does_not_read_is_left_alone() {
        for text in [
            r#"{}"#,
            r#"{"name":"a","arguments":{"x":1,"x":2}}"#,
            r#"{"name":"a","arguments":{"_meta":{"k":1,"k":2}}}"#,
            r#"{"_meta":{"k":{"a":1,"a":2}}}"#,
            r#"{"ref":"not an object","_meta":null}"#,
            r#"{"_meta":[{"a":1,"a":2}],"ref":{"x":{"a":1,"a":2}}}"#,
            r#"{"name":"a\"name\":\"b","k\\":1,"k":2}"#,
            r#"{"arguments":{"\u0061":1,"a":2},"name":"x"}"#,
            r#"[1,1]"#,
            r#""name""#,
        ] {
            assert_eq!(repeated(text), None, "{text}");
        }
    }

    #[test]
    fn nesting_deeper_than_the_one_pass_goes_is_serde_s() {
        let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        let text = format!(r#"{{"arguments":{deep},"name":"a","name":"b"}}"#);
        assert_eq!(repeated(&text).as_deref(), Some("name"));
    }

    /// Only a client's messages are refused for it: a backend's are read
    /// as before.
    #[test]
    fn a_backends_message_is_read_as_it_was() {
        let text = br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"a":2}}"#;
        assert!(Message::parse(text).is_ok());
        assert!(Message::parse_client(text).is_err());
    }

    #[test]
    fn many_keys_are_counted_in_a_set() {
        let keys: Vec<String> = (0..100).map(|i| format!("\"k{i}\":{i}")).collect();
        let text = format!("{{{}}}", keys.join(","));
        assert_eq!(repeated(&text), None);
        let text = format!("{{{},\"k42\":0}}", keys.join(","));
        assert_eq!(repeated(&text).as_deref(), Some("k42"));
    }
}
