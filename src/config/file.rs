//! Stage one: what the operator wrote. Every field is optional so that the
//! build stage can tell "absent" (default) from "written" (provenance) and
//! can report a missing key by name instead of serde's generic message.
//! Unknown keys are rejected here; no I/O and no environment access happen
//! in this stage.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use indexmap::IndexMap;
use serde::Deserialize;
use toml::de::{DeTable, DeValue};

use super::duration::FileDuration;
pub(super) use super::sandbox::FileSandbox;

pub(super) const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 7400));
pub(super) const DEFAULT_SESSION_IDLE_TTL: Duration = Duration::from_secs(30 * 60);
pub(super) const DEFAULT_MAX_SESSIONS: usize = 10_000;
pub(super) const DEFAULT_MAX_SESSIONS_PER_PRINCIPAL: usize = 1_000;
pub(super) const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
pub(super) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
pub(super) const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
pub(super) const DEFAULT_SESSION_MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// Where sealed session keys come from.
pub(super) const SESSION_KEY_ENV: &str = "SLUICE_SESSION_KEY";
pub(super) const DEFAULT_SETTLE_TIMEOUT: Duration = Duration::from_secs(3);
pub(super) const DEFAULT_LIST_PAGE_SIZE: usize = 1_000;
pub(super) const DEFAULT_MAX_BATCH_ITEMS: usize = 256;
pub(super) const DEFAULT_MAX_CONNECTIONS: usize = 8_192;
pub(super) const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
pub(super) const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
pub(super) const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
pub(super) const DEFAULT_METRICS_PATH: &str = "/metrics";
pub(super) const DEFAULT_SUMMARY_INTERVAL: Duration = Duration::from_secs(15 * 60);
pub(super) const DEFAULT_BACKEND_MAX_SESSIONS: usize = 64;
pub(super) const DEFAULT_BACKEND_IDLE_TTL: Duration = Duration::from_secs(10 * 60);
pub(super) const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(15);
pub(super) const DEFAULT_NAMESPACE: &str = "default";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    #[serde(default)]
    pub(super) server: FileServer,
    pub(super) auth: Option<FileAuth>,
    #[serde(default)]
    pub(super) metrics: FileMetrics,
    pub(super) cluster: Option<FileCluster>,
    #[serde(default)]
    pub(super) limits: FileLimits,
    pub(super) tracing: Option<FileTracing>,
    pub(super) defaults: Option<FileDefaults>,
    #[serde(default)]
    pub(super) backends: IndexMap<String, FileBackend>,
    #[serde(default)]
    pub(super) namespaces: IndexMap<String, FileNamespace>,
}

impl File {
    /// Puts every table-backed map back in file order. The `toml` crate
    /// (without its `preserve_order` feature) hands tables over sorted by
    /// key, whatever map type they land in, so the order is recovered from
    /// where each key first appears in the parsed document.
    pub(super) fn restore_order(&mut self, doc: &DeTable<'_>) {
        let backends = sub(doc, "backends");
        by_position(&mut self.backends, backends);
        by_position(&mut self.namespaces, sub(doc, "namespaces"));
        for (name, b) in &mut self.backends {
            let table = backends.and_then(|t| sub(t, name));
            if let Some(env) = &mut b.env {
                by_position(env, table.and_then(|t| sub(t, "env")));
            }
            if let Some(headers) = &mut b.headers {
                by_position(headers, table.and_then(|t| sub(t, "headers")));
            }
            if let Some(tools) = &mut b.tools {
                let rename = table
                    .and_then(|t| sub(t, "tools"))
                    .and_then(|t| sub(t, "rename"));
                by_position(&mut tools.rename, rename);
            }
        }
    }
}

fn sub<'a, 'i>(table: &'a DeTable<'i>, key: &str) -> Option<&'a DeTable<'i>> {
    match table.get(key)?.get_ref() {
        DeValue::Table(t) => Some(t),
        _ => None,
    }
}

fn by_position<V>(map: &mut IndexMap<String, V>, table: Option<&DeTable<'_>>) {
    let Some(table) = table else {
        return;
    };
    map.sort_by_cached_key(|key, _| {
        table
            .get_key_value(key.as_str())
            .map_or(usize::MAX, |(k, _)| k.span().start)
    });
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileServer {
    pub(super) listen: Option<String>,
    pub(super) sessions: Option<FileSessionMode>,
    pub(super) session_ids: Option<FileSessionIdMode>,
    pub(super) session_idle_ttl: Option<FileDuration>,
    pub(super) session_max_lifetime: Option<FileDuration>,
    pub(super) max_sessions: Option<usize>,
    pub(super) max_sessions_per_principal: Option<usize>,
    pub(super) max_body_bytes: Option<usize>,
    pub(super) allowed_origins: Option<Vec<String>>,
    pub(super) request_timeout: Option<FileDuration>,
    pub(super) shutdown_grace: Option<FileDuration>,
    pub(super) settle_timeout: Option<FileDuration>,
    pub(super) list_page_size: Option<usize>,
    pub(super) max_batch_items: Option<usize>,
    pub(super) max_connections: Option<usize>,
    pub(super) max_connections_per_peer: Option<usize>,
    pub(super) header_read_timeout: Option<FileDuration>,
    pub(super) body_read_timeout: Option<FileDuration>,
    pub(super) write_timeout: Option<FileDuration>,
    pub(super) max_inflight_body_bytes: Option<usize>,
    pub(super) tls: Option<FileTls>,
    /// The gateway's own URL as browsers reach it (the authorization code
    /// flow's callback and start URLs are under it).
    pub(super) public_url: Option<String>,
}

/// `[server] tls = { cert_file, key_file }`: PEM files, both required
/// (optional here so that a missing one is named by its key).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileTls {
    pub(super) cert_file: Option<PathBuf>,
    pub(super) key_file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileAuth {
    pub(super) bearer_tokens_env: Option<String>,
    pub(super) oauth: Option<FileOAuth>,
    /// A static token's principal name (`NAME=TOKEN`'s NAME) -> its scopes.
    pub(super) token_scopes: Option<IndexMap<String, Vec<String>>>,
}

/// `[auth] oauth = { ... }`: the gateway as an OAuth 2.1 resource server.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileOAuth {
    pub(super) issuer: Option<String>,
    pub(super) audience: Option<String>,
    pub(super) jwks_url: Option<String>,
    pub(super) required_scopes: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileCluster {
    pub(super) redis_url: Option<String>,
    pub(super) redis_password_env: Option<String>,
    pub(super) redis_ca_file: Option<PathBuf>,
    pub(super) redis_client_cert_file: Option<PathBuf>,
    pub(super) redis_client_key_file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileLimits {
    pub(super) requests_per_second: Option<u32>,
    pub(super) burst: Option<u32>,
    pub(super) max_concurrent_requests: Option<usize>,
    pub(super) max_streams_per_principal: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileTracing {
    pub(super) otlp_endpoint: Option<String>,
    pub(super) sampling_ratio: Option<f64>,
    pub(super) service_name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileMetrics {
    pub(super) path: Option<String>,
    pub(super) token_env: Option<String>,
    pub(super) summary_interval: Option<FileDuration>,
}

/// Holds the keys of every transport; the build stage rejects the keys that
/// do not belong to the chosen one with a message naming both.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileBackend {
    pub(super) transport: Option<FileTransport>,
    pub(super) command: Option<String>,
    pub(super) args: Option<Vec<String>>,
    pub(super) env: Option<IndexMap<String, String>>,
    pub(super) inherit_env: Option<Vec<String>>,
    pub(super) cwd: Option<PathBuf>,
    pub(super) url: Option<String>,
    pub(super) headers: Option<IndexMap<String, String>>,
    pub(super) isolation: Option<FileIsolation>,
    pub(super) max_sessions: Option<usize>,
    pub(super) idle_ttl: Option<FileDuration>,
    pub(super) request_timeout: Option<FileDuration>,
    pub(super) health_interval: Option<FileDuration>,
    pub(super) tools: Option<FileTools>,
    pub(super) roots: Option<Vec<String>>,
    pub(super) oauth: Option<FileBackendOAuth>,
    /// A proxy URL, or "none"; unset: the environment's.
    pub(super) proxy: Option<String>,
    /// `[backends.NAME.principals.PRINCIPAL]`: each principal's own
    /// credentials for this backend, by its name or OAuth subject.
    pub(super) principals: Option<IndexMap<String, FilePrincipal>>,
    /// What a principal with no entry in `principals` gets.
    pub(super) fallback: Option<FileFallback>,
    /// `oauth.flow = "authorization_code"`: principals' grants kept at once.
    pub(super) max_grants: Option<usize>,
    /// stdio: the kernel's bounds on the child; replaces `[defaults] sandbox`.
    pub(super) sandbox: Option<FileSandbox>,
}

/// `[defaults]`: what every backend gets unless it says otherwise.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileDefaults {
    /// For every stdio backend without a `sandbox` of its own.
    pub(super) sandbox: Option<FileSandbox>,
}

/// One principal's credentials for a backend: `headers` for http and sse
/// backends, `env` for stdio ones (its own child).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FilePrincipal {
    pub(super) headers: Option<IndexMap<String, String>>,
    pub(super) env: Option<IndexMap<String, String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum FileFallback {
    Hide,
    Shared,
}

/// `[backends.NAME] oauth = { ... }`: the gateway's own token for an HTTP
/// backend, by the client credentials grant.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileBackendOAuth {
    /// `client_credentials` (the default) or `authorization_code`.
    pub(super) flow: Option<FileOAuthFlow>,
    pub(super) token_url: Option<String>,
    pub(super) client_id: Option<String>,
    pub(super) client_secret_env: Option<String>,
    pub(super) scopes: Option<Vec<String>>,
    pub(super) resource: Option<String>,
    pub(super) exchange: Option<FileTokenExchange>,
}

/// `[backends.NAME] oauth.flow`: whose token the backend gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum FileOAuthFlow {
    /// The gateway's own (the client credentials grant).
    ClientCredentials,
    /// Each principal's, from its consent in a browser.
    AuthorizationCode,
}

/// `[backends.NAME] oauth.exchange = { ... }`: calls made for a client carry
/// a token exchanged for the client's own (RFC 8693).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileTokenExchange {
    pub(super) audience: Option<String>,
    pub(super) resource: Option<String>,
    pub(super) scopes: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileTools {
    pub(super) include: Option<Vec<String>>,
    #[serde(default)]
    pub(super) exclude: Vec<String>,
    #[serde(default)]
    pub(super) rename: IndexMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileNamespace {
    #[serde(default)]
    pub(super) backends: Vec<String>,
    pub(super) prefix: Option<FilePrefix>,
    pub(super) require_scopes: Option<Vec<String>>,
    pub(super) tool_scopes: Option<IndexMap<String, Vec<String>>>,
    pub(super) discovery: Option<FileDiscovery>,
    pub(super) pinned: Option<Vec<String>>,
    pub(super) expose_found: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum FileDiscovery {
    List,
    Search,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum FileSessionMode {
    Auto,
    Stateless,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum FileSessionIdMode {
    Table,
    Sealed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum FileTransport {
    Stdio,
    Http,
    Sse,
}

impl FileTransport {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::Http => "http",
            Self::Sse => "sse",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum FileIsolation {
    Shared,
    PerSession,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum FilePrefix {
    Always,
    Never,
}
