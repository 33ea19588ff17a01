//! One backend's grants wherever they are kept: this replica's copies,
//! and under `[cluster]` the store (sealed), with its refresh lock. The
//! flow (`flow.rs`) asks it for a principal's grant and hands it new ones.
//!
//! Under `[cluster]` (a `GrantStore` joined) the store holds every grant
//! and the copies are read again after `CACHE_FRESH`, or at once when
//! another replica says one changed (the bus); one missing is read through
//! at the next list or call.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::store::{self, GrantStore};
use super::{Connection, Grant, Grants};
use crate::config::Secret;
use crate::vocab::{BackendName, Principal, unix_now as now};

/// A replica's copy of a grant is read from the store again after this.
/// The bus says sooner; this bounds how long a lost message matters.
const CACHE_FRESH: u64 = 30;
/// The refresh lock lasts this long at most: the token request's own
/// deadline (10 s) and a margin.
const REFRESH_LOCK: Duration = Duration::from_secs(15);
/// How long a call waits for another replica's refresh, and how often it
/// looks.
const REFRESH_WAIT: Duration = Duration::from_secs(12);
const REFRESH_POLL: Duration = Duration::from_millis(100);

/// What became of a refresh lock.
pub(super) enum Lock {
    /// Taken: refresh, then give it back with this token.
    Taken(String),
    /// The store cannot be asked: refreshed here alone.
    Alone,
    /// Another replica refreshed (or dropped) the grant meanwhile.
    Landed(Option<Grant>),
    /// Another replica holds it and did not finish in time.
    Late,
}

/// One backend's grants.
pub(super) struct BackendGrants {
    backend: BackendName,
    /// Every grant (one node), or this replica's copies (cluster).
    copies: Grants,
    /// Set in cluster mode: where the grants (and start ids) are.
    store: OnceLock<Arc<dyn GrantStore>>,
}

impl BackendGrants {
    pub(super) fn new(backend: BackendName, max_grants: usize) -> BackendGrants {
        BackendGrants {
            backend,
            copies: Grants::new(max_grants),
            store: OnceLock::new(),
        }
    }

    /// Cluster mode: grants are kept in `store` from now on.
    pub(super) fn join(&self, store: Arc<dyn GrantStore>) {
        let _ = self.store.set(store);
    }

    pub(super) fn store(&self) -> Option<&Arc<dyn GrantStore>> {
        self.store.get()
    }

    pub(super) fn max(&self) -> usize {
        self.copies.max()
    }

    /// What `/oauth/connections` shows of `principal`'s grant, as this
    /// replica holds it.
    pub(super) fn connection(&self, principal: &Principal) -> Option<Connection> {
        self.copies.connection(principal)
    }

    /// Drops this replica's copy only; Some if there was one.
    pub(super) fn drop_here(&self, principal: &Principal) -> Option<Grant> {
        self.copies.remove(principal)
    }

    /// Keeps `principal`'s new or refreshed grant: here, and in the store
    /// (sealed), whose least recently used grants past `max_grants` go.
    pub(super) async fn keep(&self, principal: &Principal, grant: Grant) {
        let evicted = self.copies.put_fetched(principal, grant.clone(), now());
        let Some(store) = self.store.get() else {
            if let Some(evicted) = evicted {
                tracing::info!(target: "sluice::audit", backend = %self.backend, principal = %evicted, "oauth grant forgotten: max_grants reached");
            }
            return;
        };
        let (Some(ring), Some(field)) = (store.ring(), store::field(principal)) else {
            return;
        };
        let Some(sealed) = store::seal_grant(&ring, &self.backend, principal, &grant) else {
            return;
        };
        let backend = self.backend.as_str();
        match store.save(backend, &field, sealed, self.copies.max()).await {
            Some(evicted) => {
                for (field, sealed) in evicted {
                    if let Some((who, _)) = store::open_grant(&ring, &self.backend, &field, &sealed)
                    {
                        self.copies.remove(&who);
                        store.changed(backend, &who);
                        tracing::info!(target: "sluice::audit", backend = %self.backend, principal = %who, "oauth grant forgotten: max_grants reached");
                    }
                }
            }
            None => {
                tracing::warn!(backend = %self.backend, principal = %principal, "oauth grant kept on this replica only: the store is unreachable");
            }
        }
        store.changed(backend, principal);
    }

    /// Reads `principal`'s grant from the store into this replica's copy
    /// (cluster mode); on one node, or with the store unreachable, the
    /// copy as it is.
    pub(super) async fn load(&self, principal: &Principal) -> Option<Grant> {
        let (Some(store), Some(field)) = (self.store.get(), store::field(principal)) else {
            return self.copies.get(principal);
        };
        let Some(found) = store.load(self.backend.as_str(), &field).await else {
            return self.copies.get(principal);
        };
        let opened = found.and_then(|text| {
            let ring = store.ring()?;
            store::open_grant(&ring, &self.backend, &field, &text)
        });
        match opened {
            Some((_, grant)) => {
                self.copies.put_fetched(principal, grant.clone(), now());
                Some(grant)
            }
            None => {
                self.copies.remove(principal);
                None
            }
        }
    }

    /// `principal`'s grant: this replica's copy while fresh, else read
    /// again from the store.
    pub(super) async fn grant(&self, principal: &Principal) -> Option<Grant> {
        match self.copies.get_fetched(principal) {
            Some((grant, fetched))
                if self.store.get().is_none() || now() < fetched + CACHE_FRESH =>
            {
                Some(grant)
            }
            _ => self.load(principal).await,
        }
    }

    /// Makes sure this replica knows whether `principal` holds a grant
    /// (cluster mode: read through on a miss or a stale copy), before a
    /// list or a call decides whether the backend is there for them.
    pub(super) async fn warm(&self, principal: &Principal) {
        if self.store.get().is_some() {
            self.grant(principal).await;
        }
    }

    /// Another replica changed `principal`'s grant: this copy is dropped,
    /// and read again when next needed.
    pub(super) fn changed_elsewhere(&self, principal: &Principal) {
        self.copies.remove(principal);
    }

    /// The store's refresh lock of `principal`. While another replica
    /// holds it, waits (at most `REFRESH_WAIT`) for its refresh to land.
    pub(super) async fn refresh_lock(
        &self,
        store: &dyn GrantStore,
        principal: &Principal,
        field: &str,
    ) -> Lock {
        let deadline = tokio::time::Instant::now() + REFRESH_WAIT;
        loop {
            match store.lock(self.backend.as_str(), field, REFRESH_LOCK).await {
                Some(Some(token)) => return Lock::Taken(token),
                None => return Lock::Alone,
                Some(None) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(backend = %self.backend, principal = %principal, "oauth refresh: another replica's did not land in time");
                return Lock::Late;
            }
            tokio::time::sleep(REFRESH_POLL).await;
            match self.load(principal).await {
                Some(grant) if grant.refresh_due(now()) => {}
                landed => return Lock::Landed(landed),
            }
        }
    }

    /// Forgets `principal`'s grant here and in the store (telling the
    /// other replicas); returns it, for revocation at the server.
    pub(super) async fn drop_grant(&self, principal: &Principal) -> Option<Grant> {
        let here = self.copies.remove(principal);
        let (Some(store), Some(field)) = (self.store.get(), store::field(principal)) else {
            return here;
        };
        let stored = store.remove(self.backend.as_str(), &field).await;
        store.changed(self.backend.as_str(), principal);
        let stored = stored.flatten().and_then(|text| {
            let ring = store.ring()?;
            store::open_grant(&ring, &self.backend, &field, &text).map(|(_, g)| g)
        });
        stored.or(here)
    }

    /// `principal`'s access token as this replica holds it (no refresh).
    pub(super) fn current(&self, principal: &Principal) -> Option<Secret> {
        self.copies.get(principal).map(|g| g.access)
    }

    /// Whether `principal` holds a grant here (without using it).
    pub(super) fn connected(&self, principal: &Principal) -> bool {
        self.copies.connection(principal).is_some()
    }

    /// Grants held (`sluice_oauth_grants{backend}`): the store's count in
    /// cluster mode (this replica's copies when it cannot be asked).
    pub(super) async fn count(&self) -> usize {
        if let Some(store) = self.store.get()
            && let Some(count) = store.count(self.backend.as_str()).await
        {
            return count;
        }
        self.copies.len()
    }
}
