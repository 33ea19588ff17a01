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

use std::collections::HashSet;

use serde::Deserializer as _;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::object::{Value, members};

/// The objects under `params` whose keys the gateway reads.
const READ_INSIDE: [&str; 2] = ["_meta", "ref"];

/// Keys an object has shown, up to a few compared in place, more in a
/// set (an object of thousands of keys costs no more than its walk).
struct Seen<'a> {
    few: [&'a str; FEW],
    n: usize,
    more: Option<HashSet<&'a str>>,
}

const FEW: usize = 8;

impl<'a> Seen<'a> {
    fn new() -> Seen<'a> {
        Seen {
            few: [""; FEW],
            n: 0,
            more: None,
        }
    }

    /// Notes `key`; false if it was seen before.
    fn first(&mut self, key: &'a str) -> bool {
        if let Some(more) = &mut self.more {
            return more.insert(key);
        }
        if self.few[..self.n].contains(&key) {
            return false;
        }
        if self.n < FEW {
            self.few[self.n] = key;
            self.n += 1;
        } else {
            let mut more: HashSet<&str> = self.few.iter().copied().collect();
            more.insert(key);
            self.more = Some(more);
        }
        true
    }
}

/// The first key `params` repeats where the gateway reads it (see the
/// module's doc), by its name; None when none is (or `params` is not an
/// object: its readers refuse that themselves).
pub(crate) fn repeated_key(params: &RawValue) -> Option<String> {
    let text = params.get();
    // The common case, walked in place; a key with an escape in it (the
    // same key as its unescaped spelling) is left to serde.
    let mut found = None;
    let read = walk(text, true, &mut found);
    match (read, found) {
        (_, Some(key)) => Some(key.to_owned()),
        (Some(()), None) => None,
        (None, None) => with_serde(text, true),
    }
}

/// The members of the object `text`; a repeat into `found` (and the walk
/// stopped). None: not walked to its end here.
fn walk<'a>(text: &'a str, outer: bool, found: &mut Option<&'a str>) -> Option<()> {
    let mut seen = Seen::new();
    let mut inner = Some(());
    members(text, |key, value| {
        if !seen.first(key) {
            *found = Some(key);
            return None;
        }
        if outer
            && READ_INSIDE.contains(&key)
            && let Value::Raw(raw) = value
            && raw.get().starts_with('{')
        {
            inner = walk(raw.get(), false, found);
            // A repeat found, or a key for serde: stop either way.
            inner?;
        }
        Some(())
    })
    .and(inner)
}

/// `repeated_key`'s reading by serde (keys decoded); the fuzz target
/// compares them.
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
                } else if self.outer && READ_INSIDE.contains(&key.as_str()) {
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
    use super::*;

    fn repeated(text: &str) -> Option<String> {
        let raw = RawValue::from_string(text.to_owned()).unwrap();
        let found = repeated_key(&raw);
        // Both readings agree.
        assert_eq!(found, with_serde(text, true), "{text}");
        found
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
            r#"[1,1]"#,
            r#""name""#,
        ] {
            assert_eq!(repeated(text), None, "{text}");
        }
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
