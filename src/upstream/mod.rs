//! Upstream: one `Backend` per configured server. It owns the transport,
//! the backend sessions, health and restarts. Callers see `call` and
//! `notify`; which connection serves them is the backend's business.

mod child;
mod conn;
mod stdio;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::value::RawValue;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

pub use conn::EventSink;

use crate::config::{BackendConfig, BackendName, Transport};
use crate::jsonrpc::Outcome;
use crate::metrics::Metrics;

/// Why a call to a backend produced no JSON-RPC outcome.
#[derive(Debug, Clone, thiserror::Error)]
#[error("backend `{backend}` {kind}")]
pub struct UpstreamError {
    backend: BackendName,
    kind: ErrorKind,
}

#[derive(Debug, Clone, thiserror::Error)]
enum ErrorKind {
    #[error("is unavailable: {0}")]
    Unavailable(String),
    #[error("exited before answering")]
    Exited,
    #[error("did not answer in time")]
    Timeout,
    #[error("has too many requests in flight")]
    Overloaded,
}

impl UpstreamError {
    fn exited(b: &BackendName) -> Self {
        Self {
            backend: b.clone(),
            kind: ErrorKind::Exited,
        }
    }
    fn timeout(b: &BackendName) -> Self {
        Self {
            backend: b.clone(),
            kind: ErrorKind::Timeout,
        }
    }
    fn overloaded(b: &BackendName) -> Self {
        Self {
            backend: b.clone(),
            kind: ErrorKind::Overloaded,
        }
    }
    fn unavailable(b: &BackendName, why: String) -> Self {
        Self {
            backend: b.clone(),
            kind: ErrorKind::Unavailable(why),
        }
    }
    pub fn is_timeout(&self) -> bool {
        matches!(self.kind, ErrorKind::Timeout)
    }
}

/// What the backend told us about itself in `initialize`.
#[derive(Debug)]
pub struct InitInfo {
    pub capabilities: serde_json::Map<String, serde_json::Value>,
    pub instructions: Option<String>,
}

impl InitInfo {
    fn parse(result: &RawValue) -> Result<InitInfo, serde_json::Error> {
        #[derive(serde::Deserialize)]
        struct Wire {
            #[serde(default)]
            capabilities: serde_json::Map<String, serde_json::Value>,
            #[serde(default)]
            instructions: Option<String>,
        }
        let w: Wire = serde_json::from_str(result.get())?;
        Ok(InitInfo {
            capabilities: w.capabilities,
            instructions: w.instructions,
        })
    }

    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.contains_key(capability)
    }

    /// The cheapest list call the backend supports, for the health check.
    fn health_probe(&self) -> &'static str {
        ["tools", "prompts", "resources"]
            .into_iter()
            .zip(["tools/list", "prompts/list", "resources/list"])
            .find(|(cap, _)| self.has(cap))
            .map_or("ping", |(_, m)| m)
    }
}

const LIST_CHANGED: [&str; 3] = [
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
];

enum Health {
    Starting,
    Up(Arc<conn::Conn>, Arc<InitInfo>),
    Down(String),
    Stopped,
}

pub struct Backend {
    pub name: BackendName,
    timeout: Duration,
    health: Mutex<Health>,
    /// False until the first start attempt has ended, either way.
    settled: tokio::sync::watch::Sender<bool>,
    changes: broadcast::Sender<String>,
    metrics: Arc<Metrics>,
}

impl Backend {
    /// Starts the backend's supervisor; it runs until `stop` is cancelled.
    pub fn start(
        config: &BackendConfig,
        metrics: Arc<Metrics>,
        stop: CancellationToken,
    ) -> (Arc<Backend>, tokio::task::JoinHandle<()>) {
        let backend = Arc::new(Backend {
            name: config.name.clone(),
            timeout: config.request_timeout,
            health: Mutex::new(Health::Starting),
            settled: tokio::sync::watch::channel(false).0,
            changes: broadcast::channel(16).0,
            metrics,
        });
        backend.metrics.backend_up(&backend.name, false);
        match &config.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let spec = stdio::StdioSpec {
                    command: command.clone(),
                    args: args.clone(),
                    env: env.clone(),
                    cwd: cwd.clone(),
                };
                let task = tokio::spawn(stdio::supervise(backend.clone(), spec, stop));
                (backend, task)
            }
            Transport::Http { .. } | Transport::Sse { .. } => {
                *backend.health.lock() = Health::Down("HTTP backends are not supported yet".into());
                (backend, tokio::spawn(async {}))
            }
        }
    }

    fn set_health(&self, health: Health) {
        let up = matches!(health, Health::Up(..));
        let was_up = matches!(
            std::mem::replace(&mut *self.health.lock(), health),
            Health::Up(..)
        );
        self.metrics.backend_up(&self.name, up);
        self.settled.send_replace(true);
        if up && !was_up {
            // Clients that listed while it was away have incomplete lists.
            for method in LIST_CHANGED {
                self.list_changed(method);
            }
        }
    }

    /// Waits (at most `limit`) for the first start attempt to end, so that
    /// clients arriving with the gateway see complete lists.
    pub async fn settle(&self, limit: Duration) {
        let mut rx = self.settled.subscribe();
        let _ = tokio::time::timeout(limit, rx.wait_for(|s| *s)).await;
    }

    fn conn(&self) -> Result<Arc<conn::Conn>, UpstreamError> {
        match &*self.health.lock() {
            Health::Up(c, _) => Ok(c.clone()),
            Health::Starting => Err(UpstreamError::unavailable(&self.name, "starting".into())),
            Health::Down(why) => Err(UpstreamError::unavailable(&self.name, why.clone())),
            Health::Stopped => Err(UpstreamError::unavailable(&self.name, "stopped".into())),
        }
    }

    /// The backend's `initialize` result, while it is healthy.
    pub fn info(&self) -> Option<Arc<InitInfo>> {
        match &*self.health.lock() {
            Health::Up(_, info) => Some(info.clone()),
            _ => None,
        }
    }

    pub fn is_up(&self) -> bool {
        matches!(&*self.health.lock(), Health::Up(..))
    }

    /// Why the backend is not healthy (None when it is).
    pub fn problem(&self) -> Option<String> {
        match &*self.health.lock() {
            Health::Up(..) => None,
            Health::Starting => Some("starting".into()),
            Health::Down(why) => Some(why.clone()),
            Health::Stopped => Some("stopped".into()),
        }
    }

    /// Sends a request. Progress and server-to-client requests caused by it
    /// go to `events`.
    pub async fn call(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
        events: Option<&EventSink>,
    ) -> Result<Outcome, UpstreamError> {
        self.conn()?
            .call(method, params, events, self.timeout)
            .await
    }

    /// Delivers a client's answer to a request this backend sent.
    pub fn answer(&self, gateway_id: u64, outcome: &Outcome) -> bool {
        self.conn().is_ok_and(|c| c.answer(gateway_id, outcome))
    }

    /// List-change notifications (`notifications/tools/list_changed`, ...).
    pub fn subscribe_changes(&self) -> broadcast::Receiver<String> {
        self.changes.subscribe()
    }

    fn list_changed(&self, method: &str) {
        let _ = self.changes.send(method.to_owned());
    }
}
