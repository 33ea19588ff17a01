//! `[server]`: the listener, client sessions and their ids, bounds and
//! timeouts.

use std::net::SocketAddr;

use super::super::duration::FileDuration;
use super::super::file::{self, FileServer};
use super::super::{Secret, ServerSettings, SessionIdMode, SessionMode, TlsFiles};
use super::Builder;

impl Builder<'_> {
    pub(super) fn server(&mut self, s: FileServer, has_auth: bool) -> ServerSettings {
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
                            format!("{}: {e}", self.env.origin(file::SESSION_KEY_ENV)),
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
            max_connections_per_peer: s
                .max_connections_per_peer
                .unwrap_or(d.max_connections_per_peer),
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
            max_inflight_body_bytes: s
                .max_inflight_body_bytes
                .and_then(std::num::NonZeroUsize::new),
            tls: s.tls.and_then(|t| self.tls(t)),
            public_url: s.public_url.as_deref().and_then(|u| self.public_url(u)),
        }
    }

    /// `[server] public_url`: an absolute http(s) URL with no query.
    fn public_url(&mut self, value: &str) -> Option<url::Url> {
        let why = match url::Url::parse(value) {
            Ok(u) if !matches!(u.scheme(), "http" | "https") || u.host().is_none() => {
                "must be an http:// or https:// URL"
            }
            Ok(u) if u.query().is_some() || u.fragment().is_some() => {
                "must have no query or fragment"
            }
            Ok(u) => return Some(u),
            Err(_) => "is not a URL",
        };
        self.setting("server.public_url", format!("`{value}` {why}"));
        None
    }

    /// Both files named, and readable as a chain and its own key: a start
    /// or reload with them serves, and one without them fails here,
    /// before anything is bound or swapped.
    fn tls(&mut self, t: file::FileTls) -> Option<TlsFiles> {
        let need = |b: &mut Self, key: &str, other: &str| {
            b.setting(key, format!("required with {other} (PEM)"));
        };
        let files = match (t.cert_file, t.key_file) {
            (Some(cert_file), Some(key_file)) => TlsFiles {
                cert_file,
                key_file,
            },
            (Some(_), None) => {
                need(self, "server.tls.key_file", "cert_file");
                return None;
            }
            (None, Some(_)) => {
                need(self, "server.tls.cert_file", "key_file");
                return None;
            }
            (None, None) => {
                need(self, "server.tls.cert_file", "tls");
                need(self, "server.tls.key_file", "tls");
                return None;
            }
        };
        match files.load(&super::super::tls_provider()) {
            Ok(_) => Some(files),
            Err(e) => {
                self.setting(e.key, e.why);
                None
            }
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
