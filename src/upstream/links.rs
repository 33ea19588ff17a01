//! Which backend session a call goes over: the shared one, the caller's
//! own (per-session isolation, opened on first use), or a 2026-07-28
//! backend's stateless link; opened in the backend's era, or adopted from
//! another replica (cluster mode).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::link::{EndReason, Link};
use super::pool::PerSession;
use super::principals::{ByPrincipal, Entry, Route};
use super::{Backend, Caller, LinkCtx, Pool, RESTART_WAIT, Records, Relay, TransportSpec};
use super::{UpstreamError, http, legacy_sse, stdio};
use crate::protocol::{ClientCaps, Era};
use crate::vocab::{ClientKey, Principal};

/// Where a caller's link stands (`Backend::find_link`).
enum Found<'a> {
    /// Open: the call goes over it.
    Ready(Arc<Link>),
    /// A legacy client of a dual-era backend: its legacy session is found
    /// or opened, else this modern link serves it statelessly.
    Legacy(Arc<Link>),
    /// The caller's own session (per-session isolation), not open yet;
    /// with its principal's entry when it has one.
    Unopened(&'a Arc<PerSession>, Option<Arc<Entry>>),
    /// Its principal's own link (shared isolation), not open yet, or not
    /// yet held by this client session.
    Own(&'a Arc<ByPrincipal>, Arc<Entry>),
    /// The backend is not there for this principal (`fallback = "hide"`).
    Hidden,
    /// The shared session is gone; its replacement is not there yet.
    Gone,
}

impl Backend {
    /// Who the supervisor's session is for: everyone (shared), or, for a
    /// per-session backend's probe, a client that declared nothing, the
    /// most common kind, whose lists the probe then caches.
    pub(super) fn probe_offer(&self) -> Option<(ClientKey, ClientCaps)> {
        match &self.pool {
            Pool::PerSession(_) => Some((
                ClientKey::Principal(Principal::Anonymous),
                ClientCaps::default(),
            )),
            Pool::Shared(_) => None,
        }
    }

    /// What the supervisor's session goes over: the backend's own
    /// transport, or, when nobody may use its own credentials, the first
    /// principal's.
    pub(super) fn probe_transport(&self) -> &TransportSpec {
        match &self.principals {
            Some(p) if p.hides_others() => p.probe_transport().unwrap_or(&self.transport),
            Some(_) | None => &self.transport,
        }
    }

    /// Per-principal credentials nobody else may borrow (`fallback =
    /// "hide"`): the supervisor keeps no session for everyone (its probe,
    /// over the first principal's, is closed again).
    pub(super) fn is_private(&self) -> bool {
        self.principals.as_ref().is_some_and(|p| p.hides_others())
    }

    /// `oauth.flow = "authorization_code"`: the entries made from grants.
    pub(super) fn code_entries(&self) -> Option<&super::principals::CodeEntries> {
        self.principals.as_ref()?.code.as_ref()
    }

    /// `oauth.flow = "authorization_code"`: the backend's flow (the front's
    /// `/oauth/*` endpoints use it).
    pub(crate) fn code_flow(&self) -> Option<&Arc<super::oauth::CodeFlow>> {
        self.code_entries().map(|c| &c.flow)
    }

    /// With the authorization code flow, a start URL for `caller` if it
    /// holds no grant now (without refreshing: after a call whose token
    /// the backend refused, which dropped it). Decided without waiting:
    /// no await is added to the call's future (in cluster mode the URL
    /// was asked of Redis by `warm`).
    pub fn not_connected(&self, caller: &Caller) -> Option<url::Url> {
        let code = self.code_entries()?;
        let p = caller.who()?;
        (!code.flow.connected(p)).then(|| code.flow.start_url_now(p))
    }

    /// With the authorization code flow, makes sure this replica knows
    /// whether `caller` holds a grant (cluster mode: read from the store
    /// on a miss) before a list or call asks whether it is hidden, and
    /// that its entry carries a token that is not due (a catalog read
    /// after a restart would otherwise open a link with an expired one).
    /// Without a grant, its start URL is made ready (`not_connected`).
    pub async fn warm(&self, caller: &Caller) {
        if let (Some(code), Some(p)) = (self.code_entries(), caller.who())
            && !code.prepare(p).await
        {
            code.flow.ready_start(p).await;
        }
    }

    /// A backend's per-principal links (shared isolation).
    pub(super) fn by_principal(&self) -> Option<&Arc<ByPrincipal>> {
        self.principals.as_ref()?.shared.as_ref()
    }

    /// Opens a backend session, for one client or (None) for all.
    pub(super) async fn open(
        &self,
        client: Option<(ClientKey, ClientCaps)>,
    ) -> Result<Arc<Link>, UpstreamError> {
        self.open_over(&self.transport, self.ctx.for_client(client), false)
            .await
    }

    /// Opens a backend session over `spec` (the backend's own transport or
    /// a principal's); `legacy`: an HTTP one skips the era probe.
    pub(super) async fn open_over(
        &self,
        spec: &TransportSpec,
        ctx: LinkCtx,
        legacy: bool,
    ) -> Result<Arc<Link>, UpstreamError> {
        match spec {
            TransportSpec::Stdio(spec) => stdio::open(&ctx, spec).await,
            TransportSpec::Http(spec) if legacy => http::open_legacy(&ctx, spec).await,
            TransportSpec::Http(spec) => http::open(&ctx, spec).await,
            TransportSpec::Sse(spec) => legacy_sse::open(&ctx, spec).await,
        }
    }

    /// A link of `pool` for `key`: one client's (`caps`: what it can be
    /// asked), or, without `caps`, a principal's own, shared by its client
    /// sessions; over `spec`. In cluster mode an HTTP backend session that
    /// another replica opened for the same client session (or principal)
    /// is used rather than a second one opened; of two opened at once, the
    /// one recorded first is kept.
    async fn open_for(
        &self,
        pool: &PerSession,
        key: &ClientKey,
        caps: Option<ClientCaps>,
        spec: &TransportSpec,
        legacy: bool,
    ) -> Result<Arc<Link>, UpstreamError> {
        let ctx = match caps {
            Some(caps) => self.ctx.for_client(Some((key.clone(), caps))),
            None => self.ctx.for_principal(key.clone()),
        };
        let records = pool.records.get().cloned();
        let (TransportSpec::Http(http_spec), Some(records), Some(tag)) =
            (spec, records, pool.tag_of(key))
        else {
            return self.open_over(spec, ctx, legacy).await;
        };
        let name = self.name.as_str();
        if let Some(theirs) = records.find(name, &tag).await {
            return http::adopt(&ctx, http_spec, theirs).await;
        }
        let ours = self.open_over(spec, ctx.clone(), legacy).await?;
        let Some(mine) = ours.shared() else {
            return Ok(ours); // 2026-07-28: no session to share
        };
        match records.claim(name, &tag, mine, pool.idle_ttl).await {
            None => Ok(ours),
            Some(theirs) => {
                ours.close(EndReason::Probe);
                ours.closed().await;
                http::adopt(&ctx, http_spec, theirs).await
            }
        }
    }

    /// Its client session ended on purpose (cluster mode): the shared
    /// backend session is ended now, whichever replica holds it.
    pub async fn end_shared(&self, client: &ClientKey) {
        let (Pool::PerSession(p), TransportSpec::Http(spec), Some(tag)) =
            (&self.pool, &self.transport, client.shared_tag())
        else {
            return;
        };
        if let Some(records) = p.records.get()
            && let Some(shared) = records.take(self.name.as_str(), &tag).await
        {
            http::delete_session(spec, &shared.session).await;
        }
    }

    /// An owning handle, for work that must outlive the caller's future.
    fn owned(&self) -> Result<Arc<Backend>, UpstreamError> {
        self.me
            .upgrade()
            .ok_or_else(|| UpstreamError::unavailable(&self.name, "stopping"))
    }

    pub(super) fn modern_link(&self) -> Option<Arc<Link>> {
        if !self.glance.modern_link.load(Ordering::Acquire) {
            return None;
        }
        self.modern.lock().clone().filter(|l| !l.is_dead())
    }

    /// A 2026-07-28 backend's link, or None once it is gone.
    pub(super) fn set_modern_link(&self, link: Option<Arc<Link>>) {
        let mut modern = self.modern.lock();
        self.glance
            .modern_link
            .store(link.is_some(), Ordering::Release);
        *modern = link;
    }

    /// Where the caller's link stands, as far as can be told without a wait.
    fn find_link(&self, caller: &Caller) -> Found<'_> {
        // Per-principal credentials: a principal's own links, whatever the
        // era (a modern backend's stateless link carries the backend's own).
        if let Some(p) = &self.principals {
            match (p.route(caller), &p.shared, &self.pool) {
                (Route::Hidden, ..) => return Found::Hidden,
                (Route::Own(e), Some(by), _) => {
                    return by.ready(caller).map_or(Found::Own(by, e), Found::Ready);
                }
                (Route::Own(e), None, Pool::PerSession(pool)) => {
                    return pool
                        .existing(caller)
                        .map_or(Found::Unopened(pool, Some(e)), Found::Ready);
                }
                (Route::Own(_), None, Pool::Shared(_)) | (Route::Fallback, ..) => {}
            }
        }
        if let Some(modern) = self.modern_link() {
            use std::sync::atomic::Ordering::Relaxed;
            return if caller.era == Era::Modern || self.legacy_refused.load(Relaxed) {
                Found::Ready(modern)
            } else {
                Found::Legacy(modern)
            };
        }
        match &self.pool {
            Pool::Shared(slot) => slot
                .lock()
                .clone()
                .filter(|l| !l.is_dead())
                .map_or(Found::Gone, Found::Ready),
            Pool::PerSession(p) => p
                .existing(caller)
                .map_or(Found::Unopened(p, None), Found::Ready),
        }
    }

    /// The link a call goes over when none has to be waited for or opened:
    /// the backend is up and the caller's session open (else `link_for`).
    pub(super) fn ready_link(&self, caller: &Caller) -> Option<Arc<Link>> {
        if !self.glance.up.load(Ordering::Acquire) {
            return None;
        }
        match self.find_link(caller) {
            Found::Ready(link) => Some(link),
            Found::Legacy(_)
            | Found::Unopened(..)
            | Found::Own(..)
            | Found::Hidden
            | Found::Gone => None,
        }
    }

    /// The link a call goes over. A shared session that just died is waited
    /// for (briefly) while the supervisor replaces it, as a restart is.
    pub(super) async fn link_for(&self, caller: &Caller) -> Result<Arc<Link>, UpstreamError> {
        let until = tokio::time::Instant::now() + RESTART_WAIT.min(self.ctx.timeout);
        loop {
            // Subscribed before looking: a replacement made meanwhile wakes us.
            let mut changed = self.health_changed.subscribe();
            self.check_health().await?;
            if let Some(link) = self.live_link(caller).await? {
                return Ok(link);
            }
            self.wake.notify_one();
            if tokio::time::timeout_at(until, changed.changed())
                .await
                .is_err()
            {
                return Err(UpstreamError::unavailable(&self.name, "reconnecting"));
            }
        }
    }

    /// None: the shared session is gone and its replacement not yet there.
    async fn live_link(&self, caller: &Caller) -> Result<Option<Arc<Link>>, UpstreamError> {
        match self.find_link(caller) {
            Found::Ready(link) => Ok(Some(link)),
            Found::Gone => Ok(None),
            // A legacy client keeps its legacy semantics (sessions, server
            // requests, logging) when the backend still speaks them.
            Found::Legacy(modern) => match self.legacy_link(caller).await {
                Ok(link) => Ok(Some(link)),
                Err(e) if !e.is_unreachable() => {
                    tracing::info!(backend = %self.name, error = %e, "no legacy sessions; serving legacy clients statelessly");
                    self.legacy_refused
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    Ok(Some(modern))
                }
                Err(e) => Err(e),
            },
            Found::Hidden => Err(UpstreamError::unauthorized(
                &self.name,
                match self.code_flow() {
                    Some(_) => {
                        "not connected: this principal has no grant for this backend (see /oauth/connections)"
                    }
                    None => "not served to this principal",
                },
            )),
            Found::Unopened(p, entry) => {
                let me = self.owned()?;
                let (pool, key, caps) = (p.clone(), caller.key.clone(), caller.caps);
                let open = move || async move {
                    let spec = entry.as_ref().map_or(&me.transport, |e| &e.transport);
                    me.open_for(&pool, &key, Some(caps), spec, false).await
                };
                let link = p.get_or_open(caller, open).await;
                self.woken_by(&link);
                link.map(Some)
            }
            Found::Own(by, entry) => {
                // Held first: its principal's other sessions ending while
                // it opens do not end it under this one.
                by.hold(caller, &entry);
                let owner = entry.owner(caller);
                let me = self.owned()?;
                let (pool, key) = (by.pool.clone(), owner.key.clone());
                let open = move || async move {
                    me.open_for(&pool, &key, None, &entry.transport, false)
                        .await
                };
                let link = by.pool.get_or_open(&owner, open).await;
                self.woken_by(&link);
                if let Err(e) = &link {
                    self.refused(owner.who(), e);
                }
                if let Ok(link) = &link {
                    by.note(caller, link);
                }
                link.map(Some)
            }
        }
    }

    /// An open that found the backend unreachable has its health checked.
    /// With the authorization code flow (never probed) a principal's link
    /// that opened is what tells the backend is up, and what it offers.
    fn woken_by(&self, link: &Result<Arc<Link>, UpstreamError>) {
        if let Ok(link) = link
            && self.code_flow().is_some()
            && self.info().is_none()
        {
            self.set_health(super::Health::Up(link.info.clone()));
        }
        if let Err(e) = link
            && e.is_unreachable()
        {
            self.wake.notify_one();
        }
    }

    /// The legacy session for a legacy client of a dual-era backend.
    async fn legacy_link(&self, caller: &Caller) -> Result<Arc<Link>, UpstreamError> {
        match &self.pool {
            Pool::Shared(slot) => {
                let _one = self.opening.lock().await;
                if let Some(l) = slot.lock().clone().filter(|l| !l.is_dead()) {
                    return Ok(l);
                }
                let link = self
                    .open_over(&self.transport, self.ctx.clone(), true)
                    .await?;
                *slot.lock() = Some(link.clone());
                Ok(link)
            }
            Pool::PerSession(p) => {
                let me = self.owned()?;
                let (pool, key, caps) = (p.clone(), caller.key.clone(), caller.caps);
                let open = move || async move {
                    me.open_for(&pool, &key, Some(caps), &me.transport, true)
                        .await
                };
                p.get_or_open(caller, open).await
            }
        }
    }

    /// Cluster mode: what this backend announces is also handed to
    /// `relay`, and its per-session backend sessions to `records`.
    pub(crate) fn join_cluster(
        &self,
        relay: Relay,
        records: Arc<dyn Records>,
        grants: Arc<dyn super::oauth::GrantStore>,
    ) {
        let _ = self.relay.set(relay);
        if let Some(flow) = self.code_flow() {
            flow.join_cluster(grants);
        }
        if let Some(by) = self.by_principal() {
            let _ = by.pool.records.set(records.clone());
        }
        if let Pool::PerSession(p) = &self.pool {
            let _ = p.records.set(records);
        }
    }

    /// Ends a backend session by its id alone (one a dead replica left).
    pub async fn delete_session(&self, session: &str) {
        if let TransportSpec::Http(spec) = &self.transport {
            http::delete_session(spec, session).await;
        }
    }

    /// Whether every client shares one backend session (so one client's
    /// `resources/unsubscribe` must not end another's subscription).
    pub fn is_shared(&self) -> bool {
        matches!(self.pool, Pool::Shared(_)) || self.modern_link().is_some()
    }

    /// Whether the backend is not there for `caller` (per-principal
    /// credentials, `fallback = "hide"`, and no entry of its principal):
    /// not listed to it, its calls refused as unlisted.
    pub fn hides(&self, caller: &Caller) -> bool {
        self.principals.as_ref().is_some_and(|p| p.hides(caller))
    }

    /// The caller's link if one is open, without opening one.
    pub(super) fn existing_link(&self, caller: &Caller) -> Option<Arc<Link>> {
        if let Some(p) = &self.principals {
            match (p.route(caller), &p.shared, &self.pool) {
                (Route::Hidden, ..) => return None,
                (Route::Own(_), Some(by), _) => return by.ready(caller),
                (Route::Own(_), None, _) | (Route::Fallback, ..) => {}
            }
        }
        match &self.pool {
            Pool::Shared(slot) => slot.lock().clone(),
            Pool::PerSession(p) => p.existing(caller),
        }
    }
}
