//! Per-session HTTP backend sessions, shared by the replicas serving one
//! client session. The first replica to need one opens it and records it
//! (`sluice:bs:{backend}:{client}`, the client being a digest of its
//! session id); any other replica the client reaches uses the same one,
//! so the backend sees one session per client session, whichever replica
//! serves it. Each use refreshes the record. A replica done with it (idle,
//! shutting down) ends it only if no other replica used it within the
//! backend's `idle_ttl`; a session ended on purpose is ended at once; and
//! records nobody refreshed are ended by a sweeper on one replica at a
//! time (a lease), so sessions of replicas that died are closed too.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::AsyncCommands;
use tokio_util::sync::CancellationToken;

use super::{Cluster, PREFIX};
use crate::upstream::SharedSession;

static RELEASE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(RELEASE));
static TAKE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(TAKE));
static REFRESH_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(REFRESH));

/// Records looked at per sweep.
const SWEEP_BATCH: isize = 256;

/// Ends a backend session by its recorded id: (backend, session id).
pub type Close =
    Arc<dyn Fn(String, String) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// Drops a record unless another replica used it after this one, within
/// its TTL: 1 (the caller ends the session), else 0. KEYS: record, due
/// set. ARGV: this replica, its last use (ms), now (ms).
const RELEASE: &str = r"
local f = redis.call('HMGET', KEYS[1], 'by', 'last', 'ttl')
if f[1] and f[1] ~= ARGV[1] and tonumber(f[2]) > tonumber(ARGV[2])
   and tonumber(ARGV[3]) - tonumber(f[2]) < tonumber(f[3]) then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
return 1
";

/// Records a use; the latest use wins (refreshes arrive out of order).
/// KEYS: record, due set. ARGV: record ('' to keep it), backend, replica,
/// used (ms), ttl (ms), due (s).
const REFRESH: &str = r"
local last = tonumber(redis.call('HGET', KEYS[1], 'last') or '0')
if tonumber(ARGV[4]) >= last then
  if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], 'record', ARGV[1]) end
  redis.call('HSET', KEYS[1], 'by', ARGV[3], 'last', ARGV[4])
end
redis.call('HSET', KEYS[1], 'backend', ARGV[2], 'ttl', ARGV[5])
-- Should every replica be gone for long, Redis forgets it by itself.
redis.call('PEXPIRE', KEYS[1], 4 * tonumber(ARGV[5]) + 60000)
local due = tonumber(redis.call('ZSCORE', KEYS[2], KEYS[1]) or '0')
if tonumber(ARGV[6]) > due then redis.call('ZADD', KEYS[2], ARGV[6], KEYS[1]) end
return 1
";

/// Removes a record and returns (backend, record). KEYS: record, due set.
const TAKE: &str = r"
local f = redis.call('HMGET', KEYS[1], 'backend', 'record')
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
if f[2] then return {f[1], f[2]} end
return {}
";

#[derive(Clone)]
pub struct BackendSessions {
    cluster: Arc<Cluster>,
}

fn due_set() -> String {
    format!("{PREFIX}bs-due")
}

fn key(backend: &str, client: &str) -> String {
    format!("{PREFIX}bs:{backend}:{client}")
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Past its last use plus the TTL, and a margin for the refresh period
/// (a quarter of the TTL) and clocks: only then is a record swept.
fn due(idle_ttl: Duration) -> u64 {
    let ttl = u64::try_from(idle_ttl.as_millis()).unwrap_or(u64::MAX);
    (now_ms().saturating_add(ttl).saturating_add(ttl / 4) / 1000) + 2
}

impl BackendSessions {
    pub fn new(cluster: Arc<Cluster>) -> BackendSessions {
        BackendSessions { cluster }
    }

    async fn find(&self, backend: String, client: String) -> Option<SharedSession> {
        let key = key(&backend, &client);
        let record: Option<String> = self
            .cluster
            .run(async |c| c.hget(&key, "record").await)
            .await?;
        serde_json::from_str(&record?).ok()
    }

    async fn claim(
        &self,
        backend: String,
        client: String,
        ours: SharedSession,
        idle_ttl: Duration,
    ) -> Option<SharedSession> {
        let key = key(&backend, &client);
        let record = serde_json::to_string(&ours).ok()?;
        let set: bool = self
            .cluster
            .run(async |c| c.hset_nx(&key, "record", &record).await)
            .await?;
        if set {
            self.refresh(&key, &backend, None, now_ms(), idle_ttl).await;
            return None;
        }
        self.find(backend, client).await
    }

    /// Marks the record used at `used` (ms) by this replica (and, given,
    /// the session as it is now). The latest use wins.
    async fn refresh(
        &self,
        key: &str,
        backend: &str,
        record: Option<String>,
        used: u64,
        idle_ttl: Duration,
    ) {
        let ttl = u64::try_from(idle_ttl.as_millis()).unwrap_or(u64::MAX);
        let replica = self.cluster.replica;
        let _ = self
            .cluster
            .run(async |c| {
                REFRESH_SCRIPT
                    .key(key)
                    .key(due_set())
                    .arg(record.as_deref().unwrap_or(""))
                    .arg(backend)
                    .arg(replica)
                    .arg(used)
                    .arg(ttl)
                    .arg(due(idle_ttl))
                    .invoke_async::<i64>(c)
                    .await
            })
            .await;
    }

    async fn release(&self, backend: String, client: String, used: u64) -> bool {
        let key = key(&backend, &client);
        let replica = self.cluster.replica.to_string();
        // Redis unreachable: nobody can say who else uses it; end it (a
        // replica that still does re-initializes on the backend's 404).
        self.cluster
            .run(async |c| {
                RELEASE_SCRIPT
                    .key(&key)
                    .key(due_set())
                    .arg(&replica)
                    .arg(used)
                    .arg(now_ms())
                    .invoke_async::<i64>(c)
                    .await
            })
            .await
            .is_none_or(|released| released == 1)
    }

    /// (backend, record) of a record, removed.
    async fn take_key(&self, key: &str) -> Option<(String, SharedSession)> {
        let taken: Vec<String> = self
            .cluster
            .run(async |c| {
                TAKE_SCRIPT
                    .key(key)
                    .key(due_set())
                    .invoke_async::<Vec<String>>(c)
                    .await
            })
            .await?;
        let [backend, record] = <[String; 2]>::try_from(taken).ok()?;
        Some((backend, serde_json::from_str(&record).ok()?))
    }

    /// Every `period`, under a lease: ends the backend sessions nobody has
    /// used within their TTL (their replicas died, or lost Redis).
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
        let now = now_ms() / 1000;
        let due: Vec<String> = self
            .cluster
            .run(async |c| {
                c.zrangebyscore_limit::<_, _, _, Vec<String>>(
                    due_set(),
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
            if let Some((backend, record)) = self.take_key(&key).await {
                tracing::info!(backend = %backend, "closing a backend session no replica used within its idle_ttl");
                close(backend, record.session).await;
            }
        }
    }
}

/// The upstream side's view (see `upstream::Records`); refreshes run on
/// their own task, so a slow Redis never holds a call up.
impl crate::upstream::Records for BackendSessions {
    fn find(&self, backend: &str, client: &str) -> BoxFuture<'static, Option<SharedSession>> {
        let (me, backend, client) = (self.clone(), backend.to_owned(), client.to_owned());
        Box::pin(async move { me.find(backend, client).await })
    }

    fn claim(
        &self,
        backend: &str,
        client: &str,
        ours: SharedSession,
        idle_ttl: Duration,
    ) -> BoxFuture<'static, Option<SharedSession>> {
        let (me, backend, client) = (self.clone(), backend.to_owned(), client.to_owned());
        Box::pin(async move { me.claim(backend, client, ours, idle_ttl).await })
    }

    fn keep(&self, backend: &str, client: &str, now: SharedSession, used: u64, idle_ttl: Duration) {
        let (me, backend) = (self.clone(), backend.to_owned());
        let key = key(&backend, client);
        let record = serde_json::to_string(&now).ok();
        tokio::spawn(async move { me.refresh(&key, &backend, record, used, idle_ttl).await });
    }

    fn release(&self, backend: &str, client: &str, used: u64) -> BoxFuture<'static, bool> {
        let (me, backend, client) = (self.clone(), backend.to_owned(), client.to_owned());
        Box::pin(async move { me.release(backend, client, used).await })
    }

    fn take(&self, backend: &str, client: &str) -> BoxFuture<'static, Option<SharedSession>> {
        let (me, key) = (self.clone(), key(backend, client));
        Box::pin(async move { me.take_key(&key).await.map(|(_, r)| r) })
    }
}
