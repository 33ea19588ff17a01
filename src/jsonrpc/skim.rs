//! What a message too large to hold says about itself, read in passing
//! (`Skim`): its top-level `id`, and whether it names a `method`. A stdio
//! backend's line that the body budget refuses is skipped as it is read,
//! never held whole, yet its caller must still be told: the id is where
//! the line says who that is, and it may come anywhere in the object
//! (some SDKs write it after the result).
//!
//! Bytes are fed as they arrive; nothing is kept but the state of one
//! pass (depth, inside a string or not) and the few bytes of the keys and
//! of the id's value. Inside a string the pass jumps from quote to
//! backslash (`memchr`), so a long text costs a byte search, not a loop.

/// The longest top-level key kept (longer ones are none the gateway
/// looks for), and the longest id (`MAX_ID_LEN`).
const KEY: usize = 16;

/// One pass over a JSON object's bytes, fed in pieces.
#[derive(Debug, Default)]
pub(crate) struct Skim {
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// At depth 1: the next string is a member's key.
    at_key: bool,
    /// The key being read (at depth 1, inside its string), or last read.
    key: Vec<u8>,
    /// The id's value being read: from its first byte to the `,` or `}`
    /// that ends it at depth 1.
    in_id: bool,
    id: Vec<u8>,
    id_too_long: bool,
    method: bool,
}

/// What a skimmed message said.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Skimmed {
    /// The top-level `id` as written (trimmed), if one was read whole.
    pub(crate) id: Option<String>,
    /// Whether it named a `method` (a request or notification, not a
    /// response).
    pub(crate) method: bool,
}

impl Skim {
    pub(crate) fn new() -> Skim {
        Skim::default()
    }

    /// The next bytes of the message.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.in_string {
                bytes = self.string(bytes);
                continue;
            }
            let b = bytes[0];
            bytes = &bytes[1..];
            if self.in_id && self.depth == 1 && (b == b',' || b == b'}') {
                self.in_id = false;
            }
            if self.in_id {
                self.keep_id(&[b]);
            }
            match b {
                b'"' => {
                    self.in_string = true;
                    if self.depth == 1 && self.at_key {
                        self.key.clear();
                    }
                }
                b'{' | b'[' => {
                    self.depth += 1;
                    self.at_key = b == b'{' && self.depth == 1;
                }
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                b',' if self.depth == 1 => self.at_key = true,
                b':' if self.depth == 1 => {
                    self.at_key = false;
                    self.in_id = self.key == b"id";
                    self.method |= self.key == b"method";
                }
                _ => {}
            }
        }
    }

    /// Inside a string: up to its closing quote, or all of `bytes`.
    fn string<'a>(&mut self, bytes: &'a [u8]) -> &'a [u8] {
        let reading_key = self.depth == 1 && self.at_key;
        if self.escaped {
            self.escaped = false;
            self.keep(reading_key, &bytes[..1]);
            return &bytes[1..];
        }
        match memchr::memchr2(b'"', b'\\', bytes) {
            None => {
                self.keep(reading_key, bytes);
                &[]
            }
            Some(at) => {
                self.keep(reading_key, &bytes[..=at]);
                if bytes[at] == b'"' {
                    self.in_string = false;
                    if reading_key {
                        // The closing quote is not the key's.
                        self.key.pop();
                    }
                } else {
                    self.escaped = true;
                }
                &bytes[at + 1..]
            }
        }
    }

    fn keep(&mut self, reading_key: bool, bytes: &[u8]) {
        if reading_key {
            // A key longer than any the gateway looks for is kept too
            // long to match: its bytes are not kept.
            let room = (KEY + 1).saturating_sub(self.key.len());
            self.key.extend_from_slice(&bytes[..bytes.len().min(room)]);
        } else if self.in_id {
            self.keep_id(bytes);
        }
    }

    fn keep_id(&mut self, bytes: &[u8]) {
        if self.id.len() + bytes.len() > super::MAX_ID_LEN {
            self.id_too_long = true;
        } else {
            self.id.extend_from_slice(bytes);
        }
    }

    /// What the message said, once all of it was fed.
    pub(crate) fn finish(self) -> Skimmed {
        let id = match (self.id_too_long, std::str::from_utf8(&self.id)) {
            (false, Ok(id)) if !id.trim().is_empty() => Some(id.trim().to_owned()),
            _ => None,
        };
        Skimmed {
            id,
            method: self.method,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skim_in_pieces(text: &str, piece: usize) -> Skimmed {
        let mut skim = Skim::new();
        for chunk in text.as_bytes().chunks(piece) {
            skim.feed(chunk);
        }
        skim.finish()
    }

    #[test]
    fn the_id_is_found_wherever_it_is_and_however_the_bytes_come() {
        let big = "x".repeat(5000);
        for (text, id, method) in [
            (
                format!(r#"{{"jsonrpc":"2.0","id":17,"result":{{"text":"{big}"}}}}"#),
                Some("17"),
                false,
            ),
            // After the result, as the TypeScript SDK writes it; a nested
            // `id` and an escaped quote before it do not count.
            (
                format!(
                    r#"{{"result":{{"id":99,"text":"a\"id\":5 {big}","l":[1,{{"id":4}}]}},"jsonrpc":"2.0", "id" : "abc" }}"#
                ),
                Some(r#""abc""#),
                false,
            ),
            (
                format!(r#"{{"jsonrpc":"2.0","method":"x/y","params":{{"t":"{big}"}},"id":3}}"#),
                Some("3"),
                true,
            ),
            (
                format!(r#"{{"jsonrpc":"2.0","params":{{"t":"{big}"}},"method":"n"}}"#),
                None,
                true,
            ),
            // Cut short: no id read whole.
            (format!(r#"{{"jsonrpc":"2.0","result":"{big}"#), None, false),
        ] {
            for piece in [1, 2, 7, 64, 100_000] {
                assert_eq!(
                    skim_in_pieces(&text, piece),
                    Skimmed {
                        id: id.map(str::to_owned),
                        method
                    },
                    "{piece}: {}",
                    &text[..60.min(text.len())]
                );
            }
        }
    }

    #[test]
    fn keys_and_ids_are_bounded() {
        let long_key = format!(r#"{{"{}id":1,"id":2}}"#, "k".repeat(100));
        assert_eq!(skim_in_pieces(&long_key, 3).id.as_deref(), Some("2"));
        let long_id = format!(r#"{{"id":"{}","result":1}}"#, "i".repeat(300));
        assert_eq!(skim_in_pieces(&long_id, 5).id, None);
    }
}
