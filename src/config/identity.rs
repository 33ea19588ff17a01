//! Who reaches a backend as whom: per-principal credentials
//! (`[backends.NAME.principals]`) and the authorization code flow's
//! settings (`oauth.flow = "authorization_code"`), as built from the file.

use crate::vocab::Principal;

use super::Secret;

impl CodeFlowConfig {
    /// `{public_url}/oauth/callback`: the redirect URI.
    pub fn callback(&self) -> url::Url {
        self.under("oauth/callback")
    }

    /// `path` under `public_url` (which may have a path of its own).
    pub fn under(&self, path: &str) -> url::Url {
        let base = self.public_url.as_str().trim_end_matches('/');
        url::Url::parse(&format!("{base}/{path}")).unwrap_or_else(|_| self.public_url.clone())
    }
}

/// `[backends.NAME] oauth = { flow = "authorization_code", ... }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeFlowConfig {
    /// `[server] public_url`: where `/oauth/callback` is reached.
    pub public_url: url::Url,
    /// None: registered dynamically (RFC 7591), once per backend.
    pub client_id: Option<String>,
    pub client_secret: Option<Secret>,
    /// Empty: the backend's 401 or metadata says which.
    pub scopes: Vec<String>,
    /// Grants kept at once (least recently used forgotten first).
    pub max_grants: usize,
}

/// A backend's per-principal credentials: who has an entry, with what, and
/// what a caller without one gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrincipalCredentials {
    /// In the file's order: the first entry's credentials check the
    /// health of, and list, a backend with `fallback = "hide"`.
    pub entries: Vec<PrincipalEntry>,
    pub fallback: Fallback,
}

/// One principal's credentials for one backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrincipalEntry {
    /// The key as written: a static token's name, or an OAuth subject.
    pub key: String,
    pub principal: Principal,
    /// Headers (http and sse backends) or environment variables (stdio),
    /// each replacing the backend's own of the same name.
    pub values: Vec<(String, Secret)>,
}

/// What a caller with no entry in a backend's `principals` gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// The backend is not there for it: not listed, its calls unlisted.
    Hide,
    /// The backend's own credentials, over its ordinary sessions.
    Shared,
}
