//! Where a backend's authorization server is, as the MCP authorization
//! spec (2025-11-25) has a client find it, with no I/O here: the caller
//! fetches each URL in turn and hands the body back.
//!
//! 1. The protected resource metadata (RFC 9728): the URL in the 401's
//!    `WWW-Authenticate: Bearer resource_metadata="..."`, else the
//!    well-known URL with the backend's path inserted, else at the root.
//! 2. Its `authorization_servers[0]`'s metadata: RFC 8414 with the path
//!    inserted, then OpenID Connect discovery with it inserted, then
//!    appended (an issuer with no path: RFC 8414, then OpenID).
//!
//! Each document is checked as its RFC asks: the protected resource's
//! `resource` must be the backend's URL (or an origin/path prefix of it),
//! the server's `issuer` the one the URL was made from, and a server that
//! does not list S256 in `code_challenge_methods_supported` is refused (the
//! spec forbids going on without PKCE).

use serde::Deserialize;
use url::Url;

/// Why discovery cannot go on; its text names the document, never a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DiscoveryError {
    #[error("the protected resource metadata is not valid JSON of RFC 9728: {0}")]
    BadResourceMetadata(String),
    #[error("the protected resource metadata is for {found}, not {wanted}")]
    OtherResource { found: String, wanted: String },
    #[error("the protected resource metadata names no authorization server")]
    NoAuthorizationServer,
    #[error("the authorization server metadata is not valid JSON of RFC 8414: {0}")]
    BadServerMetadata(String),
    #[error("the authorization server metadata is for issuer {found}, not {wanted}")]
    OtherIssuer { found: String, wanted: String },
    #[error("the authorization server does not support PKCE with S256")]
    NoPkce,
}

/// What a 401 from the backend says about where to look.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Challenge {
    pub(crate) resource_metadata: Option<String>,
    /// The scope the backend asks for, preferred over `scopes_supported`.
    pub(crate) scope: Option<String>,
}

impl Challenge {
    /// Reads every `WWW-Authenticate` value the 401 carried; only the
    /// `Bearer` challenge's parameters count.
    pub(crate) fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> Challenge {
        let mut out = Challenge::default();
        for value in values {
            let mut in_bearer = false;
            for (scheme, name, param) in auth_params(value) {
                if let Some(scheme) = scheme {
                    in_bearer = scheme.eq_ignore_ascii_case("bearer");
                }
                if !in_bearer {
                    continue;
                }
                match name.to_ascii_lowercase().as_str() {
                    "resource_metadata" if out.resource_metadata.is_none() => {
                        out.resource_metadata = Some(param);
                    }
                    "scope" if out.scope.is_none() => out.scope = Some(param),
                    _ => {}
                }
            }
        }
        out
    }
}

/// `(scheme if this parameter starts a challenge, name, value)` for every
/// `name=value` or `name="quoted"` in a `WWW-Authenticate` value (RFC 9110
/// §11.6.1), challenges separated by commas like parameters are.
fn auth_params(value: &str) -> Vec<(Option<String>, String, String)> {
    let mut out = Vec::new();
    let bytes = value.as_bytes();
    let mut i = 0;
    let mut scheme: Option<String> = None;
    while i < bytes.len() {
        while i < bytes.len() && (bytes[i] == b',' || bytes[i] == b' ' || bytes[i] == b'\t') {
            i += 1;
        }
        let start = i;
        while i < bytes.len() && !b"=, \t".contains(&bytes[i]) {
            i += 1;
        }
        let token = &value[start..i];
        if token.is_empty() {
            i += 1;
            continue;
        }
        while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b'\t') {
            i += 1;
        }
        if i >= bytes.len() || bytes[i] != b'=' {
            // A scheme, the first word of a challenge.
            scheme = Some(token.to_owned());
            continue;
        }
        i += 1;
        while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b'\t') {
            i += 1;
        }
        let mut param = String::new();
        if i < bytes.len() && bytes[i] == b'"' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                if bytes[i] == b'\\' && i + 1 < bytes.len() {
                    i += 1;
                }
                let ch = value[i..].chars().next().unwrap_or(' ');
                param.push(ch);
                i += ch.len_utf8();
            }
            i += 1;
        } else {
            let s = i;
            while i < bytes.len() && bytes[i] != b',' {
                i += 1;
            }
            param.push_str(value[s..i].trim());
        }
        out.push((scheme.take(), token.to_owned(), param));
    }
    out
}

/// RFC 9728's well-known URLs for `resource`, in the order to try them.
pub(crate) fn resource_metadata_urls(resource: &Url) -> Vec<Url> {
    well_known(resource, "oauth-protected-resource", false)
}

/// RFC 8414's and OpenID Connect's metadata URLs for `issuer`, in the
/// order the MCP spec has a client try them.
pub(crate) fn server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let mut out = well_known(issuer, "oauth-authorization-server", true);
    out.extend(well_known(issuer, "openid-configuration", true));
    if has_path(issuer) {
        let mut appended = issuer.clone();
        let path = format!(
            "{}/.well-known/openid-configuration",
            issuer.path().trim_end_matches('/')
        );
        appended.set_path(&path);
        appended.set_query(None);
        out.push(appended);
    }
    out
}

fn has_path(url: &Url) -> bool {
    !url.path().trim_matches('/').is_empty()
}

/// `/.well-known/{name}{path}`; when the URL has a path, the root form too
/// unless `inserted_only`.
fn well_known(url: &Url, name: &str, inserted_only: bool) -> Vec<Url> {
    let at = |path: &str| {
        let mut u = url.clone();
        u.set_path(path);
        u.set_query(None);
        u.set_fragment(None);
        u
    };
    let root = at(&format!("/.well-known/{name}"));
    if !has_path(url) {
        return vec![root];
    }
    let inserted = at(&format!(
        "/.well-known/{name}{}",
        url.path().trim_end_matches('/')
    ));
    if inserted_only {
        vec![inserted]
    } else {
        vec![inserted, root]
    }
}

/// RFC 9728's document, as far as a client needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceMetadata {
    pub(crate) resource: String,
    pub(crate) authorization_server: Url,
    pub(crate) scopes_supported: Vec<String>,
}

#[derive(Deserialize)]
struct ResourceJson {
    resource: String,
    #[serde(default)]
    authorization_servers: Vec<String>,
    #[serde(default)]
    scopes_supported: Vec<String>,
}

impl ResourceMetadata {
    /// Reads the document served for `backend` (the backend's URL).
    pub(crate) fn parse(body: &[u8], backend: &Url) -> Result<ResourceMetadata, DiscoveryError> {
        let json: ResourceJson = serde_json::from_slice(body)
            .map_err(|e| DiscoveryError::BadResourceMetadata(e.to_string()))?;
        if !resource_covers(&json.resource, backend) {
            return Err(DiscoveryError::OtherResource {
                found: json.resource,
                wanted: backend.to_string(),
            });
        }
        let server = json
            .authorization_servers
            .first()
            .and_then(|s| Url::parse(s).ok())
            .ok_or(DiscoveryError::NoAuthorizationServer)?;
        Ok(ResourceMetadata {
            resource: json.resource,
            authorization_server: server,
            scopes_supported: json.scopes_supported,
        })
    }
}

/// Whether `resource` names `backend`: the same URL, or one of its origin
/// and a prefix of its path (a server's metadata for all its endpoints).
fn resource_covers(resource: &str, backend: &Url) -> bool {
    let Ok(resource) = Url::parse(resource) else {
        return false;
    };
    if resource.origin() != backend.origin() {
        return false;
    }
    let want = resource.path().trim_end_matches('/');
    let have = backend.path().trim_end_matches('/');
    have == want || have.starts_with(&format!("{want}/"))
}

/// RFC 8414's document, as far as a client needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerMetadata {
    pub(crate) issuer: String,
    pub(crate) authorization_endpoint: Url,
    pub(crate) token_endpoint: Url,
    pub(crate) registration_endpoint: Option<Url>,
    pub(crate) revocation_endpoint: Option<Url>,
    pub(crate) client_id_metadata_document_supported: bool,
}

#[derive(Deserialize)]
struct ServerJson {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    registration_endpoint: Option<String>,
    revocation_endpoint: Option<String>,
    #[serde(default)]
    code_challenge_methods_supported: Vec<String>,
    #[serde(default)]
    client_id_metadata_document_supported: bool,
}

impl ServerMetadata {
    /// Reads the document fetched for `issuer`.
    pub(crate) fn parse(body: &[u8], issuer: &Url) -> Result<ServerMetadata, DiscoveryError> {
        let json: ServerJson = serde_json::from_slice(body)
            .map_err(|e| DiscoveryError::BadServerMetadata(e.to_string()))?;
        let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
        if !same(&json.issuer, issuer.as_str()) {
            return Err(DiscoveryError::OtherIssuer {
                found: json.issuer,
                wanted: issuer.to_string(),
            });
        }
        if !json
            .code_challenge_methods_supported
            .iter()
            .any(|m| m == "S256")
        {
            return Err(DiscoveryError::NoPkce);
        }
        let endpoint = |name: &str, value: &str| {
            Url::parse(value).map_err(|e| DiscoveryError::BadServerMetadata(format!("{name}: {e}")))
        };
        let optional =
            |name: &str, value: Option<&String>| value.map(|v| endpoint(name, v)).transpose();
        Ok(ServerMetadata {
            authorization_endpoint: endpoint(
                "authorization_endpoint",
                &json.authorization_endpoint,
            )?,
            token_endpoint: endpoint("token_endpoint", &json.token_endpoint)?,
            registration_endpoint: optional(
                "registration_endpoint",
                json.registration_endpoint.as_ref(),
            )?,
            revocation_endpoint: optional(
                "revocation_endpoint",
                json.revocation_endpoint.as_ref(),
            )?,
            issuer: json.issuer,
            client_id_metadata_document_supported: json.client_id_metadata_document_supported,
        })
    }
}

#[cfg(test)]
mod tests;
