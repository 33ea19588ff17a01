//! Who is calling (`[auth]`): a static bearer token, or an OAuth 2.1
//! access token (a JWT from the configured issuer) checked against the
//! issuer's published keys. The gateway is a resource server only: it
//! never sees a password, issues nothing, and passes no client token on.
//! The front turns a [`Refusal`] into its 401 or 403.

mod keys;
mod metadata;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderValue;
use jsonwebtoken::Validation;
use parking_lot::Mutex;

use crate::config::{AuthSettings, NamespaceConfig, OAuthSettings, Secret};
use crate::fast_map::FastMap;
use crate::http1::client::Client;
use crate::upstream::AccessToken;
use crate::vocab::Principal;

pub(crate) use metadata::WELL_KNOWN;
use metadata::metadata_path;

/// Clock skew allowed on `exp` and `nbf`, in seconds.
const LEEWAY: u64 = 30;
/// Tokens whose signature was checked, kept so that a client's next
/// requests skip the check (an RSA verify each).
const MAX_VERIFIED: usize = 4096;
/// How long a checked token is taken on trust: a key the issuer withdraws
/// stops covering its tokens within this.
const VERIFIED_FOR: Duration = Duration::from_secs(300);

/// The configured ways in, built once per config.
pub(crate) struct Authenticator {
    /// In `bearer_tokens_env`'s order.
    tokens: Vec<StaticToken>,
    /// Whether `token_scopes` gives static tokens scopes (else unscoped).
    scoped: bool,
    /// Namespaces whose endpoint needs scopes of a scoped static token.
    static_namespace_scopes: FastMap<String, Vec<String>>,
    oauth: Option<OAuth>,
}

/// A static token with what each request that presents it gets: its
/// principal and scopes, built once, so a request clones them (an `Arc`
/// each for a named or scoped token, nothing allocated).
struct StaticToken {
    token: Secret,
    principal: Principal,
    scopes: Arc<[String]>,
}

struct OAuth {
    settings: OAuthSettings,
    keys: keys::Keys,
    /// `scheme://authority` of the audience: where the metadata lives.
    origin: String,
    /// Namespaces whose endpoint needs scopes beyond `required_scopes`.
    namespace_scopes: FastMap<String, Vec<String>>,
    /// Tokens whose signature and issuer were checked. Keyed by the token
    /// itself (a client's choice, so hashed with std's keyed hasher); only
    /// tokens the issuer signed get in.
    verified: Mutex<HashMap<Box<str>, Arc<Verified>>>,
}

/// What a checked token says, as far as each request must judge again:
/// its times, its audiences and its scopes.
struct Verified {
    principal: Principal,
    token: Arc<AccessToken>,
    exp: u64,
    nbf: Option<u64>,
    aud: Vec<String>,
    /// Trusted until then (at most `VERIFIED_FOR`).
    until: Instant,
}

/// Who is calling, and their verified OAuth token; None: a static token
/// or anonymous, which scopes do not restrict.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub(crate) principal: Principal,
    pub(crate) token: Option<Arc<AccessToken>>,
    /// A static token's scopes (`[auth] token_scopes`; None: unscoped).
    pub(crate) scopes: Option<Arc<[String]>>,
}

impl Identity {
    pub(crate) fn unscoped(principal: Principal) -> Identity {
        Identity {
            principal,
            token: None,
            scopes: None,
        }
    }
}

/// Why a request was not let in, with the `WWW-Authenticate` it gets.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// 401: no token, or one that is not valid here.
    Unauthorized(HeaderValue),
    /// 403: a valid token without the scopes this needs.
    InsufficientScope {
        /// `Bearer error="insufficient_scope", scope="..."`: every scope
        /// the endpoint needs (RFC 6750 section 3.1).
        challenge: HeaderValue,
        /// The scopes the token lacks, space-separated, for the body.
        missing: String,
    },
    /// 503: the issuer's keys have not been fetched yet, so no token can
    /// be judged (a 401 would send clients into a new authorization).
    IssuerUnreachable,
}

impl Refusal {
    fn insufficient(challenge: HeaderValue, needed: &[&str], held: &[String]) -> Refusal {
        let missing: Vec<&str> = needed
            .iter()
            .copied()
            .filter(|n| !held.iter().any(|h| h == n))
            .collect();
        Refusal::InsufficientScope {
            challenge,
            missing: missing.join(" "),
        }
    }
}

impl Authenticator {
    pub(crate) fn new(
        settings: &AuthSettings,
        namespaces: &[NamespaceConfig],
    ) -> Result<Arc<Authenticator>, String> {
        let oauth = match &settings.oauth {
            None => None,
            Some(o) => {
                let client = Client::new(o.proxy.clone())?;
                Some(OAuth {
                    keys: keys::Keys::new(o, client),
                    origin: metadata::origin(&o.audience),
                    settings: o.clone(),
                    namespace_scopes: namespaces
                        .iter()
                        .filter(|n| !n.require_scopes.is_empty())
                        .map(|n| (n.name.to_string(), n.require_scopes.clone()))
                        .collect(),
                    verified: Mutex::default(),
                })
            }
        };
        let tokens = settings
            .tokens
            .iter()
            .enumerate()
            .map(|(i, t)| StaticToken {
                token: t.token.clone(),
                principal: t.principal(i),
                scopes: Arc::from(t.scopes.as_slice()),
            })
            .collect();
        let scoped = settings.scoped_tokens;
        let static_namespace_scopes = match scoped {
            false => FastMap::default(),
            true => namespaces
                .iter()
                .filter(|n| !n.require_scopes.is_empty())
                .map(|n| (n.name.to_string(), n.require_scopes.clone()))
                .collect(),
        };
        Ok(Arc::new(Authenticator {
            tokens,
            scoped,
            static_namespace_scopes,
            oauth,
        }))
    }

    /// The principal of a request to `namespace`'s endpoint.
    pub(crate) async fn authenticate(
        &self,
        authorization: Option<&str>,
        namespace: &str,
    ) -> Result<Identity, Refusal> {
        let Some(presented) = authorization.and_then(bearer) else {
            return Err(Refusal::Unauthorized(self.challenge(namespace, None)));
        };
        if let Some(t) = self.tokens.iter().find(|t| t.token.matches(presented)) {
            return self.static_identity(t, namespace);
        }
        let Some(oauth) = &self.oauth else {
            return Err(Refusal::Unauthorized(self.challenge(namespace, None)));
        };
        // Boxed: the key fetch it may do is large, and this future is part
        // of every request's (moved into a box per request, `front::Edge`).
        match Box::pin(oauth.check(presented, namespace)).await {
            Ok(identity) => Ok(identity),
            Err(Failure::Invalid) => Err(Refusal::Unauthorized(
                self.challenge(namespace, Some("invalid_token")),
            )),
            Err(Failure::Scope(held)) => Err(Refusal::insufficient(
                self.challenge(namespace, Some("insufficient_scope")),
                &oauth.scopes(namespace),
                &held,
            )),
            Err(Failure::Unavailable) => Err(Refusal::IssuerUnreachable),
        }
    }

    /// A static token's identity: its scopes when `token_scopes` gives
    /// static tokens some, held to a namespace's `require_scopes` as an
    /// OAuth token's are.
    fn static_identity(&self, t: &StaticToken, namespace: &str) -> Result<Identity, Refusal> {
        if !self.scoped {
            return Ok(Identity::unscoped(t.principal.clone()));
        }
        if let Some(needed) = self.static_namespace_scopes.get(namespace)
            && !needed.iter().all(|s| t.scopes.contains(s))
        {
            return Err(static_refusal(needed, &t.scopes));
        }
        Ok(Identity {
            principal: t.principal.clone(),
            token: None,
            scopes: Some(t.scopes.clone()),
        })
    }

    /// The identity a named static principal has at `namespace`'s
    /// endpoint, as if it had presented its token (`sluice tools`). None:
    /// no static token has that name.
    pub(crate) fn named(&self, name: &str, namespace: &str) -> Option<Result<Identity, Refusal>> {
        let t = self
            .tokens
            .iter()
            .find(|t| matches!(&t.principal, Principal::Named(n) if n.as_str() == name))?;
        Some(self.static_identity(t, namespace))
    }

    /// The static token of a principal (for sealing its ids): found by the
    /// principal, so a sealed id stays bound to the token's bytes whatever
    /// its name or position.
    pub(crate) fn token(&self, principal: &Principal) -> Option<&Secret> {
        self.tokens
            .iter()
            .find(|t| t.principal == *principal)
            .map(|t| &t.token)
    }

    /// The protected resource metadata (RFC 9728) for a request path
    /// under `/.well-known/oauth-protected-resource`, if OAuth is on and
    /// the path names one of the gateway's endpoints.
    pub(crate) fn metadata(&self, suffix: &str, namespaces: &[&str]) -> Option<String> {
        let oauth = self.oauth.as_ref()?;
        let namespace = metadata::namespace_of(&oauth.settings.audience, suffix, namespaces)?;
        Some(metadata::document(
            &oauth.settings.issuer,
            &oauth.resource(namespace),
            &oauth.scopes(namespace),
        ))
    }

    /// `Bearer` with, under OAuth, where the metadata is and which scopes
    /// to ask for (RFC 6750 section 3, RFC 9728 section 5.1).
    fn challenge(&self, namespace: &str, error: Option<&str>) -> HeaderValue {
        let Some(oauth) = &self.oauth else {
            return HeaderValue::from_static("Bearer");
        };
        let mut value = format!(
            "Bearer resource_metadata=\"{}{}\"",
            oauth.origin,
            metadata_path(&oauth.settings.audience, namespace)
        );
        let scopes = oauth.scopes(namespace);
        if !scopes.is_empty() {
            value.push_str(&format!(", scope=\"{}\"", scopes.join(" ")));
        }
        if let Some(error) = error {
            value.push_str(&format!(", error=\"{error}\""));
        }
        // Built from validated config values (no quotes or controls).
        HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
    }
}

/// A static token short of a namespace's `require_scopes`: the scopes to
/// name, as an OAuth token's 403 names them (no `resource_metadata`: a
/// static token is not obtained by OAuth).
fn static_refusal(needed: &[String], held: &[String]) -> Refusal {
    let needed: Vec<&str> = needed.iter().map(String::as_str).collect();
    // Built from validated scope names (no quotes or controls).
    let challenge = HeaderValue::from_str(&format!(
        "Bearer error=\"insufficient_scope\", scope=\"{}\"",
        needed.join(" ")
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("Bearer error=\"insufficient_scope\""));
    Refusal::insufficient(challenge, &needed, held)
}

enum Failure {
    Invalid,
    /// Short of a scope: the scopes the token holds.
    Scope(Box<[String]>),
    Unavailable,
}

/// The claims the gateway reads; the rest stays unread.
#[derive(serde::Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    /// Seconds since the epoch (required, so always there).
    exp: u64,
    #[serde(default)]
    nbf: Option<u64>,
    /// One audience or several (RFC 7519 4.1.3); required.
    aud: Audience,
    /// RFC 9068: space-separated.
    #[serde(default)]
    scope: Option<String>,
    /// What some issuers send instead: a list (or a string).
    #[serde(default)]
    scp: Option<serde_json::Value>,
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Claims {
    /// Every scope the token holds.
    fn scopes(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .scope
            .iter()
            .flat_map(|s| s.split(' '))
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        match &self.scp {
            Some(serde_json::Value::String(s)) => {
                all.extend(s.split(' ').filter(|s| !s.is_empty()).map(str::to_owned));
            }
            Some(serde_json::Value::Array(a)) => {
                all.extend(a.iter().filter_map(|s| s.as_str()).map(str::to_owned));
            }
            _ => {}
        }
        all
    }
}

impl OAuth {
    /// Every scope a token for `namespace`'s endpoint needs.
    fn scopes(&self, namespace: &str) -> Vec<&str> {
        let own = self.namespace_scopes.get(namespace).into_iter().flatten();
        let mut all: Vec<&str> = Vec::new();
        for scope in self.settings.required_scopes.iter().chain(own) {
            if !all.contains(&scope.as_str()) {
                all.push(scope);
            }
        }
        all
    }

    /// The resource identifier of a namespace's endpoint: the audience for
    /// the default one, `{origin}/ns/{name}/mcp` for the others.
    fn resource(&self, namespace: &str) -> String {
        if namespace == crate::config::DEFAULT_NAMESPACE {
            self.settings.audience.clone()
        } else {
            format!("{}/ns/{namespace}/mcp", self.origin)
        }
    }

    async fn check(&self, token: &str, namespace: &str) -> Result<Identity, Failure> {
        let now = Instant::now();
        let known = self
            .verified
            .lock()
            .get(token)
            .filter(|v| v.until > now)
            .cloned();
        let verified = match known {
            Some(v) => v,
            None => self.verify(token, now).await?,
        };
        self.judge(&verified, namespace)
    }

    /// Checks a token's signature, issuer and claims, and remembers it.
    async fn verify(&self, token: &str, now: Instant) -> Result<Arc<Verified>, Failure> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| Failure::Invalid)?;
        if !keys::accepted(header.alg) {
            return Err(Failure::Invalid);
        }
        let key = self
            .keys
            .key(header.kid.as_deref(), header.alg)
            .await
            .map_err(|keys::Unavailable| Failure::Unavailable)?
            .ok_or(Failure::Invalid)?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.settings.issuer]);
        // Which audience is right depends on the endpoint: `judge` checks it.
        validation.validate_aud = false;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY;
        let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|_| Failure::Invalid)?
            .claims;
        let verified = Arc::new(Verified {
            principal: Principal::subject(&claims.iss, &claims.sub),
            token: Arc::new(AccessToken {
                scopes: claims.scopes().into(),
                token: Secret::new(token.to_owned()),
                expires_at: std::time::UNIX_EPOCH + Duration::from_secs(claims.exp),
            }),
            exp: claims.exp,
            nbf: claims.nbf,
            aud: match claims.aud {
                Audience::One(a) => vec![a],
                Audience::Many(a) => a,
            },
            until: now + VERIFIED_FOR,
        });
        let mut cache = self.verified.lock();
        if cache.len() >= MAX_VERIFIED {
            cache.retain(|_, v| v.until > now && v.exp + LEEWAY > unix_now());
            if cache.len() >= MAX_VERIFIED {
                cache.clear();
            }
        }
        cache.insert(token.into(), verified.clone());
        Ok(verified)
    }

    /// What every request judges again, checked or remembered: the times,
    /// the audience (the gateway's, or this namespace's own endpoint) and
    /// the scopes this endpoint needs.
    fn judge(&self, v: &Verified, namespace: &str) -> Result<Identity, Failure> {
        let now = unix_now();
        if now >= v.exp + LEEWAY || v.nbf.is_some_and(|nbf| nbf > now + LEEWAY) {
            return Err(Failure::Invalid);
        }
        let own = (namespace != crate::config::DEFAULT_NAMESPACE).then(|| self.resource(namespace));
        if !v
            .aud
            .iter()
            .any(|a| *a == self.settings.audience || own.as_ref() == Some(a))
        {
            return Err(Failure::Invalid);
        }
        let held = &v.token.scopes;
        if !self
            .scopes(namespace)
            .iter()
            .all(|s| held.iter().any(|h| h == s))
        {
            return Err(Failure::Scope(held.clone()));
        }
        Ok(Identity {
            principal: v.principal.clone(),
            token: Some(v.token.clone()),
            scopes: None,
        })
    }
}

fn unix_now() -> u64 {
    crate::vocab::unix_now()
}

/// The token of an `Authorization: Bearer <token>` value (the scheme in
/// any case, RFC 9110 section 11.1), for every endpoint that takes one.
pub(crate) fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}
