//! Cluster mode (`[cluster] redis_url`): replicas behind any load balancer,
//! with no stickiness, serve any session. Sealed ids already make a legacy
//! session replica-independent; what must be shared lives in Redis:
//!
//! - revocations (`DELETE` on one replica is 404 on all), with the id's
//!   expiry as the key's;
//! - which replicas are alive (a heartbeat key each), to tell a session
//!   resumed from another live replica from one resumed after a restart;
//! - each principal's sessions, so the per-principal cap holds across
//!   replicas;
//! - the bus (`bus`): answers to server-to-client requests that reached
//!   another replica than the one whose backend asked, list changes, and
//!   notices for a client whose GET stream is on another replica;
//! - each principal's request rate (`[limits]`, `rate`);
//! - per-session HTTP backend sessions, so that every replica serving a
//!   client uses the one backend session, and a survivor closes those of
//!   a replica that died (`backend_sessions`);
//! - the authorization code flow's grants (sealed), start ids and used
//!   states, so a principal connected through one replica is connected on
//!   all, across restarts (`grants`).
//!
//! Redis unreachable: sealed sessions are still served (their ids carry
//! everything); what cannot be checked is let through (fail-open, see
//! docs/cluster.md for why), and `/readyz` says `redis` is unhealthy.

mod backend_sessions;
mod bus;
mod grants;
mod rate;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use backend_sessions::{BackendSessions, Close};
pub use bus::{BusMessage, Inbox};
pub use grants::RedisGrants;

use crate::config::ClusterSettings;
use crate::metrics::Metrics;
use crate::vocab::{SessionId, hex};

/// Every key and channel starts with this.
const PREFIX: &str = "sluice:";
/// A replica is alive while its heartbeat key is: renewed every
/// `HEARTBEAT`, it expires after `HEARTBEAT_TTL` of silence.
const HEARTBEAT: Duration = Duration::from_secs(2);
const HEARTBEAT_TTL: Duration = Duration::from_secs(6);
/// Every Redis command's deadline: a slow Redis must not slow requests.
const COMMAND_TIMEOUT: Duration = Duration::from_millis(500);
/// Sessions ended while Redis was unreachable, held until it is back; past
/// this, the oldest are dropped (each also expires with its id).
const HELD_ENDINGS: usize = 10_000;
/// A new cause for Redis being down is logged at most this often (a
/// change of state always is).
const REPORT_AGAIN: Duration = Duration::from_secs(60);
/// The cause logged for a command that met `COMMAND_TIMEOUT`.
const NO_ANSWER: &str = "no answer within 500 ms";

pub struct Cluster {
    conn: ConnectionManager,
    client: redis::Client,
    /// This process (the boot id sealed into the ids it issues).
    replica: u32,
    up: AtomicBool,
    /// Why Redis was last found down, and when that was logged (see
    /// `mark`); None while it answers.
    reported: parking_lot::Mutex<Option<(String, Instant)>>,
    metrics: Arc<Metrics>,
    /// Endings Redis could not take: (serial, expiry, id), sent when it is
    /// back, so a DELETE made meanwhile still reaches every replica.
    held: parking_lot::Mutex<std::collections::VecDeque<([u8; 16], u64, SessionId)>>,
}

#[derive(Debug, thiserror::Error)]
#[error("redis: {0}")]
pub struct ClusterError(String);

/// The client for `settings`: the URL (an ACL user and password in it),
/// the password from its own variable if one is named, and for
/// `rediss://` the configured CA (else the platform's trust store) and
/// client certificate.
fn client(settings: &ClusterSettings) -> Result<redis::Client, ClusterError> {
    use redis::IntoConnectionInfo as _;
    // Never the URL itself in an error: it may hold a password.
    let mut info = settings
        .redis_url
        .expose()
        .into_connection_info()
        .map_err(|e| ClusterError(format!("redis_url: {e}")))?;
    // No `CLIENT SETINFO`: an ACL user need not be allowed it (the list
    // in docs/cluster.md is every command sluice sends).
    let mut redis = info.redis_settings().clone().set_skip_set_lib_name();
    if let Some(password) = &settings.password {
        redis = redis.set_password(password.expose());
    }
    info = info.set_redis_settings(redis);
    if settings.ca_file.is_none() && settings.client_cert.is_none() {
        return redis::Client::open(info).map_err(|e| ClusterError(e.to_string()));
    }
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|e| ClusterError(format!("{}: {e}", path.display())))
    };
    let certs = redis::TlsCertificates {
        client_tls: match &settings.client_cert {
            Some((cert, key)) => Some(redis::ClientTlsConfig {
                client_cert: read(cert)?,
                client_key: read(key)?,
            }),
            None => None,
        },
        root_cert: settings.ca_file.as_deref().map(read).transpose()?,
    };
    redis::Client::build_with_tls(info, certs).map_err(|e| ClusterError(e.to_string()))
}

impl Cluster {
    /// Connects (lazily: a Redis that is down at start is retried) and
    /// starts the heartbeat and health check; they stop with `stop`.
    pub async fn start(
        settings: &ClusterSettings,
        replica: u32,
        metrics: Arc<Metrics>,
        stop: CancellationToken,
    ) -> Result<Arc<Cluster>, ClusterError> {
        let client = client(settings)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(COMMAND_TIMEOUT))
            .set_response_timeout(Some(COMMAND_TIMEOUT))
            .set_max_delay(Duration::from_secs(2));
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(|e| ClusterError(e.to_string()))?;
        let cluster = Arc::new(Cluster {
            conn,
            client,
            replica,
            up: AtomicBool::new(false),
            reported: parking_lot::Mutex::new(None),
            metrics,
            held: Default::default(),
        });
        cluster.metrics.cluster_up(false);
        tokio::spawn(cluster.clone().heartbeat(stop));
        Ok(cluster)
    }

    pub fn replica(&self) -> u32 {
        self.replica
    }

    /// Whether Redis answered the last heartbeat.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Records whether Redis answered, and logs a change: up, or down
    /// with its cause (refused, a certificate not trusted, a wrong
    /// password). A Redis wrong from the start is retried at every
    /// heartbeat: its cause is logged once, and again only when it
    /// changes, at most once per `REPORT_AGAIN`.
    fn mark(&self, outcome: Result<(), &str>) {
        let up = outcome.is_ok();
        let was = self.up.swap(up, Ordering::Relaxed);
        if was != up {
            self.metrics.cluster_up(up);
        }
        let mut reported = self.reported.lock();
        match outcome {
            Ok(()) => {
                if !was {
                    tracing::info!("redis reachable");
                }
                *reported = None;
            }
            Err(cause) => {
                let again = match &*reported {
                    None => true,
                    Some((last, at)) => was || (last != cause && at.elapsed() >= REPORT_AGAIN),
                };
                if again {
                    tracing::warn!(
                        cause = %cause,
                        "redis unreachable: revocations and caps are not shared meanwhile"
                    );
                    *reported = Some((cause.to_owned(), Instant::now()));
                }
            }
        }
    }

    /// A command with the cluster's deadline; marks Redis down on failure.
    /// While Redis is down, nothing waits on it: only the heartbeat tries
    /// (`try_run`), and finds it back.
    async fn run<T>(
        &self,
        f: impl AsyncFnOnce(&mut ConnectionManager) -> redis::RedisResult<T>,
    ) -> Option<T> {
        if !self.is_up() {
            return None;
        }
        self.try_run(f).await
    }

    async fn try_run<T>(
        &self,
        f: impl AsyncFnOnce(&mut ConnectionManager) -> redis::RedisResult<T>,
    ) -> Option<T> {
        match self.attempt(f).await {
            Ok(v) => Some(v),
            Err(why) => {
                self.mark(Err(why.as_deref().unwrap_or(NO_ANSWER)));
                None
            }
        }
    }

    /// One command under the deadline: its error's text, or None when no
    /// answer came in time.
    async fn attempt<T>(
        &self,
        f: impl AsyncFnOnce(&mut ConnectionManager) -> redis::RedisResult<T>,
    ) -> Result<T, Option<String>> {
        let mut conn = self.conn.clone();
        match tokio::time::timeout(COMMAND_TIMEOUT, f(&mut conn)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "redis command failed");
                Err(Some(e.to_string()))
            }
            Err(_) => Err(None),
        }
    }

    /// Why Redis does not answer: the connection manager keeps connecting
    /// behind a command that waits, so the command only times out; a
    /// connection of its own says what fails (refused, a certificate not
    /// trusted, a wrong password). Only the heartbeat asks, while Redis is
    /// down: one connection per `HEARTBEAT`.
    async fn why_unreachable(&self) -> String {
        match tokio::time::timeout(
            COMMAND_TIMEOUT,
            self.client.get_multiplexed_async_connection(),
        )
        .await
        {
            Ok(Err(e)) => e.to_string(),
            Ok(Ok(_)) | Err(_) => NO_ANSWER.to_owned(),
        }
    }

    /// Renews this replica's heartbeat, which is also the health check.
    async fn heartbeat(self: Arc<Self>, stop: CancellationToken) {
        let key = format!("{PREFIX}replica:{:08x}", self.replica);
        let ttl = u64::try_from(HEARTBEAT_TTL.as_millis()).unwrap_or(u64::MAX);
        let mut tick = tokio::time::interval(HEARTBEAT);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            let beat = self
                .attempt(async |c| {
                    c.set_options::<_, _, ()>(
                        &key,
                        1,
                        redis::SetOptions::default().with_expiration(redis::SetExpiry::PX(ttl)),
                    )
                    .await
                })
                .await;
            let was_up = self.is_up();
            match beat {
                Ok(()) => {
                    self.mark(Ok(()));
                    if !was_up {
                        self.send_held().await;
                    }
                }
                Err(Some(why)) => self.mark(Err(&why)),
                Err(None) => {
                    let why = self.why_unreachable().await;
                    self.mark(Err(&why));
                }
            }
        }
        // Leaving: other replicas need not wait for the key to expire.
        let _ = self.try_run(async |c| c.del::<_, ()>(&key).await).await;
    }

    /// Whether another replica with this boot id is alive (None: unknown).
    pub async fn is_live_replica(&self, replica: u32) -> Option<bool> {
        let key = format!("{PREFIX}replica:{replica:08x}");
        self.run(async |c| c.exists::<_, bool>(&key).await).await
    }

    /// A session ended on purpose (DELETE, principal cap): revoked until
    /// `expires` (unix seconds) and dropped from every replica's memory.
    /// Held while Redis is unreachable, and sent when it is back.
    pub async fn end(&self, serial: [u8; 16], expires: u64, session: SessionId) {
        let key = revoked_key(&serial);
        let revoked = self
            .run(async |c| {
                c.set_options::<_, _, ()>(
                    &key,
                    1,
                    redis::SetOptions::default().with_expiration(redis::SetExpiry::EXAT(expires)),
                )
                .await
            })
            .await
            .is_some();
        if revoked
            && self
                .publish(BusMessage::Ended {
                    session: session.clone(),
                })
                .await
        {
            return;
        }
        let mut held = self.held.lock();
        if held.len() == HELD_ENDINGS {
            held.pop_front();
        }
        held.push_back((serial, expires, session));
    }

    /// The endings held while Redis was away (those not yet expired).
    async fn send_held(&self) {
        let held: Vec<_> = self.held.lock().drain(..).collect();
        if held.is_empty() {
            return;
        }
        tracing::info!(
            count = held.len(),
            "sending the session endings held while redis was unreachable"
        );
        let now = crate::vocab::unix_now();
        for (serial, expires, session) in held {
            if expires > now {
                Box::pin(self.end(serial, expires, session)).await;
            }
        }
    }

    /// Whether a serial is revoked (None: Redis could not say).
    pub async fn is_revoked(&self, serial: &[u8; 16]) -> Option<bool> {
        let key = revoked_key(serial);
        self.run(async |c| c.exists::<_, bool>(&key).await).await
    }

    /// Counts a new session (`member`, expiring at `expires`) of
    /// `principal` (a digest), forgetting ended ones; returns the
    /// principal's oldest member when the cap is exceeded (to be revoked).
    pub async fn principal_session(
        &self,
        principal: &str,
        member: &str,
        expires: u64,
        cap: usize,
        now: u64,
    ) -> Option<String> {
        let key = format!("{PREFIX}principal:{principal}");
        let popped: Vec<String> = self
            .run(async |c| {
                let mut pipe = redis::pipe();
                pipe.atomic()
                    .zrembyscore(&key, "-inf", now)
                    .ignore()
                    .zadd(&key, member, expires)
                    .ignore()
                    .expire_at(&key, i64::try_from(expires).unwrap_or(i64::MAX))
                    .ignore()
                    .zcard(&key);
                let (count,): (usize,) = pipe.query_async(c).await?;
                if count <= cap {
                    return Ok(Vec::new());
                }
                c.zpopmin::<_, Vec<String>>(&key, 1).await
            })
            .await?;
        // ZPOPMIN answers member, score.
        popped.into_iter().next()
    }

    /// The bus: messages to every other replica, and the inbox of theirs.
    pub fn bus(self: &Arc<Self>, stop: CancellationToken) -> Inbox {
        bus::open(self.clone(), stop)
    }
}

fn revoked_key(serial: &[u8; 16]) -> String {
    format!("{PREFIX}revoked:{}", hex(serial))
}
