//! Stage two: file types (with environment overrides applied) to runtime
//! types. Every check records an `Issue` and carries on with a default, so
//! one run reports every problem; the result is `Ok` only when none was
//! found. Secrets and `${VAR}` references are resolved here, through `Env`.

use std::fmt::Display;
use std::net::SocketAddr;
use std::time::Duration;

use super::duration::FileDuration;
use super::env::Env;
use super::error::{At, Issue, dotted};
use super::file::{self, File, FileAuth, FileMetrics, FileServer};
use super::{
    AuthSettings, BackendConfig, Config, LimitsSettings, MetricsSettings, OAuthSettings, Rate,
    Secret, SecretVars, ServerSettings, SessionIdMode, SessionMode, Source, TracingSettings,
};

mod backend;

pub(super) const LOOPBACK_ONLY: &str =
    "without [auth] the gateway must listen on loopback (add [auth] or use 127.0.0.1 / [::1])";

/// Which surface syntax the file used, so messages name keys as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Syntax {
    Toml,
    Desktop,
}

impl Syntax {
    fn backends(self) -> &'static str {
        match self {
            Self::Toml => "backends",
            Self::Desktop => "mcpServers",
        }
    }

    fn transport(self) -> &'static str {
        match self {
            Self::Toml => "transport",
            Self::Desktop => "type",
        }
    }
}

pub(super) fn build(
    file: File,
    syntax: Syntax,
    env: &dyn Env,
    provenance: &[(String, Source)],
    issues: Vec<Issue>,
) -> Result<Config, Vec<Issue>> {
    let mut b = Builder {
        env,
        syntax,
        provenance,
        issues,
        secrets: secret_vars(&file, syntax),
    };
    let has_auth = file.auth.is_some();
    let server = b.server(file.server, has_auth);
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
        .filter_map(|(name, fb)| b.backend(name, fb, server.request_timeout))
        .collect();
    let namespaces = b.namespaces(&file.namespaces, &file.backends, &backends);

    let oauth = auth.as_ref().is_some_and(|a| a.oauth.is_some());
    for ns in &namespaces {
        for (key, used) in [
            ("require_scopes", !ns.require_scopes.is_empty()),
            ("tool_scopes", !ns.tool_scopes.is_empty()),
        ] {
            if used && !oauth {
                b.setting(
                    &format!("namespaces.{}.{key}", ns.name),
                    "scopes need [auth] oauth (static tokens carry none)",
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
    let cluster = file.cluster.and_then(|c| b.cluster(c, &server));
    let tracing = file.tracing.and_then(|t| b.tracing(t));
    if b.issues.is_empty() {
        Ok(Config {
            server,
            auth,
            metrics,
            cluster,
            limits,
            tracing,
            backends,
            namespaces,
        })
    } else {
        Err(b.issues)
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
    for (name, b) in &file.backends {
        let var = b.oauth.as_ref().and_then(|o| named(&o.client_secret_env));
        let key = || dotted(&[syntax.backends(), name, "oauth", "client_secret_env"]);
        sources.extend(var.map(|v| (v.to_owned(), key())));
    }
    SecretVars::new(sources)
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

    fn server(&mut self, s: FileServer, has_auth: bool) -> ServerSettings {
        let d = ServerSettings::default();
        let listen = match s.listen {
            None => d.listen,
            Some(text) => text.parse::<SocketAddr>().unwrap_or_else(|_| {
                self.setting(
                    "server.listen",
                    format!("`{text}` is not an IP address and port (e.g. 127.0.0.1:7400)"),
                );
                d.listen
            }),
        };
        let allowed_origins = s.allowed_origins.unwrap_or_default();
        for origin in &allowed_origins {
            if !is_origin(origin) {
                self.setting(
                    "server.allowed_origins",
                    format!("`{origin}` is not an origin (expected scheme://host[:port])"),
                );
            }
        }
        let max_sessions = self.positive("server.max_sessions", s.max_sessions, d.max_sessions);
        // Anonymous clients are not one tenant: without auth the cap
        // would silently shrink the table to it.
        let per_principal = if has_auth {
            d.max_sessions_per_principal
        } else {
            max_sessions
        };
        let session_ids = match s.session_ids {
            Some(file::FileSessionIdMode::Sealed) => SessionIdMode::Sealed,
            Some(file::FileSessionIdMode::Table) | None => SessionIdMode::Table,
        };
        // Never a random key: one that changes with each start would end
        // every session at each restart, the very thing sealing is for.
        let session_keys = match session_ids {
            SessionIdMode::Table => None,
            SessionIdMode::Sealed => match self.env.var(file::SESSION_KEY_ENV) {
                None => {
                    self.setting(
                        "server.session_ids",
                        format!(
                            "\"sealed\" needs keys in {0} or a readable file named by {0}_FILE (generate one with `sluice keygen`)",
                            file::SESSION_KEY_ENV
                        ),
                    );
                    None
                }
                Some(value) => match crate::vocab::decode_keys(&value) {
                    Ok(_) => Some(Secret::new(value)),
                    Err(e) => {
                        self.setting(
                            "server.session_ids",
                            format!("{}: {e}", file::SESSION_KEY_ENV),
                        );
                        None
                    }
                },
            },
        };
        ServerSettings {
            listen,
            sessions: match s.sessions {
                Some(file::FileSessionMode::Stateless) => SessionMode::Stateless,
                Some(file::FileSessionMode::Auto) | None => SessionMode::Auto,
            },
            session_ids,
            session_keys,
            session_max_lifetime: self.nonzero(
                "server.session_max_lifetime",
                s.session_max_lifetime,
                d.session_max_lifetime,
            ),
            session_idle_ttl: self.nonzero(
                "server.session_idle_ttl",
                s.session_idle_ttl,
                d.session_idle_ttl,
            ),
            max_sessions,
            max_sessions_per_principal: self.positive(
                "server.max_sessions_per_principal",
                s.max_sessions_per_principal,
                per_principal,
            ),
            max_body_bytes: self.positive(
                "server.max_body_bytes",
                s.max_body_bytes,
                d.max_body_bytes,
            ),
            allowed_origins,
            request_timeout: self.nonzero(
                "server.request_timeout",
                s.request_timeout,
                d.request_timeout,
            ),
            shutdown_grace: s
                .shutdown_grace
                .map_or(d.shutdown_grace, |FileDuration(d)| d),
            settle_timeout: s
                .settle_timeout
                .map_or(d.settle_timeout, |FileDuration(d)| d),
            list_page_size: self.positive(
                "server.list_page_size",
                s.list_page_size,
                d.list_page_size,
            ),
            max_batch_items: self.positive(
                "server.max_batch_items",
                s.max_batch_items,
                d.max_batch_items,
            ),
            max_connections: self.positive(
                "server.max_connections",
                s.max_connections,
                d.max_connections,
            ),
            header_read_timeout: self.nonzero(
                "server.header_read_timeout",
                s.header_read_timeout,
                d.header_read_timeout,
            ),
            body_read_timeout: self.nonzero(
                "server.body_read_timeout",
                s.body_read_timeout,
                d.body_read_timeout,
            ),
            write_timeout: self.nonzero("server.write_timeout", s.write_timeout, d.write_timeout),
        }
    }

    fn auth(&mut self, a: FileAuth) -> Option<AuthSettings> {
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
            return Some(AuthSettings {
                tokens: Vec::new(),
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
        Some(AuthSettings { tokens, oauth })
    }

    /// Scope names as OAuth spells them (RFC 6749 section 3.3: no spaces,
    /// no quotes or backslashes).
    fn scopes(&mut self, key: &str, scopes: Vec<String>) -> Vec<String> {
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
        })
    }

    fn cluster(&mut self, c: file::FileCluster, server: &ServerSettings) -> Option<Secret> {
        let url = c.redis_url.filter(|u| !u.trim().is_empty());
        let Some(url) = url else {
            self.setting("cluster.redis_url", "[cluster] needs a redis_url");
            return None;
        };
        if !(url.starts_with("redis://")
            || url.starts_with("rediss://")
            || url.starts_with("unix://"))
        {
            // Not echoed: it may hold a password.
            self.setting(
                "cluster.redis_url",
                "must start with redis://, rediss:// or unix://",
            );
            return None;
        }
        if server.session_ids != SessionIdMode::Sealed {
            self.setting(
                "cluster.redis_url",
                "cluster mode needs server.session_ids = \"sealed\" (a table id lives in one process)",
            );
            return None;
        }
        Some(Secret::new(url))
    }

    fn tracing(&mut self, t: file::FileTracing) -> Option<TracingSettings> {
        let ratio = t.sampling_ratio.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&ratio) {
            self.setting(
                "tracing.sampling_ratio",
                format!("{ratio} is not between 0 and 1"),
            );
        }
        let service_name = t.service_name.unwrap_or_else(|| "sluice".to_owned());
        if service_name.is_empty() {
            self.setting("tracing.service_name", "must not be empty");
        }
        let Some(url) = t.otlp_endpoint else {
            self.setting(
                "tracing.otlp_endpoint",
                "[tracing] needs an otlp_endpoint (the collector's OTLP/HTTP URL)",
            );
            return None;
        };
        let otlp_endpoint = match otlp_traces_url(&url) {
            Ok(uri) => uri,
            Err(why) => {
                self.setting("tracing.otlp_endpoint", why);
                return None;
            }
        };
        Some(TracingSettings {
            otlp_endpoint,
            sampling_ratio: ratio,
            service_name,
        })
    }

    fn limits(&mut self, l: file::FileLimits) -> LimitsSettings {
        use std::num::{NonZeroU32, NonZeroUsize};
        let per_second = l.requests_per_second.and_then(NonZeroU32::new);
        let burst = match (per_second, l.burst) {
            (_, Some(0)) | (_, None) => per_second,
            (Some(_), Some(b)) => NonZeroU32::new(b),
            (None, Some(_)) => {
                self.setting("limits.burst", "a burst needs limits.requests_per_second");
                None
            }
        };
        LimitsSettings {
            rate: per_second
                .zip(burst)
                .map(|(per_second, burst)| Rate { per_second, burst }),
            max_concurrent_requests: l.max_concurrent_requests.and_then(NonZeroUsize::new),
        }
    }

    fn metrics(&mut self, m: FileMetrics) -> MetricsSettings {
        let d = MetricsSettings::default();
        let path = m.path.unwrap_or(d.path);
        if !path.starts_with('/') {
            self.setting("metrics.path", format!("`{path}` must start with `/`"));
        } else if ["/mcp", "/healthz", "/readyz", "/status"].contains(&path.as_str())
            || path.starts_with("/ns/")
        {
            self.setting(
                "metrics.path",
                format!("`{path}` is one of the gateway's own routes"),
            );
        }
        let token = match m.token_env.filter(|v| !v.trim().is_empty()) {
            None => None,
            Some(var) => match self.env.var(&var).map(|t| t.trim().to_owned()) {
                Some(t) if !t.is_empty() => Some(Secret::new(t)),
                Some(_) => {
                    self.setting(
                        "metrics.token_env",
                        format!("environment variable `{var}` is empty"),
                    );
                    None
                }
                None => {
                    self.setting(
                        "metrics.token_env",
                        format!("environment variable `{var}` is not set"),
                    );
                    None
                }
            },
        };
        MetricsSettings {
            path,
            token,
            summary_interval: m
                .summary_interval
                .map_or(d.summary_interval, |FileDuration(d)| d),
        }
    }
}

fn is_origin(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    !rest.is_empty() && !rest.contains(['/', '?', '#', ' '])
}

/// An OTLP/HTTP traces URL: `http(s)://host[:port][/path]`; a bare origin
/// gets the standard `/v1/traces` (as `OTEL_EXPORTER_OTLP_ENDPOINT` does).
fn otlp_traces_url(url: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = url.parse().map_err(|_| format!("`{url}` is not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(format!("`{url}` must be an http:// or https:// URL"));
    }
    if uri.path() != "/" {
        return Ok(uri);
    }
    format!("{}/v1/traces", url.trim_end_matches('/'))
        .parse()
        .map_err(|_| format!("`{url}` is not a URL"))
}

/// An `http://` or `https://` URL with a host.
pub(super) fn absolute_url(url: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = url.parse().map_err(|_| format!("`{url}` is not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(format!("`{url}` must be an http:// or https:// URL"));
    }
    Ok(uri)
}
