//! Connections: the accept loop, its bound and its timeouts.
//!
//! Every accepted socket holds a permit and a place (`places`); at
//! `max_connections` (kept below the file-descriptor limit) a connection
//! that has sent no request, or else one idle between requests, gives way
//! to the new one, and when every one is busy the new one is answered 503
//! and closed at once, so the connections already open keep being served
//! and accept never spins on EMFILE. One address holds at most
//! `max_connections_per_peer`. The header-read timeout (on
//! `crate::timers`, in `conn` and in hyper) bounds a client that opens a
//! connection and sends a partial request, or nothing at all (shortened
//! under pressure, `places::PRESSURE`), and also ends keep-alive
//! connections that sit idle between requests.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::places::{Entered, PeerFull, Places};
use crate::metrics::Metrics;

/// How the gateway treats client connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    /// Connections one address may hold (0: half of `max_connections`).
    pub max_connections_per_peer: usize,
    pub header_read_timeout: Duration,
    /// A write the client takes no bytes of for this long ends the connection.
    pub write_timeout: Duration,
}

/// The answer to a connection over the cap: small enough to go out in
/// one non-blocking write, and it says when to come back.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
Retry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// How long a new connection at the cap waits for the one that gives way
/// to close (its task, on some worker, sees its socket shut and ends).
const GIVE_WAY: Duration = Duration::from_secs(1);
/// How often connections that wait for their first head are looked at
/// while the gateway is under pressure.
const SWEEP: Duration = Duration::from_millis(250);

/// File descriptors kept free of client connections for everything else:
/// backend pipes and sockets, the listener, logs.
pub(crate) const FD_RESERVE: usize = 64;

/// Raises the soft open-file limit to the hard one and returns the number
/// of client connections that fit below it, leaving `reserve` free.
pub fn connection_cap(wanted: usize, reserve: usize) -> (usize, Option<u64>) {
    let limit = raise_nofile_limit();
    match limit {
        Some(n) => {
            let room = usize::try_from(n)
                .unwrap_or(usize::MAX)
                .saturating_sub(reserve);
            (wanted.min(room.max(16)), limit)
        }
        None => (wanted, None),
    }
}

fn raise_nofile_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    Some(lim.rlim_cur)
}

/// The connections of a stopped accept loop, still finishing.
pub struct Connections {
    /// Tells the connections served by `conn` itself to finish.
    closing: crate::cancel_flag::CancelFlag,
    /// The same for those handed to hyper.
    graceful: GracefulShutdown,
    permits: Arc<Semaphore>,
    max: u32,
}

impl Connections {
    /// Asks every connection to finish its request in flight and close.
    /// Past `grace`, `abort` runs (requests still running answer with an
    /// error) and the connections get `flush` to write that. Returns
    /// whether every connection closed.
    pub async fn drain(self, grace: Duration, flush: Duration, abort: impl FnOnce()) -> bool {
        // Every connection holds a permit until it ends, whoever serves it.
        let all_closed = self.permits.acquire_many_owned(self.max);
        tokio::pin!(all_closed);
        self.closing.cancel();
        let hyper_closed = self.graceful.shutdown();
        let closed = async {
            hyper_closed.await;
            (&mut all_closed).await
        };
        if tokio::time::timeout(grace, closed).await.is_ok() {
            return true;
        }
        tracing::warn!("in-flight requests did not finish within the grace period; ending them");
        abort();
        tokio::time::timeout(flush, all_closed).await.is_ok()
    }
}

/// Accepts until `stop`; returns the connections still open.
pub async fn accept(
    listener: TcpListener,
    app: super::Edge,
    limits: Limits,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) -> Connections {
    let graceful = GracefulShutdown::new();
    let closing = crate::cancel_flag::CancelFlag::new();
    let max = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let permits = Arc::new(Semaphore::new(max as usize));
    let http = super::conn::hyper_builder(Some(limits.header_read_timeout));
    // `SLUICE_HTTP=hyper`: every connection is hyper's from its first byte.
    let hyper_only = crate::http1::Engine::current() == crate::http1::Engine::Hyper;
    // `[server] tls`: every connection is hyper's, after its handshake.
    let tls = app.front.tls.as_ref().map(|certs| certs.acceptor());
    let places = Places::new(
        max as usize,
        limits.max_connections_per_peer,
        limits.header_read_timeout,
        metrics.clone(),
    );
    let mut sweeps = tokio::time::interval(SWEEP);
    sweeps.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut pressed = false;
    let mut backoff = Duration::from_millis(5);
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            _ = sweeps.tick(), if pressed => {
                pressed = places.sweep();
                continue;
            }
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => {
                backoff = Duration::from_millis(5);
                a
            }
            Err(e) => {
                // EMFILE/ENFILE and the like: the next accept would fail the
                // same way at once. Wait instead of spinning.
                tracing::warn!(error = %e, "accept failed; pausing");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let Entered {
            place,
            gave_way,
            pressed: now_pressed,
        } = match places.enter(peer.ip(), tcp.as_raw_fd()) {
            Ok(entered) => entered,
            Err(PeerFull) => {
                refuse(tcp, peer, "at max_connections_per_peer");
                continue;
            }
        };
        pressed |= now_pressed;
        // At the cap, one that sends nothing gives way (the one of this
        // address already did, if it was at its own cap); the new one
        // waits for it to close. Every one busy: refused.
        let gave_way = gave_way || (permits.available_permits() == 0 && places.make_room(&place));
        let permit = if gave_way {
            let freed = async {
                places.settled().await;
                permits.clone().acquire_owned().await
            };
            tokio::time::timeout(GIVE_WAY, freed)
                .await
                .ok()
                .and_then(Result::ok)
        } else {
            permits.clone().try_acquire_owned().ok()
        };
        let Some(permit) = permit else {
            drop(place);
            metrics.connection_refused();
            refuse(tcp, peer, "at max_connections, every connection busy");
            continue;
        };
        // SSE streams can be written faster without Nagle (a 30x difference).
        let _ = tcp.set_nodelay(true);
        let serve = super::conn::Serve {
            edge: app.clone(),
            hyper: http.clone(),
            hyper_only,
            watcher: graceful.watcher(),
            closing: closing.clone(),
            header_read_timeout: limits.header_read_timeout,
            write_timeout: limits.write_timeout,
        };
        let open = Open::new(metrics.clone(), permit);
        match tls.clone() {
            None => spawn(tcp, open, move |tcp| super::conn::serve(tcp, serve, place)),
            Some(tls) => spawn(tcp, open, move |tcp| {
                super::conn::tls::serve(tcp, serve, place, tls)
            }),
        }
    }
    Connections {
        closing,
        graceful,
        permits,
        max,
    }
}

/// Runs `serve` on a worker, the connection's count held until it ends.
fn spawn<F, Fut>(tcp: TcpStream, open: Open, serve: F)
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    crate::workers::spawn_connection(tcp, move |tcp| {
        crate::clock::Polled::new(async move {
            serve(tcp).await;
            drop(open);
        })
    });
}

/// A connection's place under the cap, and its count, given back however
/// the connection ends (its worker stopped included).
struct Open {
    metrics: Arc<Metrics>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Open {
    fn new(metrics: Arc<Metrics>, permit: tokio::sync::OwnedSemaphorePermit) -> Open {
        metrics.connection_opened();
        Open {
            metrics,
            _permit: permit,
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.metrics.connection_closed();
    }
}

/// Over a cap: a 503 if the socket takes it without waiting, then close.
fn refuse(tcp: TcpStream, peer: SocketAddr, why: &'static str) {
    let _ = tcp.try_write(REFUSAL);
    tracing::debug!(%peer, why, "connection refused");
}
