//! Wires the gateway together, front -> sessions -> router -> upstream, and
//! runs it until a signal, then shuts down in order.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::auth::Authenticator;
use crate::cluster::{BackendSessions, BusMessage, Close, Cluster, RedisGrants};
use crate::config::{Config, SessionMode};
use crate::front::{self, Front, Layout, Policy};
use crate::metrics::Metrics;
use crate::reload::{self, Join};
use crate::router::Router;
use crate::sessions::sealed::KeyRing;
use crate::sessions::{Ids, Limits, Sealer, Sessions};
use crate::traces::Traces;
use crate::upstream::Backend;
use crate::upstream::Notice;
use crate::vocab::NamespaceName;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A configured feature this build does not serve yet (exit 2).
    #[error("backend `{backend}`: {what} is not supported yet")]
    Unsupported { backend: String, what: &'static str },
    #[error("backend `{backend}`: {why}")]
    Backend { backend: String, why: String },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// `sluice stdio --namespace` names none of the config's.
    #[error("namespace `{0}` is not in the config")]
    UnknownNamespace(String),
    /// `sluice tools --principal` names no static token.
    #[error("principal `{0}` is not a named entry of [auth] bearer_tokens_env")]
    UnknownPrincipal(String),
    #[error("server failed: {0}")]
    Io(#[from] std::io::Error),
}

impl ServeError {
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            ServeError::Unsupported { .. }
                | ServeError::Backend { .. }
                | ServeError::UnknownNamespace(_)
                | ServeError::UnknownPrincipal(_)
        )
    }
}

/// Cluster mode: backends relay what they announce and record their
/// per-session sessions, and keep the code flow's grants in Redis; the
/// bus's messages are acted on; and the sweeper closes what dead replicas
/// left behind.
fn join_cluster(
    cluster: &Arc<Cluster>,
    front: &Arc<Front>,
    config: &Config,
    stop: CancellationToken,
) -> Join {
    let records = Arc::new(BackendSessions::new(cluster.clone()));
    // The code flow's grants, sealed with the sessions' key ring.
    let grants = Arc::new(RedisGrants::new(cluster.clone(), front.sessions.clone()));
    let joiner = cluster.clone();
    let join: Join = Arc::new(move |backend: &Arc<Backend>| {
        let (cluster, name) = (joiner.clone(), backend.name.to_string());
        let relay = Arc::new(move |notice: &Notice| {
            // List changes for every replica's caches; per-session notices
            // for the client's GET stream, wherever it is open.
            let wanted = match notice {
                // A principal's sessions may be on any replica.
                Notice::ListChanged(_) | Notice::Connected { .. } => true,
                Notice::Log { client, .. }
                | Notice::ResourceUpdated { client, .. }
                | Notice::Ask { client, .. }
                | Notice::ElicitationComplete { client, .. } => client.is_some(),
            };
            if wanted {
                let message = BusMessage::Notice {
                    backend: name.clone(),
                    notice: notice.clone(),
                };
                let cluster = cluster.clone();
                tokio::spawn(async move { cluster.publish(message).await });
            }
        });
        backend.join_cluster(relay, records.clone(), grants.clone());
    });
    for backend in &front.layout.load().backends {
        join(backend);
    }
    front.clone().serve_inbox(cluster.bus(stop.clone()));
    let current = front.clone();
    let close: Close = Arc::new(move |backend: String, session: String| {
        let backend = current
            .layout
            .load()
            .backends
            .iter()
            .find(|b| b.name.as_str() == backend)
            .cloned();
        Box::pin(async move {
            if let Some(b) = backend {
                b.delete_session(&session).await;
            }
        })
    });
    // Often enough that an orphan outlives its idle TTL by little.
    let period = config
        .backends
        .iter()
        .filter(|b| b.isolation == crate::config::Isolation::PerSession)
        .map(|b| b.idle_ttl / 4)
        .min()
        .unwrap_or(Duration::from_secs(30))
        .clamp(Duration::from_secs(1), Duration::from_secs(30));
    tokio::spawn(BackendSessions::new(cluster.clone()).sweep(close, period, stop));
    join
}

/// Past the grace period, how long requests get to write their error.
const ABORT_FLUSH: Duration = Duration::from_secs(2);

/// Runs the gateway until SIGINT/SIGTERM; SIGHUP reloads `config` from
/// `source` (the file it was read from; none for the built-in default).
/// `on_listening` gets the bound address once connections are accepted
/// (`https://` before it with `[server] tls`).
pub async fn serve(
    config: Config,
    source: Option<PathBuf>,
    on_listening: impl FnOnce(&str),
) -> Result<(), ServeError> {
    // Before anything is announced: a SIGTERM sent as soon as the
    // readiness line appears is a graceful stop, not the default kill.
    let mut hangups = hangups()?;
    let stop = wait_for_signal()?;
    let auth = config
        .auth
        .as_ref()
        .map(|a| Authenticator::new(a, &config.namespaces))
        .transpose()
        .map_err(|why| ServeError::Backend {
            backend: "(auth)".into(),
            why,
        })?;
    // Read before anything starts: the files were checked with the config,
    // and one changed since is as much a config error.
    let tls = config
        .server
        .tls
        .as_ref()
        .map(front::Certs::new)
        .transpose()
        .map_err(|e| ServeError::Backend {
            backend: "(server.tls)".into(),
            why: e.to_string(),
        })?
        .map(Arc::new);

    // The address first: a port in use ends the start before any backend
    // is spawned (and warns about nothing else).
    let addr = config.server.listen;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let local = listener.local_addr()?;
    let loopback = addr.ip().is_loopback();
    let tls_on = config.server.tls.is_some();
    let edge = Edge {
        auth,
        tls,
        loopback_host_only: loopback,
        only: None,
    };
    let mut gateway = Assembled::start(config, source, edge).await?;
    let front = gateway.front.clone();
    let app = front::routes(front.clone(), &gateway.reloader.config.metrics.path);
    // The URL says what the listener speaks: with TLS, `https`.
    let shown = match tls_on {
        true => format!("https://{local}"),
        false => local.to_string(),
    };
    let scheme = if tls_on { "https" } else { "http" };
    let max_connections = gateway.max_connections;
    tracing::info!(url = %format!("{scheme}://{local}/mcp"), backends = front.layout.load().backends.len(), max_connections, "sluice listening");
    on_listening(&shown);

    let server = &gateway.reloader.config.server;
    let limits = front::server::Limits {
        max_connections,
        max_connections_per_peer: server.max_connections_per_peer,
        header_read_timeout: server.header_read_timeout,
        write_timeout: server.write_timeout,
    };
    let grace = server.shutdown_grace;
    let accepting = tokio::spawn(front::server::accept(
        listener,
        app,
        limits,
        front.metrics.clone(),
        gateway.stopping.token().clone(),
    ));
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            Some(()) = hangups.recv() => gateway.reloader.reload(),
        }
    }
    tracing::info!("shutting down");
    gateway.stopping.cancel();
    // In-flight requests get the grace period; streams end on `stopping`.
    match accepting.await {
        Ok(connections) => {
            // Requests wait on their own cancellation only: a stateless
            // one's is a child of `aborting`, a session's ends with the
            // session, so the sessions end here rather than just after.
            // No request comes in after it: a draining connection reads
            // none past the one it is answering.
            let abort = || {
                front.aborting.cancel();
                front.sessions.close_all();
            };
            let drained = connections.drain(grace, ABORT_FLUSH, abort).await;
            if !drained {
                tracing::warn!("some connections were still open when the gateway stopped");
            }
        }
        Err(e) => tracing::warn!(error = %e, "accept loop failed"),
    }
    gateway.finish().await;
    Ok(())
}

/// What differs between the edges the gateway is served on: a listener's
/// `[auth]` and TLS, or neither for `stdio`.
pub(crate) struct Edge {
    pub(crate) auth: Option<Arc<Authenticator>>,
    pub(crate) tls: Option<Arc<front::Certs>>,
    /// Only loopback Host names (a listener on loopback, and `stdio`).
    pub(crate) loopback_host_only: bool,
    /// The one namespace served (`stdio`): a reloaded config is narrowed
    /// to it, as the first was, so no other backend starts. None: all.
    pub(crate) only: Option<NamespaceName>,
}

/// The running gateway without its edge: backends, router, the session
/// table and the front, with what ends them.
pub(crate) struct Assembled {
    pub(crate) front: Arc<Front>,
    pub(crate) stopping: crate::cancel_flag::CancelFlag,
    /// Reloads the config (SIGHUP); holds every backend task.
    pub(crate) reloader: reload::Gateway,
    stop_backends: CancellationToken,
    /// Client connections, kept below the fd limit with room for backends.
    pub(crate) max_connections: usize,
}

impl Assembled {
    /// Starts the backends and wires front -> sessions -> router ->
    /// upstream over them.
    pub(crate) async fn start(
        config: Config,
        source: Option<PathBuf>,
        edge: Edge,
    ) -> Result<Assembled, ServeError> {
        let metrics = Arc::new(match config.cluster {
            Some(_) => Metrics::new().with_cluster(),
            None => Metrics::new(),
        });
        let traces = match &config.tracing {
            Some(settings) => Traces::start(settings).map_err(|why| ServeError::Backend {
                backend: "(tracing)".into(),
                why,
            })?,
            None => Traces::off(),
        };
        let stop_backends = CancellationToken::new();
        let stopping = crate::cancel_flag::CancelFlag::new();
        let aborting = CancellationToken::new();
        // upstream: one supervised backend per configured server.
        let mut started = Vec::new();
        for b in &config.backends {
            let s = reload::start(b, &metrics, config.server.settle_timeout, &stop_backends)
                .map_err(|why| ServeError::Backend {
                    backend: b.name.to_string(),
                    why,
                })?;
            started.push(s);
        }
        let backends: Vec<Arc<Backend>> = started.iter().map(|s| s.backend.clone()).collect();
        // router: namespaces over those backends.
        let router = Router::new(&config, &backends);
        // cluster: what replicas share, in Redis (none: one node).
        let boot = Sealer::new_boot();
        let cluster = match &config.cluster {
            Some(url) => Some(
                Cluster::start(url, boot, metrics.clone(), stopping.token().clone())
                    .await
                    .map_err(|e| ServeError::Backend {
                        backend: "(cluster)".into(),
                        why: e.to_string(),
                    })?,
            ),
            None => None,
        };
        // sessions: the bounded table and its one reaper.
        let ids = match &config.server.session_keys {
            Some(keys) => Ids::Sealed(Sealer::new(
                KeyRing::parse(keys.expose()).map_err(|e| ServeError::Backend {
                    backend: "(server)".into(),
                    why: e.to_string(),
                })?,
                config.server.session_max_lifetime,
                boot,
                cluster.is_none(),
            )),
            None => Ids::Table,
        };
        let sealed_ids = matches!(ids, Ids::Sealed(_));
        let sessions = Sessions::with_namespaces(
            Limits {
                max_sessions: config.server.max_sessions,
                max_per_principal: config.server.max_sessions_per_principal,
                idle_ttl: config.server.session_idle_ttl,
            },
            ids,
            metrics.clone(),
            crate::router::MAX_TAGS,
        );
        sessions.spawn_reaper(stopping.token().clone());
        // Client connections stay below the fd limit, with room for backends.
        let reserve = front::server::FD_RESERVE
            + config
                .backends
                .iter()
                .map(|b| match b.isolation {
                    crate::config::Isolation::Shared => 4,
                    crate::config::Isolation::PerSession => 4 * b.max_sessions,
                })
                .sum::<usize>();
        let (max_connections, nofile) =
            front::server::connection_cap(config.server.max_connections, reserve);
        if max_connections < config.server.max_connections {
            tracing::warn!(
                max_connections,
                nofile,
                "max_connections lowered to fit the open-file limit"
            );
        }
        // The budget for large bodies in flight, process-wide (`budget`).
        crate::budget::BODIES.set_limit(
            config
                .server
                .max_inflight_body_bytes
                .map_or_else(crate::budget::default_limit, std::num::NonZeroUsize::get),
        );
        // front: the edge's requests in.
        let has_auth = edge.auth.is_some();
        let only = edge.only;
        let front = Arc::new(Front {
            layout: arc_swap::ArcSwap::from_pointee(Layout {
                policy: Policy {
                    auth: edge.auth,
                    allowed_origins: config.server.allowed_origins.clone(),
                    loopback_host_only: edge.loopback_host_only,
                    max_body_bytes: config.server.max_body_bytes,
                    stateless: config.server.sessions == SessionMode::Stateless,
                },
                router,
                backends: backends.clone(),
                limits: front::Limits::new(config.limits, has_auth, max_connections),
            }),
            sessions: sessions.clone(),
            metrics: metrics.clone(),
            metrics_token: config.metrics.token.clone(),
            stopping: stopping.clone(),
            aborting,
            body_read_timeout: config.server.body_read_timeout,
            max_batch_items: config.server.max_batch_items,
            bridge: Default::default(),
            status: Default::default(),
            reloads: tokio::sync::watch::channel(()).0,
            sealed_ids,
            cluster: cluster.clone(),
            principal_cap: config.server.max_sessions_per_principal,
            stream_keep_alive: (config.server.session_idle_ttl / 3).min(Duration::from_secs(15)),
            traces,
            tls: edge.tls,
            sse: Default::default(),
        });
        let join = cluster
            .as_ref()
            .map(|cluster| join_cluster(cluster, &front, &config, stopping.token().clone()));
        tokio::spawn(front::sample_status(
            front.clone(),
            stopping.token().clone(),
        ));
        spawn_summary(
            metrics,
            config.metrics.summary_interval,
            stopping.token().clone(),
        );
        let reloader = reload::Gateway::new(
            config,
            reload::Source { path: source, only },
            started,
            stop_backends.clone(),
            front.clone(),
            join,
        );
        Ok(Assembled {
            front,
            stopping,
            reloader,
            stop_backends,
            max_connections,
        })
    }

    /// Ends every client session, then every backend (children killed
    /// with their process group), within a bound.
    pub(crate) async fn finish(self) {
        self.stopping.cancel();
        self.front.sessions.close_all();
        self.stop_backends.cancel();
        let traced = self.front.clone();
        let all = futures_util::future::join_all(self.reloader.tasks());
        if tokio::time::timeout(Duration::from_secs(10), all)
            .await
            .is_err()
        {
            tracing::warn!("some backends did not stop in time");
        }
        traced.traces.shutdown().await;
        tracing::info!("stopped");
    }
}

/// SIGHUP, registered now.
pub(crate) fn hangups() -> std::io::Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
}

/// SIGTERM or SIGINT, both registered now (a future registers nothing
/// until it is first polled).
pub(crate) fn wait_for_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

fn spawn_summary(metrics: Arc<Metrics>, every: Duration, stop: CancellationToken) {
    if every.is_zero() {
        return;
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {
                    if let Some(line) = metrics.summary() {
                        tracing::info!("{line}");
                    }
                }
            }
        }
    });
}
