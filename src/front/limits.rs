//! `[limits]`: how many requests one principal may have in flight, how
//! many it may send per second, and how many GET streams it may hold open.
//! Checked before a POST's body is read (a DELETE counts as a POST does; a
//! GET stream takes from the rate and holds a stream slot, never a request
//! slot, so that open streams never lock out their principal's own POSTs);
//! a request over any is answered 429 with `Retry-After`. Each request
//! of a 2025-03-26 batch counts as if it had come alone: the POST let in
//! is its first, the rest take from the rate in order (those past it are
//! answered with the same refusal in the batch's reply, and never run),
//! and the batch runs at once only as many as the principal has slots
//! free. The rate is shared by every replica through Redis in cluster
//! mode (see `cluster::rate`), and kept here while Redis does not answer;
//! the count in flight is each replica's own.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{Quota, RateLimiter};
use parking_lot::Mutex;

use super::Front;
use super::error::Reject;
use crate::config::LimitsSettings;
use crate::metrics::LimitReason;
use crate::vocab::Principal;

type Local =
    RateLimiter<Principal, governor::state::keyed::HashMapStateStore<Principal>, DefaultClock>;

/// Checks between two sweeps of the local rate's idle principals.
const SWEEP_EVERY: u32 = 4096;

pub(crate) struct Limits {
    settings: LimitsSettings,
    local: Option<Local>,
    /// Requests in flight, by principal (entries at zero are removed).
    in_flight: Mutex<HashMap<Principal, usize>>,
    checks: std::sync::atomic::AtomicU32,
    /// GET streams one principal may hold open (None: no cap).
    stream_cap: Option<usize>,
    /// GET streams open, by principal (entries at zero are removed).
    streams: Mutex<HashMap<Principal, usize>>,
    /// The connection cap (as fitted to the open-file limit) the default
    /// stream cap is a quarter of; kept for the `Limits` of a reload.
    connections: usize,
}

/// A GET stream let in: it holds one of its principal's stream slots
/// until this drops (with the stream's body).
pub(super) struct StreamSlot(Option<(Arc<Limits>, Principal)>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        if let Some((limits, principal)) = self.0.take() {
            let mut streams = limits.streams.lock();
            if let Some(n) = streams.get_mut(&principal) {
                *n -= 1;
                if *n == 0 {
                    streams.remove(&principal);
                }
            }
        }
    }
}

/// A request let in: it counts as in flight until this drops (with the
/// request's work, which may outlive its response). A batch widened to run
/// several of its requests at once holds one slot for each.
pub(super) struct Admitted(Option<Held>);

struct Held {
    limits: Arc<Limits>,
    principal: Principal,
    slots: usize,
}

impl Admitted {
    /// Up to `want` requests at once for a batch let in with this one's
    /// slot: the slots the principal has free now are taken (never waited
    /// for), and held until this drops. Returns how many may run at once
    /// (at least the one this holds).
    pub(super) fn widen(&mut self, want: usize) -> usize {
        let Some(held) = &mut self.0 else {
            return want.max(1);
        };
        let Some(max) = held.limits.settings.max_concurrent_requests else {
            return want.max(1);
        };
        let mut in_flight = held.limits.in_flight.lock();
        let n = in_flight.entry(held.principal.clone()).or_default();
        let more = want
            .saturating_sub(held.slots)
            .min(max.get().saturating_sub(*n));
        *n += more;
        held.slots += more;
        held.slots
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(held) = self.0.take() {
            let mut in_flight = held.limits.in_flight.lock();
            if let Some(n) = in_flight.get_mut(&held.principal) {
                *n -= held.slots;
                if *n == 0 {
                    in_flight.remove(&held.principal);
                }
            }
        }
    }
}

/// What a take from the rate let through: the first `n` of the requests
/// asked for; the rest may go after `wait`.
pub(super) struct Granted {
    pub(super) n: usize,
    pub(super) wait: Duration,
}

impl Limits {
    /// `authenticated`: `[auth]` is set (without it every client is one
    /// principal, and streams have no default cap); `connections`: the
    /// connection cap as fitted, the default stream cap a quarter of it.
    pub(crate) fn new(
        settings: LimitsSettings,
        authenticated: bool,
        connections: usize,
    ) -> Arc<Limits> {
        let local = settings
            .rate
            .map(|r| RateLimiter::hashmap(Quota::per_second(r.per_second).allow_burst(r.burst)));
        let stream_cap = match settings.max_streams_per_principal {
            Some(0) => None,
            Some(n) => Some(n),
            None => authenticated.then_some((connections / 4).max(1)),
        };
        Arc::new(Limits {
            settings,
            local,
            in_flight: Mutex::default(),
            checks: Default::default(),
            stream_cap,
            streams: Mutex::default(),
            connections,
        })
    }

    /// The connection cap this was made for.
    pub(crate) fn connections(&self) -> usize {
        self.connections
    }

    /// Lets a GET stream open, or says why not (counted): one of the
    /// principal's stream slots, and one request from its rate.
    pub(super) async fn open_stream(
        self: &Arc<Self>,
        front: &Front,
        principal: &Principal,
    ) -> Result<StreamSlot, Reject> {
        let slot = match self.stream_cap {
            None => StreamSlot(None),
            Some(max) => {
                let mut streams = self.streams.lock();
                let n = streams.entry(principal.clone()).or_default();
                if *n >= max {
                    drop(streams);
                    front.metrics.limited(LimitReason::streams);
                    return Err(Reject::TooManyStreams);
                }
                *n += 1;
                StreamSlot(Some((self.clone(), principal.clone())))
            }
        };
        if self.local.is_some() {
            let granted = self.take_rate(front, principal, 1).await;
            if granted.n == 0 {
                front.metrics.limited(LimitReason::rate);
                return Err(Reject::RateLimited(granted.wait));
            }
        }
        Ok(slot)
    }

    /// Lets the request in, or says why not (counted).
    pub(super) async fn admit(
        self: &Arc<Self>,
        front: &Front,
        principal: &Principal,
    ) -> Result<Admitted, Reject> {
        let admitted = match self.settings.max_concurrent_requests {
            None => Admitted(None),
            Some(max) => {
                let mut in_flight = self.in_flight.lock();
                let n = in_flight.entry(principal.clone()).or_default();
                if *n >= max.get() {
                    drop(in_flight);
                    front.metrics.limited(LimitReason::concurrency);
                    return Err(Reject::TooManyInFlight);
                }
                *n += 1;
                Admitted(Some(Held {
                    limits: self.clone(),
                    principal: principal.clone(),
                    slots: 1,
                }))
            }
        };
        // Without a rate there is nothing to wait on (and nothing to call:
        // every request passes here).
        if self.local.is_none() {
            return Ok(admitted);
        }
        let granted = self.take_rate(front, principal, 1).await;
        if granted.n == 0 {
            front.metrics.limited(LimitReason::rate);
            return Err(Reject::RateLimited(granted.wait));
        }
        Ok(admitted)
    }

    /// The rest of a batch's requests (its first came with the POST, let
    /// in by `admit`): each takes one from the principal's rate, in order,
    /// as if each had been sent alone; those past the allowance are
    /// counted here and never run.
    pub(super) async fn admit_more(
        &self,
        front: &Front,
        principal: &Principal,
        n: usize,
    ) -> Granted {
        if n == 0 {
            return Granted {
                n,
                wait: Duration::ZERO,
            };
        }
        let granted = self.take_rate(front, principal, n).await;
        for _ in granted.n..n {
            front.metrics.limited(LimitReason::rate);
        }
        granted
    }

    /// `n` requests from the principal's rate, in order (the first ones
    /// go while the allowance lasts): shared across replicas when Redis
    /// answers, else this replica's own allowance.
    async fn take_rate(&self, front: &Front, principal: &Principal, n: usize) -> Granted {
        let (Some(rate), Some(local)) = (self.settings.rate, &self.local) else {
            return Granted {
                n,
                wait: Duration::ZERO,
            };
        };
        if let Some(cluster) = &front.cluster {
            let who = front
                .layout
                .load()
                .policy
                .principal_digest(principal)
                .unwrap_or_else(|| "anonymous".to_owned());
            // Boxed: Redis's future would make every request's large.
            if let Some((granted, wait)) = Box::pin(cluster.take_rate(&who, rate, n)).await {
                return Granted { n: granted, wait };
            }
        }
        let checks = self
            .checks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if checks % SWEEP_EVERY == SWEEP_EVERY - 1 {
            // Principals whose allowance is full again need no state.
            local.retain_recent();
            local.shrink_to_fit();
        }
        for granted in 0..n {
            if let Err(not_until) = local.check_key(principal) {
                return Granted {
                    n: granted,
                    wait: not_until.wait_time_from(DefaultClock::default().now()),
                };
            }
        }
        Granted {
            n,
            wait: Duration::ZERO,
        }
    }
}
