//! A session's requests in flight: what the client's
//! `notifications/cancelled` (by the client's raw id) and the session's
//! end reach.
//!
//! Clients mostly have one request in flight per session, so one entry is
//! held inline: no table allocated and freed per request, no hashing of the
//! id. A second request moves both into a map; the map goes when the last
//! one ends, so an idle session holds nothing. When the session ends,
//! every request in it is cancelled, and so is any request that comes in
//! after.
//!
//! Entries are keyed by the request's cancellation (`RequestCancel::key`),
//! not by its id: a client may send two requests under one id (the
//! protocol forbids it; nothing stops it), and each must leave with its own
//! request and be reached by the session's end. A cancellation by id
//! reaches every request under that id.

use crate::cancel_flag::RequestCancel;
use crate::fast_map::FastMap;

#[derive(Default)]
pub(super) enum InFlight {
    #[default]
    None,
    One(Box<str>, RequestCancel),
    /// Boxed: every session holds this, and the common states are small
    /// (the map's own 40 bytes inline would make every session pay them).
    Many(Box<FastMap<usize, (Box<str>, RequestCancel)>>),
    /// The session ended.
    Ended,
}

impl InFlight {
    /// Records a request under the client's `id`. In an ended session it
    /// is cancelled instead.
    pub(super) fn insert(&mut self, id: &str, token: RequestCancel) {
        match self {
            InFlight::Ended => token.cancel(),
            InFlight::None => *self = InFlight::One(id.into(), token),
            InFlight::One(..) => {
                let InFlight::One(held, t) = std::mem::take(self) else {
                    unreachable!("matched One above")
                };
                let mut map = FastMap::with_capacity_and_hasher(2, Default::default());
                map.insert(t.key(), (held, t));
                map.insert(token.key(), (id.into(), token));
                *self = InFlight::Many(Box::new(map));
            }
            InFlight::Many(map) => {
                map.insert(token.key(), (id.into(), token));
            }
        }
    }

    /// Forgets the request `token` cancels (its own entry, whatever else
    /// shares its id).
    pub(super) fn remove(&mut self, token: &RequestCancel) {
        match self {
            InFlight::One(_, t) if t.key() == token.key() => *self = InFlight::None,
            InFlight::Many(map) => {
                map.remove(&token.key());
                if map.is_empty() {
                    *self = InFlight::None;
                }
            }
            _ => {}
        }
    }

    /// The client cancelled `id`: every request under it is cancelled (each
    /// stays until it ends). False if there is none.
    pub(super) fn cancel(&self, id: &str) -> bool {
        match self {
            InFlight::One(held, t) if **held == *id => {
                t.cancel();
                true
            }
            // A scan: the map is keyed for the common ends (a request's
            // own); a cancellation is rarer, and costs the client a request.
            InFlight::Many(map) => {
                map.values()
                    .filter(|(held, _)| **held == *id)
                    .fold(false, |_, (_, t)| {
                        t.cancel();
                        true
                    })
            }
            _ => false,
        }
    }

    /// The session ended: its requests are cancelled, now and later.
    pub(super) fn end(&mut self) {
        match std::mem::replace(self, InFlight::Ended) {
            InFlight::One(_, cancel) => cancel.cancel(),
            InFlight::Many(map) => map.values().for_each(|(_, t)| t.cancel()),
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
        assert!(!f.cancel("1"));
        f.insert("1", a.clone());
        assert!(matches!(f, InFlight::One(..)));
        assert!(!f.cancel("2"));
        f.insert("2", b.clone());
        f.insert("\"x\"", c.clone());
        assert_eq!(f.len(), 3);
        // An id reaches its own request only.
        assert!(f.cancel("2"));
        assert!(b.is_cancelled() && !a.is_cancelled() && !c.is_cancelled());
        // Cancelled, it stays until it ends.
        assert_eq!(f.len(), 3);
        f.remove(&b);
        assert!(!f.cancel("2"));
        f.remove(&a);
        assert!(f.cancel("\"x\""));
        f.remove(&c);
        // Empty again: nothing held, whichever state it went through.
        assert!(matches!(f, InFlight::None));
        assert_eq!(f.len(), 0);
    }

    /// Two requests under one id: each leaves with its own request, in
    /// either order, and the one left is still reached by the session's
    /// end and by a cancellation of the id.
    #[test]
    fn a_reused_id_keeps_both_requests() {
        for first_ends in [true, false] {
            let mut f = InFlight::default();
            let (a, b) = (RequestCancel::new(), RequestCancel::new());
            f.insert("7", a.clone());
            f.insert("7", b.clone());
            assert_eq!(f.len(), 2);
            let (ends, stays) = if first_ends { (&a, &b) } else { (&b, &a) };
            f.remove(ends);
            assert_eq!(f.len(), 1, "the other one's entry stays");
            assert!(f.cancel("7"));
            assert!(stays.is_cancelled() && !ends.is_cancelled());
            f.end();
            let late = RequestCancel::new();
            f.insert("7", late.clone());
            assert!(late.is_cancelled());
        }
        let mut f = InFlight::default();
        let (a, b) = (RequestCancel::new(), RequestCancel::new());
        f.insert("7", a.clone());
        f.insert("7", b.clone());
        assert!(f.cancel("7"), "one id, both requests");
        assert!(a.is_cancelled() && b.is_cancelled());
        f.remove(&a);
        f.remove(&a);
        assert_eq!(
            f.len(),
            1,
            "a second removal of one request removes nothing"
        );
        let c = RequestCancel::new();
        f.insert("8", c.clone());
        f.end();
        assert!(c.is_cancelled());
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
            f.remove(&late);
            assert!(!f.cancel("9") && f.len() == 0);
        }
    }

    /// Smaller than the map (48 bytes) every session held before.
    #[test]
    fn stays_small() {
        assert!(std::mem::size_of::<InFlight>() <= 32);
    }
}
