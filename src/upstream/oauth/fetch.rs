//! The HTTP requests that join the flow's pieces, on the gateway's own
//! backend client (`http1::client::Client`, the one the backend's MCP
//! requests go over, through the proxy its config names): discovery,
//! dynamic registration, the token endpoint (code and refresh) and
//! revocation. Each is bounded by `DEADLINE`, and its answer by
//! `MAX_ANSWER`; no redirect is followed.
//!
//! Errors name the step and the HTTP status, never a token or a body.

use std::time::Duration;

use http::Method;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use url::Url;

use super::{
    Challenge, ClientIdentity, Grant, ResourceMetadata, ServerMetadata, TokenForm,
    read_token_answer, registration_request, resource_metadata_urls, server_metadata_urls,
};
use crate::http1::client::Client;

/// One request, answer included, takes at most this long.
pub(super) const DEADLINE: Duration = Duration::from_secs(10);
/// An answer larger than this is refused.
const MAX_ANSWER: usize = 256 * 1024;

/// Where a backend's authorization server is, and what it offers.
#[derive(Debug, Clone)]
pub(crate) struct Endpoints {
    /// The RFC 8707 resource: the backend's URL as its metadata names it.
    pub(crate) resource: Url,
    pub(crate) server: ServerMetadata,
    /// The scope to ask for: the 401's, else the metadata's supported ones.
    pub(crate) scope: Option<String>,
}

/// What went wrong in one of the flow's requests (no secret in it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct FetchError(pub String);

fn err(step: &str, why: impl std::fmt::Display) -> FetchError {
    FetchError(format!("{step}: {why}"))
}

struct Answer {
    status: http::StatusCode,
    challenge: Option<String>,
    body: bytes::Bytes,
}

async fn send(
    client: &Client,
    method: Method,
    url: &Url,
    headers: &[(http::HeaderName, String)],
    body: Option<String>,
) -> Result<Answer, String> {
    let uri: http::Uri = url.as_str().parse().map_err(|e| format!("bad url: {e}"))?;
    let target = client.target(&uri)?;
    let mut req = client.request(method, &target);
    for (k, v) in headers {
        let mut value = http::HeaderValue::try_from(v.as_str()).map_err(|_| "bad header")?;
        value.set_sensitive(true);
        req = req.header(k.clone(), value);
    }
    if let Some(body) = body {
        req = req.body(body);
    }
    let run = async {
        let answer = req.send().await.map_err(|e| e.to_string())?;
        let status = answer.status();
        let challenge = answer
            .headers()
            .get_str(&WWW_AUTHENTICATE)
            .map(str::to_owned);
        let body = answer.bytes(MAX_ANSWER).await?;
        Ok(Answer {
            status,
            challenge,
            body,
        })
    };
    tokio::time::timeout(DEADLINE, run)
        .await
        .map_err(|_| "no answer in time".to_owned())?
}

async fn get_json(client: &Client, url: &Url) -> Result<Option<bytes::Bytes>, String> {
    let a = send(
        client,
        Method::GET,
        url,
        &[(ACCEPT, "application/json".into())],
        None,
    )
    .await?;
    Ok(a.status.is_success().then_some(a.body))
}

/// Finds the authorization server of the backend at `backend`: the
/// `resource_metadata` of its 401 (to an `initialize` without a token),
/// else RFC 9728's well-known URLs; then RFC 8414's, then OpenID's.
pub(super) async fn discover(client: &Client, backend: &Url) -> Result<Endpoints, FetchError> {
    let init = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "sluice", "version": env!("CARGO_PKG_VERSION")}},
    });
    let probe = send(
        client,
        Method::POST,
        backend,
        &[
            (CONTENT_TYPE, "application/json".into()),
            (ACCEPT, "application/json, text/event-stream".into()),
        ],
        Some(init.to_string()),
    )
    .await
    .map_err(|e| err("the backend's 401", e))?;
    let challenge = Challenge::parse(probe.challenge.as_deref());
    let mut candidates = Vec::new();
    if let Some(url) = challenge
        .resource_metadata
        .as_deref()
        .and_then(|u| Url::parse(u).ok())
    {
        candidates.push(url);
    }
    candidates.extend(resource_metadata_urls(backend));
    let mut last = "no metadata found".to_owned();
    let mut found = None;
    for url in candidates {
        match get_json(client, &url).await {
            Ok(Some(body)) => match ResourceMetadata::parse(&body, backend) {
                Ok(m) => {
                    found = Some(m);
                    break;
                }
                Err(e) => last = e.to_string(),
            },
            Ok(None) => {}
            Err(e) => last = e,
        }
    }
    let resource = found.ok_or_else(|| err("the protected resource metadata", last))?;
    let issuer = &resource.authorization_server;
    let mut last = "no metadata found".to_owned();
    for url in server_metadata_urls(issuer) {
        match get_json(client, &url).await {
            Ok(Some(body)) => match ServerMetadata::parse(&body, issuer) {
                Ok(server) => {
                    let scope = challenge.scope.clone().or_else(|| {
                        (!resource.scopes_supported.is_empty())
                            .then(|| resource.scopes_supported.join(" "))
                    });
                    return Ok(Endpoints {
                        resource: Url::parse(&resource.resource)
                            .map_err(|e| err("the resource", e))?,
                        server,
                        scope,
                    });
                }
                Err(e) => last = e.to_string(),
            },
            Ok(None) => {}
            Err(e) => last = e,
        }
    }
    Err(err("the authorization server metadata", last))
}

/// Registers the gateway as a client (RFC 7591), its callback its only
/// redirect.
pub(super) async fn register(
    client: &Client,
    server: &ServerMetadata,
    redirect: &Url,
) -> Result<ClientIdentity, FetchError> {
    let Some(endpoint) = &server.registration_endpoint else {
        return Err(err(
            "registration",
            "the authorization server offers no dynamic registration: configure oauth.client_id",
        ));
    };
    let body = registration_request(redirect, "sluice").to_string();
    let a = send(
        client,
        Method::POST,
        endpoint,
        &[
            (CONTENT_TYPE, "application/json".into()),
            (ACCEPT, "application/json".into()),
        ],
        Some(body),
    )
    .await
    .map_err(|e| err("registration", e))?;
    if !a.status.is_success() && a.status.as_u16() != 400 {
        return Err(err("registration", format!("HTTP {}", a.status)));
    }
    ClientIdentity::registered(&a.body).map_err(|e| err("registration", e))
}

/// One request to the token endpoint: a code exchanged, or a refresh.
pub(super) async fn token(
    client: &Client,
    endpoint: &Url,
    form: TokenForm,
    now: u64,
    before: Option<&Grant>,
) -> Result<Grant, FetchError> {
    let a = post_form(client, endpoint, form)
        .await
        .map_err(|e| err("the token endpoint", e))?;
    if !a.status.is_success() && a.status.as_u16() != 400 && a.status.as_u16() != 401 {
        return Err(err("the token endpoint", format!("HTTP {}", a.status)));
    }
    read_token_answer(&a.body, now, before).map_err(|e| err("the token endpoint", e))
}

/// Revokes a grant (RFC 7009); the server's answer is only its status.
pub(super) async fn revoke(
    client: &Client,
    endpoint: &Url,
    form: TokenForm,
) -> Result<(), FetchError> {
    let a = post_form(client, endpoint, form)
        .await
        .map_err(|e| err("revocation", e))?;
    match a.status.is_success() {
        true => Ok(()),
        false => Err(err("revocation", format!("HTTP {}", a.status))),
    }
}

async fn post_form(client: &Client, endpoint: &Url, form: TokenForm) -> Result<Answer, String> {
    let mut headers = vec![
        (CONTENT_TYPE, "application/x-www-form-urlencoded".to_owned()),
        (ACCEPT, "application/json".to_owned()),
    ];
    if let Some(basic) = &form.authorization {
        headers.push((AUTHORIZATION, basic.expose().to_owned()));
    }
    send(client, Method::POST, endpoint, &headers, Some(form.body)).await
}

#[cfg(test)]
mod tests;
