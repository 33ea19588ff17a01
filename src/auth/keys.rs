//! The issuer's signing keys (its JWKS): fetched when first needed, kept,
//! fetched again when a token names a key that is not there (the issuer
//! rotated) or when they are an hour old, and never more often than
//! `MIN_REFETCH`, so a flood of tokens with made-up key ids costs the
//! issuer one request per interval.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Uri};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::config::OAuthSettings;
use crate::http1::client::Client;

/// An unknown key id fetches the keys again at most this often.
const MIN_REFETCH: Duration = Duration::from_secs(5);
/// Keys this old are fetched again before use.
const MAX_AGE: Duration = Duration::from_secs(3600);
/// One fetch (discovery included) takes at most this long.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// A JWKS or metadata document larger than this is refused.
const MAX_DOCUMENT: usize = 256 * 1024;

/// What an RSA key verifies.
const RSA: [Algorithm; 6] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];

/// Whether tokens signed with `alg` are accepted at all: asymmetric
/// algorithms only (never `none`, never an HMAC keyed with a public key).
pub(super) fn accepted(alg: Algorithm) -> bool {
    RSA.contains(&alg) || matches!(alg, Algorithm::ES256 | Algorithm::ES384 | Algorithm::EdDSA)
}

/// The issuer's keys could not be fetched yet.
pub(super) struct Unavailable;

pub(super) struct Keys {
    issuer: String,
    configured: Option<Uri>,
    client: Client,
    state: Mutex<State>,
    /// Held by the one task fetching; the others wait for its result.
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    keys: Arc<Vec<Key>>,
    /// The JWKS URL, once discovered (or as configured).
    url: Option<Uri>,
    fetched: Option<Instant>,
    attempted: Option<Instant>,
}

struct Key {
    kid: Option<String>,
    /// The algorithm the JWK is restricted to, if it says.
    alg: Option<Algorithm>,
    /// The algorithms its type and curve can verify.
    verifies: &'static [Algorithm],
    key: DecodingKey,
}

impl Keys {
    pub(super) fn new(settings: &OAuthSettings, client: Client) -> Keys {
        Keys {
            issuer: settings.issuer.clone(),
            configured: settings.jwks_url.clone(),
            client,
            state: Mutex::new(State {
                url: settings.jwks_url.clone(),
                ..State::default()
            }),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The key that verifies a token with this header, fetching the keys
    /// if they are missing, stale or lack it (within the rate limit).
    /// `Err` while the issuer's keys have never been had: no token can be
    /// judged, which is the gateway's problem, not the token's.
    pub(super) async fn key(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<Option<DecodingKey>, Unavailable> {
        let (keys, fresh) = self.current();
        if let Some(k) = pick(&keys, kid, alg)
            && fresh
        {
            return Ok(Some(k));
        }
        self.refresh().await;
        if self.state.lock().fetched.is_none() {
            return Err(Unavailable);
        }
        Ok(pick(&self.current().0, kid, alg))
    }

    fn current(&self) -> (Arc<Vec<Key>>, bool) {
        let st = self.state.lock();
        let fresh = st.fetched.is_some_and(|t| t.elapsed() < MAX_AGE);
        (st.keys.clone(), fresh)
    }

    async fn refresh(&self) {
        let _one = self.fetching.lock().await;
        {
            let mut st = self.state.lock();
            // Another task fetched (or tried) while this one waited.
            if st.attempted.is_some_and(|t| t.elapsed() < MIN_REFETCH) {
                return;
            }
            st.attempted = Some(Instant::now());
        }
        match tokio::time::timeout(FETCH_TIMEOUT, self.fetch()).await {
            Ok(Ok((url, keys))) => {
                let mut st = self.state.lock();
                tracing::info!(keys = keys.len(), "issuer signing keys fetched");
                st.keys = Arc::new(keys);
                st.url = Some(url);
                st.fetched = Some(Instant::now());
            }
            Ok(Err(why)) => tracing::warn!("issuer signing keys not fetched: {why}"),
            Err(_) => tracing::warn!("issuer signing keys not fetched: no answer in time"),
        }
    }

    async fn fetch(&self) -> Result<(Uri, Vec<Key>), String> {
        let known = self.state.lock().url.clone();
        let url = match known.or_else(|| self.configured.clone()) {
            Some(url) => url,
            None => self.discover().await?,
        };
        let doc: serde_json::Value = self.get_json(&url).await?;
        let keys = doc
            .get("keys")
            .and_then(|k| k.as_array())
            .ok_or("the JWKS has no `keys`")?;
        // A key the gateway cannot use (another type, an encryption key)
        // is skipped, not a reason to refuse the others.
        let keys: Vec<Key> = keys
            .iter()
            .filter_map(|k| serde_json::from_value::<Jwk>(k.clone()).ok())
            .filter_map(|jwk| Key::of(&jwk))
            .collect();
        Ok((url, keys))
    }

    /// `jwks_uri` from the issuer's metadata: RFC 8414 first, then OpenID
    /// Connect discovery, each naming exactly the configured issuer.
    async fn discover(&self) -> Result<Uri, String> {
        let issuer = self.issuer.trim_end_matches('/');
        let uri: Uri = issuer.parse().map_err(|_| "the issuer is not a URL")?;
        let origin = super::metadata::origin(issuer);
        let path = uri.path().trim_end_matches('/');
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{issuer}/.well-known/openid-configuration"),
        ];
        let mut last = String::from("no metadata found");
        // A document naming another issuer says more than a later 404.
        let mut mismatch = None;
        for candidate in candidates {
            let Ok(url) = candidate.parse::<Uri>() else {
                continue;
            };
            match self.get_json(&url).await {
                Ok(doc) => {
                    let named = doc.get("issuer").and_then(|i| i.as_str());
                    if named != Some(&self.issuer) {
                        // URLs, not secrets: the operator needs both to
                        // see which side to correct (often a trailing `/`).
                        mismatch = Some(match named {
                            Some(other) => format!(
                                "the issuer's metadata at {candidate} names the issuer {other:?}, not the configured {:?}",
                                self.issuer
                            ),
                            None => format!(
                                "the issuer's metadata at {candidate} names no issuer (the configured one is {:?})",
                                self.issuer
                            ),
                        });
                        continue;
                    }
                    return doc
                        .get("jwks_uri")
                        .and_then(|u| u.as_str())
                        .and_then(|u| u.parse().ok())
                        .ok_or_else(|| "the issuer's metadata has no jwks_uri".to_owned());
                }
                Err(why) => last = why,
            }
        }
        Err(mismatch.unwrap_or(last))
    }

    async fn get_json(&self, url: &Uri) -> Result<serde_json::Value, String> {
        let target = self.client.target(url)?;
        let response = self
            .client
            .request(Method::GET, &target)
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("HTTP {status} from the issuer"));
        }
        let body = response.bytes(MAX_DOCUMENT).await?;
        serde_json::from_slice(&body).map_err(|_| "the issuer sent no JSON".to_owned())
    }
}

impl Key {
    fn of(jwk: &Jwk) -> Option<Key> {
        if jwk.common.public_key_use == Some(PublicKeyUse::Encryption) {
            return None;
        }
        let verifies: &'static [Algorithm] = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => &RSA,
            AlgorithmParameters::EllipticCurve(p) => match p.curve {
                EllipticCurve::P256 => &[Algorithm::ES256],
                EllipticCurve::P384 => &[Algorithm::ES384],
                _ => return None,
            },
            AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
                &[Algorithm::EdDSA]
            }
            // Symmetric keys are never accepted from a published set.
            _ => return None,
        };
        let alg = match jwk.common.key_algorithm {
            None => None,
            Some(a) => Some(algorithm_of(a)?),
        };
        Some(Key {
            kid: jwk.common.key_id.clone(),
            alg,
            verifies,
            key: DecodingKey::from_jwk(jwk).ok()?,
        })
    }
}

fn algorithm_of(a: KeyAlgorithm) -> Option<Algorithm> {
    Some(match a {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

/// The key for a token: the one with its `kid` (or, without a `kid`, the
/// only key that can verify its algorithm), if that key may verify it.
fn pick(keys: &[Key], kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
    let usable = |k: &&Key| k.verifies.contains(&alg) && k.alg.is_none_or(|a| a == alg);
    let found = match kid {
        Some(kid) => keys
            .iter()
            .filter(|k| k.kid.as_deref() == Some(kid))
            .find(usable),
        None => {
            let mut candidates = keys.iter().filter(usable);
            let only = candidates.next();
            only.filter(|_| candidates.next().is_none())
        }
    };
    found.map(|k| k.key.clone())
}
