//! `[backends.NAME] oauth = { flow = "authorization_code", ... }` and
//! `max_grants`: each principal's own grant for an HTTP backend, from its
//! consent in a browser (issue 50). Needs `[server] public_url`.

use super::super::file::{FileBackend, FileOAuthFlow, FileTransport};
use super::super::{CodeFlowConfig, Secret};
use super::Builder;

/// `max_grants` when the config says nothing.
const DEFAULT_MAX_GRANTS: usize = 10_000;

impl Builder<'_> {
    /// The backend's authorization code flow (Some(None): it has none);
    /// None when its keys are wrong.
    pub(super) fn code_flow(
        &mut self,
        name: &str,
        kind: FileTransport,
        b: &FileBackend,
    ) -> Option<Option<CodeFlowConfig>> {
        let section = self.syntax.backends();
        let o = match &b.oauth {
            Some(o) if o.flow == Some(FileOAuthFlow::AuthorizationCode) => o,
            _ => {
                if b.max_grants.is_some() {
                    self.at_key(
                        &[section, name, "max_grants"],
                        "applies only with oauth.flow = \"authorization_code\"",
                    );
                    return None;
                }
                return Some(None);
            }
        };
        let at = [section, name, "oauth"];
        let mut ok = true;
        if kind != FileTransport::Http {
            self.at_key(
                &at,
                "flow = \"authorization_code\" needs transport = \"http\" (Streamable HTTP)",
            );
            ok = false;
        }
        for (key, set) in [
            ("token_url", o.token_url.is_some()),
            ("resource", o.resource.is_some()),
            ("exchange", o.exchange.is_some()),
        ] {
            if set {
                self.at_key(
                    &[section, name, "oauth", key],
                    "not with flow = \"authorization_code\" (the backend's metadata says where \
                     its authorization server is)",
                );
                ok = false;
            }
        }
        if b.principals.is_some() {
            self.at_key(
                &at,
                "flow = \"authorization_code\" cannot be combined with `principals`: each \
                 principal's grant is its credentials",
            );
            ok = false;
        }
        if b.headers
            .iter()
            .flatten()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        {
            self.at_key(
                &at,
                "the backend already has an Authorization header (in `headers`)",
            );
            ok = false;
        }
        if !self.has_auth {
            self.at_key(
                &at,
                "flow = \"authorization_code\" needs [auth]: grants are kept per principal, and \
                 without it every caller is anonymous",
            );
            ok = false;
        }
        let max_grants = match b.max_grants {
            Some(0) => {
                self.at_key(&[section, name, "max_grants"], "must be greater than zero");
                ok = false;
                1
            }
            n => n.unwrap_or(DEFAULT_MAX_GRANTS),
        };
        let client_id = o.client_id.clone().filter(|c| !c.is_empty());
        let client_secret = match o.client_secret_env.as_deref().filter(|v| !v.is_empty()) {
            None => None,
            Some(_) if client_id.is_none() => {
                self.at_key(
                    &[section, name, "oauth", "client_secret_env"],
                    "needs client_id (a registered client's secret is the server's to give)",
                );
                ok = false;
                None
            }
            Some(var) => match self.env.var(var) {
                Some(secret) if !secret.is_empty() => Some(Secret::new(secret)),
                _ => {
                    self.at_key(&at, format!("environment variable `{var}` is not set"));
                    ok = false;
                    None
                }
            },
        };
        let public_url = match &self.public_url {
            Some(u) => Some(u.clone()),
            None => {
                self.setting(
                    "server.public_url",
                    format!(
                        "is required by backend `{name}` (oauth.flow = \"authorization_code\"): \
                         the URL browsers reach the gateway at, for /oauth/callback"
                    ),
                );
                None
            }
        };
        if !ok {
            return None;
        }
        Some(Some(CodeFlowConfig {
            public_url: public_url?,
            client_id,
            client_secret,
            scopes: o.scopes.clone().unwrap_or_default(),
            max_grants,
        }))
    }
}
