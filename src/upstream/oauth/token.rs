//! The requests of the authorization code flow and what their answers
//! give, with no I/O: the authorization URL the browser is sent to, the
//! token endpoint's form bodies (the code exchanged, a grant refreshed, a
//! token revoked per RFC 7009) and the token answer read into a `Grant`.
//!
//! Every request names the backend as RFC 8707's `resource`, so the token
//! is good for that backend only; the code exchange carries the PKCE
//! verifier, and a client with a secret authenticates with
//! `client_secret_basic` (`TokenForm::authorization`).

use base64::Engine as _;
use serde::Deserialize;
use url::Url;
use url::form_urlencoded::Serializer;

use super::client::ClientIdentity;
use super::grants::Grant;
use super::pkce::Pkce;
use crate::config::Secret;

/// What the authorization request asks for.
pub(crate) struct AuthorizationRequest<'a> {
    pub(crate) client: &'a ClientIdentity,
    pub(crate) redirect: &'a Url,
    pub(crate) resource: &'a Url,
    pub(crate) scope: Option<&'a str>,
    pub(crate) pkce: &'a Pkce,
    pub(crate) state: &'a str,
}

impl AuthorizationRequest<'_> {
    /// The URL at `endpoint` the browser is redirected to.
    pub(crate) fn url(&self, endpoint: &Url) -> Url {
        let mut url = endpoint.clone();
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", &self.client.client_id)
                .append_pair("redirect_uri", self.redirect.as_str())
                .append_pair("code_challenge", &self.pkce.challenge())
                .append_pair("code_challenge_method", Pkce::METHOD)
                .append_pair("state", self.state)
                .append_pair("resource", self.resource.as_str());
            if let Some(scope) = self.scope.filter(|s| !s.is_empty()) {
                q.append_pair("scope", scope);
            }
        }
        url
    }
}

/// A form for the token (or revocation) endpoint: its body, and the
/// `Authorization` header a client with a secret sends. Neither may be
/// logged.
pub(crate) struct TokenForm {
    pub(crate) body: String,
    pub(crate) authorization: Option<Secret>,
}

impl TokenForm {
    fn new(client: &ClientIdentity, pairs: &[(&str, &str)]) -> TokenForm {
        let mut form = Serializer::new(String::new());
        for (k, v) in pairs {
            form.append_pair(k, v);
        }
        let authorization = match &client.client_secret {
            // RFC 6749 §2.3.1: each part form-encoded, then base64.
            Some(secret) => {
                let enc = |s: &str| Serializer::new(String::new()).append_key_only(s).finish();
                let pair = format!("{}:{}", enc(&client.client_id), enc(secret.expose()));
                Some(Secret::new(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(pair)
                )))
            }
            None => {
                form.append_pair("client_id", &client.client_id);
                None
            }
        };
        TokenForm {
            body: form.finish(),
            authorization,
        }
    }

    /// The code exchanged (with its verifier) for the first grant.
    pub(crate) fn code(
        client: &ClientIdentity,
        code: &str,
        redirect: &Url,
        pkce: &Pkce,
        resource: &Url,
    ) -> TokenForm {
        TokenForm::new(
            client,
            &[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", redirect.as_str()),
                ("code_verifier", pkce.verifier()),
                ("resource", resource.as_str()),
            ],
        )
    }

    /// A grant refreshed.
    pub(crate) fn refresh(client: &ClientIdentity, refresh: &Secret, resource: &Url) -> TokenForm {
        TokenForm::new(
            client,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh.expose()),
                ("resource", resource.as_str()),
            ],
        )
    }

    /// A token revoked (RFC 7009): the refresh token when there is one,
    /// which ends the grant's access tokens too at most servers.
    pub(crate) fn revoke(client: &ClientIdentity, grant: &Grant) -> TokenForm {
        let (token, hint) = match &grant.refresh {
            Some(r) => (r.expose(), "refresh_token"),
            None => (grant.access.expose(), "access_token"),
        };
        TokenForm::new(client, &[("token", token), ("token_type_hint", hint)])
    }
}

/// Why a token answer gives no grant. Never holds a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenError {
    #[error("the token endpoint refused: {0}")]
    Refused(String),
    #[error("the token endpoint's answer is not valid JSON of RFC 6749: {0}")]
    BadAnswer(String),
    #[error("the token endpoint gave a token of type {0}, not Bearer")]
    NotBearer(String),
}

#[derive(Deserialize)]
struct Answer {
    access_token: Option<String>,
    token_type: Option<String>,
    expires_in: Option<u64>,
    refresh_token: Option<String>,
    scope: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// The grant a token answer gives at `now` (unix seconds). A refresh's
/// answer is read with the grant it refreshes as `before`: its refresh
/// token is kept when the server did not rotate it, and its connection
/// time stays.
pub(crate) fn read_token_answer(
    body: &[u8],
    now: u64,
    before: Option<&Grant>,
) -> Result<Grant, TokenError> {
    let answer: Answer =
        serde_json::from_slice(body).map_err(|e| TokenError::BadAnswer(e.to_string()))?;
    if let Some(error) = answer.error {
        let detail = answer.error_description.unwrap_or_default();
        return Err(TokenError::Refused(
            format!("{error} {detail}").trim().to_owned(),
        ));
    }
    let access = answer
        .access_token
        .filter(|t| !t.is_empty())
        .ok_or_else(|| TokenError::BadAnswer("no access_token".into()))?;
    let kind = answer.token_type.unwrap_or_default();
    if !kind.eq_ignore_ascii_case("bearer") {
        return Err(TokenError::NotBearer(kind));
    }
    Ok(Grant {
        access: Secret::new(access),
        refresh: answer
            .refresh_token
            .map(Secret::new)
            .or_else(|| before.and_then(|b| b.refresh.clone())),
        expires: answer.expires_in.map(|s| now + s),
        scope: answer
            .scope
            .or_else(|| before.and_then(|b| b.scope.clone())),
        connected: before.map_or(now, |b| b.connected),
    })
}

#[cfg(test)]
mod tests;
