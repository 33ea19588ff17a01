//! Who the gateway is at a backend's authorization server: a configured
//! `client_id` (with `client_secret_env`), else, where the server says it
//! fetches them and `public_url` is https, the URL of the Client ID
//! Metadata Document the gateway serves for that backend, else one
//! registered dynamically (RFC 7591) once per backend and kept for the
//! process's life. The registration asks for what the flow uses and nothing more:
//! the authorization code and refresh token grants, the one redirect URI
//! `{public_url}/oauth/callback`, and a public client (`none`) so that no
//! secret is needed at the token endpoint when the server allows it.

use serde::Deserialize;
use url::Url;

use crate::config::Secret;

/// The gateway's identity at one authorization server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientIdentity {
    pub(crate) client_id: String,
    /// Sent with `client_secret_basic` when present.
    pub(crate) client_secret: Option<Secret>,
}

/// Why a registration's answer cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RegistrationError {
    #[error("the registration answer is not valid JSON of RFC 7591: {0}")]
    BadAnswer(String),
    #[error("the authorization server refused the registration: {0}")]
    Refused(String),
}

/// The RFC 7591 request body for a gateway whose callback is `redirect`.
pub(crate) fn registration_request(redirect: &Url, client_name: &str) -> serde_json::Value {
    serde_json::json!({
        "client_name": client_name,
        "redirect_uris": [redirect.as_str()],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "web",
    })
}

/// The Client ID Metadata Document served at `id` (its own URL, the
/// `client_id`): what a registration asks, as the client it names.
pub(crate) fn metadata_document(id: &Url, redirect: &Url, client_name: &str) -> serde_json::Value {
    let mut document = registration_request(redirect, client_name);
    document["client_id"] = id.as_str().into();
    document
}

#[derive(Deserialize)]
struct Answer {
    client_id: Option<String>,
    client_secret: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

impl ClientIdentity {
    /// A configured client.
    pub(crate) fn configured(client_id: &str, client_secret: Option<Secret>) -> ClientIdentity {
        ClientIdentity {
            client_id: client_id.to_owned(),
            client_secret,
        }
    }

    /// The identity a registration's answer gives (any status: an error
    /// body is read for its `error`).
    pub(crate) fn registered(body: &[u8]) -> Result<ClientIdentity, RegistrationError> {
        let answer: Answer = serde_json::from_slice(body)
            .map_err(|e| RegistrationError::BadAnswer(e.to_string()))?;
        if let Some(error) = answer.error {
            let detail = answer.error_description.unwrap_or_default();
            return Err(RegistrationError::Refused(
                format!("{error} {detail}").trim().to_owned(),
            ));
        }
        let client_id = answer
            .client_id
            .filter(|id| !id.is_empty())
            .ok_or_else(|| RegistrationError::BadAnswer("no client_id".into()))?;
        Ok(ClientIdentity {
            client_id,
            client_secret: answer.client_secret.map(Secret::new),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registration_asks_for_the_code_flow_and_our_callback_only() {
        let body = registration_request(
            &Url::parse("https://gw.example.com/oauth/callback").unwrap(),
            "sluice",
        );
        assert_eq!(
            body["redirect_uris"][0],
            "https://gw.example.com/oauth/callback"
        );
        assert_eq!(body["grant_types"][0], "authorization_code");
        assert_eq!(body["grant_types"][1], "refresh_token");
        assert_eq!(body["token_endpoint_auth_method"], "none");
    }

    #[test]
    fn the_metadata_document_names_itself_and_asks_what_a_registration_does() {
        let id = Url::parse("https://gw.example.com/.well-known/oauth-client/github").unwrap();
        let redirect = Url::parse("https://gw.example.com/oauth/callback").unwrap();
        let doc = metadata_document(&id, &redirect, "sluice");
        assert_eq!(doc["client_id"], id.as_str());
        assert_eq!(doc["redirect_uris"][0], redirect.as_str());
        assert_eq!(doc["token_endpoint_auth_method"], "none");
        assert!(doc.get("client_secret").is_none());
    }

    #[test]
    fn a_registration_answer_gives_the_client_and_hides_its_secret() {
        let id =
            ClientIdentity::registered(br#"{"client_id":"c1","client_secret":"s3cr3t"}"#).unwrap();
        assert_eq!(id.client_id, "c1");
        assert_eq!(id.client_secret.as_ref().unwrap().expose(), "s3cr3t");
        assert!(!format!("{id:?}").contains("s3cr3t"));
        assert_eq!(
            ClientIdentity::registered(br#"{"client_id":"c2"}"#)
                .unwrap()
                .client_secret,
            None
        );
        assert_eq!(
            ClientIdentity::registered(
                br#"{"error":"invalid_redirect_uri","error_description":"no"}"#
            ),
            Err(RegistrationError::Refused("invalid_redirect_uri no".into()))
        );
        for bad in [&b"{}"[..], br#"{"client_id":""}"#, b"<html>"] {
            assert!(matches!(
                ClientIdentity::registered(bad),
                Err(RegistrationError::BadAnswer(_))
            ));
        }
    }
}
