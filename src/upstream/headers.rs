//! The headers an HTTP backend gets with every request: its configured
//! ones, and, with `[backends.NAME] oauth`, the gateway's own bearer token
//! (the client credentials grant), fetched when the backend starts and
//! again before it expires. Never anything of the client's.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, Guard};
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::http_client::{Client, Target};
use crate::config::{BackendName, ClientCredentials};

/// One token request, answer included, takes at most this long.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// A token endpoint's answer larger than this is refused.
const MAX_ANSWER: usize = 64 * 1024;
/// A token whose answer gives no `expires_in` is fetched again this often.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// Retries after a failed fetch wait 1 s, 2 s, ... up to this.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub(super) struct Headers {
    current: ArcSwap<HeaderMap>,
    token: Option<Token>,
}

struct Token {
    config: ClientCredentials,
    target: Target,
    /// True once a token is in `current`.
    ready: watch::Sender<bool>,
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
    ) -> Result<Headers, String> {
        let token = match credentials {
            None => None,
            Some(c) => Some(Token {
                target: Target::new(&c.token_url).map_err(|e| format!("oauth token_url: {e}"))?,
                config: c.clone(),
                ready: watch::channel(false).0,
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

    /// Waits for the first token (if the backend takes one); the caller's
    /// deadline bounds it.
    pub(super) async fn ready(&self) {
        if let Some(token) = &self.token {
            let mut ready = token.ready.subscribe();
            let _ = ready.wait_for(|r| *r).await;
        }
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
            let wait = match tokio::time::timeout(FETCH_TIMEOUT, fetch(&client, token)).await {
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

/// One client credentials request: the header to send and how long it is good for.
async fn fetch(client: &Client, token: &Token) -> Result<(HeaderValue, Duration), String> {
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
    let mut value = HeaderValue::try_from(format!("Bearer {}", a.access_token))
        .map_err(|_| "the token endpoint sent a token unusable in a header")?;
    value.set_sensitive(true);
    let lifetime = a.expires_in.map_or(DEFAULT_LIFETIME, Duration::from_secs);
    Ok((value, lifetime))
}
