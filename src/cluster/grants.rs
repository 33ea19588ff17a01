//! The authorization code flow's grants and start ids in Redis, shared by
//! every replica (`upstream::oauth::GrantStore`). Only sealed text is
//! written: grants are sealed with the sessions' key ring before they get
//! here (`upstream/oauth/store.rs`), start ids name a principal and a
//! backend, never a token.
//!
//! Keys, per backend: `sluice:oauth:grants:{backend}` (hash: principal tag
//! -> sealed grant) and `sluice:oauth:used:{backend}` (sorted set: tag ->
//! last use, ms): saving past `max_grants` drops the least recently used,
//! in one script. `sluice:oauth:refresh:{backend}:{tag}`: a refresh lock,
//! with its own expiry. `sluice:oauth:start:{id}` (the record, then `used`
//! once opened, for twice the flow's life, so a second use is named) and
//! `sluice:oauth:pending:{backend}:{tag}` (the unopened id, given again
//! while fresh). `sluice:oauth:state:{serial}`: a state already opened.
//! `sluice:oauth:client:{backend}:{digest}`: the gateway's registration
//! (RFC 7591) at the backend's server, sealed, made by the first replica
//! that needed it and used by all (a code is exchanged by the client it
//! was issued to, whichever replica the callback reaches).
//! A change is told to the other replicas on the bus.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::AsyncCommands;

use super::{BusMessage, Cluster, PREFIX};
use crate::sessions::Sessions;
use crate::sessions::sealed::KeyRing;
use crate::upstream::oauth::{GrantStore, TakenStart};
use crate::vocab::Principal;

static SAVE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(SAVE));
static UNLOCK_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(UNLOCK));
static START_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(START));
static TAKE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(TAKE));
static LOAD_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(LOAD));

/// Keeps a grant and drops the least recently used past the bound.
/// KEYS: grants hash, use set. ARGV: field, sealed, now (ms), max.
/// Returns the dropped ones as field, sealed, field, sealed, ...
const SAVE: &str = r"
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local out = {}
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  local gone = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #gone, 2 do
    local f = gone[i]
    local v = redis.call('HGET', KEYS[1], f)
    redis.call('HDEL', KEYS[1], f)
    if v then table.insert(out, f); table.insert(out, v) end
  end
end
return out
";

/// A grant, its use noted. KEYS: grants hash, use set. ARGV: field, now (ms).
const LOAD: &str = r"
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v then redis.call('ZADD', KEYS[2], 'XX', ARGV[2], ARGV[1]) end
return v
";

/// Gives a lock back if it is still ours. KEYS: lock. ARGV: token.
const UNLOCK: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
";

/// The pending id if fresh, else a new one. KEYS: pending, new start.
/// ARGV: new id, record, key ttl (s), least ttl left to reuse (s), start
/// key prefix.
const START: &str = r"
local id = redis.call('GET', KEYS[1])
if id then
  local k = ARGV[5] .. id
  local v = redis.call('GET', k)
  if v and v ~= 'used' then
    if redis.call('TTL', k) >= tonumber(ARGV[4]) then return id end
    redis.call('DEL', k)
  end
end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
return ARGV[1]
";

/// Opens a start id once. KEYS: start. Returns the record, 'used', or nil.
const TAKE: &str = r"
local v = redis.call('GET', KEYS[1])
if not v or v == 'used' then return v end
redis.call('SET', KEYS[1], 'used', 'KEEPTTL')
return v
";

/// Redis as the replicas' grant store.
#[derive(Clone)]
pub struct RedisGrants {
    cluster: Arc<Cluster>,
    /// Whose key ring seals grants (rotated by a reload).
    sessions: Arc<Sessions>,
}

fn grants_key(backend: &str) -> String {
    format!("{PREFIX}oauth:grants:{backend}")
}

fn used_key(backend: &str) -> String {
    format!("{PREFIX}oauth:used:{backend}")
}

fn start_key(id: &str) -> String {
    format!("{PREFIX}oauth:start:{id}")
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn token() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("OS randomness is unavailable");
    crate::vocab::hex(&bytes)
}

impl RedisGrants {
    pub fn new(cluster: Arc<Cluster>, sessions: Arc<Sessions>) -> RedisGrants {
        RedisGrants { cluster, sessions }
    }
}

impl GrantStore for RedisGrants {
    fn ring(&self) -> Option<Arc<KeyRing>> {
        self.sessions.key_ring()
    }

    fn load(&self, backend: &str, field: &str) -> BoxFuture<'static, Option<Option<String>>> {
        let (cluster, field) = (self.cluster.clone(), field.to_owned());
        let (grants, used) = (grants_key(backend), used_key(backend));
        Box::pin(async move {
            cluster
                .run(async |c| {
                    LOAD_SCRIPT
                        .key(&grants)
                        .key(&used)
                        .arg(&field)
                        .arg(now_ms())
                        .invoke_async::<Option<String>>(c)
                        .await
                })
                .await
        })
    }

    fn save(
        &self,
        backend: &str,
        field: &str,
        sealed: String,
        max: usize,
    ) -> BoxFuture<'static, Option<Vec<(String, String)>>> {
        let (cluster, field) = (self.cluster.clone(), field.to_owned());
        let (grants, used) = (grants_key(backend), used_key(backend));
        Box::pin(async move {
            let gone: Vec<String> = cluster
                .run(async |c| {
                    SAVE_SCRIPT
                        .key(&grants)
                        .key(&used)
                        .arg(&field)
                        .arg(&sealed)
                        .arg(now_ms())
                        .arg(max)
                        .invoke_async::<Vec<String>>(c)
                        .await
                })
                .await?;
            Some(
                gone.chunks_exact(2)
                    .map(|p| (p[0].clone(), p[1].clone()))
                    .collect(),
            )
        })
    }

    fn remove(&self, backend: &str, field: &str) -> BoxFuture<'static, Option<Option<String>>> {
        let (cluster, field) = (self.cluster.clone(), field.to_owned());
        let (grants, used) = (grants_key(backend), used_key(backend));
        Box::pin(async move {
            cluster
                .run(async |c| {
                    let mut pipe = redis::pipe();
                    pipe.atomic()
                        .hget(&grants, &field)
                        .hdel(&grants, &field)
                        .ignore()
                        .zrem(&used, &field)
                        .ignore();
                    let (v,): (Option<String>,) = pipe.query_async(c).await?;
                    Ok(v)
                })
                .await
        })
    }

    fn count(&self, backend: &str) -> BoxFuture<'static, Option<usize>> {
        let (cluster, grants) = (self.cluster.clone(), grants_key(backend));
        Box::pin(async move {
            cluster
                .run(async |c| c.hlen::<_, usize>(&grants).await)
                .await
        })
    }

    fn lock(
        &self,
        backend: &str,
        field: &str,
        ttl: Duration,
    ) -> BoxFuture<'static, Option<Option<String>>> {
        let cluster = self.cluster.clone();
        let key = format!("{PREFIX}oauth:refresh:{backend}:{field}");
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        Box::pin(async move {
            let token = token();
            let set = set_nx(&cluster, &key, &token, Some(redis::SetExpiry::PX(ttl))).await?;
            Some(set.then_some(token))
        })
    }

    fn unlock(&self, backend: &str, field: &str, token: String) -> BoxFuture<'static, ()> {
        let cluster = self.cluster.clone();
        let key = format!("{PREFIX}oauth:refresh:{backend}:{field}");
        Box::pin(async move {
            let _ = cluster
                .run(async |c| {
                    UNLOCK_SCRIPT
                        .key(&key)
                        .arg(&token)
                        .invoke_async::<i64>(c)
                        .await
                })
                .await;
        })
    }

    fn changed(&self, backend: &str, principal: &Principal) {
        let cluster = self.cluster.clone();
        let message = BusMessage::Grant {
            backend: backend.to_owned(),
            principal: principal.clone(),
        };
        tokio::spawn(async move { cluster.publish(message).await });
    }

    fn start(
        &self,
        backend: &str,
        field: &str,
        id: String,
        record: String,
        ttl: Duration,
        fresh: Duration,
    ) -> BoxFuture<'static, Option<String>> {
        let cluster = self.cluster.clone();
        let pending = format!("{PREFIX}oauth:pending:{backend}:{field}");
        // Kept twice its life: a used or expired id is named, not unknown.
        let (life, fresh) = (ttl.as_secs(), fresh.as_secs());
        Box::pin(async move {
            cluster
                .run(async |c| {
                    START_SCRIPT
                        .key(&pending)
                        .key(start_key(&id))
                        .arg(&id)
                        .arg(&record)
                        .arg(2 * life)
                        .arg(life + fresh)
                        .arg(start_key(""))
                        .invoke_async::<String>(c)
                        .await
                })
                .await
        })
    }

    fn take_start(&self, id: &str) -> BoxFuture<'static, Option<TakenStart>> {
        let (cluster, key) = (self.cluster.clone(), start_key(id));
        Box::pin(async move {
            let taken: Option<String> = cluster
                .run(async |c| TAKE_SCRIPT.key(&key).invoke_async(c).await)
                .await?;
            Some(match taken {
                None => TakenStart::Unknown,
                Some(v) if v == "used" => TakenStart::Used,
                Some(record) => TakenStart::Record(record),
            })
        })
    }

    fn first_use(&self, serial: &str, expires: u64) -> BoxFuture<'static, Option<bool>> {
        let cluster = self.cluster.clone();
        let key = format!("{PREFIX}oauth:state:{serial}");
        Box::pin(
            async move { set_nx(&cluster, &key, "1", Some(redis::SetExpiry::EXAT(expires))).await },
        )
    }

    fn client(&self, backend: &str, tag: &str) -> BoxFuture<'static, Option<Option<String>>> {
        let (cluster, key) = (self.cluster.clone(), client_key(backend, tag));
        Box::pin(async move { cluster.run(async |c| c.get(&key).await).await })
    }

    fn keep_client(
        &self,
        backend: &str,
        tag: &str,
        sealed: String,
    ) -> BoxFuture<'static, Option<bool>> {
        let (cluster, key) = (self.cluster.clone(), client_key(backend, tag));
        // No expiry: one per backend and server, bounded by the config.
        Box::pin(async move { set_nx(&cluster, &key, &sealed, None).await })
    }
}

/// A registration outlives restarts: it is the gateway's identity there.
fn client_key(backend: &str, tag: &str) -> String {
    format!("{PREFIX}oauth:client:{backend}:{tag}")
}

/// `SET key value NX` (with an expiry, if given): whether it was set
/// (None: Redis could not say).
async fn set_nx(
    cluster: &Cluster,
    key: &str,
    value: &str,
    expiry: Option<redis::SetExpiry>,
) -> Option<bool> {
    let mut options = redis::SetOptions::default().conditional_set(redis::ExistenceCheck::NX);
    if let Some(expiry) = expiry {
        options = options.with_expiration(expiry);
    }
    let set: Option<String> = cluster
        .run(async |c| {
            c.set_options::<_, _, Option<String>>(key, value, options)
                .await
        })
        .await?;
    Some(set.is_some())
}
