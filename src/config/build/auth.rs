//! `[auth]`: static bearer tokens, OAuth access tokens, scope names.

use super::super::file::{self, FileAuth};
use super::super::{AuthSettings, OAuthSettings, Secret};
use super::{Builder, absolute_url};

impl Builder<'_> {
    pub(super) fn auth(&mut self, a: FileAuth) -> Option<AuthSettings> {
        let oauth = a.oauth.and_then(|o| self.oauth(o));
        let var = a.bearer_tokens_env.filter(|v| !v.trim().is_empty());
        let Some(var) = var else {
            if oauth.is_none() {
                self.setting(
                    "auth.bearer_tokens_env",
                    "[auth] needs bearer_tokens_env (the environment variable holding the \
                     bearer tokens), oauth, or both",
                );
                return None;
            }
            if a.token_scopes.is_some() {
                self.setting(
                    "auth.token_scopes",
                    "scopes for static tokens need bearer_tokens_env",
                );
            }
            return Some(AuthSettings {
                tokens: Vec::new(),
                token_scopes: None,
                oauth,
            });
        };
        let Some(value) = self.env.var(&var) else {
            self.setting(
                "auth.bearer_tokens_env",
                format!("environment variable `{var}` is not set"),
            );
            return None;
        };
        let tokens: Vec<Secret> = value
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(Secret::new)
            .collect();
        if tokens.is_empty() {
            self.setting(
                "auth.bearer_tokens_env",
                format!("environment variable `{var}` holds no tokens"),
            );
            return None;
        }
        let token_scopes = a.token_scopes.map(|by| self.token_scopes(by, tokens.len()));
        Some(AuthSettings {
            tokens,
            token_scopes,
            oauth,
        })
    }

    /// `token_scopes`, by token index: each key a static token's principal
    /// (`token#N`, N from 0 in `bearer_tokens_env`'s order), each token not
    /// named holding no scope.
    fn token_scopes(
        &mut self,
        by: indexmap::IndexMap<String, Vec<String>>,
        tokens: usize,
    ) -> Vec<Vec<String>> {
        let mut scopes = vec![Vec::new(); tokens];
        for (principal, held) in by {
            let key = format!("auth.token_scopes.{principal}");
            let held = self.scopes(&key, held);
            match principal
                .strip_prefix("token#")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n < tokens)
            {
                Some(i) => scopes[i] = held,
                None => self.setting(
                    &key,
                    format!(
                        "not a static token's principal: token#0 to token#{} (their order in bearer_tokens_env)",
                        tokens.saturating_sub(1)
                    ),
                ),
            }
        }
        scopes
    }

    /// Scope names as OAuth spells them (RFC 6749 section 3.3: no spaces,
    /// no quotes or backslashes).
    pub(super) fn scopes(&mut self, key: &str, scopes: Vec<String>) -> Vec<String> {
        if let Some(bad) = scopes
            .iter()
            .find(|s| s.is_empty() || s.contains([' ', '"', '\\']) || s.contains(char::is_control))
        {
            self.setting(
                key,
                format!("`{bad}` is not a scope (no spaces, quotes or backslashes)"),
            );
        }
        scopes
    }

    fn oauth(&mut self, o: file::FileOAuth) -> Option<OAuthSettings> {
        let issuer = o.issuer.filter(|i| !i.trim().is_empty());
        let audience = o.audience.filter(|a| !a.trim().is_empty());
        let (Some(issuer), Some(audience)) = (issuer, audience) else {
            self.setting(
                "auth.oauth",
                "needs an issuer (the authorization server's issuer URL) and an audience \
                 (this gateway's resource URL, e.g. https://mcp.example.com/mcp)",
            );
            return None;
        };
        let mut ok = true;
        if absolute_url(&issuer).is_err() {
            self.setting(
                "auth.oauth.issuer",
                format!("`{issuer}` must be an http:// or https:// URL"),
            );
            ok = false;
        }
        let audience = match absolute_url(&audience) {
            Ok(_) => Some(audience),
            Err(why) => {
                self.setting("auth.oauth.audience", why);
                None
            }
        };
        let jwks_url = match o.jwks_url.as_deref().map(absolute_url) {
            None => None,
            Some(Ok(uri)) => Some(uri),
            Some(Err(why)) => {
                self.setting("auth.oauth.jwks_url", why);
                ok = false;
                None
            }
        };
        let required_scopes = self.scopes(
            "auth.oauth.required_scopes",
            o.required_scopes.unwrap_or_default(),
        );
        Some(OAuthSettings {
            issuer,
            audience: audience.filter(|_| ok)?,
            jwks_url,
            required_scopes,
            proxy: self.env_proxy(),
        })
    }
}
