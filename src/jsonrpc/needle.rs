//! A byte search for one key in raw JSON, before any parsing: almost no
//! message carries the few keys the gateway looks inside for, and a search
//! costs a fraction of a parse.

use std::sync::OnceLock;

use memchr::memmem::Finder;

/// A searcher for one key, built at its first use and kept: `str::contains`
/// and `memmem::find` build one at every call (100 to 200 instructions).
pub(crate) struct Needle {
    key: &'static str,
    finder: OnceLock<Finder<'static>>,
}

impl Needle {
    pub(crate) const fn new(key: &'static str) -> Needle {
        Needle {
            key,
            finder: OnceLock::new(),
        }
    }

    /// Whether `text` has the key's bytes anywhere: a hint that a parse
    /// may find it, never a conclusion that it is there.
    pub(crate) fn in_text(&self, text: &str) -> bool {
        let finder = self.finder.get_or_init(|| Finder::new(self.key));
        finder.find(text.as_bytes()).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::Needle;

    #[test]
    fn finds_the_key_anywhere_and_nothing_else() {
        static KEY: Needle = Needle::new("\"progressToken\"");
        assert!(KEY.in_text(r#"{"_meta":{"progressToken":1}}"#));
        assert!(KEY.in_text(r#""progressToken""#));
        assert!(!KEY.in_text(r#"{"_meta":{"progresstoken":1}}"#));
        assert!(!KEY.in_text(r#"{"_meta":{"progressToken:1}}"#));
        assert!(!KEY.in_text(""));
    }
}
