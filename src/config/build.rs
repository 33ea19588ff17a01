//! Stage two: file types (with environment overrides applied) to runtime
//! types. Every check records an `Issue` and carries on with a default, so
//! one run reports every problem; the result is `Ok` only when none was
//! found. Secrets and `${VAR}` references are resolved here, through `Env`.
//!
//! A table at a time: `[server]` (`server`), `[auth]` (`auth`), backends
//! and namespaces (`backend`), `[metrics]`, `[limits]`, `[cluster]` and
//! `[tracing]` (`operations`).

use std::fmt::Display;
use std::time::Duration;

use super::duration::FileDuration;
use super::env::Env;
use super::error::{At, Issue, dotted};
use super::file::File;
use super::{BackendConfig, Config, SecretVars, Source};

mod auth;
mod backend;
mod code_flow;
mod discovery;
mod operations;
mod principals;
mod sandbox;
mod server;

pub(super) const LOOPBACK_ONLY: &str =
    "without [auth] the gateway must listen on loopback (add [auth] or use 127.0.0.1 / [::1])";

/// Which surface syntax the file used, so messages name keys as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Syntax {
    Toml,
    Desktop,
}

impl Syntax {
    pub(super) fn backends(self) -> &'static str {
        match self {
            Self::Toml => "backends",
            Self::Desktop => "mcpServers",
        }
    }

    pub(super) fn transport(self) -> &'static str {
        match self {
            Self::Toml => "transport",
            Self::Desktop => "type",
        }
    }
}

/// The config, with defaults in place of what is wrong; every problem is
/// added to `issues` (the config is good only if none was).
pub(super) fn build(
    file: File,
    syntax: Syntax,
    env: &dyn Env,
    provenance: &[(String, Source)],
    issues: &mut Vec<Issue>,
) -> Config {
    let mut b = Builder {
        env,
        syntax,
        provenance,
        issues: std::mem::take(issues),
        secrets: secret_vars(&file, syntax),
        proxy_reported: false,
        has_auth: file.auth.is_some(),
        public_url: None,
        default_sandbox: file.defaults.as_ref().and_then(|d| d.sandbox.clone()),
    };
    let has_auth = b.has_auth;
    // From what the file asks for, not from what was built: an [auth]
    // refused (its token variable unset, say) is reported once, not again
    // as every namespace's scopes.
    let scoped = file
        .auth
        .as_ref()
        .is_some_and(|a| a.oauth.is_some() || a.token_scopes.is_some());
    let server = b.server(file.server, has_auth);
    b.public_url = server.public_url.clone();
    let auth = file.auth.and_then(|a| b.auth(a));
    let metrics = b.metrics(file.metrics);
    let limits = b.limits(file.limits);
    if !has_auth && !server.listen.ip().is_loopback() {
        b.setting(
            "server.listen",
            format!("{}: {LOOPBACK_ONLY}", server.listen),
        );
    }

    if file.backends.is_empty() {
        b.issues.push(Issue {
            at: At::Nowhere,
            message: match syntax {
                Syntax::Toml => "no backends configured (add a [backends.<name>] table)".to_owned(),
                Syntax::Desktop => "no enabled servers in `mcpServers`".to_owned(),
            },
        });
    }
    let backends: Vec<BackendConfig> = file
        .backends
        .iter()
        .filter_map(|(name, fb)| b.backend(name, fb, server.request_timeout, auth.as_ref()))
        .collect();
    let namespaces = b.namespaces(&file.namespaces, &file.backends, &backends);

    let oauth = auth.as_ref().is_some_and(|a| a.oauth.is_some());
    for ns in &namespaces {
        for (key, used) in [
            ("require_scopes", !ns.require_scopes.is_empty()),
            ("tool_scopes", !ns.tool_scopes.is_empty()),
        ] {
            if used && !scoped {
                b.setting(
                    &format!("namespaces.{}.{key}", ns.name),
                    "scopes need [auth] oauth or token_scopes (static tokens carry none otherwise)",
                );
            }
        }
    }
    for backend in &backends {
        if backend
            .credentials
            .as_ref()
            .is_some_and(|c| c.exchange.is_some())
            && !oauth
        {
            let section = b.syntax.backends();
            b.at_key(
                &[section, backend.name.as_str(), "oauth", "exchange"],
                "token exchange needs [auth] oauth (the client tokens it exchanges)",
            );
        }
    }
    // Replicas share grants in Redis sealed with the sessions' key ring:
    // without it (table ids) there is nothing to seal them with.
    if file.cluster.is_some() && server.session_keys.is_none() {
        for backend in backends.iter().filter(|b| b.code_flow.is_some()) {
            let section = b.syntax.backends();
            b.at_key(
                &[section, backend.name.as_str(), "oauth", "flow"],
                "with [cluster], grants are kept in Redis sealed with the sessions' key ring: \
                 set server.session_ids = \"sealed\" and SLUICE_SESSION_KEY (`sluice keygen` \
                 makes a key)",
            );
        }
    }
    let cluster = file.cluster.and_then(|c| b.cluster(c, &server));
    let tracing = file.tracing.and_then(|t| b.tracing(t));
    *issues = b.issues;
    Config {
        server,
        auth,
        metrics,
        cluster,
        limits,
        tracing,
        backends,
        namespaces,
    }
}

struct Builder<'a> {
    env: &'a dyn Env,
    syntax: Syntax,
    provenance: &'a [(String, Source)],
    issues: Vec<Issue>,
    /// The variables that hold the gateway's own secrets: never passed to a
    /// child or interpolated into what a backend gets.
    secrets: SecretVars,
    /// A bad proxy variable has been reported (once, however many use it).
    proxy_reported: bool,
    /// The file has an `[auth]` table (built or not).
    has_auth: bool,
    /// `[server] public_url`, once built.
    public_url: Option<url::Url>,
    /// `[defaults] sandbox`: for stdio backends without their own.
    default_sandbox: Option<super::file::FileSandbox>,
}

/// Every variable the config names as a secret's source, with its key.
fn secret_vars(file: &File, syntax: Syntax) -> SecretVars {
    fn named(v: &Option<String>) -> Option<&str> {
        v.as_deref().map(str::trim).filter(|v| !v.is_empty())
    }
    // The session key is `SLUICE_*`, which `SecretVars` withholds whole.
    let mut sources = Vec::new();
    let auth = file.auth.as_ref().and_then(|a| named(&a.bearer_tokens_env));
    sources.extend(auth.map(|v| (v.to_owned(), "auth.bearer_tokens_env".to_owned())));
    let metrics = named(&file.metrics.token_env);
    sources.extend(metrics.map(|v| (v.to_owned(), "metrics.token_env".to_owned())));
    let redis = file
        .cluster
        .as_ref()
        .and_then(|c| named(&c.redis_password_env));
    sources.extend(redis.map(|v| (v.to_owned(), "cluster.redis_password_env".to_owned())));
    for (name, b) in &file.backends {
        let var = b.oauth.as_ref().and_then(|o| named(&o.client_secret_env));
        let key = || dotted(&[syntax.backends(), name, "oauth", "client_secret_env"]);
        sources.extend(var.map(|v| (v.to_owned(), key())));
    }
    SecretVars::new(sources).with_principals(principal_vars(file, syntax))
}

/// Every variable a principal's credentials name, with its key and the
/// principal: that principal's alone, never a child's or another's.
fn principal_vars(file: &File, syntax: Syntax) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (name, b) in &file.backends {
        for (who, p) in b.principals.iter().flatten() {
            let values = [("headers", &p.headers), ("env", &p.env)];
            for (table, map) in values {
                for (key, value) in map.iter().flatten() {
                    let at = || dotted(&[syntax.backends(), name, "principals", who, table, key]);
                    for var in super::env::referenced(value) {
                        out.push((var.to_owned(), at(), who.clone()));
                    }
                }
            }
        }
    }
    out
}

impl Builder<'_> {
    fn at_key(&mut self, path: &[&str], message: impl Display) {
        self.issues.push(Issue {
            at: At::Key(path.iter().map(|s| (*s).to_owned()).collect()),
            message: format!("`{}`: {message}", dotted(path)),
        });
    }

    /// A problem with one array element; `shown` is how the message names it.
    fn at_item(&mut self, path: &[&str], index: usize, shown: impl Display, message: impl Display) {
        let mut at: Vec<String> = path.iter().map(|s| (*s).to_owned()).collect();
        at.push(index.to_string());
        self.issues.push(Issue {
            at: At::Key(at),
            message: format!("`{shown}`: {message}"),
        });
    }

    /// A problem with a [server]/[auth]/[metrics] value, blamed on the
    /// environment variable when one set it.
    fn setting(&mut self, key: &str, message: impl Display) {
        let var = self.provenance.iter().find_map(|(k, s)| match s {
            Source::Env(var) if k == key => Some(var.clone()),
            _ => None,
        });
        match var {
            Some(var) => self.issues.push(Issue {
                at: At::Nowhere,
                message: format!("`{key}` (set by environment variable `{var}`): {message}"),
            }),
            None => self.at_key(&key.split('.').collect::<Vec<_>>(), message),
        }
    }

    /// The environment's proxies (`http1::proxy`), for what reaches out
    /// over HTTP. A variable that cannot be used is a problem only then: a
    /// gateway of stdio backends starts whatever `http_proxy` holds.
    fn env_proxy(&mut self) -> super::Proxy {
        match super::Proxy::from_vars(|name| self.env.var(name)) {
            Ok(proxy) => proxy,
            Err(bad) => {
                if !std::mem::replace(&mut self.proxy_reported, true) {
                    self.issues.push(Issue {
                        at: At::Nowhere,
                        message: format!("environment variable `{}`: {}", bad.var, bad.why),
                    });
                }
                super::Proxy::none()
            }
        }
    }

    fn nonzero(&mut self, key: &str, value: Option<FileDuration>, default: Duration) -> Duration {
        match value {
            Some(FileDuration(d)) if d.is_zero() => {
                self.setting(key, "must not be zero");
                default
            }
            Some(FileDuration(d)) => d,
            None => default,
        }
    }

    fn positive(&mut self, key: &str, value: Option<usize>, default: usize) -> usize {
        match value {
            Some(0) => {
                self.setting(key, "must be greater than zero");
                default
            }
            Some(n) => n,
            None => default,
        }
    }
}

/// An `http://` or `https://` URL with a host.
pub(super) fn absolute_url(url: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = url.parse().map_err(|_| format!("`{url}` is not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(format!("`{url}` must be an http:// or https:// URL"));
    }
    Ok(uri)
}
