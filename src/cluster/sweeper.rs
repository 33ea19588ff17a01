//! Per-session backend sessions across the cluster. Each one a replica
//! opens on an HTTP backend is recorded in Redis (which replica, which
//! backend, the backend's session id, when it is due to be idle). The
//! replica that owns it keeps its record fresh and ends it itself; if that
//! replica dies, its records stop being refreshed, and one surviving
//! replica (holding a short lease, so that two never close the same
//! session) sends the backend the DELETE the dead one never could. So the
//! backend's live sessions come back to the client sessions that use them,
//! and to 0 after the TTLs, whichever replica opened them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use tokio_util::sync::CancellationToken;

use super::{Cluster, PREFIX};
use crate::sessions::unix_now;

/// Records looked at per sweep.
const SWEEP_BATCH: isize = 256;

/// Ends a backend session by its recorded id: (backend, session id).
pub type Close =
    Arc<dyn Fn(String, String) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

#[derive(Clone)]
pub struct BackendSessions {
    cluster: Arc<Cluster>,
}

fn idle_set() -> String {
    format!("{PREFIX}bs-idle")
}

impl BackendSessions {
    pub fn new(cluster: Arc<Cluster>) -> BackendSessions {
        BackendSessions { cluster }
    }

    /// Records (or refreshes) a backend session: it is due to be closed
    /// `idle_ttl` from now unless refreshed again.
    pub async fn record(&self, backend: &str, session: &str, idle_ttl: Duration) {
        let key = format!("{PREFIX}bs:{}:{backend}:{session}", self.cluster.replica);
        let due = unix_now() + idle_ttl.as_secs();
        let replica = self.cluster.replica;
        let (backend, session) = (backend.to_owned(), session.to_owned());
        let _ = self
            .cluster
            .run(async |c| {
                let mut pipe = redis::pipe();
                pipe.atomic()
                    .hset_multiple(
                        &key,
                        &[
                            ("backend", backend.as_str()),
                            ("session", session.as_str()),
                            ("replica", &replica.to_string()),
                        ],
                    )
                    .ignore()
                    .zadd(idle_set(), &key, due)
                    .ignore();
                pipe.query_async::<()>(c).await
            })
            .await;
    }

    /// The owner ended it: nothing left to sweep.
    pub async fn unrecord(&self, backend: &str, session: &str) {
        let key = format!("{PREFIX}bs:{}:{backend}:{session}", self.cluster.replica);
        self.drop_record(&key).await;
    }

    async fn drop_record(&self, key: &str) {
        let _ = self
            .cluster
            .run(async |c| {
                let mut pipe = redis::pipe();
                pipe.del(key).ignore().zrem(idle_set(), key).ignore();
                pipe.query_async::<()>(c).await
            })
            .await;
    }

    /// Every `period`, under a lease: closes the overdue backend sessions
    /// of replicas that are no longer alive.
    pub async fn sweep(self, close: Close, period: Duration, stop: CancellationToken) {
        let mut tick = tokio::time::interval(period);
        let lease_ms = u64::try_from(period.as_millis())
            .unwrap_or(u64::MAX)
            .max(1000);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let replica = self.cluster.replica;
            let leased = self
                .cluster
                .run(async |c| {
                    c.set_options::<_, _, Option<String>>(
                        format!("{PREFIX}sweep-lease"),
                        replica,
                        redis::SetOptions::default()
                            .conditional_set(redis::ExistenceCheck::NX)
                            .with_expiration(redis::SetExpiry::PX(lease_ms)),
                    )
                    .await
                })
                .await
                .flatten()
                .is_some();
            if leased {
                self.sweep_once(&close).await;
            }
        }
    }

    async fn sweep_once(&self, close: &Close) {
        let now = unix_now();
        let due: Vec<String> = self
            .cluster
            .run(async |c| {
                c.zrangebyscore_limit::<_, _, _, Vec<String>>(
                    idle_set(),
                    "-inf",
                    now,
                    0,
                    SWEEP_BATCH,
                )
                .await
            })
            .await
            .unwrap_or_default();
        for key in due {
            let fields: Vec<Option<String>> = self
                .cluster
                .run(async |c| {
                    redis::cmd("HMGET")
                        .arg(&key)
                        .arg("backend")
                        .arg("session")
                        .arg("replica")
                        .query_async::<Vec<Option<String>>>(c)
                        .await
                })
                .await
                .unwrap_or_default();
            let fields: Vec<String> = fields.into_iter().map(Option::unwrap_or_default).collect();
            let [backend, session, owner] = <[String; 3]>::try_from(fields).unwrap_or_default();
            let owner: Option<u32> = owner.parse().ok();
            // A live owner ends its own sessions (it may have refreshed this
            // one meanwhile); only an orphan is ours to close.
            if let Some(o) = owner
                && o != self.cluster.replica
                && self.cluster.is_live_replica(o).await != Some(false)
            {
                continue;
            }
            if !backend.is_empty() && !session.is_empty() {
                tracing::info!(backend = %backend, "closing a backend session left by a replica that is gone");
                close(backend, session).await;
            }
            self.drop_record(&key).await;
        }
    }
}

/// The upstream side's view: per-session backend sessions recorded as they
/// open, refresh and close (each write on its own task: a slow Redis never
/// holds a call up).
impl crate::upstream::Records for BackendSessions {
    fn keep(&self, backend: &str, session: &str, idle_ttl: Duration) {
        let (me, backend, session) = (self.clone(), backend.to_owned(), session.to_owned());
        tokio::spawn(async move { me.record(&backend, &session, idle_ttl).await });
    }

    fn forget(&self, backend: &str, session: &str) {
        let (me, backend, session) = (self.clone(), backend.to_owned(), session.to_owned());
        tokio::spawn(async move { me.unrecord(&backend, &session).await });
    }
}
