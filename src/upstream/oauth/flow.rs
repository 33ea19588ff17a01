//! One backend's authorization code flow at run time (`oauth.flow =
//! "authorization_code"`): its start ids, its discovery and client
//! registration (made once, kept in memory), its principals' grants, and
//! the steps `/oauth/start/{id}`, `/oauth/callback` and
//! `/oauth/connections` take. See README.md beside this file.
//!
//! Invariants: a start id is single use, bound to one principal and one
//! backend, and dies after `FLOW_TTL`; a state opens once, for the browser
//! that holds the flow cookie its start set; a grant is only ever used for
//! the principal it was made for. No token is logged or shown.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use url::Url;

use super::fetch::{self, Endpoints};
use super::{
    AuthorizationRequest, ClientIdentity, Connection, FLOW_TTL, FlowStates, Grant, Grants, Pkce,
    StateRefused, TokenForm,
};
use crate::config::{CodeFlowConfig, Secret};
use crate::http1::client::Client;
use crate::sessions::sealed::KeyRing;
use crate::vocab::{BackendName, Principal, hex};

/// Start ids waiting to be opened, across backends.
const MAX_STARTS: usize = 100_000;

/// What every backend's flows share: the key that seals states (made at
/// start: a restart loses flows in progress, which the person starts
/// again), the states already used, and the start ids not yet opened.
struct Shared {
    ring: KeyRing,
    states: FlowStates,
    /// Start id -> (principal, backend, expiry in unix seconds); None
    /// once used (kept until its expiry, so a second use is named).
    starts: Mutex<HashMap<String, (Option<Started>, u64)>>,
}

/// Whom a start id is for, and where.
type Started = (Principal, BackendName);

static SHARED: LazyLock<Shared> = LazyLock::new(|| Shared {
    ring: KeyRing::parse(&KeyRing::generate()).expect("a generated key ring parses"),
    states: FlowStates::new(),
    starts: Mutex::new(HashMap::new()),
});

pub(super) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("OS randomness is unavailable");
    hex(&bytes)
}

/// Why `/oauth/start/{id}` or `/oauth/callback` is refused: its text goes
/// on the plain 400 page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
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
    pub fn label(&self) -> &'static str {
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
pub struct CodeFlow {
    backend: BackendName,
    config: CodeFlowConfig,
    /// The backend's MCP URL.
    url: Url,
    client: Client,
    grants: Grants,
    /// Discovered and registered once; a failure is tried again next time.
    setup: tokio::sync::Mutex<Option<Arc<Setup>>>,
    /// One refresh at a time: a rotated refresh token is spent once.
    refreshing: tokio::sync::Mutex<()>,
}

impl CodeFlow {
    pub(crate) fn new(
        backend: BackendName,
        config: CodeFlowConfig,
        url: Url,
        client: Client,
    ) -> CodeFlow {
        CodeFlow {
            grants: Grants::new(config.max_grants),
            backend,
            config,
            url,
            client,
            setup: tokio::sync::Mutex::new(None),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    pub fn max_grants(&self) -> usize {
        self.grants.max()
    }

    pub fn backend(&self) -> &BackendName {
        &self.backend
    }

    /// A new start URL for `principal`: `{public_url}/oauth/start/{id}`,
    /// single use, for `FLOW_TTL`.
    pub fn start_url(&self, principal: &Principal) -> Url {
        let id = random_hex();
        let now = now();
        let mut starts = SHARED.starts.lock();
        if starts.len() >= MAX_STARTS {
            starts.retain(|_, (_, e)| *e > now);
        }
        if starts.len() >= MAX_STARTS
            && let Some(soonest) = starts
                .iter()
                .min_by_key(|(_, (_, e))| *e)
                .map(|(k, _)| k.clone())
        {
            starts.remove(&soonest);
        }
        starts.insert(
            id.clone(),
            (
                Some((principal.clone(), self.backend.clone())),
                now + FLOW_TTL.as_secs(),
            ),
        );
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
    pub fn metadata_document(&self) -> Option<serde_json::Value> {
        (self.config.client_id.is_none() && self.secure()).then(|| {
            super::metadata_document(&self.metadata_url(), &self.config.callback(), "sluice")
        })
    }

    /// The callback's path (the flow cookie's `Path`).
    pub fn callback_path(&self) -> String {
        self.config.callback().path().to_owned()
    }

    /// Whether the start URL is https (the flow cookie is then `Secure`).
    pub fn secure(&self) -> bool {
        self.config.public_url.scheme() == "https"
    }

    /// The backend a start id is for, taking the id out (single use).
    pub fn take_start(id: &str) -> Result<(Principal, BackendName), Refused> {
        let mut starts = SHARED.starts.lock();
        let (slot, expires) = starts.get_mut(id).ok_or(Refused::UnknownStart)?;
        if now() >= *expires {
            starts.remove(id);
            return Err(Refused::ExpiredStart);
        }
        slot.take().ok_or(Refused::UsedStart)
    }

    /// Opens a callback's state for the browser holding `cookie`.
    pub fn open_state(state: &str, cookie: &[u8]) -> Result<super::FlowState, Refused> {
        Ok(SHARED.states.finish(&SHARED.ring, state, cookie, now())?)
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
            None => fetch::register(&self.client, &endpoints.server, &self.config.callback())
                .await
                .map_err(|e| e.to_string())?,
        };
        tracing::info!(backend = %self.backend, issuer = %endpoints.server.issuer, client_id = %client.client_id, "oauth: authorization server found");
        let setup = Arc::new(Setup { endpoints, client });
        *slot = Some(setup.clone());
        Ok(setup)
    }

    /// `/oauth/start/{id}` for `principal`: the flow cookie to set and
    /// the authorization URL to send the browser to.
    pub async fn begin(&self, principal: &Principal, id: &str) -> Result<(String, Url), Refused> {
        let setup = self.setup().await.map_err(Refused::Failed)?;
        let pkce = Pkce::generate();
        let cookie = random_hex();
        let state = SHARED.states.seal(
            &SHARED.ring,
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
    pub async fn finish(
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
        if let Some(evicted) = self.grants.put(principal, grant) {
            tracing::info!(target: "sluice::audit", backend = %self.backend, principal = %evicted, "oauth grant forgotten: max_grants reached");
        }
        tracing::info!(target: "sluice::audit", backend = %self.backend, principal = %principal, "oauth connected");
        Ok(())
    }

    /// The access token to send for `principal`, refreshed first when due;
    /// None without a usable grant (a refused refresh drops it).
    pub async fn access(&self, principal: &Principal) -> Option<Secret> {
        let grant = self.grants.get(principal)?;
        if !grant.refresh_due(now()) {
            return Some(grant.access);
        }
        let _one = self.refreshing.lock().await;
        // Refreshed by another call meanwhile?
        let grant = self.grants.get(principal)?;
        if !grant.refresh_due(now()) {
            return Some(grant.access);
        }
        match self.refresh(&grant).await {
            Ok(fresh) => {
                let access = fresh.access.clone();
                self.grants.put(principal, fresh);
                tracing::info!(backend = %self.backend, principal = %principal, "oauth grant refreshed");
                Some(access)
            }
            Err(why) => {
                self.grants.remove(principal);
                tracing::warn!(target: "sluice::audit", backend = %self.backend, principal = %principal, "oauth refresh failed, grant dropped: {why}");
                None
            }
        }
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

    /// Drops `principal`'s grant without revoking it (it is no good).
    pub fn forget(&self, principal: &Principal, why: &str) {
        if self.grants.remove(principal).is_some() {
            tracing::warn!(target: "sluice::audit", backend = %self.backend, principal = %principal, "oauth grant dropped: {why}");
        }
    }

    /// `principal`'s access token as it is now (no refresh).
    pub fn current(&self, principal: &Principal) -> Option<Secret> {
        self.grants.get(principal).map(|g| g.access)
    }

    /// Whether `principal` holds a grant here (without using it).
    pub fn connected(&self, principal: &Principal) -> bool {
        self.grants.connection(principal).is_some()
    }

    /// What `/oauth/connections` shows of `principal`'s grant: no token.
    pub fn connection(&self, principal: &Principal) -> Option<Connection> {
        self.grants.connection(principal)
    }

    /// Grants held (`sluice_oauth_grants{backend}`).
    pub fn grants(&self) -> usize {
        self.grants.len()
    }

    /// Forgets `principal`'s grant, revoking it at the server first when
    /// it offers RFC 7009. False: there was none.
    pub async fn disconnect(&self, principal: &Principal) -> bool {
        let Some(grant) = self.grants.remove(principal) else {
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
