//! `[backends.NAME.principals.PRINCIPAL]` and `fallback`: each principal's
//! own credentials for a backend (headers for http and sse, environment
//! variables for stdio), keyed by a static token's name or an OAuth
//! subject, and what a caller with no entry gets.

use super::super::file::{FileBackend, FileFallback, FilePrincipal, FileTransport};
use super::super::{AuthSettings, Fallback, PrincipalCredentials, PrincipalEntry, Secret};
use super::Builder;
use crate::vocab::{Principal, PrincipalName};

impl Builder<'_> {
    /// The backend's per-principal credentials (Some(None): it has none);
    /// None when they are wrong.
    pub(super) fn principals(
        &mut self,
        name: &str,
        kind: FileTransport,
        b: &FileBackend,
        auth: Option<&AuthSettings>,
    ) -> Option<Option<PrincipalCredentials>> {
        let section = self.syntax.backends();
        let Some(by) = &b.principals else {
            if b.fallback.is_some() {
                self.at_key(
                    &[section, name, "fallback"],
                    "applies only to a backend with `principals` (who gets the backend's own \
                     credentials when a principal has no entry)",
                );
                return None;
            }
            return Some(None);
        };
        let at = [section, name, "principals"];
        if by.is_empty() {
            self.at_key(&at, "names no principal");
            return None;
        }
        if b.oauth.is_some() {
            self.at_key(
                &at,
                "cannot be combined with `oauth` (the gateway's own token): each principal's \
                 entry carries its own credentials",
            );
            return None;
        }
        if auth.is_none() && !self.has_auth {
            self.at_key(
                &at,
                "per-principal credentials need [auth]: without it every caller is anonymous",
            );
        }
        // (With [auth] wrong, that is said; the entries are still checked.)
        let mut entries = Vec::new();
        let mut ok = auth.is_some();
        for (who, p) in by {
            let path = [section, name, "principals", who.as_str()];
            let principal = auth.and_then(|auth| self.principal_of(&path, who, auth));
            let values = self.principal_values(name, kind, who, p);
            match (principal, values) {
                (Some(principal), Some(values)) => entries.push(PrincipalEntry {
                    key: who.clone(),
                    principal,
                    values,
                }),
                _ => ok = false,
            }
        }
        let fallback = match b.fallback {
            Some(FileFallback::Shared) => Fallback::Shared,
            Some(FileFallback::Hide) | None => Fallback::Hide,
        };
        ok.then_some(Some(PrincipalCredentials { entries, fallback }))
    }

    /// The principal a `principals` key names: a static token's name, else
    /// (with `[auth] oauth`) an OAuth subject, the token's `sub` claim.
    fn principal_of(&mut self, path: &[&str], key: &str, auth: &AuthSettings) -> Option<Principal> {
        let named =
            |t: &&super::super::StaticToken| t.name.as_ref().is_some_and(|n| n.as_str() == key);
        if auth.tokens.iter().any(|t| named(&t)) {
            return PrincipalName::new(key).ok().map(Principal::Named);
        }
        if key.starts_with("token#") {
            self.at_key(
                path,
                "a token's position is no principal (it changes when a token before it is \
                 retired): name the tokens in bearer_tokens_env, NAME=TOKEN, and key this by NAME",
            );
            return None;
        }
        if let Some(o) = &auth.oauth {
            return Some(Principal::subject(&o.issuer, key));
        }
        let named = super::auth::named(&auth.tokens);
        self.at_key(
            path,
            format!(
                "names no principal: no entry of [auth] bearer_tokens_env is named `{key}` \
                 ({named})"
            ),
        );
        None
    }

    /// A principal's headers (http, sse) or environment (stdio), expanded;
    /// the other transport's key is refused by name.
    fn principal_values(
        &mut self,
        name: &str,
        kind: FileTransport,
        who: &str,
        p: &FilePrincipal,
    ) -> Option<Vec<(String, Secret)>> {
        let section = self.syntax.backends();
        let at = [section, name, "principals", who];
        let which = format!("{} = \"{}\"", self.syntax.transport(), kind.as_str());
        let (wrong, takes) = match kind {
            FileTransport::Stdio => (("headers", p.headers.is_some()), "env"),
            FileTransport::Http | FileTransport::Sse => (("env", p.env.is_some()), "headers"),
        };
        if wrong.1 {
            let mut path = at.to_vec();
            path.push(wrong.0);
            self.at_key(
                &path,
                format!("not allowed with {which} (a principal's credentials here are `{takes}`)"),
            );
            return None;
        }
        match kind {
            FileTransport::Http | FileTransport::Sse => {
                let mut path = at.to_vec();
                path.push("headers");
                self.headers(&path, p.headers.as_ref(), Some(who))
            }
            FileTransport::Stdio => {
                let mut env = Vec::new();
                let mut ok = true;
                for (key, value) in p.env.iter().flatten() {
                    let path = [section, name, "principals", who, "env", key.as_str()];
                    if key.is_empty() || key.contains(['=', '\0']) {
                        self.at_key(&path, "not a valid environment variable name");
                        ok = false;
                    }
                    match self.expand_for(&path, value, Some(who)) {
                        Some(v) if v.contains('\0') => {
                            self.at_key(&path, "value contains a NUL");
                            ok = false;
                        }
                        Some(v) => env.push((key.clone(), Secret::new(v))),
                        None => ok = false,
                    }
                }
                ok.then_some(env)
            }
        }
    }
}
