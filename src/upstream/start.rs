//! A backend started from its config: its transport (the command, or the
//! URL and headers), its pool, and its supervisor.

use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{Notify, broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::pool::PerSession;
use super::principals::Principals;
use super::{Backend, Glance, Health, LinkCtx, Notice, Pool, TransportSpec};
use super::{cache, catalog, child, headers, http, sandbox, supervisor, throttle};
use crate::config::{BackendConfig, Isolation, Secret, Transport};
use crate::metrics::Metrics;
use crate::protocol::ClientCaps;
use crate::vocab::Principal;

impl Backend {
    /// Starts the backend's supervisor; it runs until `stop` is cancelled
    /// and ends every backend session before it returns.
    pub fn start(
        config: &BackendConfig,
        metrics: Arc<Metrics>,
        settle_until: tokio::time::Instant,
        stop: CancellationToken,
    ) -> Result<(Arc<Backend>, tokio::task::JoinHandle<()>), String> {
        let transport = transport_spec(config)?;
        let entries = principal_transports(config, &transport)?;
        let principals = match (&config.principals, &config.code_flow, &transport) {
            (None, Some(code), TransportSpec::Http(spec)) => {
                let flow = super::oauth::CodeFlow::new(
                    config.name.clone(),
                    code.clone(),
                    spec.url.clone(),
                    spec.client.clone(),
                );
                let shared = (config.isolation == Isolation::Shared).then(|| {
                    PerSession::by_principal(
                        config.name.clone(),
                        config.max_sessions,
                        config.idle_ttl,
                    )
                });
                Some(Principals::code(
                    Arc::new(flow),
                    spec.clone(),
                    shared,
                    stop.clone(),
                ))
            }
            (_, Some(_), _) => {
                return Err(
                    "oauth.flow = \"authorization_code\" needs an http backend without principals"
                        .into(),
                );
            }
            (None, None, _) => None,
            (Some(p), None, _) => {
                let shared = (config.isolation == Isolation::Shared).then(|| {
                    PerSession::by_principal(
                        config.name.clone(),
                        config.max_sessions,
                        config.idle_ttl,
                    )
                });
                // Never served with the backend's own credentials instead.
                let made = Principals::new(entries, p.fallback, shared, stop.clone());
                Some(made.ok_or("principals: no entry")?)
            }
        };
        if let TransportSpec::Http(spec) | TransportSpec::Sse(spec) = &transport {
            // The gateway's own token, while the backend runs.
            tokio::spawn(spec.headers.clone().keep_fresh(
                spec.client.clone(),
                config.name.clone(),
                stop.clone(),
            ));
        }
        let backend = Arc::new_cyclic(|weak: &Weak<Backend>| {
            let me = weak.clone();
            let weak = weak.clone();
            Backend {
                name: config.name.clone(),
                me,
                ctx: LinkCtx {
                    name: config.name.clone(),
                    metrics,
                    timeout: config.request_timeout,
                    on_notice: Arc::new(move |notice: Notice| {
                        if let Some(b) = weak.upgrade() {
                            b.announce(notice);
                        }
                    }),
                    client: None,
                    principal: None,
                    offer: ClientCaps {
                        sampling: true,
                        elicitation: true,
                        elicitation_url: true,
                        roots: !config.roots.is_empty(),
                        roots_list_changed: false,
                    },
                    roots: (!config.roots.is_empty()).then(|| config.roots.clone().into()),
                    warnings: Arc::new(throttle::Throttle::new(5, Duration::from_secs(10))),
                    stderr: Arc::new(throttle::Throttle::new(100, Duration::from_secs(10))),
                    watched: Arc::default(),
                    last_exit: Arc::default(),
                },
                principals,
                transport,
                pool: match config.isolation {
                    Isolation::Shared => Pool::Shared(Mutex::new(None)),
                    Isolation::PerSession => Pool::PerSession(PerSession::new(
                        config.name.clone(),
                        config.max_sessions,
                        config.idle_ttl,
                    )),
                },
                cache: cache::ListCache::default(),
                catalogs: catalog::Catalogs::default(),
                health: Mutex::new(Health::Starting),
                history: Mutex::default(),
                settled: watch::channel(false).0,
                settle_until,
                health_changed: watch::channel(()).0,
                changes: broadcast::channel(16).0,
                wake: Notify::new(),
                modern: Mutex::new(None),
                glance: Glance::default(),
                legacy_refused: std::sync::atomic::AtomicBool::new(false),
                opening: tokio::sync::Mutex::new(()),
                relay: std::sync::OnceLock::new(),
                health_interval: match config.transport {
                    Transport::Stdio { .. } => Duration::ZERO,
                    Transport::Http { .. } | Transport::Sse { .. } => config.health_interval,
                },
            }
        });
        backend.ctx.metrics.backend_up(&backend.name, false);
        let task = tokio::spawn(supervisor::run(backend.clone(), stop));
        Ok((backend, task))
    }

    /// How the backend is reached: `stdio`, `http` or `sse`.
    /// An HTTP backend's host and port (None for stdio).
    pub(super) fn peer(&self) -> Option<(String, u16)> {
        match &self.transport {
            TransportSpec::Stdio(_) => None,
            TransportSpec::Http(spec) | TransportSpec::Sse(spec) => Some((
                spec.url.host_str()?.to_owned(),
                spec.url.port_or_known_default()?,
            )),
        }
    }

    pub fn transport(&self) -> &'static str {
        match self.transport {
            TransportSpec::Stdio(_) => "stdio",
            TransportSpec::Http(_) => "http",
            TransportSpec::Sse(_) => "sse",
        }
    }
}

/// Whether `start` would accept this backend (a reload checks every new
/// one before it starts any).
pub fn check(config: &BackendConfig) -> Result<(), String> {
    let transport = transport_spec(config)?;
    principal_transports(config, &transport).map(drop)
}

/// Each principal's way to the backend, built once: the backend's
/// transport with the principal's headers or variables in place of its
/// own of the same names.
fn principal_transports(
    config: &BackendConfig,
    base: &TransportSpec,
) -> Result<Vec<(Principal, TransportSpec)>, String> {
    let Some(p) = &config.principals else {
        return Ok(Vec::new());
    };
    p.entries
        .iter()
        .map(|e| {
            let spec = match base {
                TransportSpec::Stdio(s) => TransportSpec::Stdio(s.with_env(&e.values)),
                TransportSpec::Http(s) => {
                    TransportSpec::Http(Arc::new(with_headers(s, &e.values)?))
                }
                TransportSpec::Sse(s) => TransportSpec::Sse(Arc::new(with_headers(s, &e.values)?)),
            };
            Ok((e.principal.clone(), spec))
        })
        .collect()
}

/// `spec` with `values` among its headers (sensitive, as every configured one).
fn with_headers(
    spec: &http::HttpSpec,
    values: &[(String, Secret)],
) -> Result<http::HttpSpec, String> {
    let mut map = (**spec.headers.current()).clone();
    insert_sensitive(&mut map, values)?;
    Ok(http::HttpSpec {
        url: spec.url.clone(),
        target: spec.target.clone(),
        headers: Arc::new(headers::Headers::new(map, None, &spec.client)?),
        client: spec.client.clone(),
    })
}

fn transport_spec(config: &BackendConfig) -> Result<TransportSpec, String> {
    Ok(match &config.transport {
        Transport::Stdio {
            command,
            args,
            env,
            inherit,
            cwd,
            sandbox,
        } => TransportSpec::Stdio(child::StdioSpec {
            command: command.clone(),
            args: args.clone(),
            env: env.clone(),
            inherit: inherit.clone(),
            cwd: cwd.clone(),
            sandbox: match sandbox {
                None => None,
                Some(s) => {
                    let plan = sandbox::Plan::new(s, sandbox::Host::get());
                    plan.check()
                        .map_err(|why| format!("backend `{}`: {why}", config.name))?;
                    for m in plan.missing() {
                        tracing::warn!(backend = %config.name, missing = %m, "sandbox bound not enforced (require = false)");
                    }
                    Some(Arc::new(plan))
                }
            },
        }),
        Transport::Http { url, headers } => {
            TransportSpec::Http(Arc::new(http_spec(url, headers, config)?))
        }
        Transport::Sse { url, headers } => {
            TransportSpec::Sse(Arc::new(http_spec(url, headers, config)?))
        }
    })
}

fn http_spec(
    url: &str,
    headers: &[(String, crate::config::Secret)],
    config: &BackendConfig,
) -> Result<http::HttpSpec, String> {
    let mut url = url::Url::parse(url).map_err(|e| format!("bad url: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("bad url: scheme {} (http or https)", url.scheme()));
    }
    // Credentials in the URL (`http://user:pass@host/`) go as Basic auth,
    // as browsers and curl send them, and leave the URL.
    let basic = crate::http1::proxy::basic_auth(&url);
    let _ = url.set_username("");
    let _ = url.set_password(None);
    let uri = url
        .as_str()
        .parse::<::http::Uri>()
        .map_err(|e| format!("bad url: {e}"))?;
    let mut map = ::http::HeaderMap::new();
    insert_sensitive(&mut map, headers)?;
    if let Some(mut value) = basic
        && !map.contains_key(::http::header::AUTHORIZATION)
    {
        value.set_sensitive(true);
        map.insert(::http::header::AUTHORIZATION, value);
    }
    // No redirects are followed: one would carry the configured secret
    // headers to wherever the backend points (a 3xx is an error, not a hop).
    // Its URL, its legacy endpoint and its token URL all go through the
    // proxy its config names.
    let client = crate::http1::client::Client::new(config.proxy.clone())
        .map_err(|e| format!("http client: {e}"))?;
    let target = client.target(&uri).map_err(|e| format!("bad url: {e}"))?;
    Ok(http::HttpSpec {
        url,
        target,
        headers: Arc::new(headers::Headers::new(
            map,
            config.credentials.as_ref(),
            &client,
        )?),
        client,
    })
}

/// Configured headers into `map`, each replacing one of its name, marked
/// sensitive (they are credentials); a message names the header only.
fn insert_sensitive(
    map: &mut ::http::HeaderMap,
    headers: &[(String, crate::config::Secret)],
) -> Result<(), String> {
    for (k, v) in headers {
        let name =
            ::http::HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k}: {e}"))?;
        let mut value = ::http::HeaderValue::from_str(v.expose())
            .map_err(|_| format!("header {k}: invalid value"))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(())
}
