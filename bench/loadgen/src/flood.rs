//! Workload "flood" (issue 38, item 1): `sockets` connections from one
//! loopback address that send nothing, each re-opened as soon as the
//! server closes it, at most `CONNECTING` connects under way at once (so
//! the listener's backlog does not overflow and the flood really is held:
//! all at once, most of them would wait out SYN retransmits instead).
//! Once every socket has connected (or `duration` has passed), for
//! `duration`, a healthy client opens a
//! fresh connection every `interval` and sends its request at once, and
//! another sends one every `interval` on a keep-alive connection it opened
//! before the flood. What counts: how many of each were served (a 200
//! within `deadline`), out of how many tried.
//!
//! Every socket is owned by one task, every wait has a deadline, and the
//! flood's tasks end at `duration`.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::{Instant, timeout};

use crate::client::Target;

/// Flood connects under way at once.
const CONNECTING: usize = 64;

pub struct Plan {
    pub target: Arc<Target>,
    pub sockets: usize,
    /// The flood's address.
    pub from: IpAddr,
    /// The healthy clients' address.
    pub client_from: IpAddr,
    pub duration: Duration,
    pub interval: Duration,
    /// How long a healthy request may take to count as served.
    pub deadline: Duration,
}

#[derive(Debug, Default, Serialize)]
pub struct Tries {
    pub tried: u64,
    pub served: u64,
    pub served_pct: f64,
    /// Why the others were not: `503`, `closed`, `timeout`, `connect: ...`.
    pub failures: BTreeMap<String, u64>,
}

impl Tries {
    fn record(&mut self, outcome: Result<(), String>) {
        self.tried += 1;
        match outcome {
            Ok(()) => self.served += 1,
            Err(why) => *self.failures.entry(why).or_default() += 1,
        }
        self.served_pct = 100.0 * self.served as f64 / self.tried as f64;
    }
}

#[derive(Debug, Serialize)]
pub struct Flood {
    pub sockets: usize,
    pub from: String,
    pub client_from: String,
    pub duration_s: f64,
    /// Flood connections opened (the first ones and every re-open).
    pub flood_connects: u64,
    /// Flood connections the server closed (displaced, refused or timed out).
    pub flood_closed: u64,
    pub flood_connect_errors: u64,
    /// Until every flood socket had connected once.
    pub ramp_s: f64,
    pub fresh: Tries,
    pub keep_alive: Tries,
}

pub async fn run(plan: &Plan) -> Result<Flood, String> {
    raise_nofile(plan.sockets as u64 + 256);
    let to = plan.target.addr;
    let host = plan.target.host.to_str().unwrap_or("127.0.0.1").to_owned();
    // The keep-alive client: connected, and its first request served,
    // before the flood begins.
    let mut kept = connect(plan.client_from, to)
        .await
        .map_err(|e| format!("keep-alive client: {e}"))?;
    request(&mut kept, &host, plan.deadline)
        .await
        .map_err(|e| format!("keep-alive client's first request: {e}"))?;

    let counts = Arc::new(Counts::default());
    let connecting = Arc::new(tokio::sync::Semaphore::new(CONNECTING));
    // The flood's end is set once it is held: `duration` after that.
    let (ends, end_at) = tokio::sync::watch::channel(Instant::now() + 2 * plan.duration);
    let flood: Vec<_> = (0..plan.sockets)
        .map(|_| {
            let (counts, connecting, end_at) = (counts.clone(), connecting.clone(), end_at.clone());
            tokio::spawn(hold(plan.from, to, end_at, counts, connecting))
        })
        .collect();
    // The flood fills the server before the first healthy try.
    let ramp = Instant::now();
    while counts.connects.load(Ordering::Relaxed) < plan.sockets as u64
        && ramp.elapsed() < plan.duration
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ramp_s = ramp.elapsed().as_secs_f64();
    let end = Instant::now() + plan.duration;
    let _ = ends.send(end);

    let mut fresh = Tries::default();
    let mut keep_alive = Tries::default();
    let mut kept = Some(kept);
    let mut tick = tokio::time::interval(plan.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while Instant::now() + plan.interval <= end {
        tick.tick().await;
        let fresh_try = async {
            let mut s = timeout(plan.deadline, connect(plan.client_from, to))
                .await
                .map_err(|_| "timeout".to_owned())?
                .map_err(|e| format!("connect: {e}"))?;
            request(&mut s, &host, plan.deadline).await
        };
        let kept_try = async {
            let Some(s) = kept.as_mut() else {
                return Err("closed".to_owned());
            };
            request(s, &host, plan.deadline).await
        };
        let (f, k) = tokio::join!(fresh_try, kept_try);
        fresh.record(f);
        if k.is_err() {
            // Counted, then a new keep-alive connection for the next one.
            kept = connect(plan.client_from, to).await.ok();
        }
        keep_alive.record(k);
    }
    for task in flood {
        let _ = task.await;
    }
    Ok(Flood {
        sockets: plan.sockets,
        from: plan.from.to_string(),
        client_from: plan.client_from.to_string(),
        duration_s: plan.duration.as_secs_f64(),
        flood_connects: counts.connects.load(Ordering::Relaxed),
        flood_closed: counts.closed.load(Ordering::Relaxed),
        flood_connect_errors: counts.errors.load(Ordering::Relaxed),
        ramp_s,
        fresh,
        keep_alive,
    })
}

#[derive(Default)]
struct Counts {
    connects: AtomicU64,
    closed: AtomicU64,
    errors: AtomicU64,
}

/// One flood socket: connected, silent, re-opened whenever the server
/// closes it, until the end `end_at` says (set once the flood is held).
async fn hold(
    from: IpAddr,
    to: SocketAddr,
    end_at: tokio::sync::watch::Receiver<Instant>,
    counts: Arc<Counts>,
    connecting: Arc<tokio::sync::Semaphore>,
) {
    let mut buf = [0u8; 512];
    let end = || *end_at.borrow();
    while Instant::now() < end() {
        let connected = {
            let Ok(_turn) = connecting.acquire().await else {
                return;
            };
            tokio::time::timeout_at(end(), connect(from, to)).await
        };
        let Ok(Ok(mut s)) = connected else {
            counts.errors.fetch_add(1, Ordering::Relaxed);
            // Bounded retry pace for a connect that failed.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        counts.connects.fetch_add(1, Ordering::Relaxed);
        // Whatever comes (a 503, a 408, the end), the server has let go.
        let mut moved = end_at.clone();
        loop {
            tokio::select! {
                read = s.read(&mut buf) => match read {
                    Ok(n) if n > 0 => continue,
                    _ => break,
                },
                () = tokio::time::sleep_until(end()) => return,
                // The end was set: wait for that one instead.
                Ok(()) = moved.changed() => continue,
            }
        }
        counts.closed.fetch_add(1, Ordering::Relaxed);
    }
}

/// A connection from `from` (bound before connecting; the port is chosen
/// at connect, so re-opens do not exhaust ports bound to one address).
async fn connect(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = match to {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    // SAFETY: setsockopt on a socket this function owns, with an int.
    unsafe {
        let on: libc::c_int = 1;
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&raw const on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    socket.bind(SocketAddr::new(from, 0))?;
    let s = socket.connect(to).await?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// `GET /healthz` on `s`; served if a 200 is read within `deadline`.
async fn request(s: &mut TcpStream, host: &str, deadline: Duration) -> Result<(), String> {
    let exchange = async {
        let wire = format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n");
        s.write_all(wire.as_bytes())
            .await
            .map_err(|_| "closed".to_owned())?;
        let mut head = Vec::with_capacity(512);
        let mut buf = [0u8; 512];
        let end = loop {
            let n = s.read(&mut buf).await.map_err(|_| "closed".to_owned())?;
            if n == 0 {
                return Err("closed".to_owned());
            }
            head.extend_from_slice(&buf[..n]);
            if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if head.len() > 64 * 1024 {
                return Err("head too large".to_owned());
            }
        };
        let text = String::from_utf8_lossy(&head[..end]).to_ascii_lowercase();
        let status = text.split_whitespace().nth(1).unwrap_or("?").to_owned();
        let length: usize = text
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let mut left = length.saturating_sub(head.len() - end);
        while left > 0 {
            let n = s.read(&mut buf).await.map_err(|_| "closed".to_owned())?;
            if n == 0 {
                return Err("closed".to_owned());
            }
            left = left.saturating_sub(n);
        }
        if status == "200" { Ok(()) } else { Err(status) }
    };
    timeout(deadline, exchange)
        .await
        .map_err(|_| "timeout".to_owned())?
}

/// The soft open-file limit raised to `want` (or the hard limit).
fn raise_nofile(want: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write only the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < want {
            lim.rlim_cur = want.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
