//! Environment overrides: `SLUICE_<SECTION>__<KEY>` sets a scalar key of
//! [server], [auth], [metrics], [limits], [cluster] or [tracing], written in
//! the file's own syntax (enum words, integers, durations; lists
//! comma-separated). They are applied to
//! the file-stage types, so the build stage validates an overridden value
//! exactly like a written one. Any `SLUICE_*__*` variable that does not name
//! such a key is an error: a misspelt override silently ignored is worse.

use serde::Deserialize;
use serde::de::IntoDeserializer;
use serde::de::value::Error as ValueError;

use super::Source;
use super::env::Env;
use super::error::{At, Issue};
use super::file::{File, FileAuth, FileLimits, FileMetrics, FileServer, FileTracing};

const PREFIX: &str = "SLUICE_";

pub(super) const SERVER_KEYS: [&str; 21] = [
    "listen",
    "sessions",
    "session_ids",
    "session_idle_ttl",
    "session_max_lifetime",
    "max_sessions",
    "max_sessions_per_principal",
    "max_body_bytes",
    "allowed_origins",
    "request_timeout",
    "shutdown_grace",
    "settle_timeout",
    "list_page_size",
    "max_batch_items",
    "max_connections",
    "max_connections_per_peer",
    "header_read_timeout",
    "body_read_timeout",
    "write_timeout",
    "max_inflight_body_bytes",
    "public_url",
];
pub(super) const AUTH_KEYS: [&str; 1] = ["bearer_tokens_env"];
pub(super) const METRICS_KEYS: [&str; 3] = ["path", "token_env", "summary_interval"];
pub(super) const LIMITS_KEYS: [&str; 4] = [
    "requests_per_second",
    "burst",
    "max_concurrent_requests",
    "max_streams_per_principal",
];
pub(super) const CLUSTER_KEYS: [&str; 1] = ["redis_url"];
pub(super) const TRACING_KEYS: [&str; 3] = ["otlp_endpoint", "sampling_ratio", "service_name"];

enum Rejected {
    Section,
    Key,
    Value(String),
}

/// Applies every override in `env` to `file` and returns the provenance of
/// each key `check` shows a source for, in declaration order.
pub(super) fn apply(
    file: &mut File,
    env: &dyn Env,
    issues: &mut Vec<Issue>,
) -> Vec<(String, Source)> {
    let written = written(file);
    let mut vars: Vec<(String, String)> = env
        .vars()
        .into_iter()
        .filter(|(name, _)| name.starts_with(PREFIX) && name.contains("__"))
        .collect();
    // Deterministic order, whatever order the environment lists them in.
    vars.sort();

    let mut from_env: Vec<(String, String)> = Vec::new();
    for (var, value) in vars {
        let Some((section, key)) = var[PREFIX.len()..].split_once("__") else {
            continue;
        };
        let (section, key) = (section.to_ascii_lowercase(), key.to_ascii_lowercase());
        let value = value.trim();
        let result = match section.as_str() {
            "server" => set_server(&mut file.server, &key, value),
            "auth" if AUTH_KEYS.contains(&key.as_str()) => {
                set_auth(file.auth.get_or_insert_with(FileAuth::default), &key, value)
            }
            "auth" => Err(Rejected::Key),
            "metrics" => set_metrics(&mut file.metrics, &key, value),
            "limits" => set_limits(&mut file.limits, &key, value),
            "cluster" if CLUSTER_KEYS.contains(&key.as_str()) => {
                file.cluster.get_or_insert_with(Default::default).redis_url =
                    Some(value.to_owned());
                Ok(())
            }
            "cluster" => Err(Rejected::Key),
            "tracing" => set_tracing(
                file.tracing.get_or_insert_with(Default::default),
                &key,
                value,
            ),
            _ => Err(Rejected::Section),
        };
        let message = match result {
            Ok(()) => {
                from_env.push((format!("{section}.{key}"), var));
                continue;
            }
            Err(Rejected::Section) => format!(
                "environment variable `{var}`: no section [{section}]; only [server], [auth], \
                 [metrics], [limits], [cluster] and [tracing] keys can be set from the \
                 environment"
            ),
            Err(Rejected::Key) => {
                format!("environment variable `{var}`: unknown key `{key}` in [{section}]")
            }
            Err(Rejected::Value(why)) => {
                format!("environment variable `{var}`: `{section}.{key}`: {why}")
            }
        };
        issues.push(Issue {
            at: At::Nowhere,
            message,
        });
    }

    let mut sections: Vec<(&str, &[&str])> = vec![("server", &SERVER_KEYS)];
    if file.auth.is_some() {
        sections.push(("auth", &AUTH_KEYS));
    }
    sections.push(("metrics", &METRICS_KEYS));
    sections.push(("limits", &LIMITS_KEYS));
    sections.push(("cluster", &CLUSTER_KEYS));
    sections.push(("tracing", &TRACING_KEYS));
    let mut provenance = Vec::new();
    for (section, keys) in sections {
        for key in keys {
            let full = format!("{section}.{key}");
            let source = if let Some((_, var)) = from_env.iter().find(|(k, _)| *k == full) {
                Source::Env(var.clone())
            } else if written.contains(&full) {
                Source::File
            } else {
                Source::Default
            };
            provenance.push((full, source));
        }
    }
    // Tables only the file can set, whose source `check` shows too.
    let from_file = |written: bool| match written {
        true => Source::File,
        false => Source::Default,
    };
    provenance.push((
        "server.tls".to_owned(),
        from_file(file.server.tls.is_some()),
    ));
    if let Some(auth) = &file.auth {
        provenance.push(("auth.oauth".to_owned(), from_file(auth.oauth.is_some())));
    }
    provenance
}

fn written(file: &File) -> Vec<String> {
    let s = &file.server;
    let server = [
        s.listen.is_some(),
        s.sessions.is_some(),
        s.session_ids.is_some(),
        s.session_idle_ttl.is_some(),
        s.session_max_lifetime.is_some(),
        s.max_sessions.is_some(),
        s.max_sessions_per_principal.is_some(),
        s.max_body_bytes.is_some(),
        s.allowed_origins.is_some(),
        s.request_timeout.is_some(),
        s.shutdown_grace.is_some(),
        s.settle_timeout.is_some(),
        s.list_page_size.is_some(),
        s.max_batch_items.is_some(),
        s.max_connections.is_some(),
        s.max_connections_per_peer.is_some(),
        s.header_read_timeout.is_some(),
        s.body_read_timeout.is_some(),
        s.write_timeout.is_some(),
        s.max_inflight_body_bytes.is_some(),
        s.public_url.is_some(),
    ];
    let auth = [file
        .auth
        .as_ref()
        .is_some_and(|a| a.bearer_tokens_env.is_some())];
    let m = &file.metrics;
    let metrics = [
        m.path.is_some(),
        m.token_env.is_some(),
        m.summary_interval.is_some(),
    ];
    let l = &file.limits;
    let limits = [
        l.requests_per_second.is_some(),
        l.burst.is_some(),
        l.max_concurrent_requests.is_some(),
        l.max_streams_per_principal.is_some(),
    ];
    let cluster = [file.cluster.as_ref().is_some_and(|c| c.redis_url.is_some())];
    let t = file.tracing.as_ref();
    let tracing = [
        t.is_some_and(|t| t.otlp_endpoint.is_some()),
        t.is_some_and(|t| t.sampling_ratio.is_some()),
        t.is_some_and(|t| t.service_name.is_some()),
    ];
    let mut out = Vec::new();
    for (section, keys, present) in [
        ("server", &SERVER_KEYS[..], &server[..]),
        ("auth", &AUTH_KEYS[..], &auth[..]),
        ("metrics", &METRICS_KEYS[..], &metrics[..]),
        ("limits", &LIMITS_KEYS[..], &limits[..]),
        ("cluster", &CLUSTER_KEYS[..], &cluster[..]),
        ("tracing", &TRACING_KEYS[..], &tracing[..]),
    ] {
        for (key, present) in keys.iter().zip(present) {
            if *present {
                out.push(format!("{section}.{key}"));
            }
        }
    }
    out
}

fn set_server(s: &mut FileServer, key: &str, v: &str) -> Result<(), Rejected> {
    match key {
        "listen" => s.listen = Some(v.to_owned()),
        "sessions" => s.sessions = Some(word(v)?),
        "session_ids" => s.session_ids = Some(word(v)?),
        "session_idle_ttl" => s.session_idle_ttl = Some(word(v)?),
        "session_max_lifetime" => s.session_max_lifetime = Some(word(v)?),
        "max_sessions" => s.max_sessions = Some(count(v)?),
        "max_sessions_per_principal" => s.max_sessions_per_principal = Some(count(v)?),
        "max_body_bytes" => s.max_body_bytes = Some(count(v)?),
        "allowed_origins" => s.allowed_origins = Some(list(v)),
        "request_timeout" => s.request_timeout = Some(word(v)?),
        "shutdown_grace" => s.shutdown_grace = Some(word(v)?),
        "settle_timeout" => s.settle_timeout = Some(word(v)?),
        "list_page_size" => s.list_page_size = Some(count(v)?),
        "max_batch_items" => s.max_batch_items = Some(count(v)?),
        "max_connections" => s.max_connections = Some(count(v)?),
        "max_connections_per_peer" => s.max_connections_per_peer = Some(count(v)?),
        "header_read_timeout" => s.header_read_timeout = Some(word(v)?),
        "body_read_timeout" => s.body_read_timeout = Some(word(v)?),
        "write_timeout" => s.write_timeout = Some(word(v)?),
        "max_inflight_body_bytes" => s.max_inflight_body_bytes = Some(count(v)?),
        "public_url" => s.public_url = Some(v.to_owned()),
        _ => return Err(Rejected::Key),
    }
    Ok(())
}

fn set_auth(a: &mut FileAuth, key: &str, v: &str) -> Result<(), Rejected> {
    match key {
        "bearer_tokens_env" => a.bearer_tokens_env = Some(v.to_owned()),
        _ => return Err(Rejected::Key),
    }
    Ok(())
}

fn set_metrics(m: &mut FileMetrics, key: &str, v: &str) -> Result<(), Rejected> {
    match key {
        "path" => m.path = Some(v.to_owned()),
        "token_env" => m.token_env = Some(v.to_owned()),
        "summary_interval" => m.summary_interval = Some(word(v)?),
        _ => return Err(Rejected::Key),
    }
    Ok(())
}

fn set_limits(l: &mut FileLimits, key: &str, v: &str) -> Result<(), Rejected> {
    match key {
        "requests_per_second" => l.requests_per_second = Some(small(v)?),
        "burst" => l.burst = Some(small(v)?),
        "max_concurrent_requests" => l.max_concurrent_requests = Some(count(v)?),
        "max_streams_per_principal" => l.max_streams_per_principal = Some(count(v)?),
        _ => return Err(Rejected::Key),
    }
    Ok(())
}

fn set_tracing(t: &mut FileTracing, key: &str, v: &str) -> Result<(), Rejected> {
    match key {
        "otlp_endpoint" => t.otlp_endpoint = Some(v.to_owned()),
        "service_name" => t.service_name = Some(v.to_owned()),
        "sampling_ratio" => {
            let ratio = v
                .parse()
                .map_err(|_| Rejected::Value(format!("expected a number, got `{v}`")))?;
            t.sampling_ratio = Some(ratio);
        }
        _ => return Err(Rejected::Key),
    }
    Ok(())
}

fn small(v: &str) -> Result<u32, Rejected> {
    v.parse().map_err(|_| {
        Rejected::Value(format!(
            "expected a non-negative integer below 2^32, got `{v}`"
        ))
    })
}

/// Parses an enum word or a duration through the same `Deserialize` impl the
/// file uses, so both sources accept and reject the same spellings.
fn word<'de, T: Deserialize<'de>>(v: &'de str) -> Result<T, Rejected> {
    T::deserialize(IntoDeserializer::<ValueError>::into_deserializer(v))
        .map_err(|e| Rejected::Value(e.to_string().replace("unknown variant", "unknown value")))
}

fn count(v: &str) -> Result<usize, Rejected> {
    v.parse()
        .map_err(|_| Rejected::Value(format!("expected a non-negative integer, got `{v}`")))
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}
