//! Configuration, built in two stages (ripgrep's lowargs → hiargs):
//!
//! 1. `file` / `desktop`: what the operator wrote, deserialized with unknown
//!    keys rejected; then `overrides` applies `SLUICE_<SECTION>__<KEY>`
//!    environment variables to that same layer.
//! 2. `build`: validates everything, collecting every problem before
//!    failing, reads secrets and `${VAR}` references through [`Env`], and
//!    produces the runtime types below.
//!
//! Runtime types never depend on serde, and nothing outside this module sees
//! the file-stage types. SecretVars are read once, here, and travel as
//! [`Secret`], whose `Debug` never prints them.

mod build;
mod child_env;
mod describe;
mod desktop;
mod duration;

/// A duration as the config writes it (`"30s"`, `"5m"`, `"250ms"`).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    duration::parse(text)
}

/// A duration in the config's own syntax.
pub fn format_duration(d: std::time::Duration) -> String {
    duration::format(d)
}
mod env;
mod error;
mod file;
mod identity;
#[doc(hidden)]
pub mod keys;
mod lint;
mod overrides;
mod reading;
mod sandbox;
mod tls;
mod tools;

#[cfg(test)]
mod tests;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::http1::proxy::Proxy;
use crate::vocab::{BackendName, NamespaceName, Principal, PrincipalName, UnnamedToken};

pub use describe::describe;

/// The namespace of `/mcp` when none are configured.
pub const DEFAULT_NAMESPACE: &str = file::DEFAULT_NAMESPACE;
pub use child_env::{Inherit, SecretVars};
pub use env::{Env, ProcessEnv};
pub use error::ConfigError;
pub use identity::{CodeFlowConfig, Fallback, PrincipalCredentials, PrincipalEntry};
/// Where a command is, as `execvp` finds it (`sluice check` and the sandbox).
pub(crate) use lint::resolve as resolve_command;
pub use sandbox::{NetworkAccess, Sandbox, format_bytes};
pub use tls::{TlsError, TlsFiles, provider as tls_provider};
pub(crate) use tools::glob;
pub use tools::{InvalidToolFilter, ToolFilter, ToolScopes};

use reading::Reading;

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub server: ServerSettings,
    pub auth: Option<AuthSettings>,
    pub metrics: MetricsSettings,
    /// Cluster mode: where the replicas meet (a Redis URL, which may hold
    /// a password). None: one node.
    pub cluster: Option<ClusterSettings>,
    pub limits: LimitsSettings,
    /// OpenTelemetry traces over OTLP; None: off.
    pub tracing: Option<TracingSettings>,
    /// In file order.
    pub backends: Vec<BackendConfig>,
    /// Never empty: without configured namespaces there is one `default`
    /// namespace holding every backend, prefixed.
    pub namespaces: Vec<NamespaceConfig>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerSettings {
    pub listen: SocketAddr,
    pub sessions: SessionMode,
    pub session_ids: SessionIdMode,
    /// Sealed ids: the value of `SLUICE_SESSION_KEY` (checked), None with table ids.
    pub session_keys: Option<Secret>,
    /// Sealed ids: how long an id is good for, however active its session.
    pub session_max_lifetime: Duration,
    /// Never zero: sessions are always bounded in time.
    pub session_idle_ttl: Duration,
    pub max_sessions: usize,
    /// Defaults to 1,000 with `[auth]`; without it every client is the one
    /// anonymous principal, so the default is the table's capacity.
    pub max_sessions_per_principal: usize,
    pub max_body_bytes: usize,
    pub allowed_origins: Vec<String>,
    pub request_timeout: Duration,
    pub shutdown_grace: Duration,
    /// How long after start requests wait for backends still starting.
    pub settle_timeout: Duration,
    /// Items per page of a merged list.
    pub list_page_size: usize,
    /// Items per 2025-03-26 batch.
    pub max_batch_items: usize,
    /// Client connections held at once (lowered to fit the fd limit).
    pub max_connections: usize,
    /// Client connections one address may hold (0: half of
    /// `max_connections`); past it one of its own gives way, or the new
    /// one is refused.
    pub max_connections_per_peer: usize,
    /// For a request's headers, and also how long a keep-alive connection
    /// may sit idle between requests.
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
    /// How long a write to a client may wait for it to take any bytes.
    pub write_timeout: Duration,
    /// The budget for large bodies in flight (`crate::budget`); None: a
    /// quarter of the memory this process may use.
    pub max_inflight_body_bytes: Option<std::num::NonZeroUsize>,
    /// TLS on the listener (None: plain TCP). The files were read whole
    /// and checked when the config was built; they are read again at each
    /// reload.
    pub tls: Option<TlsFiles>,
    /// `[server] public_url`: the gateway's URL as browsers reach it, for
    /// the authorization code flow (`/oauth/start/{id}`, `/oauth/callback`).
    pub public_url: Option<url::Url>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionMode {
    Auto,
    Stateless,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionIdMode {
    Table,
    Sealed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    /// Static bearer tokens, each one principal, in `bearer_tokens_env`'s
    /// order (empty with `oauth` alone).
    pub tokens: Vec<StaticToken>,
    /// Whether `token_scopes` is set: static tokens are then scoped (one it
    /// does not name holds none); without it they see every tool.
    pub scoped_tokens: bool,
    /// OAuth 2.1 access tokens (JWTs) from one issuer.
    pub oauth: Option<OAuthSettings>,
}

/// One entry of `bearer_tokens_env`: `NAME=TOKEN`, or a bare token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticToken {
    /// The principal's name; None: unnamed, shown as `token#N` and keyed
    /// by nothing (with `token_scopes` set every entry has one).
    pub name: Option<PrincipalName>,
    pub token: Secret,
    /// Its `token_scopes` (empty when unscoped or not named there).
    pub scopes: Vec<String>,
}

impl StaticToken {
    /// Who presents this token, the entry at `position`.
    pub fn principal(&self, position: usize) -> Principal {
        match &self.name {
            Some(name) => Principal::Named(name.clone()),
            None => Principal::Unnamed(UnnamedToken::new(self.token.expose(), position)),
        }
    }
}

/// `[auth] oauth`: JWT access tokens, checked against the issuer's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    /// Exactly the `iss` tokens must carry.
    pub issuer: String,
    /// The gateway's resource identifier (RFC 8707), an absolute URL: what
    /// `aud` must name, and the `resource` of its metadata (RFC 9728).
    pub audience: String,
    /// The issuer's JWKS; None: from its metadata (RFC 8414 / OIDC).
    pub jwks_url: Option<http::Uri>,
    /// Scopes every token must hold.
    pub required_scopes: Vec<String>,
    /// How the issuer's metadata and keys are fetched: the environment's
    /// proxies.
    pub proxy: Proxy,
}

/// What one principal may ask of the gateway (`[limits]`; all off by
/// default). Without `[auth]` every client is the one anonymous principal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitsSettings {
    /// Requests per second, with a burst of `burst` (in cluster mode
    /// across every replica).
    pub rate: Option<Rate>,
    /// Requests in flight at once (per replica).
    pub max_concurrent_requests: Option<std::num::NonZeroUsize>,
    /// GET streams open at once (per replica): None, the default (a
    /// quarter of the connection cap with `[auth]`, else none); `Some(0)`,
    /// none.
    pub max_streams_per_principal: Option<usize>,
}

/// `[cluster]`: the Redis replicas share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// `redis://` or `rediss://` (TLS); an ACL user and password may be in it.
    pub redis_url: Secret,
    /// From `redis_password_env` (or its `_FILE`): replaces the URL's.
    pub password: Option<Secret>,
    /// `rediss://` only. The CA to trust instead of the platform's store,
    /// and a client certificate and key (PEM), read at start.
    pub ca_file: Option<PathBuf>,
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// `[tracing]`: a span per request and per backend call, exported over
/// OTLP/HTTP (protobuf).
#[derive(Debug, Clone, PartialEq)]
pub struct TracingSettings {
    /// The collector's traces URL (`/v1/traces` added to a bare origin).
    pub otlp_endpoint: http::Uri,
    /// The share of traces a client did not sample itself that are
    /// recorded (0 to 1); a client's own sampling decision is followed.
    pub sampling_ratio: f64,
    pub service_name: String,
    /// How the collector is reached: the environment's proxies.
    pub proxy: Proxy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub per_second: std::num::NonZeroU32,
    pub burst: std::num::NonZeroU32,
}

/// A value read from the environment that must never reach a log line.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Compares without an early exit on the first differing byte, so the
    /// time taken does not reveal how much of a guessed token was right.
    pub fn matches(&self, candidate: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), candidate.as_bytes());
        let mut diff = a.len() ^ b.len();
        for (i, x) in a.iter().enumerate() {
            diff |= usize::from(x ^ b.get(i).copied().unwrap_or(!x));
        }
        diff == 0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsSettings {
    /// Starts with `/`.
    pub path: String,
    pub token: Option<Secret>,
    /// Zero disables the summary log line.
    pub summary_interval: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BackendConfig {
    pub name: BackendName,
    pub transport: Transport,
    pub isolation: Isolation,
    pub max_sessions: usize,
    pub idle_ttl: Duration,
    pub request_timeout: Duration,
    /// An HTTP backend idle this long is pinged, so a dead one is noticed
    /// before a client calls it (zero: never).
    pub health_interval: Duration,
    pub tools: ToolFilter,
    /// Roots the gateway gives a shared backend when it asks (`roots/list`);
    /// per-session backends get their own client's roots instead.
    pub roots: Vec<String>,
    /// http/sse: the gateway's own OAuth token for this backend.
    pub credentials: Option<ClientCredentials>,
    /// http/sse: the proxies its requests (its token's included) go
    /// through: its `proxy` key, else the environment's. Direct for stdio.
    pub proxy: Proxy,
    /// `[backends.NAME.principals]`: per-principal credentials (None: every
    /// caller reaches the backend with its own, shared, credentials).
    pub principals: Option<PrincipalCredentials>,
    /// http: `oauth.flow = "authorization_code"`: each principal's own
    /// grant, from its consent in a browser.
    pub code_flow: Option<CodeFlowConfig>,
}

/// `[backends.NAME] oauth`: a token the gateway fetches for itself (the
/// client credentials grant, RFC 6749 section 4.4) and refreshes before it
/// expires. Never the client's token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCredentials {
    pub token_url: http::Uri,
    pub client_id: String,
    pub client_secret: Secret,
    pub scopes: Vec<String>,
    /// The RFC 8707 `resource` asked for.
    pub resource: Option<String>,
    /// Calls made for a client carry a token exchanged for its own.
    pub exchange: Option<TokenExchange>,
}

/// `[backends.NAME] oauth.exchange`: the RFC 8693 token exchange of a
/// client's verified access token for one meant for this backend, asked
/// with the same client credentials. The backend sees who the user is; the
/// client's own token still never reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenExchange {
    pub audience: Option<String>,
    /// Defaults to the backend's `resource`.
    pub resource: Option<String>,
    /// Defaults to the backend's `scopes`.
    pub scopes: Vec<String>,
}

/// `Debug` (in `describe.rs`) hides argument and `env` values and URL
/// credentials: they may hold interpolated secrets.
#[derive(Clone, PartialEq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        /// Which of the gateway's own variables the child gets.
        inherit: Inherit,
        cwd: Option<PathBuf>,
        /// The kernel's bounds on the child (None: unbounded).
        sandbox: Option<Box<Sandbox>>,
    },
    Http {
        url: String,
        headers: Vec<(String, Secret)>,
    },
    /// The deprecated 2024-11-05 HTTP+SSE transport.
    Sse {
        url: String,
        headers: Vec<(String, Secret)>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    Shared,
    PerSession,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceConfig {
    pub name: NamespaceName,
    pub backends: Vec<BackendName>,
    pub prefix: Prefix,
    /// OAuth scopes a token needs for this namespace's endpoint, beside
    /// `[auth] oauth.required_scopes`.
    pub require_scopes: Vec<String>,
    /// OAuth scopes some of its tools need besides.
    pub tool_scopes: ToolScopes,
    /// How its clients find tools: the whole list, or a search.
    pub discovery: Discovery,
}

/// `[namespaces.NAME] discovery`: `tools/list` lists every tool, or (search)
/// the gateway's `search_tools` and `call_tool`, the pinned tools and, with
/// `expose_found`, what the session's searches found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Discovery {
    #[default]
    List,
    Search {
        /// Tools listed beside the gateway's own, by the names clients see.
        pinned: Vec<String>,
        /// A legacy session's searches add what they found to its list.
        expose_found: bool,
    },
}

impl Discovery {
    /// The gateway's own tools in search mode.
    pub const SEARCH_TOOLS: &str = "search_tools";
    pub const CALL_TOOL: &str = "call_tool";

    pub fn is_gateway_tool(name: &str) -> bool {
        name == Self::SEARCH_TOOLS || name == Self::CALL_TOOL
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefix {
    Always,
    Never,
}

/// A loaded config and where each [server], [auth] and [metrics] value came
/// from, keyed `"section.key"`.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub config: Config,
    pub provenance: Vec<(String, Source)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    File,
    /// The environment variable that set the value.
    Env(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::File => f.write_str("file"),
            Self::Env(var) => write!(f, "env {var}"),
        }
    }
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            listen: file::DEFAULT_LISTEN,
            sessions: SessionMode::Auto,
            session_ids: SessionIdMode::Table,
            session_keys: None,
            session_max_lifetime: file::DEFAULT_SESSION_MAX_LIFETIME,
            session_idle_ttl: file::DEFAULT_SESSION_IDLE_TTL,
            max_sessions: file::DEFAULT_MAX_SESSIONS,
            max_sessions_per_principal: file::DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
            max_body_bytes: file::DEFAULT_MAX_BODY_BYTES,
            allowed_origins: Vec::new(),
            request_timeout: file::DEFAULT_REQUEST_TIMEOUT,
            shutdown_grace: file::DEFAULT_SHUTDOWN_GRACE,
            settle_timeout: file::DEFAULT_SETTLE_TIMEOUT,
            list_page_size: file::DEFAULT_LIST_PAGE_SIZE,
            max_batch_items: file::DEFAULT_MAX_BATCH_ITEMS,
            max_connections: file::DEFAULT_MAX_CONNECTIONS,
            max_connections_per_peer: 0,
            header_read_timeout: file::DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: file::DEFAULT_BODY_READ_TIMEOUT,
            write_timeout: file::DEFAULT_WRITE_TIMEOUT,
            max_inflight_body_bytes: None,
            tls: None,
            public_url: None,
        }
    }
}

impl Default for MetricsSettings {
    fn default() -> Self {
        Self {
            path: file::DEFAULT_METRICS_PATH.to_owned(),
            token: None,
            summary_interval: file::DEFAULT_SUMMARY_INTERVAL,
        }
    }
}

impl Config {
    pub fn backend(&self, name: &str) -> Option<&BackendConfig> {
        self.backends.iter().find(|b| b.name.as_str() == name)
    }

    pub fn namespace(&self, name: &str) -> Option<&NamespaceConfig> {
        self.namespaces.iter().find(|n| n.name.as_str() == name)
    }

    /// The config with `namespace` alone and the backends it serves (for
    /// `sluice stdio --namespace`, which has no use for the others' children);
    /// None when it has no such namespace.
    pub fn narrowed_to(mut self, namespace: &str) -> Option<Config> {
        let served = self.namespace(namespace)?.clone();
        self.backends.retain(|b| served.backends.contains(&b.name));
        self.namespaces = vec![served];
        Some(self)
    }

    /// Applies `--listen`, which outranks the file and the environment but
    /// not the rule that an unauthenticated gateway stays on loopback.
    pub fn set_listen(&mut self, listen: SocketAddr) -> Result<(), ConfigError> {
        if self.auth.is_none() && !listen.ip().is_loopback() {
            return Err(ConfigError::single(
                "--listen",
                None,
                format!("{listen}: {}", build::LOOPBACK_ONLY),
            ));
        }
        self.server.listen = listen;
        Ok(())
    }
}

/// Reads and loads a config file: the `mcpServers` JSON form when the file
/// name ends in `.json` or the content starts with `{`, TOML otherwise.
pub fn load(path: &Path, env: &dyn Env) -> Result<Loaded, ConfigError> {
    let (origin, reading) = read(path, env)?;
    reading.into_result(&origin)
}

/// What `sluice check` reports: every problem loading finds and every
/// problem a start would meet only later (a stdio command not found, a
/// backend no namespace serves), each with its line, in line order. Ok:
/// the config, and its warnings rendered (none is an error); Err: every
/// problem, errors and warnings alike.
pub fn check(path: &Path, env: &dyn Env) -> Result<(Loaded, Vec<String>), ConfigError> {
    let (origin, reading) = read(path, env)?;
    reading.check(&origin, env)
}

fn read(path: &Path, env: &dyn Env) -> Result<(String, Reading), ConfigError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::single(&origin, None, format!("cannot read config file: {e}")))?;
    let json = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("json"))
        || text.trim_start().starts_with('{');
    let reading = match json {
        true => Reading::desktop(&text, env),
        false => Reading::toml(&text, env),
    };
    Ok((origin, reading))
}

/// Loads TOML text; `origin` names it in messages.
pub fn parse_toml(text: &str, origin: &str, env: &dyn Env) -> Result<Loaded, ConfigError> {
    Reading::toml(text, env).into_result(origin)
}

/// Loads the `mcpServers` JSON that desktop MCP clients use; `origin` names
/// it in messages.
pub fn parse_desktop(text: &str, origin: &str, env: &dyn Env) -> Result<Loaded, ConfigError> {
    Reading::desktop(text, env).into_result(origin)
}

/// The built-in config used without `--config`: the gateway's own demo
/// server as backend `demo`, everything else at its default. It is read
/// as a file would be, so `SLUICE_*__*` overrides apply to it (and a
/// misspelt one is refused) exactly as they do with `--config`.
pub fn demo(exe: PathBuf, env: &dyn Env) -> Result<Loaded, ConfigError> {
    let command = toml::Value::String(exe.to_string_lossy().into_owned());
    let text = format!(
        "[backends.demo]\ncommand = {command}\nargs = [\"demo-server\"]\n\n\
         [namespaces.{DEFAULT_NAMESPACE}]\nbackends = [\"demo\"]\n"
    );
    parse_toml(&text, "the built-in default config", env)
}
