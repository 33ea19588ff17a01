//! The pool: a backend's idle connections, one list per worker shard,
//! each taken warmest first and closed once idle too long.

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::time::Instant;
use tower::Service;

use super::SendError;
use super::conn::Conn;
use super::target::{Origin, Prepared};

pub(super) type Connector = hyper_rustls::HttpsConnector<super::dial::Dialer>;

/// Idle connections kept per backend: as many as calls a link may have in
/// flight (`conn::MAX_POSTS`), so a steady load reuses every one.
pub(super) const MAX_IDLE: usize = 256;
/// An idle connection older than this is closed rather than reused.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

pub(super) struct Shared {
    /// Which targets go through which proxy (`Client::target`); the
    /// connector dials by it too.
    pub(super) proxy: crate::http1::proxy::Proxy,
    pub(super) connector: Connector,
    /// Set with `SLUICE_HTTP=hyper`: every request goes through it.
    pub(super) twin: Option<super::twin::Twin>,
    /// A pool per worker shard (`crate::workers`): a connection registered
    /// with one runtime's reactor is only ever driven from that runtime.
    pub(super) idle: Box<[Mutex<Idle>]>,
}

#[derive(Default)]
pub(super) struct Idle {
    /// Oldest first: expired ones are a prefix, the warmest is at the end.
    conns: Vec<IdleConn>,
    /// A task closes expired connections while any are idle, so a backend
    /// that gets no more calls is not left holding sockets.
    reaping: bool,
}

impl Idle {
    fn expire(&mut self, now: Instant) {
        // One subtraction, then comparisons: the list is in idle order.
        let Some(cutoff) = now.checked_sub(IDLE_TIMEOUT) else {
            return;
        };
        let expired = self.conns.partition_point(|i| i.since <= cutoff);
        drop(self.conns.drain(..expired));
    }
}

struct IdleConn {
    conn: Conn,
    since: Instant,
}

impl Shared {
    pub(super) fn idle_count(&self) -> usize {
        self.idle.iter().map(|i| i.lock().conns.len()).sum()
    }

    /// The calling thread's pool: its index in `idle`.
    fn shard(&self) -> usize {
        crate::workers::shard() % self.idle.len()
    }

    /// The warmest idle connection to `origin` that can take a request.
    pub(super) fn checkout(&self, origin: &Origin) -> Option<Conn> {
        loop {
            let mut conn = {
                let mut idle = self.idle[self.shard()].lock();
                idle.expire(crate::clock::tokio_now());
                let at = idle.conns.iter().rposition(|i| i.conn.origin == *origin)?;
                idle.conns.remove(at).conn
            };
            // Closed sockets are dropped outside the lock.
            if conn.reusable() {
                return Some(conn);
            }
        }
    }

    pub(super) fn checkin(self: &Arc<Self>, conn: Conn) {
        let shard = self.shard();
        let mut idle = self.idle[shard].lock();
        if idle.conns.len() >= MAX_IDLE {
            return;
        }
        if !idle.reaping {
            // Outside a runtime (dropped at exit) nothing could reap it.
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                return;
            };
            idle.reaping = true;
            runtime.spawn(reap(Arc::downgrade(self), shard));
        }
        idle.conns.push(IdleConn {
            conn,
            since: crate::clock::tokio_now(),
        });
    }

    pub(super) async fn connect(&self, target: &Prepared) -> Result<Conn, SendError> {
        let mut connector = self.connector.clone();
        poll_fn(|cx| connector.poll_ready(cx))
            .await
            .map_err(SendError::Connect)?;
        let io = connector
            .call(target.uri.clone())
            .await
            .map_err(SendError::Connect)?;
        Ok(Conn {
            origin: target.origin.clone(),
            io: Box::pin(TokioIo::new(io)),
            buf: BytesMut::new(),
        })
    }
}

/// Closes idle connections as they expire; ends when none is idle or the
/// client is gone.
async fn reap(shared: std::sync::Weak<Shared>, shard: usize) {
    loop {
        tokio::time::sleep(IDLE_TIMEOUT / 4).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let mut idle = shared.idle[shard].lock();
        idle.expire(Instant::now());
        if idle.conns.is_empty() {
            idle.reaping = false;
            return;
        }
    }
}
