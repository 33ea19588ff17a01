//! Which backend session a call goes over: the shared one, the caller's
//! own (per-session isolation, opened on first use), or a 2026-07-28
//! backend's stateless link; opened in the backend's era, or adopted from
//! another replica (cluster mode).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::link::{EndReason, Link};
use super::pool::PerSession;
use super::{Backend, Caller, Pool, RESTART_WAIT, Records, Relay, TransportSpec, UpstreamError};
use super::{http, legacy_sse, stdio};
use crate::protocol::{ClientCaps, Era};
use crate::vocab::{ClientKey, Principal};

/// Where a caller's link stands (`Backend::find_link`).
enum Found<'a> {
    /// Open: the call goes over it.
    Ready(Arc<Link>),
    /// A legacy client of a dual-era backend: its legacy session is found
    /// or opened, else this modern link serves it statelessly.
    Legacy(Arc<Link>),
    /// The caller's own session (per-session isolation), not open yet.
    Unopened(&'a Arc<PerSession>),
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

    /// Opens a backend session, for one client or (None) for all.
    pub(super) async fn open(
        &self,
        client: Option<(ClientKey, ClientCaps)>,
    ) -> Result<Arc<Link>, UpstreamError> {
        let ctx = self.ctx.for_client(client);
        match &self.transport {
            TransportSpec::Stdio(spec) => stdio::open(&ctx, spec).await,
            TransportSpec::Http(spec) => http::open(&ctx, spec).await,
            TransportSpec::Sse(spec) => legacy_sse::open(&ctx, spec).await,
        }
    }

    /// A legacy session on an HTTP backend, skipping the era probe.
    async fn open_legacy(
        &self,
        client: Option<(ClientKey, ClientCaps)>,
    ) -> Result<Arc<Link>, UpstreamError> {
        match &self.transport {
            TransportSpec::Http(spec) => {
                http::open_legacy(&self.ctx.for_client(client), spec).await
            }
            _ => self.open(client).await,
        }
    }

    /// A client's own backend session. In cluster mode an HTTP backend
    /// session that another replica opened for the same client session is
    /// used rather than a second one opened; of two opened at once, the
    /// one recorded first is kept.
    async fn open_for(
        &self,
        client: (ClientKey, ClientCaps),
        legacy: bool,
    ) -> Result<Arc<Link>, UpstreamError> {
        let records = match &self.pool {
            Pool::PerSession(p) => p.records.get().cloned(),
            Pool::Shared(_) => None,
        };
        let (TransportSpec::Http(spec), Some(records), Some(tag)) =
            (&self.transport, records, client.0.shared_tag())
        else {
            return match legacy {
                true => self.open_legacy(Some(client)).await,
                false => self.open(Some(client)).await,
            };
        };
        let ctx = self.ctx.for_client(Some(client));
        let name = self.name.as_str();
        if let Some(theirs) = records.find(name, &tag).await {
            return http::adopt(&ctx, spec, theirs).await;
        }
        let ours = match legacy {
            true => http::open_legacy(&ctx, spec).await?,
            false => http::open(&ctx, spec).await?,
        };
        let Some(mine) = ours.shared() else {
            return Ok(ours); // 2026-07-28: no session to share
        };
        let idle_ttl = match &self.pool {
            Pool::PerSession(p) => p.idle_ttl,
            Pool::Shared(_) => Duration::ZERO,
        };
        match records.claim(name, &tag, mine, idle_ttl).await {
            None => Ok(ours),
            Some(theirs) => {
                ours.close(EndReason::Probe);
                ours.closed().await;
                http::adopt(&ctx, spec, theirs).await
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
            Pool::PerSession(p) => p.existing(caller).map_or(Found::Unopened(p), Found::Ready),
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
            Found::Legacy(_) | Found::Unopened(_) | Found::Gone => None,
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
            Found::Unopened(p) => {
                let me = self.owned()?;
                let client = (caller.key.clone(), caller.caps);
                let link = p
                    .get_or_open(
                        caller,
                        move || async move { me.open_for(client, false).await },
                    )
                    .await;
                if let Err(e) = &link
                    && e.is_unreachable()
                {
                    self.wake.notify_one();
                }
                link.map(Some)
            }
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
                let link = self.open_legacy(None).await?;
                *slot.lock() = Some(link.clone());
                Ok(link)
            }
            Pool::PerSession(p) => {
                let me = self.owned()?;
                let client = (caller.key.clone(), caller.caps);
                p.get_or_open(
                    caller,
                    move || async move { me.open_for(client, true).await },
                )
                .await
            }
        }
    }

    /// Cluster mode: what this backend announces is also handed to
    /// `relay`, and its per-session backend sessions to `records`.
    pub fn join_cluster(&self, relay: Relay, records: Arc<dyn Records>) {
        let _ = self.relay.set(relay);
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
}
