//! Gateway list cursors: which backend a page came from, and that backend's
//! own cursor. Opaque to clients; `s1.` versions the format.

const PREFIX: &str = "s1.";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cursor {
    pub(super) member: usize,
    pub(super) backend_cursor: Option<String>,
}

impl Cursor {
    pub(super) fn start() -> Cursor {
        Cursor {
            member: 0,
            backend_cursor: None,
        }
    }

    pub(super) fn encode(&self) -> String {
        match &self.backend_cursor {
            Some(c) => format!("{PREFIX}{}.{c}", self.member),
            None => format!("{PREFIX}{}", self.member),
        }
    }

    pub(super) fn decode(s: &str) -> Option<Cursor> {
        let rest = s.strip_prefix(PREFIX)?;
        let (member, backend_cursor) = match rest.split_once('.') {
            Some((m, c)) => (m, Some(c.to_owned())),
            None => (rest, None),
        };
        Some(Cursor {
            member: member.parse().ok()?,
            backend_cursor,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_including_dots_in_backend_cursors() {
        for c in [
            Cursor::start(),
            Cursor {
                member: 3,
                backend_cursor: Some("a.b.c==".into()),
            },
            Cursor {
                member: 1,
                backend_cursor: Some(String::new()),
            },
        ] {
            assert_eq!(Cursor::decode(&c.encode()), Some(c));
        }
        assert_eq!(Cursor::decode("garbage"), None);
        assert_eq!(Cursor::decode("s1.x"), None);
    }
}
