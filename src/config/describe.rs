//! `sluice check` output: the effective config and where each server
//! setting came from. It must never print a secret: tokens and header
//! values are not shown, stdio `env` shows keys only, arguments are counted
//! (they may hold interpolated `${VAR}` values), and URLs lose their
//! userinfo and query.

use std::fmt::{self, Write as _};

use super::duration::format as dur;
use super::{
    AuthSettings, Fallback, Isolation, Loaded, Prefix, PrincipalCredentials, SessionIdMode,
    SessionMode, Source, Transport,
};

pub fn describe(loaded: &Loaded) -> String {
    let c = &loaded.config;
    let s = &c.server;
    let mut text = String::from("settings:\n");
    let mut line = |key: &str, value: String| {
        let source = loaded
            .provenance
            .iter()
            .find(|(k, _)| k == key)
            .map_or(Source::Default, |(_, s)| s.clone());
        let _ = writeln!(text, "  {key:<34} {value:<24} ({source})");
    };
    line("server.listen", s.listen.to_string());
    let sessions = match s.sessions {
        SessionMode::Auto => "auto",
        SessionMode::Stateless => "stateless",
    };
    line("server.sessions", sessions.to_owned());
    let session_ids = match s.session_ids {
        SessionIdMode::Table => "table",
        SessionIdMode::Sealed => "sealed",
    };
    let session_ids = match &s.session_keys {
        // How many keys, never the keys.
        Some(keys) => format!(
            "{session_ids} ({} key(s) from SLUICE_SESSION_KEY)",
            keys.expose()
                .split(',')
                .filter(|k| !k.trim().is_empty())
                .count()
        ),
        None => session_ids.to_owned(),
    };
    line("server.session_ids", session_ids);
    line("server.session_max_lifetime", dur(s.session_max_lifetime));
    line("server.session_idle_ttl", dur(s.session_idle_ttl));
    line("server.max_sessions", s.max_sessions.to_string());
    line(
        "server.max_sessions_per_principal",
        s.max_sessions_per_principal.to_string(),
    );
    line("server.max_body_bytes", s.max_body_bytes.to_string());
    line(
        "server.allowed_origins",
        format!("[{}]", s.allowed_origins.join(", ")),
    );
    line("server.request_timeout", dur(s.request_timeout));
    line("server.shutdown_grace", dur(s.shutdown_grace));
    line("server.settle_timeout", dur(s.settle_timeout));
    line("server.list_page_size", s.list_page_size.to_string());
    line("server.max_batch_items", s.max_batch_items.to_string());
    line("server.max_connections", s.max_connections.to_string());
    let per_peer = match s.max_connections_per_peer {
        0 => format!(
            "0 (half of max_connections: {})",
            (s.max_connections / 2).max(1)
        ),
        n => n.to_string(),
    };
    line("server.max_connections_per_peer", per_peer);
    line("server.header_read_timeout", dur(s.header_read_timeout));
    line("server.body_read_timeout", dur(s.body_read_timeout));
    line("server.write_timeout", dur(s.write_timeout));
    line(
        "server.max_inflight_body_bytes",
        match s.max_inflight_body_bytes {
            Some(n) => n.to_string(),
            None => format!(
                "{} (a quarter of this machine's memory)",
                crate::budget::default_limit()
            ),
        },
    );
    if let Some(u) = &s.public_url {
        line("server.public_url", u.to_string());
    }
    // Only a config whose files were read whole gets this far.
    line(
        "server.tls",
        match &s.tls {
            None => "off (plain TCP)".to_owned(),
            Some(t) => format!(
                "on: certificate {}, key {} (read, the key the certificate's)",
                t.cert_file.display(),
                t.key_file.display()
            ),
        },
    );
    if let Some(o) = c.auth.as_ref().and_then(|a| a.oauth.as_ref()) {
        let scopes = if o.required_scopes.is_empty() {
            String::new()
        } else {
            format!(", scopes {}", o.required_scopes.join(" "))
        };
        line(
            "auth.oauth",
            format!("issuer {}, audience {}{scopes}", o.issuer, o.audience),
        );
    }
    match &c.auth {
        Some(a) if a.tokens.is_empty() => {}
        Some(a) => line(
            "auth.bearer_tokens_env",
            format!("{} token(s)", a.tokens.len()),
        ),
        // Not configured: nothing to attribute, and loopback was enforced.
        None => line("auth", "none (loopback only)".to_owned()),
    }
    line("metrics.path", c.metrics.path.clone());
    let token = if c.metrics.token.is_some() {
        "token set"
    } else {
        "no token"
    };
    line("metrics.token_env", token.to_owned());
    let interval = if c.metrics.summary_interval.is_zero() {
        "off".to_owned()
    } else {
        dur(c.metrics.summary_interval)
    };
    line("metrics.summary_interval", interval);
    let limits = &c.limits;
    line(
        "limits.requests_per_second",
        limits
            .rate
            .map_or_else(|| "off".to_owned(), |r| r.per_second.to_string()),
    );
    line(
        "limits.burst",
        limits
            .rate
            .map_or_else(|| "off".to_owned(), |r| r.burst.to_string()),
    );
    line(
        "limits.max_concurrent_requests",
        limits
            .max_concurrent_requests
            .map_or_else(|| "off".to_owned(), |n| n.to_string()),
    );
    line(
        "limits.max_streams_per_principal",
        match limits.max_streams_per_principal {
            Some(0) => "off".to_owned(),
            Some(n) => n.to_string(),
            None if c.auth.is_some() => "a quarter of the connection cap".to_owned(),
            None => "off (no [auth]: one principal)".to_owned(),
        },
    );
    // Set or not; the URL may hold a password.
    line(
        "cluster.redis_url",
        match &c.cluster {
            None => "none (one node)".to_owned(),
            Some(cl) => {
                let tls = cl.redis_url.expose().starts_with("rediss://");
                let mut v = String::from(if tls { "set, TLS" } else { "set" });
                if cl.ca_file.is_some() {
                    v.push_str(", own CA");
                }
                if cl.client_cert.is_some() {
                    v.push_str(", client certificate");
                }
                if cl.password.is_some() {
                    v.push_str(", password from redis_password_env");
                }
                v
            }
        },
    );

    match &c.tracing {
        // Without user info or query: the URL may carry credentials.
        Some(t) => {
            let at = format!(
                "{}://{}{}{} (sampling {}, service {})",
                t.otlp_endpoint.scheme_str().unwrap_or("http"),
                t.otlp_endpoint.host().unwrap_or_default(),
                t.otlp_endpoint
                    .port()
                    .map_or_else(String::new, |p| format!(":{p}")),
                t.otlp_endpoint.path(),
                t.sampling_ratio,
                t.service_name
            );
            line("tracing.otlp_endpoint", at);
        }
        None => line("tracing.otlp_endpoint", "off".to_owned()),
    }

    if let Some(a) = c.auth.as_ref().filter(|a| !a.tokens.is_empty()) {
        principals(&mut text, a);
    }
    text.push_str("backends:\n");
    for b in &c.backends {
        let _ = writeln!(text, "  {}: {}", b.name, transport(&b.transport));
        let isolation = match b.isolation {
            Isolation::Shared => "shared",
            Isolation::PerSession => "per-session",
        };
        let _ = writeln!(
            text,
            "    isolation {isolation}, max_sessions {}, idle_ttl {}, request_timeout {}",
            b.max_sessions,
            dur(b.idle_ttl),
            dur(b.request_timeout)
        );
        let (include, exclude, rename) = b.tools.parts();
        let mut tools = format!("    tools: include [{}]", include.join(", "));
        if !exclude.is_empty() {
            let _ = write!(tools, ", exclude [{}]", exclude.join(", "));
        }
        for (from, to) in rename {
            let _ = write!(tools, ", {from} -> {to}");
        }
        let _ = writeln!(text, "{tools}");
        if let Transport::Http { url, .. } | Transport::Sse { url, .. } = &b.transport {
            // The route its URL takes; the proxy's credentials left out.
            let via = b.proxy.shown_for(url);
            let _ = writeln!(
                text,
                "    proxy: {}",
                via.as_deref().unwrap_or("none (direct)")
            );
        }
        if let Some(o) = &b.credentials {
            let _ = writeln!(
                text,
                "    oauth: client credentials as `{}` from {}",
                o.client_id,
                redact_url(&o.token_url.to_string())
            );
            if let Some(x) = &o.exchange {
                let _ = writeln!(
                    text,
                    "    oauth: calls for a client carry its token exchanged (RFC 8693) for {}",
                    x.audience
                        .as_deref()
                        .or(x.resource.as_deref())
                        .unwrap_or("the backend's default audience")
                );
            }
        }
        if let Some(p) = &b.principals {
            backend_principals(&mut text, p, &b.transport);
        }
        if let Some(f) = &b.code_flow {
            let client = match &f.client_id {
                Some(id) => format!(
                    "as `{id}`{}",
                    if f.client_secret.is_some() {
                        " (with a secret)"
                    } else {
                        ""
                    }
                ),
                None => "registered dynamically".to_owned(),
            };
            let _ = writeln!(
                text,
                "    oauth: authorization code, each principal's own grant (at most {}), client {client}; callback {}",
                f.max_grants,
                f.callback()
            );
        }
    }
    text.push_str("namespaces:\n");
    for n in &c.namespaces {
        let route = if n.name.as_str() == super::file::DEFAULT_NAMESPACE {
            "/mcp".to_owned()
        } else {
            format!("/ns/{}/mcp", n.name)
        };
        let prefix = match n.prefix {
            Prefix::Always => "always",
            Prefix::Never => "never",
        };
        let members: Vec<&str> = n.backends.iter().map(|b| b.as_str()).collect();
        let _ = writeln!(
            text,
            "  {} ({route}): [{}], prefix {prefix}",
            n.name,
            members.join(", ")
        );
        if !n.require_scopes.is_empty() {
            let _ = writeln!(text, "    require_scopes [{}]", n.require_scopes.join(", "));
        }
        for (pattern, scopes) in n.tool_scopes.parts() {
            let _ = writeln!(text, "    tool_scopes {pattern}: [{}]", scopes.join(", "));
        }
        if let super::Discovery::Search {
            pinned,
            expose_found,
        } = &n.discovery
        {
            let _ = writeln!(
                text,
                "    discovery search: search_tools, call_tool, pinned [{}], expose_found {expose_found}",
                pinned.join(", ")
            );
        }
    }
    text
}

/// A backend's per-principal credentials: who, and the names of their
/// headers or variables, never the values.
fn backend_principals(text: &mut String, p: &PrincipalCredentials, t: &Transport) {
    let fallback = match p.fallback {
        Fallback::Hide => "hide (a principal with no entry: not listed, calls refused)",
        Fallback::Shared => "shared (a principal with no entry: the backend's own credentials)",
    };
    let _ = writeln!(text, "    principals: fallback {fallback}");
    let what = match t {
        Transport::Stdio { .. } => "env",
        Transport::Http { .. } | Transport::Sse { .. } => "headers",
    };
    for e in &p.entries {
        let subject = match e.principal {
            crate::vocab::Principal::Subject(_) => " (OAuth subject)",
            _ => "",
        };
        let names: Vec<&str> = e.values.iter().map(|(k, _)| k.as_str()).collect();
        let _ = writeln!(
            text,
            "      {}{subject}: {what} [{}], its own backend sessions",
            e.key,
            names.join(", ")
        );
    }
}

/// Each static token's principal with its scopes, never the token.
fn principals(text: &mut String, auth: &AuthSettings) {
    text.push_str("principals:\n");
    for (i, t) in auth.tokens.iter().enumerate() {
        let scopes = if !auth.scoped_tokens {
            "unscoped (sees every tool)".to_owned()
        } else if t.scopes.is_empty() {
            "scopes [] (no scoped tool)".to_owned()
        } else {
            format!("scopes [{}]", t.scopes.join(", "))
        };
        let _ = writeln!(text, "  {}: {scopes}", t.principal(i));
    }
}

fn transport(t: &Transport) -> String {
    match t {
        Transport::Stdio {
            command,
            args,
            env,
            inherit,
            cwd,
            sandbox,
        } => {
            let mut s = format!("stdio `{command}` with {} arg(s)", args.len());
            if !env.is_empty() {
                let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
                let _ = write!(s, ", env keys [{}]", keys.join(", "));
            }
            if !inherit.added().is_empty() {
                let _ = write!(s, ", inherits [{}]", inherit.added().join(", "));
            }
            if let Some(cwd) = cwd {
                let _ = write!(s, ", cwd {}", cwd.display());
            }
            if let Some(sandbox) = sandbox {
                let _ = write!(s, ", sandbox {}", sandboxed(sandbox));
            }
            s
        }
        Transport::Http { url, headers } | Transport::Sse { url, headers } => {
            let kind = if matches!(t, Transport::Sse { .. }) {
                "sse"
            } else {
                "http"
            };
            let mut s = format!("{kind} {}", redact_url(url));
            if !headers.is_empty() {
                let names: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
                let _ = write!(s, ", headers [{}]", names.join(", "));
            }
            s
        }
    }
}

/// Drops what may carry credentials: `user:pass@` and the query string.
pub(super) fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let userinfo = if authority.contains('@') { "***@" } else { "" };
    let tail = match tail.find(['?', '#']) {
        Some(i) => format!("{}?…", &tail[..i]),
        None => tail.to_owned(),
    };
    if scheme.is_empty() {
        format!("{userinfo}{host}{tail}")
    } else {
        format!("{scheme}://{userinfo}{host}{tail}")
    }
}

/// Written by hand so that `{:?}` of a config, easy to reach for in a log
/// line, follows the same rules as `sluice check`.
impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stdio {
                command,
                args,
                env,
                inherit,
                cwd,
                sandbox,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", &format_args!("<{} redacted>", args.len()))
                .field("env", &RedactedValues(env))
                .field("inherit_env", &inherit.added())
                .field("cwd", cwd)
                .field("sandbox", sandbox)
                .finish(),
            Self::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", &redact_url(url))
                .field("headers", headers)
                .finish(),
            Self::Sse { url, headers } => f
                .debug_struct("Sse")
                .field("url", &redact_url(url))
                .field("headers", headers)
                .finish(),
        }
    }
}

struct RedactedValues<'a>(&'a [(String, String)]);

impl fmt::Debug for RedactedValues<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, _)| (k, format_args!("<redacted>"))))
            .finish()
    }
}

/// A sandbox in the syntax it is written in (paths in full: they are
/// not secrets, and a reader checks them).
fn sandboxed(s: &super::Sandbox) -> String {
    let mut parts = Vec::new();
    if let Some(m) = s.memory {
        parts.push(format!("memory = \"{}\"", super::format_bytes(m)));
    }
    if let Some(p) = s.processes {
        parts.push(format!("processes = {p}"));
    }
    if let Some(n) = s.open_files {
        parts.push(format!("open_files = {n}"));
    }
    parts.push(format!("network = \"{}\"", s.network.as_str()));
    for (key, paths) in [("read", &s.read), ("write", &s.write)] {
        if let Some(paths) = paths {
            let shown: Vec<String> = paths
                .iter()
                .map(|p| format!("{:?}", p.display().to_string()))
                .collect();
            parts.push(format!("{key} = [{}]", shown.join(", ")));
        }
    }
    parts.push(format!("require = {}", s.require));
    format!("{{ {} }}", parts.join(", "))
}
