//! One backend's grants: what each principal's consent gave the gateway
//! (an access token, maybe a refresh token, when the access token ends),
//! kept in memory: all of them on one node, this replica's copies under
//! `[cluster]` (the store holds them all; see `flow`).
//!
//! Bound: at most `max` principals (`oauth.max_grants`, default 10,000).
//! Full, the least recently used grant is forgotten to make room (that
//! principal is asked to connect again at their next call); a new grant is
//! never refused. Tokens are `Secret`s: `Debug` shows none of them, and
//! `Connection` (what `/oauth/connections` lists) holds none.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;

use crate::config::Secret;
use crate::vocab::Principal;

/// Refreshed this long before the access token's expiry, so a call made
/// just before it does not reach the backend with a dead token.
pub(crate) const REFRESH_AHEAD: u64 = 60;

/// What one principal's consent gave, for one backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) access: Secret,
    pub(crate) refresh: Option<Secret>,
    /// Unix seconds; None when the server did not say (`expires_in`).
    pub(crate) expires: Option<u64>,
    /// The scope granted, as the server said it.
    pub(crate) scope: Option<String>,
    /// Unix seconds: when the principal connected (kept across refreshes).
    pub(crate) connected: u64,
}

impl Grant {
    /// Whether the access token should be refreshed before use at `now`:
    /// within `REFRESH_AHEAD` of its expiry (or within a tenth of a short
    /// lifetime, so a 30-second token is not refreshed at every call).
    pub(crate) fn refresh_due(&self, now: u64) -> bool {
        let Some(expires) = self.expires else {
            return false;
        };
        let lifetime = expires.saturating_sub(self.connected).max(1);
        let ahead = REFRESH_AHEAD.min(lifetime / 10);
        now + ahead >= expires
    }
}

/// What `/oauth/connections` shows of a grant: no token.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Connection {
    pub(crate) connected: u64,
    pub(crate) expires: Option<u64>,
    pub(crate) scope: Option<String>,
    pub(crate) refreshable: bool,
}

/// One backend's grants, by principal, least recently used first out.
pub(crate) struct Grants {
    max: usize,
    inner: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    /// Principal -> (grant, its last use, when it was read from the
    /// store: unix seconds, 0 on one node).
    by_principal: HashMap<Principal, (Grant, u64, u64)>,
    /// Last use -> principal: the first entry is the least recently used.
    by_use: BTreeMap<u64, Principal>,
    tick: u64,
}

impl Table {
    fn touch(&mut self, principal: &Principal) {
        self.tick += 1;
        let tick = self.tick;
        if let Some((_, used, _)) = self.by_principal.get_mut(principal) {
            self.by_use.remove(used);
            *used = tick;
            self.by_use.insert(tick, principal.clone());
        }
    }
}

impl Grants {
    /// At most `max` grants (at least one).
    pub(crate) fn new(max: usize) -> Grants {
        Grants {
            max: max.max(1),
            inner: Mutex::new(Table::default()),
        }
    }

    /// `principal`'s grant, now its most recently used.
    pub(crate) fn get(&self, principal: &Principal) -> Option<Grant> {
        self.get_fetched(principal).map(|(g, _)| g)
    }

    /// `get`, with when the grant was read from the store.
    pub(crate) fn get_fetched(&self, principal: &Principal) -> Option<(Grant, u64)> {
        let mut table = self.inner.lock();
        table.touch(principal);
        table
            .by_principal
            .get(principal)
            .map(|(g, _, f)| (g.clone(), *f))
    }

    /// Keeps `grant` for `principal` (replacing theirs, as a refresh does).
    /// Returns the principal whose grant was forgotten to make room.
    #[cfg(test)]
    pub(crate) fn put(&self, principal: &Principal, grant: Grant) -> Option<Principal> {
        self.put_fetched(principal, grant, 0)
    }

    /// `put`, noting when the grant was read from the store.
    pub(crate) fn put_fetched(
        &self,
        principal: &Principal,
        grant: Grant,
        fetched: u64,
    ) -> Option<Principal> {
        let mut table = self.inner.lock();
        let mut evicted = None;
        if !table.by_principal.contains_key(principal)
            && table.by_principal.len() >= self.max
            && let Some((_, oldest)) = table.by_use.pop_first()
        {
            table.by_principal.remove(&oldest);
            evicted = Some(oldest);
        }
        table.tick += 1;
        let tick = table.tick;
        if let Some((_, used, _)) = table
            .by_principal
            .insert(principal.clone(), (grant, tick, fetched))
        {
            table.by_use.remove(&used);
        }
        table.by_use.insert(tick, principal.clone());
        evicted
    }

    /// Forgets `principal`'s grant (a deleted connection, a failed
    /// refresh); returns it, for revocation at the server.
    pub(crate) fn remove(&self, principal: &Principal) -> Option<Grant> {
        let mut table = self.inner.lock();
        let (grant, used, _) = table.by_principal.remove(principal)?;
        table.by_use.remove(&used);
        Some(grant)
    }

    /// What `principal` may see of their grant here, without using it.
    pub(crate) fn connection(&self, principal: &Principal) -> Option<Connection> {
        let table = self.inner.lock();
        table
            .by_principal
            .get(principal)
            .map(|(g, _, _)| Connection {
                connected: g.connected,
                expires: g.expires,
                scope: g.scope.clone(),
                refreshable: g.refresh.is_some(),
            })
    }

    /// Grants held (`sluice_oauth_grants{backend}`).
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().by_principal.len()
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::PrincipalName;

    fn who(name: &str) -> Principal {
        Principal::Named(PrincipalName::new(name).unwrap())
    }

    fn grant(token: &str) -> Grant {
        Grant {
            access: Secret::new(token),
            refresh: Some(Secret::new(format!("{token}-refresh"))),
            expires: Some(1_000 + 3_600),
            scope: Some("read".into()),
            connected: 1_000,
        }
    }

    #[test]
    fn grants_are_per_principal_and_replaced_by_a_refresh() {
        let grants = Grants::new(10);
        assert_eq!(grants.put(&who("alice"), grant("a1")), None);
        assert_eq!(grants.put(&who("bob"), grant("b1")), None);
        assert_eq!(grants.get(&who("alice")).unwrap().access.expose(), "a1");
        assert_eq!(grants.get(&who("bob")).unwrap().access.expose(), "b1");
        assert_eq!(grants.get(&who("carol")), None);
        grants.put(&who("alice"), grant("a2"));
        assert_eq!(grants.len(), 2);
        assert_eq!(grants.get(&who("alice")).unwrap().access.expose(), "a2");
        assert_eq!(grants.remove(&who("alice")).unwrap().access.expose(), "a2");
        assert_eq!(grants.get(&who("alice")), None);
        assert_eq!(grants.len(), 1);
    }

    #[test]
    fn full_the_least_recently_used_grant_goes() {
        let grants = Grants::new(2);
        grants.put(&who("alice"), grant("a"));
        grants.put(&who("bob"), grant("b"));
        grants.get(&who("alice"));
        assert_eq!(grants.put(&who("carol"), grant("c")), Some(who("bob")));
        assert_eq!(grants.len(), 2);
        assert!(grants.get(&who("bob")).is_none());
        // Replacing a held grant evicts no one.
        assert_eq!(grants.put(&who("carol"), grant("c2")), None);
        assert_eq!(grants.put(&who("dave"), grant("d")), Some(who("alice")));
        assert_eq!(Grants::new(0).max(), 1);
    }

    #[test]
    fn no_token_is_shown() {
        let grants = Grants::new(2);
        grants.put(&who("alice"), grant("sekrit"));
        let shown = format!(
            "{:?} {}",
            grants.get(&who("alice")).unwrap(),
            serde_json::to_string(&grants.connection(&who("alice")).unwrap()).unwrap()
        );
        assert!(!shown.contains("sekrit"), "{shown}");
        assert_eq!(
            grants.connection(&who("alice")),
            Some(Connection {
                connected: 1_000,
                expires: Some(4_600),
                scope: Some("read".into()),
                refreshable: true,
            })
        );
    }

    #[test]
    fn refresh_is_due_ahead_of_expiry() {
        let g = grant("a");
        assert!(!g.refresh_due(4_600 - 61));
        assert!(g.refresh_due(4_600 - 60));
        assert!(g.refresh_due(5_000));
        let short = Grant {
            expires: Some(1_030),
            ..grant("s")
        };
        assert!(!short.refresh_due(1_020), "a tenth of 30 s ahead, not 60 s");
        assert!(short.refresh_due(1_027));
        let forever = Grant {
            expires: None,
            ..grant("f")
        };
        assert!(!forever.refresh_due(u64::MAX / 2));
    }
}
