//! Config reload (SIGHUP): the file read again, checked whole, then applied
//! to the running gateway without ending a client session. Backends that
//! did not change keep running (their sessions with them), and so do those
//! whose `tools` alone changed (the filter and renames are the namespaces',
//! rebuilt over the same backend); added ones start; removed or otherwise
//! changed ones are drained (their backend sessions closed, children
//! ended). Namespaces, filters, limits, auth tokens and allowed origins
//! take effect for the next request: a request in flight finishes with
//! the layout it began with.

use crate::auth::Authenticator;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{self, BackendConfig, Config, ProcessEnv, ServerSettings};
use crate::front::{self, Front, Layout, Policy};
use crate::metrics::Metrics;
use crate::upstream::Backend;
use crate::vocab::{BackendName, NamespaceName};

/// How long a drained backend gets to close its sessions.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// A running backend and what stops it.
pub(crate) struct Started {
    pub(crate) backend: Arc<Backend>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

/// Starts one backend under `parent` (the gateway's stop).
pub(crate) fn start(
    cfg: &BackendConfig,
    metrics: &Arc<Metrics>,
    settle: Duration,
    parent: &CancellationToken,
) -> Result<Started, String> {
    let stop = parent.child_token();
    let settle_until = tokio::time::Instant::now() + settle;
    let (backend, task) = Backend::start(cfg, metrics.clone(), settle_until, stop.clone())?;
    Ok(Started {
        backend,
        stop,
        task,
    })
}

impl Started {
    /// Its task, which ends once the gateway's stop (its parent) is given.
    pub(crate) fn task(self) -> JoinHandle<()> {
        self.task
    }
}

/// What a new backend must be given in cluster mode before it serves.
pub(crate) type Join = Arc<dyn Fn(&Arc<Backend>) + Send + Sync>;

/// Where a reload reads its config, and what of it the gateway serves.
pub(crate) struct Source {
    /// The file; none for the built-in default.
    pub(crate) path: Option<PathBuf>,
    /// The one namespace served (`sluice stdio`): the config read is
    /// narrowed to it, so that no other backend starts. None: all.
    pub(crate) only: Option<NamespaceName>,
}

impl Source {
    fn narrow(&self, config: Config) -> Result<Config, String> {
        let Some(ns) = &self.only else {
            return Ok(config);
        };
        config.narrowed_to(ns.as_str()).ok_or_else(|| {
            format!("the new config has no namespace `{ns}`, the one this gateway serves")
        })
    }
}

/// What a reload changes, owned by the serve loop.
pub(crate) struct Gateway {
    pub(crate) config: Config,
    source: Source,
    started: Vec<Started>,
    draining: Vec<JoinHandle<()>>,
    stop_backends: CancellationToken,
    metrics: Arc<Metrics>,
    front: Arc<Front>,
    join: Option<Join>,
}

impl Gateway {
    pub(crate) fn new(
        config: Config,
        source: Source,
        started: Vec<Started>,
        stop_backends: CancellationToken,
        front: Arc<Front>,
        join: Option<Join>,
    ) -> Gateway {
        Gateway {
            metrics: front.metrics.clone(),
            config,
            source,
            started,
            draining: Vec::new(),
            stop_backends,
            front,
            join,
        }
    }

    /// Reads the config again and applies it, or keeps the old one and
    /// logs why (the errors `sluice check` prints).
    pub(crate) fn reload(&mut self) {
        let result = match &self.source.path {
            None => Err("the gateway runs its built-in default: no config file to reload".into()),
            Some(path) => config::load(path, &ProcessEnv)
                .map_err(|e| e.to_string())
                .and_then(|loaded| self.source.narrow(loaded.config))
                .and_then(|config| self.apply(config)),
        };
        self.metrics.reloaded(result.is_ok());
        match result {
            Ok(summary) => tracing::info!("config reloaded: {summary}"),
            Err(e) => tracing::error!("config reload refused, the old config kept:\n{e}"),
        }
    }

    /// Applies `new` whole, or changes nothing and says why.
    pub(crate) fn apply(&mut self, mut new: Config) -> Result<String, String> {
        let old = &self.config;
        // Where it listens is the process's own (and `--listen` may have
        // set it): kept without a warning, like what else needs a restart.
        new.server.listen = old.server.listen;
        let restart = keep_restart_only(old, &mut new);
        let ring = match &new.server.session_keys {
            Some(keys) if old.server.session_keys.as_ref() != Some(keys) => Some(
                crate::sessions::sealed::KeyRing::parse(keys.expose())
                    .map_err(|why| format!("SLUICE_SESSION_KEY: {why}"))?,
            ),
            _ => None,
        };
        // Read whole again (the files may have changed since the check),
        // and installed with the layout, or not at all.
        let certificate = match (&self.front.tls, &new.server.tls) {
            (Some(_), Some(files)) => Some(front::Certs::read(files).map_err(|e| e.to_string())?),
            _ => None,
        };
        for b in &new.backends {
            if !old.backend(b.name.as_str()).is_some_and(|o| runs_as(o, b)) {
                crate::upstream::check(b).map_err(|why| format!("backend `{}`: {why}", b.name))?;
            }
        }
        // Unchanged, it keeps what it learnt (the issuer's keys).
        let scopes = |c: &Config| -> Vec<(String, Vec<String>)> {
            c.namespaces
                .iter()
                .map(|n| (n.name.to_string(), n.require_scopes.clone()))
                .collect()
        };
        let auth = if new.auth == old.auth && scopes(&new) == scopes(old) {
            self.front.layout.load().policy.auth.clone()
        } else {
            new.auth
                .as_ref()
                .map(|a| Authenticator::new(a, &new.namespaces))
                .transpose()
                .map_err(|why| format!("[auth]: {why}"))?
        };

        // Start what is new or changed; keep what is not.
        let mut kept: Vec<Started> = Vec::new();
        let mut fresh: Vec<Started> = Vec::new();
        let mut old_started = std::mem::take(&mut self.started);
        for b in &new.backends {
            let same = old.backend(b.name.as_str()).is_some_and(|o| runs_as(o, b));
            let running = old_started.iter().position(|s| s.backend.name == b.name);
            if same && let Some(at) = running {
                kept.push(old_started.swap_remove(at));
                continue;
            }
            match start(
                b,
                &self.metrics,
                new.server.settle_timeout,
                &self.stop_backends,
            ) {
                Ok(s) => fresh.push(s),
                Err(why) => {
                    // Nothing changes: what this reload started is stopped.
                    for s in fresh {
                        s.stop.cancel();
                    }
                    old_started.extend(kept);
                    self.started = old_started;
                    return Err(format!("backend `{}`: {why}", b.name));
                }
            }
        }
        if let Some(join) = &self.join {
            for s in &fresh {
                join(&s.backend);
            }
        }
        let added: Vec<&BackendName> = fresh
            .iter()
            .filter(|s| old.backend(s.backend.name.as_str()).is_none())
            .map(|s| &s.backend.name)
            .collect();
        let changed: Vec<&BackendName> = fresh
            .iter()
            .filter(|s| old.backend(s.backend.name.as_str()).is_some())
            .map(|s| &s.backend.name)
            .collect();
        let removed: Vec<BackendName> = old_started
            .iter()
            .filter(|s| new.backend(s.backend.name.as_str()).is_none())
            .map(|s| s.backend.name.clone())
            .collect();
        // Kept running, their tools served anew by the namespaces.
        let retooled: Vec<&BackendName> = kept
            .iter()
            .filter(|s| {
                old.backend(s.backend.name.as_str()) != new.backend(s.backend.name.as_str())
            })
            .map(|s| &s.backend.name)
            .collect();
        let mut summary = format!(
            "backends added [{}], changed [{}], removed [{}], unchanged {}",
            join_names(&added),
            join_names(&changed),
            join_names(&removed.iter().collect::<Vec<_>>()),
            kept.len() - retooled.len(),
        );
        if !retooled.is_empty() {
            summary.push_str(&format!(
                ", tools changed without a restart [{}]",
                join_names(&retooled)
            ));
        }
        let namespaces = |of: &Config, without: &Config| -> Vec<String> {
            of.namespaces
                .iter()
                .filter(|n| without.namespace(n.name.as_str()).is_none())
                .map(|n| n.name.to_string())
                .collect()
        };
        let (ns_added, ns_removed) = (namespaces(&new, old), namespaces(old, &new));
        if !ns_added.is_empty() || !ns_removed.is_empty() {
            summary.push_str(&format!(
                "; namespaces added [{}], removed [{}]",
                ns_added.join(", "),
                ns_removed.join(", ")
            ));
        }

        // The new layout, in config order, swapped in whole.
        let mut started: Vec<Started> = Vec::with_capacity(new.backends.len());
        let mut pool = kept.into_iter().chain(fresh).collect::<Vec<_>>();
        for b in &new.backends {
            if let Some(at) = pool.iter().position(|s| s.backend.name == b.name) {
                started.push(pool.swap_remove(at));
            }
        }
        let backends: Vec<Arc<Backend>> = started.iter().map(|s| s.backend.clone()).collect();
        let current = self.front.layout.load_full();
        crate::budget::BODIES.set_limit(
            new.server
                .max_inflight_body_bytes
                .map_or_else(crate::budget::default_limit, std::num::NonZeroUsize::get),
        );
        let layout = Layout {
            policy: Policy {
                auth,
                allowed_origins: new.server.allowed_origins.clone(),
                max_body_bytes: new.server.max_body_bytes,
                ..current.policy.clone()
            },
            router: current.router.rebuild(&new, &backends),
            limits: if new.limits == old.limits && new.auth.is_some() == old.auth.is_some() {
                current.limits.clone()
            } else {
                front::Limits::new(new.limits, new.auth.is_some(), current.limits.connections())
            },
            backends,
        };
        self.front.layout.store(Arc::new(layout));
        self.front.reloads.send_replace(());
        let rotated = ring.is_some_and(|ring| self.front.sessions.rotate_keys(ring));
        if let (Some(certs), Some(key)) = (&self.front.tls, certificate) {
            certs.install(key);
            summary.push_str("; TLS certificate read again");
        }

        // What left the layout is drained in the background.
        for s in old_started {
            let front = self.front.clone();
            self.draining.push(tokio::spawn(async move {
                s.stop.cancel();
                if tokio::time::timeout(DRAIN_TIMEOUT, s.task).await.is_err() {
                    tracing::warn!(backend = %s.backend.name, "backend did not stop in time after the reload");
                }
                // Unless a later reload has brought the name back meanwhile.
                let name = &s.backend.name;
                if !front.layout.load().backends.iter().any(|b| &b.name == name) {
                    front.metrics.backend_removed(name);
                }
                tracing::info!(backend = %s.backend.name, "backend drained after the reload");
            }));
        }
        self.draining.retain(|d| !d.is_finished());
        if rotated {
            summary.push_str(", session keys rotated");
        }
        self.started = started;
        self.config = new;
        if !restart.is_empty() {
            tracing::warn!(
                "config reload: {} changed, which takes effect at restart",
                restart.join(", ")
            );
        }
        Ok(summary)
    }

    /// Every backend task, running or draining, for the shutdown to await.
    pub(crate) fn tasks(self) -> Vec<JoinHandle<()>> {
        self.started
            .into_iter()
            .map(|s| s.task)
            .chain(self.draining)
            .collect()
    }
}

/// Whether the backend `old` started serves `new` as it runs: they differ
/// at most in `tools`, which the namespaces apply over it (its filter and
/// renames), so its process and sessions are kept.
fn runs_as(old: &BackendConfig, new: &BackendConfig) -> bool {
    *old == BackendConfig {
        tools: old.tools.clone(),
        ..new.clone()
    }
}

fn join_names(names: &[&BackendName]) -> String {
    names
        .iter()
        .map(|n| n.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `old`'s server settings with those a reload applies taken from `new`.
fn applied_server(old: &ServerSettings, new: &ServerSettings) -> ServerSettings {
    ServerSettings {
        allowed_origins: new.allowed_origins.clone(),
        max_body_bytes: new.max_body_bytes,
        list_page_size: new.list_page_size,
        // The backends' default: a change restarts the backends it reaches.
        request_timeout: new.request_timeout,
        // For the backends a reload starts.
        settle_timeout: new.settle_timeout,
        // The files of a listener that has TLS (read again at each
        // reload); TLS on or off is the listener's own, kept to restart.
        tls: match (&old.tls, &new.tls) {
            (Some(_), Some(files)) => Some(files.clone()),
            _ => old.tls.clone(),
        },
        // A new key ring (from a `SLUICE_SESSION_KEY_FILE` rewritten), not
        // a change between table and sealed ids.
        session_keys: match (&old.session_keys, &new.session_keys) {
            (Some(_), Some(keys)) => Some(keys.clone()),
            _ => old.session_keys.clone(),
        },
        ..old.clone()
    }
}

/// Keeps in `new` what a reload cannot apply to a running process, so it
/// is the config in force; names what was kept.
fn keep_restart_only(old: &Config, new: &mut Config) -> Vec<&'static str> {
    let mut kept = Vec::new();
    let server = applied_server(&old.server, &new.server);
    if server != new.server {
        kept.push(
            "[server] (other than allowed_origins, max_body_bytes, list_page_size, request_timeout, the session key ring and the tls files)",
        );
        new.server = server;
    }
    if new.metrics != old.metrics {
        kept.push("[metrics]");
        new.metrics = old.metrics.clone();
    }
    if new.cluster != old.cluster {
        kept.push("[cluster]");
        new.cluster = old.cluster.clone();
    }
    if new.tracing != old.tracing {
        kept.push("[tracing]");
        new.tracing = old.tracing.clone();
    }
    kept
}
