//! One backend's authorization code flow at run time (`oauth.flow =
//! "authorization_code"`): its start ids, its discovery and client
//! registration (made once, kept in memory), its principals' grants, and
//! the steps `/oauth/start/{id}`, `/oauth/callback` and
//! `/oauth/connections` take. See README.md beside this file.
//!
//! Invariants: a start id is single use, bound to one principal and one
//! backend, and dies after `FLOW_TTL`; a state opens once, for the browser
//! that holds the flow cookie its start set; a grant is only ever used for
//! the principal it was made for. No token is logged or shown, nor written
//! to the store but sealed.
//!
//! Where the grants are kept, here and under `[cluster]` in the store, is
//! `backend_grants.rs`'s; a refresh is made here, under the store's lock
//! of (backend, principal), so a rotating refresh token is never spent
//! twice by two replicas.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use url::Url;

use super::backend_grants::{BackendGrants, Lock};
use super::fetch::{self, Endpoints};
use super::starts::{MAX_PER_PRINCIPAL, MAX_STARTS, Starts};
use super::store::{self, GrantStore, StartRecord, TakenStart};
use super::{
    AuthorizationRequest, ClientIdentity, Connection, FLOW_TTL, FlowStates, Grant, Pkce,
    StateRefused, TokenForm,
};
use crate::config::{CodeFlowConfig, Secret};
use crate::http1::client::Client;
use crate::sessions::sealed::KeyRing;
use crate::vocab::{BackendName, Principal, hex, unix_now as now};

/// What every backend's flows share on one node: the key that seals
/// states without the sessions' key ring (made at start: a restart loses
/// flows in progress, which the person starts again), the states already
/// used, and the start ids not yet opened.
struct Shared {
    ring: Arc<KeyRing>,
    states: FlowStates,
    starts: Starts,
}

static SHARED: LazyLock<Shared> = LazyLock::new(|| Shared {
    ring: Arc::new(KeyRing::parse(&KeyRing::generate()).expect("a generated key ring parses")),
    states: FlowStates::new(),
    starts: Starts::new(MAX_STARTS, MAX_PER_PRINCIPAL),
});

fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("OS randomness is unavailable");
    hex(&bytes)
}

/// Why `/oauth/start/{id}` or `/oauth/callback` is refused: its text goes
/// on the plain 400 page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    #[error("this link is unknown; ask again from your MCP client")]
    UnknownStart,
    #[error("this link has already been used; ask again from your MCP client")]
    UsedStart,
    #[error("this link has expired; ask again from your MCP client")]
    ExpiredStart,
    #[error("{0}")]
    State(#[from] StateRefused),
    #[error("the authorization server said: {0}")]
    Denied(String),
    #[error("the connection could not be made: {0}")]
    Failed(String),
}

impl Refused {
    /// The `result` label of `sluice_oauth_flows_total`.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Refused::UnknownStart => "unknown",
            Refused::UsedStart => "used",
            Refused::ExpiredStart => "expired",
            Refused::State(StateRefused::Unknown) => "other_browser",
            Refused::State(StateRefused::Expired) => "expired",
            Refused::State(StateRefused::Used) => "used",
            Refused::Denied(_) => "denied",
            Refused::Failed(_) => "failed",
        }
    }
}

/// The authorization server as discovered, and who the gateway is there.
struct Setup {
    endpoints: Endpoints,
    client: ClientIdentity,
}

/// One backend's flow.
pub(crate) struct CodeFlow {
    backend: BackendName,
    config: CodeFlowConfig,
    /// The backend's MCP URL.
    url: Url,
    client: Client,
    /// Its grants, here and (cluster mode) in the store, which also holds
    /// the start ids.
    grants: BackendGrants,
    /// Discovered and registered once; a failure is tried again next time.
    setup: tokio::sync::Mutex<Option<Arc<Setup>>>,
    /// One refresh at a time here: a rotated refresh token is spent once
    /// (across replicas, the store's lock).
    refreshing: tokio::sync::Mutex<()>,
    /// Cluster mode: each principal's start URL as the store last gave it,
    /// with its expiry (unix seconds), for a call to name without waiting.
    /// At most `max_grants`; full, any one goes (it is asked again).
    ready: Mutex<HashMap<Principal, (Url, u64)>>,
}

impl CodeFlow {
    pub(crate) fn new(
        backend: BackendName,
        config: CodeFlowConfig,
        url: Url,
        client: Client,
    ) -> CodeFlow {
        CodeFlow {
            grants: BackendGrants::new(backend.clone(), config.max_grants),
            backend,
            config,
            url,
            client,
            setup: tokio::sync::Mutex::new(None),
            refreshing: tokio::sync::Mutex::new(()),
            ready: Mutex::new(HashMap::new()),
        }
    }

    /// Cluster mode: grants and start ids are kept in `store` from now on.
    pub(crate) fn join_cluster(&self, store: Arc<dyn GrantStore>) {
        self.grants.join(store);
    }

    pub(crate) fn max_grants(&self) -> usize {
        self.grants.max()
    }

    /// A start URL for `principal`: `{public_url}/oauth/start/{id}`, single
    /// use, for `FLOW_TTL`; the same one while it is fresh and unopened.
    pub(crate) async fn start_url(&self, principal: &Principal) -> Url {
        let fresh = random_hex();
        let shared = match (self.grants.store(), store::field(principal)) {
            (Some(store), Some(field)) => {
                let record = StartRecord {
                    principal: principal.clone(),
                    backend: self.backend.as_str().to_owned(),
                    expires: now() + FLOW_TTL.as_secs(),
                };
                let record = serde_json::to_string(&record).expect("a record serialises");
                store
                    .start(
                        self.backend.as_str(),
                        &field,
                        fresh.clone(),
                        record,
                        FLOW_TTL,
                        FLOW_TTL / 2,
                    )
                    .await
            }
            _ => None,
        };
        // The store unreachable: a link this replica alone opens.
        let id =
            shared.unwrap_or_else(|| SHARED.starts.issue(principal, &self.backend, fresh, now()));
        self.config.under(&format!("oauth/start/{id}"))
    }

    /// Where the gateway's Client ID Metadata Document for this backend
    /// is served: the `client_id` it is known by where the server fetches
    /// such documents.
    fn metadata_url(&self) -> Url {
        self.config
            .under(&format!(".well-known/oauth-client/{}", self.backend))
    }

    /// `/.well-known/oauth-client/{backend}`: the document, when the
    /// gateway may be known by it (no `client_id` configured, an https
    /// `public_url`, as the draft requires of a client id).
    pub(crate) fn metadata_document(&self) -> Option<serde_json::Value> {
        (self.config.client_id.is_none() && self.secure()).then(|| {
            super::metadata_document(&self.metadata_url(), &self.config.callback(), "sluice")
        })
    }

    /// `start_url` without waiting: in cluster mode the one `ready_start`
    /// got from the store while it surely lives, else (and on
    /// one node) one of this process's table (a replica that does not
    /// know an id asks its own table: then only this one opens it).
    pub(crate) fn start_url_now(&self, principal: &Principal) -> Url {
        if self.grants.store().is_some()
            && let Some((url, expires)) = self.ready.lock().get(principal)
            && now() < *expires
        {
            return url.clone();
        }
        let id = SHARED
            .starts
            .issue(principal, &self.backend, random_hex(), now());
        self.config.under(&format!("oauth/start/{id}"))
    }

    /// Cluster mode: asks the store for `principal`'s start URL now, so
    /// that a call answered without waiting names one every replica opens.
    pub(crate) async fn ready_start(&self, principal: &Principal) {
        if self.grants.store().is_none() {
            return;
        }
        let url = self.start_url(principal).await;
        let mut ready = self.ready.lock();
        if ready.len() >= self.max_grants()
            && !ready.contains_key(principal)
            && let Some(any) = ready.keys().next().cloned()
        {
            ready.remove(&any);
        }
        // The store gives one with at least half its life left.
        ready.insert(principal.clone(), (url, now() + FLOW_TTL.as_secs() / 2));
    }

    /// The callback's path (the flow cookie's `Path`).
    pub(crate) fn callback_path(&self) -> String {
        self.config.callback().path().to_owned()
    }

    /// Whether the start URL is https (the flow cookie is then `Secure`).
    pub(crate) fn secure(&self) -> bool {
        self.config.public_url.scheme() == "https"
    }

    /// The backend a start id is for, taking the id out (single use): from
    /// `store` in cluster mode (else, or when it does not know the id, this
    /// process's table).
    pub(crate) async fn take_start(
        store: Option<&dyn GrantStore>,
        id: &str,
    ) -> Result<(Principal, BackendName), Refused> {
        if let Some(store) = store {
            match store.take_start(id).await {
                Some(TakenStart::Record(record)) => {
                    let record: StartRecord =
                        serde_json::from_str(&record).map_err(|_| Refused::UnknownStart)?;
                    if now() >= record.expires {
                        return Err(Refused::ExpiredStart);
                    }
                    let backend =
                        BackendName::new(&record.backend).map_err(|_| Refused::UnknownStart)?;
                    return Ok((record.principal, backend));
                }
                Some(TakenStart::Used) => return Err(Refused::UsedStart),
                Some(TakenStart::Unknown) | None => {}
            }
        }
        SHARED.starts.take(id, now())
    }

    /// Opens a callback's state for the browser holding `cookie`, with the
    /// sessions' key ring when there is one (states then open on any
    /// replica holding it); in cluster mode `store` says whether another
    /// replica opened it already.
    pub(crate) async fn open_state(
        ring: Option<&KeyRing>,
        store: Option<&dyn GrantStore>,
        state: &str,
        cookie: &[u8],
    ) -> Result<super::FlowState, Refused> {
        let ring = ring.unwrap_or(&SHARED.ring);
        let opened = SHARED.states.finish(ring, state, cookie, now())?;
        if let Some(store) = store
            && store.first_use(&opened.serial_hex(), opened.expires).await == Some(false)
        {
            return Err(StateRefused::Used.into());
        }
        Ok(opened)
    }

    async fn setup(&self) -> Result<Arc<Setup>, String> {
        let mut slot = self.setup.lock().await;
        if let Some(s) = &*slot {
            return Ok(s.clone());
        }
        let endpoints = fetch::discover(&self.client, &self.url)
            .await
            .map_err(|e| e.to_string())?;
        let client = match &self.config.client_id {
            Some(id) => ClientIdentity::configured(id, self.config.client_secret.clone()),
            None if endpoints.server.client_id_metadata_document_supported && self.secure() => {
                ClientIdentity::configured(self.metadata_url().as_str(), None)
            }
            None => self.registered(&endpoints).await?,
        };
        tracing::info!(backend = %self.backend, issuer = %endpoints.server.issuer, client_id = %client.client_id, "oauth: authorization server found");
        let setup = Arc::new(Setup { endpoints, client });
        *slot = Some(setup.clone());
        Ok(setup)
    }

    /// The gateway's registration at the server: made here (one node), or
    /// the one every replica uses (cluster: the first replica's, kept
    /// sealed in the store), since a code is exchanged by the client it
    /// was issued to, on whichever replica the callback lands.
    async fn registered(&self, endpoints: &Endpoints) -> Result<ClientIdentity, String> {
        let redirect = self.config.callback();
        let register = async || {
            fetch::register(&self.client, &endpoints.server, &redirect)
                .await
                .map_err(|e| e.to_string())
        };
        let (Some(store), Some(ring)) = (
            self.grants.store(),
            self.grants.store().and_then(|s| s.ring()),
        ) else {
            return register().await;
        };
        let (backend, tag) = (
            self.backend.as_str(),
            store::client_tag(&endpoints.server.issuer, redirect.as_str()),
        );
        let open = |text: Option<String>| store::open_client(&ring, &self.backend, &tag, &text?);
        if let Some(kept) = open(store.client(backend, &tag).await.flatten()) {
            return Ok(kept);
        }
        let ours = register().await?;
        let Some(sealed) = store::seal_client(&ring, &self.backend, &tag, &ours) else {
            return Ok(ours);
        };
        match store.keep_client(backend, &tag, sealed).await {
            // Another replica registered first: its registration is used.
            Some(false) => match open(store.client(backend, &tag).await.flatten()) {
                Some(theirs) => Ok(theirs),
                None => Ok(ours),
            },
            _ => Ok(ours),
        }
    }

    /// `/oauth/start/{id}` for `principal`: the flow cookie to set and
    /// the authorization URL to send the browser to. `id`: the start id it
    /// came from; `ring`: the sessions' key ring, when there is one.
    pub(crate) async fn begin(
        &self,
        principal: &Principal,
        id: &str,
        ring: Option<&KeyRing>,
    ) -> Result<(String, Url), Refused> {
        let setup = self.setup().await.map_err(Refused::Failed)?;
        let pkce = Pkce::generate();
        let cookie = random_hex();
        let state = SHARED.states.seal(
            ring.unwrap_or(&SHARED.ring),
            (principal, &self.backend, id),
            &pkce,
            cookie.as_bytes(),
            now(),
        );
        let scopes = self.config.scopes.join(" ");
        let scope = match scopes.is_empty() {
            true => setup.endpoints.scope.as_deref(),
            false => Some(scopes.as_str()),
        };
        let url = AuthorizationRequest {
            client: &setup.client,
            redirect: &self.config.callback(),
            resource: &setup.endpoints.resource,
            scope,
            pkce: &pkce,
            state: &state,
        }
        .url(&setup.endpoints.server.authorization_endpoint);
        Ok((cookie, url))
    }

    /// `/oauth/callback`: the code exchanged for the principal's grant.
    pub(crate) async fn finish(
        &self,
        principal: &Principal,
        pkce: &Pkce,
        code: &str,
    ) -> Result<(), Refused> {
        let setup = self.setup().await.map_err(Refused::Failed)?;
        let form = TokenForm::code(
            &setup.client,
            code,
            &self.config.callback(),
            pkce,
            &setup.endpoints.resource,
        );
        let grant = fetch::token(
            &self.client,
            &setup.endpoints.server.token_endpoint,
            form,
            now(),
            None,
        )
        .await
        .map_err(|e| Refused::Failed(e.to_string()))?;
        self.grants.keep(principal, grant).await;
        tracing::info!(target: "sluice::audit", backend = %self.backend, principal = %principal, "oauth connected");
        Ok(())
    }

    /// The access token to send for `principal`, refreshed first when due;
    /// None without a usable grant (a refused refresh drops it).
    pub(crate) async fn access(&self, principal: &Principal) -> Option<Secret> {
        let grant = self.grants.grant(principal).await?;
        if !grant.refresh_due(now()) {
            return Some(grant.access);
        }
        let _one = self.refreshing.lock().await;
        // Refreshed by another call (or replica) meanwhile?
        let grant = self.grants.load(principal).await?;
        if !grant.refresh_due(now()) {
            return Some(grant.access);
        }
        let store = self.grants.store();
        let field = store::field(principal);
        let lock = match (store, &field) {
            (Some(store), Some(field)) => {
                match self
                    .grants
                    .refresh_lock(store.as_ref(), principal, field)
                    .await
                {
                    Lock::Taken(token) => Some(token),
                    Lock::Alone => None,
                    // Another replica's refresh: its outcome, or (not
                    // landed in time) the token as it is while it lasts.
                    Lock::Landed(fresh) => return fresh.map(|g| g.access),
                    Lock::Late => {
                        return (now() < grant.expires.unwrap_or(u64::MAX)).then_some(grant.access);
                    }
                }
            }
            _ => None,
        };
        let result = match lock {
            // Under the lock: read again, another replica may have just
            // refreshed it.
            Some(_) => match self.grants.load(principal).await {
                Some(grant) if !grant.refresh_due(now()) => Ok(grant),
                Some(grant) => self.refresh(&grant).await,
                None => Err("the grant was dropped meanwhile".into()),
            },
            None => self.refresh(&grant).await,
        };
        let access = match result {
            Ok(fresh) => {
                let access = fresh.access.clone();
                if fresh != grant {
                    self.grants.keep(principal, fresh).await;
                    tracing::info!(backend = %self.backend, principal = %principal, "oauth grant refreshed");
                }
                Some(access)
            }
            Err(why) => {
                self.grants.drop_grant(principal).await;
                tracing::warn!(target: "sluice::audit", backend = %self.backend, principal = %principal, "oauth refresh failed, grant dropped: {why}");
                None
            }
        };
        if let (Some(store), Some(field), Some(token)) = (store, field, lock) {
            store.unlock(self.backend.as_str(), &field, token).await;
        }
        access
    }

    async fn refresh(&self, grant: &Grant) -> Result<Grant, String> {
        let Some(refresh) = &grant.refresh else {
            return Err("the grant has no refresh token".into());
        };
        let setup = self.setup().await?;
        let form = TokenForm::refresh(&setup.client, refresh, &setup.endpoints.resource);
        fetch::token(
            &self.client,
            &setup.endpoints.server.token_endpoint,
            form,
            now(),
            Some(grant),
        )
        .await
        .map_err(|e| e.to_string())
    }

    /// Another replica changed `principal`'s grant: this copy is dropped,
    /// and read again when next needed.
    pub(crate) fn changed_elsewhere(&self, principal: &Principal) {
        self.grants.changed_elsewhere(principal);
    }

    /// `principal`'s access token as this replica holds it (no refresh).
    pub(crate) fn current(&self, principal: &Principal) -> Option<Secret> {
        self.grants.current(principal)
    }

    /// Whether `principal` holds a grant here (without using it).
    pub(crate) fn connected(&self, principal: &Principal) -> bool {
        self.grants.connected(principal)
    }

    /// Grants held (`sluice_oauth_grants{backend}`): the store's count in
    /// cluster mode (this replica's copies when it cannot be asked).
    pub(crate) async fn grants(&self) -> usize {
        self.grants.count().await
    }

    /// Drops `principal`'s grant without revoking it (it is no good); the
    /// store forgets it on its own task.
    pub(crate) fn forget(self: &Arc<Self>, principal: &Principal, why: &str) {
        let here = self.grants.drop_here(principal).is_some();
        if self.grants.store().is_some() {
            let (me, who) = (self.clone(), principal.clone());
            tokio::spawn(async move { me.grants.drop_grant(&who).await });
        }
        if here {
            tracing::warn!(target: "sluice::audit", backend = %self.backend, principal = %principal, "oauth grant dropped: {why}");
        }
    }

    /// What `/oauth/connections` shows of `principal`'s grant: no token.
    pub(crate) async fn connection(&self, principal: &Principal) -> Option<Connection> {
        self.grants.warm(principal).await;
        self.grants.connection(principal)
    }

    /// Forgets `principal`'s grant, revoking it at the server first when
    /// it offers RFC 7009. False: there was none.
    pub(crate) async fn disconnect(&self, principal: &Principal) -> bool {
        let Some(grant) = self.grants.drop_grant(principal).await else {
            return false;
        };
        let revoked = match self.setup().await {
            Ok(setup) => match &setup.endpoints.server.revocation_endpoint {
                Some(endpoint) => {
                    let form = TokenForm::revoke(&setup.client, &grant);
                    match fetch::revoke(&self.client, endpoint, form).await {
                        Ok(()) => "revoked",
                        Err(e) => {
                            tracing::warn!(backend = %self.backend, "oauth revocation failed: {e}");
                            "revocation failed"
                        }
                    }
                }
                None => "no revocation endpoint",
            },
            Err(_) => "authorization server unreachable",
        };
        tracing::info!(target: "sluice::audit", backend = %self.backend, principal = %principal, revoked, "oauth disconnected");
        true
    }
}
