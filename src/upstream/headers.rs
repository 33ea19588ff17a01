//! The headers an HTTP backend gets with every request: its configured
//! ones, and, with `[backends.NAME] oauth`, the gateway's own bearer token
//! (the client credentials grant), fetched when the backend starts and
//! again before it expires. With `oauth.exchange`, a call made for a client
//! carries instead a token exchanged for the client's (RFC 8693). Never the
//! client's own token.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::{ArcSwap, Guard};
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method};
use parking_lot::Mutex;
use tokio::sync::{OnceCell, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{ClientCredentials, Secret};
use crate::fast_map::FastMap;
use crate::http1::client::{Client, Target};
use crate::vocab::BackendName;

/// One token request, answer included, takes at most this long.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// A token endpoint's answer larger than this is refused.
const MAX_ANSWER: usize = 64 * 1024;
/// A token whose answer gives no `expires_in` is fetched again this often.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// Retries after a failed fetch wait 1 s, 2 s, ... up to this.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Exchanged tokens kept per backend (one per client token in use).
const MAX_EXCHANGED: usize = 10_000;

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";

/// A request's OAuth access token, verified by the front: its scopes gate
/// tools; for a backend with `oauth.exchange` it is the subject token of
/// the exchange. Never sent to a backend as it is.
#[derive(Debug)]
pub(crate) struct AccessToken {
    pub(crate) scopes: Box<[String]>,
    pub(crate) token: Secret,
    /// Its `exp`.
    pub(crate) expires_at: SystemTime,
}

pub(super) struct Headers {
    current: ArcSwap<HeaderMap>,
    token: Option<Token>,
}

struct Token {
    config: ClientCredentials,
    target: Target,
    /// True once a token is in `current`.
    ready: watch::Sender<bool>,
    /// With `oauth.exchange`: exchanged tokens by a digest of the client
    /// token they were exchanged for.
    exchanged: Mutex<FastMap<[u8; 32], Arc<Exchanged>>>,
}

/// One exchange, made once however many calls wait for it.
#[derive(Default)]
struct Exchanged(OnceCell<(String, Instant)>);

impl Exchanged {
    fn fresh(&self, now: Instant) -> Option<&str> {
        let (value, until) = self.0.get()?;
        (*until > now).then_some(value.as_str())
    }

    /// Done and past its use: may be dropped.
    fn stale(&self, now: Instant) -> bool {
        self.0.get().is_some_and(|(_, until)| *until <= now)
    }
}

impl std::fmt::Debug for Headers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Values are credentials: names only.
        f.debug_list().entries(self.current.load().keys()).finish()
    }
}

impl Headers {
    pub(super) fn new(
        fixed: HeaderMap,
        credentials: Option<&ClientCredentials>,
        client: &Client,
    ) -> Result<Headers, String> {
        let token = match credentials {
            None => None,
            Some(c) => Some(Token {
                target: client
                    .target(&c.token_url)
                    .map_err(|e| format!("oauth token_url: {e}"))?,
                config: c.clone(),
                ready: watch::channel(false).0,
                exchanged: Mutex::default(),
            }),
        };
        Ok(Headers {
            current: ArcSwap::from_pointee(fixed),
            token,
        })
    }

    /// What to send now.
    pub(super) fn current(&self) -> Guard<Arc<HeaderMap>> {
        self.current.load()
    }

    /// Replaces the `Authorization` sent (a principal's grant, refreshed);
    /// a value unusable in a header is not sent at all.
    pub(super) fn set_authorization(&self, value: &str) {
        let current = self.current.load();
        if current
            .get(AUTHORIZATION)
            .is_some_and(|v| v.as_bytes() == value.as_bytes())
        {
            return;
        }
        let mut map = HeaderMap::clone(&current);
        match HeaderValue::try_from(value) {
            Ok(mut v) => {
                v.set_sensitive(true);
                map.insert(AUTHORIZATION, v);
            }
            Err(_) => {
                map.remove(AUTHORIZATION);
            }
        }
        self.current.store(Arc::new(map));
    }

    /// Waits for the first token (if the backend takes one); the caller's
    /// deadline bounds it.
    pub(super) async fn ready(&self) {
        if let Some(token) = &self.token {
            let mut ready = token.ready.subscribe();
            let _ = ready.wait_for(|r| *r).await;
        }
    }

    /// Whether calls made for a client carry its token exchanged.
    pub(super) fn exchanges(&self) -> bool {
        self.token
            .as_ref()
            .is_some_and(|t| t.config.exchange.is_some())
    }

    /// The `Authorization` of a call made for a client, when the backend
    /// takes the client's token exchanged (None: it takes the gateway's).
    /// An exchanged token is used until four fifths of its life, never
    /// past the client token's own expiry; within `timeout`.
    pub(super) async fn for_client(
        &self,
        client: &Client,
        subject: Option<&AccessToken>,
        timeout: Duration,
    ) -> Result<Option<String>, String> {
        let Some(token) = self.token.as_ref().filter(|t| t.config.exchange.is_some()) else {
            return Ok(None);
        };
        let Some(subject) = subject else {
            return Err("it takes the client's OAuth token exchanged, and this client has none (a static token cannot be exchanged)".into());
        };
        let key: [u8; 32] = {
            use sha2::Digest as _;
            sha2::Sha256::digest(subject.token.expose().as_bytes()).into()
        };
        let now = Instant::now();
        let entry = {
            let mut cache = token.exchanged.lock();
            match cache.get(&key) {
                Some(e) if !e.stale(now) => e.clone(),
                _ => {
                    if cache.len() >= MAX_EXCHANGED {
                        cache.retain(|_, e| !e.stale(now));
                        if cache.len() >= MAX_EXCHANGED {
                            cache.clear();
                        }
                    }
                    let e = Arc::new(Exchanged::default());
                    cache.insert(key, e.clone());
                    e
                }
            }
        };
        if let Some(value) = entry.fresh(now) {
            return Ok(Some(value.to_owned()));
        }
        let exchange = async {
            let (value, lifetime) =
                grant(client, token, exchange_form(&token.config, subject)).await?;
            let left = subject
                .expires_at
                .duration_since(SystemTime::now())
                .unwrap_or_default();
            let until = Instant::now() + (lifetime * 4 / 5).min(left);
            Ok::<_, String>((value, until))
        };
        let exchange = async {
            tokio::time::timeout(timeout.min(FETCH_TIMEOUT), exchange)
                .await
                .map_err(|_| "the token exchange got no answer in time".to_owned())?
        };
        let (value, _) = entry.0.get_or_try_init(|| exchange).await?;
        Ok(Some(value.clone()))
    }

    /// Keeps the token fresh until `stop` (the backend's own task).
    pub(super) async fn keep_fresh(
        self: Arc<Self>,
        client: Client,
        backend: BackendName,
        stop: CancellationToken,
    ) {
        let Some(token) = &self.token else {
            return;
        };
        let mut backoff = Duration::from_secs(1);
        loop {
            let failed = backoff;
            let wait = match tokio::time::timeout(FETCH_TIMEOUT, own_token(&client, token)).await {
                Ok(Ok((value, lifetime))) => {
                    let mut map = HeaderMap::clone(&self.current.load());
                    map.insert(AUTHORIZATION, value);
                    self.current.store(Arc::new(map));
                    token.ready.send_replace(true);
                    tracing::info!(%backend, "backend token fetched");
                    backoff = Duration::from_secs(1);
                    // Again when four fifths of its life have passed.
                    (lifetime * 4 / 5).max(Duration::from_secs(5))
                }
                Ok(Err(why)) => {
                    tracing::warn!(%backend, "backend token not fetched: {why}");
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    failed
                }
                Err(_) => {
                    tracing::warn!(%backend, "backend token not fetched: no answer in time");
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    failed
                }
            };
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// The gateway's own token (the client credentials grant).
async fn own_token(client: &Client, token: &Token) -> Result<(HeaderValue, Duration), String> {
    let c = &token.config;
    let form = {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials");
        if !c.scopes.is_empty() {
            form.append_pair("scope", &c.scopes.join(" "));
        }
        if let Some(resource) = &c.resource {
            form.append_pair("resource", resource);
        }
        form.finish()
    };
    let (value, lifetime) = grant(client, token, form).await?;
    let mut value = HeaderValue::try_from(value)
        .map_err(|_| "the token endpoint sent a token unusable in a header")?;
    value.set_sensitive(true);
    Ok((value, lifetime))
}

/// An RFC 8693 request: the client's token for one meant for the backend.
fn exchange_form(c: &ClientCredentials, subject: &AccessToken) -> String {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", TOKEN_EXCHANGE);
    form.append_pair("subject_token", subject.token.expose());
    form.append_pair("subject_token_type", ACCESS_TOKEN);
    form.append_pair("requested_token_type", ACCESS_TOKEN);
    if let Some(x) = &c.exchange {
        if let Some(audience) = &x.audience {
            form.append_pair("audience", audience);
        }
        if let Some(resource) = &x.resource {
            form.append_pair("resource", resource);
        }
        if !x.scopes.is_empty() {
            form.append_pair("scope", &x.scopes.join(" "));
        }
    }
    form.finish()
}

/// One token request with the gateway's client credentials: the
/// `Authorization` value to send and how long it is good for.
async fn grant(client: &Client, token: &Token, form: String) -> Result<(String, Duration), String> {
    let c = &token.config;
    // client_secret_basic: both parts form-encoded first (RFC 6749 2.3.1).
    let encode = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let basic = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!(
            "{}:{}",
            encode(&c.client_id),
            encode(c.client_secret.expose())
        ),
    );
    let mut authorization = HeaderValue::try_from(format!("Basic {basic}"))
        .map_err(|_| "client credentials unusable in a header")?;
    authorization.set_sensitive(true);
    let answer = client
        .request(Method::POST, &token.target)
        .header(AUTHORIZATION, authorization)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(ACCEPT, "application/json")
        .body(form)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = answer.status();
    let body = answer.bytes(MAX_ANSWER).await?;
    if !status.is_success() {
        // The error code only (RFC 6749 5.2): never the body as a whole.
        let code = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("error")?.as_str().map(str::to_owned))
            .unwrap_or_default();
        return Err(format!("the token endpoint answered HTTP {status} {code}"));
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        access_token: String,
        #[serde(default)]
        token_type: Option<String>,
        #[serde(default)]
        expires_in: Option<u64>,
    }
    let a: Answer =
        serde_json::from_slice(&body).map_err(|_| "the token endpoint sent no token")?;
    if a.token_type
        .as_deref()
        .is_some_and(|t| !t.eq_ignore_ascii_case("bearer"))
    {
        return Err("the token endpoint sent a token that is not a bearer token".into());
    }
    let value = format!("Bearer {}", a.access_token);
    if HeaderValue::try_from(value.as_str()).is_err() {
        return Err("the token endpoint sent a token unusable in a header".into());
    }
    let lifetime = a.expires_in.map_or(DEFAULT_LIFETIME, Duration::from_secs);
    Ok((value, lifetime))
}
