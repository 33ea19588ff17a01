//! `[auth]`: static bearer tokens, OAuth access tokens, scope names.

use super::super::file::{self, FileAuth};
use super::super::{AuthSettings, OAuthSettings, Secret, StaticToken};
use super::{Builder, absolute_url};
use crate::vocab::PrincipalName;

/// Why these are not scope names as OAuth spells them (RFC 6749 section
/// 3.3: no spaces, no quotes or backslashes).
fn not_scopes(scopes: &[String]) -> Option<String> {
    let bad = scopes
        .iter()
        .find(|s| s.is_empty() || s.contains([' ', '"', '\\']) || s.contains(char::is_control))?;
    Some(format!(
        "`{bad}` is not a scope (no spaces, quotes or backslashes)"
    ))
}

/// How to move from positional keys to names, with the operator's own
/// variable.
fn migration(var: &str) -> String {
    format!(
        "Name the tokens, {var}=alice=tok-a,bob=tok-b, then key token_scopes by those names: \
         token_scopes = {{ alice = [\"mcp:admin\"], bob = [\"mcp:read\"] }}"
    )
}

/// The names of `tokens`, for a message about a key that names none.
pub(super) fn named(tokens: &[StaticToken]) -> String {
    let named: Vec<&str> = tokens
        .iter()
        .filter_map(|t| t.name.as_ref().map(PrincipalName::as_str))
        .collect();
    if named.is_empty() {
        "none is named".to_owned()
    } else {
        format!("named: {}", named.join(", "))
    }
}

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
                scoped_tokens: false,
                oauth,
            });
        };
        let Some(value) = self.env.var(&var) else {
            self.setting(
                "auth.bearer_tokens_env",
                format!("environment variable `{var}` is not set"),
            );
            // Its keys can still be wrong whatever the tokens are.
            if let Some(by) = &a.token_scopes {
                for key in by.keys() {
                    self.scope_key(key, &var);
                }
            }
            return None;
        };
        let mut tokens = self.static_tokens(&var, &value)?;
        let scoped_tokens = a.token_scopes.is_some();
        if let Some(by) = a.token_scopes {
            self.token_scopes(by, &var, &mut tokens);
        }
        Some(AuthSettings {
            tokens,
            scoped_tokens,
            oauth,
        })
    }

    /// The entries of `bearer_tokens_env`, comma-separated: `NAME=TOKEN`,
    /// or a bare token. An entry is named when the text before its first
    /// `=` is a principal name and the text after it is a token (not
    /// empty, not starting with `=`); otherwise the whole entry is one
    /// unnamed token, so a token ending in base64 padding (`c2VjcmV0==`)
    /// stays whole. Any token, `=` and all, can be named: `bob=a=b` is
    /// bob's token `a=b`. No message quotes a token.
    fn static_tokens(&mut self, var: &str, value: &str) -> Option<Vec<StaticToken>> {
        let tokens: Vec<StaticToken> = value
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|entry| {
                let named = entry.split_once('=').and_then(|(name, token)| {
                    let token = token.trim();
                    let name = PrincipalName::new(name.trim()).ok()?;
                    (!token.is_empty() && !token.starts_with('=')).then_some((name, token))
                });
                match named {
                    Some((name, token)) => StaticToken {
                        name: Some(name),
                        token: Secret::new(token),
                        scopes: Vec::new(),
                    },
                    None => StaticToken {
                        name: None,
                        token: Secret::new(entry),
                        scopes: Vec::new(),
                    },
                }
            })
            .collect();
        if tokens.is_empty() {
            self.setting(
                "auth.bearer_tokens_env",
                format!("environment variable `{var}` holds no tokens"),
            );
            return None;
        }
        let shown = |i: usize| tokens[i].principal(i).to_string();
        let mut problems = Vec::new();
        for (i, t) in tokens.iter().enumerate() {
            let Some(j) = tokens[..i].iter().position(|earlier| {
                earlier.token.expose() == t.token.expose()
                    || (earlier.name.is_some() && earlier.name == t.name)
            }) else {
                continue;
            };
            problems.push(if tokens[j].name.is_some() && tokens[j].name == t.name {
                format!(
                    "`{var}` names `{}` twice (each name is one principal)",
                    shown(i)
                )
            } else {
                format!(
                    "`{var}` holds the same token twice ({} and {}): one token is one principal",
                    shown(j),
                    shown(i)
                )
            });
        }
        for p in problems {
            self.setting("auth.bearer_tokens_env", p);
        }
        Some(tokens)
    }

    /// `token_scopes`: each key names an entry of `bearer_tokens_env`, and
    /// every entry is named, so that scopes follow the principal, never a
    /// position (which moves when a token before it is retired).
    fn token_scopes(
        &mut self,
        by: indexmap::IndexMap<String, Vec<String>>,
        var: &str,
        tokens: &mut [StaticToken],
    ) {
        let unnamed: Vec<String> = tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| t.name.is_none())
            .map(|(i, t)| t.principal(i).to_string())
            .collect();
        if !unnamed.is_empty() {
            self.setting(
                "auth.token_scopes",
                format!(
                    "every entry of `{var}` needs a name when token_scopes is set; {} {} \
                     none. {}",
                    unnamed.join(", "),
                    if unnamed.len() == 1 { "has" } else { "have" },
                    migration(var)
                ),
            );
        }
        for (key, held) in by {
            let path = ["auth", "token_scopes", key.as_str()];
            // By path: a name may hold a `.`.
            if let Some(why) = not_scopes(&held) {
                self.at_key(&path, why);
            }
            if !self.scope_key(&key, var) {
                continue;
            }
            match tokens
                .iter_mut()
                .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == key))
            {
                Some(t) => t.scopes = held,
                None => {
                    let named = named(tokens);
                    self.at_key(
                        &path,
                        format!("no entry of `{var}` is named `{key}` ({named})"),
                    );
                }
            }
        }
    }

    /// Whether a `token_scopes` key can name a principal at all; a
    /// position (`token#0`) is refused with how to name the tokens instead.
    fn scope_key(&mut self, key: &str, var: &str) -> bool {
        let path = ["auth", "token_scopes", key];
        if key.starts_with("token#") {
            self.at_key(
                &path,
                format!(
                    "a token's position is no principal: it changes when a token before it \
                     is retired, and its scopes would pass to the next one. {}",
                    migration(var)
                ),
            );
            return false;
        }
        if let Err(e) = PrincipalName::new(key) {
            self.at_key(&path, e);
            return false;
        }
        true
    }

    /// Scope names as OAuth spells them.
    pub(super) fn scopes(&mut self, key: &str, scopes: Vec<String>) -> Vec<String> {
        if let Some(why) = not_scopes(&scopes) {
            self.setting(key, why);
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
