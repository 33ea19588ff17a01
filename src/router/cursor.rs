//! Gateway list cursors: where the next page of a merged list starts.
//! Opaque to clients: a member (backend) of the namespace, that backend's
//! own cursor for the page to resume in, and how many items of that page
//! were already returned. `s2.` versions the format; `s1.` cursors (member
//! and backend cursor only) from an earlier gateway are still read.

const PREFIX: &str = "s2.";
const PREFIX_V1: &str = "s1.";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cursor {
    pub(super) member: usize,
    pub(super) backend_cursor: Option<String>,
    /// Items of the page at `backend_cursor` already returned.
    pub(super) skip: usize,
}

impl Cursor {
    pub(super) fn start() -> Cursor {
        Cursor {
            member: 0,
            backend_cursor: None,
            skip: 0,
        }
    }

    pub(super) fn encode(&self) -> String {
        let head = format!("{PREFIX}{}.{}", self.member, self.skip);
        match &self.backend_cursor {
            Some(c) => format!("{head}.{c}"),
            None => head,
        }
    }

    pub(super) fn decode(s: &str) -> Option<Cursor> {
        if let Some(rest) = s.strip_prefix(PREFIX) {
            let mut parts = rest.splitn(3, '.');
            return Some(Cursor {
                member: parts.next()?.parse().ok()?,
                skip: parts.next()?.parse().ok()?,
                backend_cursor: parts.next().map(str::to_owned),
            });
        }
        let rest = s.strip_prefix(PREFIX_V1)?;
        let (member, backend_cursor) = match rest.split_once('.') {
            Some((m, c)) => (m, Some(c.to_owned())),
            None => (rest, None),
        };
        Some(Cursor {
            member: member.parse().ok()?,
            backend_cursor,
            skip: 0,
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
                skip: 7,
            },
            Cursor {
                member: 1,
                backend_cursor: Some(String::new()),
                skip: 0,
            },
        ] {
            assert_eq!(Cursor::decode(&c.encode()), Some(c));
        }
        assert_eq!(Cursor::decode("garbage"), None);
        assert_eq!(Cursor::decode("s2.x.0"), None);
        assert_eq!(Cursor::decode("s2.1"), None);
        assert_eq!(
            Cursor::decode("s1.2.abc"),
            Some(Cursor {
                member: 2,
                backend_cursor: Some("abc".into()),
                skip: 0
            })
        );
    }
}
