//! The one task that owns a backend's health: it opens the shared backend
//! session (or, for per-session backends, a probe session it closes again),
//! checks it with a list call, and reopens with capped exponential backoff
//! when it fails. On stop it ends every backend session it has.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::link::{self, EndReason, Link};
use super::{Backend, Health, Pool, UpstreamError};

const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A run this long resets the backoff.
const STABLE_AFTER: Duration = Duration::from_secs(10);

pub(super) async fn run(backend: Arc<Backend>, stop: CancellationToken) {
    if let Pool::PerSession(p) = &backend.pool {
        tokio::spawn(reap(p.clone(), stop.clone()));
    }
    if let Some(by) = backend.by_principal() {
        tokio::spawn(reap(by.pool.clone(), stop.clone()));
    }
    // The authorization code flow: nothing may reach the backend without a
    // principal's grant, so there is no probe (its health is each call's).
    if backend.code_flow().is_some() {
        backend.set_health(Health::Starting);
        stop.cancelled().await;
    }
    let mut backoff = BACKOFF_FIRST;
    while !stop.is_cancelled() {
        let started = Instant::now();
        // A stop does not wait for a backend that hangs in its handshake:
        // the half-open session is ended by its guard.
        let connected = tokio::select! {
            c = connect(&backend) => c,
            _ = stop.cancelled() => break,
        };
        match connected {
            Ok(link) => serve(&backend, link, &stop).await,
            Err(e) => {
                tracing::warn!(backend = %backend.name, error = %e, "backend unhealthy");
                backend.set_health(Health::Down(e.reason()));
            }
        }
        if stop.is_cancelled() {
            break;
        }
        if started.elapsed() >= STABLE_AFTER {
            backoff = BACKOFF_FIRST;
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
    if let Some(by) = backend.by_principal() {
        by.pool.close_all(EndReason::Shutdown).await;
    }
    match &backend.pool {
        Pool::PerSession(p) => p.close_all(EndReason::Shutdown).await,
        // A dual-era backend's legacy session, opened for legacy clients.
        Pool::Shared(slot) => {
            let legacy = slot.lock().take();
            if let Some(l) = legacy {
                l.close(EndReason::Shutdown);
                l.closed().await;
            }
        }
    }
    backend.set_health(Health::Stopped);
}

/// Opens a session and proves it healthy; the probe's page seeds the cache.
async fn connect(backend: &Backend) -> Result<Arc<Link>, UpstreamError> {
    let ctx = backend.ctx.for_client(backend.probe_offer());
    let link = backend
        .open_over(backend.probe_transport(), ctx, false)
        .await?;
    let guard = link::CloseOnDrop::new(link.clone(), EndReason::Shutdown);
    match link::probe(&link, backend.ctx.timeout).await {
        Ok((method, page)) => {
            backend.cache.clear();
            let ttl = link.info.is_modern().then(|| super::lists::ttl_of(&page));
            let version = backend.cache.version();
            let profile = backend.profile(link.conn.offer().unwrap_or(backend.ctx.offer));
            let _ = backend
                .cache
                .put(version, method, profile, None, &page, ttl);
            Ok(guard.disarm())
        }
        Err(e) => {
            guard.disarm().close(EndReason::Failed);
            link.closed().await;
            Err(e)
        }
    }
}

/// Healthy until the shared session dies (or, per-session, until a call
/// finds the backend unreachable), or until stop.
async fn serve(backend: &Backend, link: Arc<Link>, stop: &CancellationToken) {
    let info = link.info.clone();
    // Per-principal credentials nobody else may borrow: no session of the
    // probe's (the first principal's) is kept for anyone.
    let private = backend.is_private();
    if info.is_modern() && !private {
        // Stateless: one link for all, whatever the isolation; legacy
        // clients get legacy sessions of their own (Backend::legacy_link).
        backend.set_modern_link(Some(link.clone()));
        // A redeployed backend may serve legacy sessions again: ask anew.
        backend
            .legacy_refused
            .store(false, std::sync::atomic::Ordering::Relaxed);
        backend.set_health(Health::Up(info));
        tracing::info!(backend = %backend.name, "backend healthy (2026-07-28)");
        watch(backend, &link, stop).await;
        backend.set_modern_link(None);
        if !stop.is_cancelled() {
            backend.set_health(Health::Restarting);
        }
        link.closed().await;
        return;
    }
    match (&backend.pool, private) {
        (Pool::Shared(slot), false) => {
            *slot.lock() = Some(link.clone());
            backend.set_health(Health::Up(info));
            tracing::info!(backend = %backend.name, "backend healthy");
            watch(backend, &link, stop).await;
            *slot.lock() = None;
            if !stop.is_cancelled() {
                backend.set_health(Health::Restarting);
            }
            link.closed().await;
        }
        (Pool::PerSession(_), _) | (Pool::Shared(_), true) => {
            link.close(EndReason::Probe);
            link.closed().await;
            backend.set_health(Health::Up(info));
            tracing::info!(backend = %backend.name, "backend healthy");
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = backend.wake.notified() => {}
            }
        }
    }
}

/// Until the link dies or `stop` (which closes it). A link idle for the
/// backend's `health_interval` is pinged: a backend that went away while
/// nobody called it is noticed now (and reconnected), not at the next call.
async fn watch(backend: &Backend, link: &Arc<Link>, stop: &CancellationToken) {
    let every = backend.health_interval;
    // (Zero: the tick is never taken; a year keeps the timer valid.)
    let mut tick = tokio::time::interval(if every.is_zero() {
        Duration::from_secs(365 * 86_400)
    } else {
        every
    });
    tick.reset();
    loop {
        tokio::select! {
            _ = stop.cancelled() => {
                link.close(EndReason::Shutdown);
                return;
            }
            _ = link.dead().cancelled() => return,
            _ = tick.tick(), if !every.is_zero() => {
                if link.idle_for() < every {
                    continue;
                }
                // 2026-07-28 has no ping; its discover is as cheap.
                let method = if link.info.is_modern() { "server/discover" } else { "ping" };
                let _in_use = link.begin();
                match link.conn.call(method, None, None, backend.ctx.timeout).await {
                    Err(e) if e.is_unreachable() || e.is_timeout() => {
                        tracing::warn!(backend = %backend.name, error = %e, "backend failed its health check");
                        link.close(EndReason::Failed);
                    }
                    // An answer, even an error, is a backend alive.
                    _ => {}
                }
            }
        }
    }
}

/// One sweeper for the backend's per-session links, no timer per link.
async fn reap(pool: Arc<super::pool::PerSession>, stop: CancellationToken) {
    let period = (pool.idle_ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    let mut tick = tokio::time::interval(period);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => pool.reap_idle(),
        }
    }
}
