//! A backend with per-principal credentials (`[backends.NAME.principals]`):
//! a principal with an entry reaches it with its own headers (HTTP) or its
//! own child and environment (stdio), over backend sessions no other
//! principal ever uses; one without is hidden from it, or served with the
//! backend's own credentials (`fallback`).
//!
//! Each entry's transport is built once, when the backend starts: its
//! headers belong to the links opened with it, never rebuilt per call.
//!
//! With `isolation = "shared"` a principal has one backend session, which
//! its client sessions share: `ByPrincipal` keys the links by principal
//! (bounded by `max_sessions`, reaped at `idle_ttl`), and a client session
//! holds its principal's link from its first call until it ends; the link
//! ends with the last holder. With `"per-session"` the backend's ordinary
//! per-session pool serves it, each link opened with its principal's own.
//!
//! With `oauth.flow = "authorization_code"` a principal's credentials come
//! from its grant rather than the config (`CodeEntries`): its entry is made
//! when it first calls with a grant, its `Authorization` replaced when the
//! grant is refreshed, and it is dropped with the grant.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::http::HttpSpec;
use super::link::Link;
use super::oauth::CodeFlow;
use super::pool::PerSession;
use super::{Caller, TransportSpec};
use crate::config::Fallback;
use crate::fast_map::FastMap;
use crate::vocab::{ClientKey, ClientSession, Principal, SessionId};

/// A backend's per-principal credentials, and the links they opened.
pub(super) struct Principals {
    entries: FastMap<Principal, Arc<Entry>>,
    /// The file's first entry: what checks the health of, and lists, a
    /// backend whose callers without an entry are hidden (it may have no
    /// credentials of its own). None with the authorization code flow.
    first: Option<Arc<Entry>>,
    fallback: Fallback,
    /// `isolation = "shared"`: each principal's one link (None: the
    /// backend's per-session pool keys by client session).
    pub(super) shared: Option<Arc<ByPrincipal>>,
    /// `oauth.flow = "authorization_code"`: entries made from grants.
    pub(super) code: Option<CodeEntries>,
}

/// Each principal's entry made from its grant.
pub(super) struct CodeEntries {
    pub(super) flow: Arc<CodeFlow>,
    /// The backend's transport, without any principal's token.
    base: Arc<HttpSpec>,
    made: Mutex<FastMap<Principal, Arc<Entry>>>,
}

/// One principal's way to the backend.
pub(super) struct Entry {
    principal: Principal,
    /// The backend's transport with the principal's headers or variables.
    pub(super) transport: TransportSpec,
    holders: Mutex<Holders>,
}

/// The client sessions that hold a principal's shared link.
struct Holders {
    count: usize,
    /// Cancelled when the count falls to zero (then replaced): the link
    /// opened under it ends.
    released: CancellationToken,
}

/// Who a caller is to the backend.
pub(super) enum Route {
    /// Its own credentials.
    Own(Arc<Entry>),
    /// The backend's own (`fallback = "shared"`).
    Fallback,
    /// Not there for it (`fallback = "hide"`).
    Hidden,
}

/// One link per principal, shared by its client sessions.
pub(super) struct ByPrincipal {
    /// Keyed by `ClientKey::Principal`.
    pub(super) pool: Arc<PerSession>,
    /// Each client session that called, and the link it last used: the
    /// call's look-up. Bounded by the client sessions alive.
    held: Mutex<FastMap<SessionId, Option<Arc<Link>>>>,
    /// The backend's stop: a holder's watch ends with it.
    stop: CancellationToken,
}

impl Principals {
    /// `entries` in the file's order (None without any: the config never
    /// has an empty `principals`).
    pub(super) fn new(
        entries: Vec<(Principal, TransportSpec)>,
        fallback: Fallback,
        shared: Option<Arc<PerSession>>,
        stop: CancellationToken,
    ) -> Option<Principals> {
        let entries: Vec<Arc<Entry>> = entries
            .into_iter()
            .map(|(principal, transport)| Entry::new(principal, transport))
            .collect();
        Some(Principals {
            first: Some(entries.first()?.clone()),
            entries: entries
                .into_iter()
                .map(|e| (e.principal.clone(), e))
                .collect(),
            fallback,
            shared: shared.map(|pool| {
                Arc::new(ByPrincipal {
                    pool,
                    held: Mutex::default(),
                    stop,
                })
            }),
            code: None,
        })
    }

    /// A backend with the authorization code flow: no entry until a
    /// principal with a grant calls; nobody else reaches it.
    pub(super) fn code(
        flow: Arc<CodeFlow>,
        base: Arc<HttpSpec>,
        shared: Option<Arc<PerSession>>,
        stop: CancellationToken,
    ) -> Principals {
        Principals {
            entries: FastMap::default(),
            first: None,
            fallback: Fallback::Hide,
            shared: shared.map(|pool| {
                Arc::new(ByPrincipal {
                    pool,
                    held: Mutex::default(),
                    stop,
                })
            }),
            code: Some(CodeEntries {
                flow,
                base,
                made: Mutex::default(),
            }),
        }
    }

    /// How `caller` reaches the backend. Anonymous callers, and answers
    /// relayed from other replicas, have no entry.
    pub(super) fn route(&self, caller: &Caller) -> Route {
        match caller.who().and_then(|p| self.entry(p)) {
            Some(e) => Route::Own(e),
            None if self.fallback == Fallback::Shared => Route::Fallback,
            None => Route::Hidden,
        }
    }

    /// `principal`'s entry: from the file, or made from its grant.
    fn entry(&self, principal: &Principal) -> Option<Arc<Entry>> {
        if let Some(e) = self.entries.get(principal) {
            return Some(e.clone());
        }
        self.code.as_ref()?.entry(principal)
    }

    /// Whether the backend is not there for `caller` (one look-up, and
    /// none with `fallback = "shared"`).
    pub(super) fn hides(&self, caller: &Caller) -> bool {
        self.fallback == Fallback::Hide
            && !caller.who().is_some_and(|p| match &self.code {
                None => self.entries.contains_key(p),
                Some(_) => self.entry(p).is_some(),
            })
    }

    /// With `fallback = "hide"`, the backend keeps no session of its own
    /// credentials: nobody may use one.
    pub(super) fn hides_others(&self) -> bool {
        self.fallback == Fallback::Hide
    }

    /// What the health check and lists go over when nobody may use the
    /// backend's own credentials.
    pub(super) fn probe_transport(&self) -> Option<&TransportSpec> {
        self.first.as_ref().map(|e| &e.transport)
    }
}

impl CodeEntries {
    /// Makes `principal`'s entry carry its grant's access token, refreshed
    /// first when due. False: it has no usable grant. An entry outlives a
    /// grant (unused without one: `entry` asks the grants): links opened
    /// with it carry the next grant's token as soon as there is one.
    pub(super) async fn prepare(&self, principal: &Principal) -> bool {
        let Some(access) = self.flow.access(principal).await else {
            return false;
        };
        self.carrying(principal, &access);
        true
    }

    /// `principal`'s entry while it holds a grant (made with the grant's
    /// token as it is, the first time: a call refreshes it when due).
    fn entry(&self, principal: &Principal) -> Option<Arc<Entry>> {
        let access = self.flow.current(principal)?;
        if let Some(e) = self.made.lock().get(principal) {
            return Some(e.clone());
        }
        Some(self.carrying(principal, &access))
    }

    /// `principal`'s entry, made if need be, sending `access`.
    fn carrying(&self, principal: &Principal, access: &crate::config::Secret) -> Arc<Entry> {
        let value = format!("Bearer {}", access.expose());
        let existing = self.made.lock().get(principal).cloned();
        if let Some(entry) = existing {
            if let TransportSpec::Http(spec) = &entry.transport {
                spec.headers.set_authorization(&value);
            }
            return entry;
        }
        let spec = HttpSpec {
            url: self.base.url.clone(),
            target: self.base.target.clone(),
            headers: Arc::new(
                super::headers::Headers::new(
                    (**self.base.headers.current()).clone(),
                    None,
                    &self.base.client,
                )
                .expect("no token to fetch"),
            ),
            client: self.base.client.clone(),
        };
        spec.headers.set_authorization(&value);
        let entry = Entry::new(principal.clone(), TransportSpec::Http(Arc::new(spec)));
        let mut made = self.made.lock();
        // Bounded by the grants: entries of forgotten grants go first.
        if made.len() >= self.flow.max_grants() {
            made.retain(|p, _| self.flow.connected(p));
        }
        // Made meanwhile by another call: that one is kept.
        made.entry(principal.clone()).or_insert(entry).clone()
    }
}

impl Entry {
    fn new(principal: Principal, transport: TransportSpec) -> Arc<Entry> {
        Arc::new(Entry {
            principal,
            transport,
            holders: Mutex::new(Holders {
                count: 0,
                released: CancellationToken::new(),
            }),
        })
    }

    /// Who the principal's shared link is opened for: its key, and its
    /// holders' end as the end of the "session" that owns it.
    pub(super) fn owner(&self, caller: &Caller) -> Caller {
        let released = self.holders.lock().released.clone();
        Caller {
            key: ClientKey::Principal(self.principal.clone()),
            session: Some(Arc::new(Released {
                principal: self.principal.clone(),
                released,
            })),
            era: caller.era,
            caps: caller.caps,
            token: None,
            scopes: None,
        }
    }

    fn hold(&self) {
        self.holders.lock().count += 1;
    }

    fn release(&self) {
        let mut h = self.holders.lock();
        h.count = h.count.saturating_sub(1);
        if h.count == 0 {
            h.released.cancel();
            h.released = CancellationToken::new();
        }
    }
}

/// A principal's shared link as its pool sees its owner: a "session" that
/// ends when the principal's last client session holding it does.
struct Released {
    principal: Principal,
    released: CancellationToken,
}

impl ClientSession for Released {
    fn ended(&self) -> &CancellationToken {
        &self.released
    }

    fn principal(&self) -> &Principal {
        &self.principal
    }
}

impl ByPrincipal {
    /// The principal's link `caller` uses now, if open (the call's one
    /// look-up: by client session, or by principal without one).
    pub(super) fn ready(&self, caller: &Caller) -> Option<Arc<Link>> {
        match &caller.key {
            ClientKey::Session(id) => self
                .held
                .lock()
                .get(id)
                .and_then(|l| l.as_ref().filter(|l| !l.is_dead()).cloned()),
            key @ ClientKey::Principal(_) => self.pool.live(key),
        }
    }

    /// Makes `caller`'s client session a holder of its principal's link
    /// until it ends (once per session): before the link is looked up or
    /// opened, so that its principal's other sessions ending meanwhile do
    /// not end it under this one.
    pub(super) fn hold(self: &Arc<Self>, caller: &Caller, entry: &Arc<Entry>) {
        let (ClientKey::Session(id), Some(session)) = (&caller.key, &caller.session) else {
            return;
        };
        {
            let mut held = self.held.lock();
            if held.contains_key(id) {
                return;
            }
            held.insert(id.clone(), None);
            entry.hold();
        }
        let ended = session.ended().clone();
        let (me, id, entry) = (self.clone(), id.clone(), entry.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = ended.cancelled() => {}
                // The backend's links are all ended by its stop.
                _ = me.stop.cancelled() => {}
            }
            me.held.lock().remove(&id);
            entry.release();
        });
    }

    /// Notes the link `caller`'s session uses now.
    pub(super) fn note(&self, caller: &Caller, link: &Arc<Link>) {
        if let ClientKey::Session(id) = &caller.key
            && let Some(slot) = self.held.lock().get_mut(id)
        {
            *slot = Some(link.clone());
        }
    }
}
