//! Grants and start ids kept beyond one process (`[cluster]`: Redis, in
//! `cluster/grants.rs`), and what is written there: a grant sealed with
//! the sessions' key ring, never a token in clear.
//!
//! The store deals in opaque text: sealing and opening happen here, so
//! whatever implements `GrantStore` never sees a token. A sealed grant is
//! bound (associated data) to its backend and its principal's tag, so a
//! value copied to another principal's field, or another backend's hash,
//! does not open.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::{ClientIdentity, Grant};
use crate::config::Secret;
use crate::sessions::sealed::KeyRing;
use crate::vocab::{BackendName, ClientKey, Principal};

/// Its own prefix: a grant never opens as a state or a session id.
const PREFIX: &str = "g1.";
/// A registration's.
const CLIENT_PREFIX: &str = "c1.";
/// Tokens are opaque strings of the server's; a few KiB at most.
const MAX_PLAIN: usize = 16 * 1024;

/// What `take_start` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TakenStart {
    /// No such id (or it expired long ago).
    Unknown,
    /// Already opened once.
    Used,
    /// The id's record (`StartRecord` as JSON), now marked used.
    Record(String),
}

/// Where grants live when replicas share them. Every method answers None
/// when the store could not be asked (Redis down, or no answer within its
/// deadline): the caller then does what it can with what it holds.
pub(crate) trait GrantStore: Send + Sync {
    /// The key ring grants are sealed with: the sessions' own, as it is now
    /// (a reload may rotate it).
    fn ring(&self) -> Option<Arc<KeyRing>>;
    /// The sealed grant of `field` (a principal's tag) at `backend`, noted
    /// as used now (least recently used goes first when full).
    fn load(&self, backend: &str, field: &str) -> BoxFuture<'static, Option<Option<String>>>;
    /// Keeps `sealed` for `field`; past `max` grants at `backend`, the least
    /// recently used go (atomically) and are returned: (field, sealed).
    fn save(
        &self,
        backend: &str,
        field: &str,
        sealed: String,
        max: usize,
    ) -> BoxFuture<'static, Option<Vec<(String, String)>>>;
    /// Forgets `field`'s grant; returns it, sealed, if there was one.
    fn remove(&self, backend: &str, field: &str) -> BoxFuture<'static, Option<Option<String>>>;
    /// Grants held at `backend` (`sluice_oauth_grants{backend}`).
    fn count(&self, backend: &str) -> BoxFuture<'static, Option<usize>>;
    /// Takes the refresh lock of (`backend`, `field`) for at most `ttl`:
    /// its token, or Some(None) while another replica holds it.
    fn lock(
        &self,
        backend: &str,
        field: &str,
        ttl: Duration,
    ) -> BoxFuture<'static, Option<Option<String>>>;
    /// Gives the lock back, if `token` still holds it.
    fn unlock(&self, backend: &str, field: &str, token: String) -> BoxFuture<'static, ()>;
    /// Tells the other replicas that `principal`'s grant at `backend`
    /// changed (connected, refreshed, dropped): they forget their copy.
    fn changed(&self, backend: &str, principal: &Principal);
    /// The unopened start id of (`backend`, `field`) if it has at least
    /// `fresh` left, else a new one, `id`, holding `record` for `ttl`.
    fn start(
        &self,
        backend: &str,
        field: &str,
        id: String,
        record: String,
        ttl: Duration,
        fresh: Duration,
    ) -> BoxFuture<'static, Option<String>>;
    /// Opens a start id once: its record, marked used.
    fn take_start(&self, id: &str) -> BoxFuture<'static, Option<TakenStart>>;
    /// Whether a state's `serial` is used here for the first time (it is
    /// then remembered until `expires`, unix seconds).
    fn first_use(&self, serial: &str, expires: u64) -> BoxFuture<'static, Option<bool>>;
    /// The gateway's registration (RFC 7591) at `backend`'s server, sealed,
    /// under `tag` (see `client_tag`), if a replica made one.
    fn client(&self, backend: &str, tag: &str) -> BoxFuture<'static, Option<Option<String>>>;
    /// Keeps a registration unless one is kept already: true if this one
    /// is (else read the other, and use it instead).
    fn keep_client(
        &self,
        backend: &str,
        tag: &str,
        sealed: String,
    ) -> BoxFuture<'static, Option<bool>>;
}

/// Where a registration is kept: a digest of the server and the redirect
/// URI it was made for (another `public_url` or server registers anew).
pub(crate) fn client_tag(issuer: &str, redirect: &str) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(b"sluice-oauth-client\0");
    h.update(issuer.as_bytes());
    h.update(b"\0");
    h.update(redirect.as_bytes());
    crate::vocab::hex(&h.finalize()[..16])
}

#[derive(Serialize, Deserialize)]
struct PlainClient {
    client_id: String,
    client_secret: Option<String>,
}

/// A registration sealed for the store (its secret, if any, is one).
pub(crate) fn seal_client(
    ring: &KeyRing,
    backend: &BackendName,
    tag: &str,
    client: &ClientIdentity,
) -> Option<String> {
    let plain = PlainClient {
        client_id: client.client_id.clone(),
        client_secret: client.client_secret.as_ref().map(|s| s.expose().to_owned()),
    };
    let json = serde_json::to_vec(&plain).ok()?;
    Some(ring.seal_bytes(CLIENT_PREFIX, &json, &client_binding(backend, tag)))
}

/// A registration as `seal_client` sealed it for `backend` and `tag`.
pub(crate) fn open_client(
    ring: &KeyRing,
    backend: &BackendName,
    tag: &str,
    text: &str,
) -> Option<ClientIdentity> {
    let plain = ring.open_bytes(
        CLIENT_PREFIX,
        text,
        &client_binding(backend, tag),
        MAX_PLAIN,
    )?;
    let plain: PlainClient = serde_json::from_slice(&plain).ok()?;
    Some(ClientIdentity::configured(
        &plain.client_id,
        plain.client_secret.map(Secret::new),
    ))
}

fn client_binding(backend: &BackendName, tag: &str) -> Vec<u8> {
    format!("sluice-oauth-client\0{}\0{tag}", backend.as_str()).into_bytes()
}

/// What a start id stands for, as the store holds it (no secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StartRecord {
    pub(crate) principal: Principal,
    pub(crate) backend: String,
    /// Unix seconds.
    pub(crate) expires: u64,
}

/// A principal's field in the store: a digest, alike on every replica
/// (None for the anonymous principal, which has no grants).
pub(crate) fn field(principal: &Principal) -> Option<String> {
    ClientKey::Principal(principal.clone()).principal_tag()
}

#[derive(Serialize, Deserialize)]
struct Plain {
    v: u8,
    principal: Principal,
    access: String,
    refresh: Option<String>,
    expires: Option<u64>,
    scope: Option<String>,
    connected: u64,
}

fn binding(backend: &BackendName, field: &str) -> Vec<u8> {
    format!("sluice-oauth-grant\0{}\0{field}", backend.as_str()).into_bytes()
}

/// `grant` of `principal` at `backend`, sealed for the store.
pub(crate) fn seal_grant(
    ring: &KeyRing,
    backend: &BackendName,
    principal: &Principal,
    grant: &Grant,
) -> Option<String> {
    let field = field(principal)?;
    let plain = Plain {
        v: 1,
        principal: principal.clone(),
        access: grant.access.expose().to_owned(),
        refresh: grant.refresh.as_ref().map(|r| r.expose().to_owned()),
        expires: grant.expires,
        scope: grant.scope.clone(),
        connected: grant.connected,
    };
    let json = serde_json::to_vec(&plain).ok()?;
    Some(ring.seal_bytes(PREFIX, &json, &binding(backend, &field)))
}

/// A sealed grant opened: whose it is, and what it holds. None if it is
/// not one of ours, was altered, or was sealed for another field (another
/// principal) or backend.
pub(crate) fn open_grant(
    ring: &KeyRing,
    backend: &BackendName,
    field: &str,
    text: &str,
) -> Option<(Principal, Grant)> {
    let plain = ring.open_bytes(PREFIX, text, &binding(backend, field), MAX_PLAIN)?;
    let plain: Plain = serde_json::from_slice(&plain).ok()?;
    if plain.v != 1 || self::field(&plain.principal).as_deref() != Some(field) {
        return None;
    }
    Some((
        plain.principal,
        Grant {
            access: Secret::new(plain.access),
            refresh: plain.refresh.map(Secret::new),
            expires: plain.expires,
            scope: plain.scope,
            connected: plain.connected,
        },
    ))
}

#[cfg(test)]
mod tests;
