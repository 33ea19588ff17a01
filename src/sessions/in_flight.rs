//! A session's requests in flight, by the client's raw id: what the
//! client's `notifications/cancelled` reaches.
//!
//! Clients mostly have one request in flight per session, so one entry is
//! held inline: no table allocated and freed per request, no hashing of the
//! id (a map keyed by ids a client chooses needs SipHash, about 200
//! instructions a request for two lookups). A second request moves both
//! into a map; the map goes when the last one ends, so an idle session
//! holds nothing. When the session ends, every request in it is
//! cancelled, and so is any request that comes in after.

use std::collections::HashMap;

use crate::cancel_flag::RequestCancel;

#[derive(Default)]
pub(super) enum InFlight {
    #[default]
    None,
    One(Box<str>, RequestCancel),
    /// Boxed: every session holds this, and the common states are small
    /// (the map's own 48 bytes inline would make every session pay them).
    #[expect(clippy::box_collection, reason = "keeps `InFlight` small")]
    Many(Box<HashMap<Box<str>, RequestCancel>>),
    /// The session ended.
    Ended,
}

impl InFlight {
    /// Records `id`'s request; a second request under the same id takes the
    /// entry over, as a map insert would. In an ended session it is
    /// cancelled instead.
    pub(super) fn insert(&mut self, id: &str, token: RequestCancel) {
        match self {
            InFlight::Ended => token.cancel(),
            InFlight::None => *self = InFlight::One(id.into(), token),
            InFlight::One(held, t) if **held == *id => *t = token,
            InFlight::One(..) => {
                let InFlight::One(held, t) = std::mem::take(self) else {
                    unreachable!("matched One above")
                };
                let mut map = HashMap::with_capacity(2);
                map.insert(held, t);
                map.insert(id.into(), token);
                *self = InFlight::Many(Box::new(map));
            }
            InFlight::Many(map) => {
                map.insert(id.into(), token);
            }
        }
    }

    /// Forgets `id`'s request, handing back its cancellation.
    pub(super) fn remove(&mut self, id: &str) -> Option<RequestCancel> {
        match self {
            InFlight::One(held, _) if **held == *id => match std::mem::take(self) {
                InFlight::One(_, t) => Some(t),
                _ => unreachable!("matched One above"),
            },
            InFlight::Many(map) => {
                let token = map.remove(id);
                if map.is_empty() {
                    *self = InFlight::None;
                }
                token
            }
            _ => None,
        }
    }

    /// The session ended: its requests are cancelled, now and later.
    pub(super) fn end(&mut self) {
        match std::mem::replace(self, InFlight::Ended) {
            InFlight::One(_, cancel) => cancel.cancel(),
            InFlight::Many(map) => map.values().for_each(RequestCancel::cancel),
            InFlight::None | InFlight::Ended => {}
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        match self {
            InFlight::None | InFlight::Ended => 0,
            InFlight::One(..) => 1,
            InFlight::Many(map) => map.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_a_map_through_every_state() {
        let mut f = InFlight::default();
        let (a, b, c) = (
            RequestCancel::new(),
            RequestCancel::new(),
            RequestCancel::new(),
        );
        assert!(f.remove("1").is_none());
        f.insert("1", a.clone());
        assert!(matches!(f, InFlight::One(..)));
        assert!(f.remove("2").is_none());
        f.insert("2", b.clone());
        f.insert("\"x\"", c.clone());
        assert_eq!(f.len(), 3);
        // Each id hands back its own token.
        f.remove("2").unwrap().cancel();
        assert!(b.is_cancelled() && !a.is_cancelled() && !c.is_cancelled());
        assert!(f.remove("2").is_none());
        f.remove("1").unwrap().cancel();
        assert!(a.is_cancelled());
        f.remove("\"x\"").unwrap();
        // Empty again: nothing held, whichever state it went through.
        assert!(matches!(f, InFlight::None));
        assert_eq!(f.len(), 0);
    }

    #[test]
    fn a_reused_id_takes_the_entry_over() {
        let mut f = InFlight::default();
        let (a, b) = (RequestCancel::new(), RequestCancel::new());
        f.insert("7", a.clone());
        f.insert("7", b.clone());
        assert_eq!(f.len(), 1);
        f.remove("7").unwrap().cancel();
        assert!(b.is_cancelled() && !a.is_cancelled());
        assert!(matches!(f, InFlight::None));
    }

    #[test]
    fn its_end_cancels_every_request_and_every_later_one() {
        for held in [0, 1, 3] {
            let mut f = InFlight::default();
            let tokens: Vec<_> = (0..held).map(|_| RequestCancel::new()).collect();
            for (i, t) in tokens.iter().enumerate() {
                f.insert(&i.to_string(), t.clone());
            }
            f.end();
            assert!(
                tokens.iter().all(RequestCancel::is_cancelled),
                "{held} held"
            );
            let late = RequestCancel::new();
            f.insert("9", late.clone());
            assert!(late.is_cancelled(), "born cancelled after the end");
            assert!(f.remove("9").is_none() && f.len() == 0);
        }
    }

    /// Smaller than the map (48 bytes) every session held before.
    #[test]
    fn stays_small() {
        assert!(std::mem::size_of::<InFlight>() <= 32);
    }
}
