//! `[limits]`: how many requests one principal may have in flight, and how
//! many it may send per second. Checked before a POST's body is read; a
//! request over either is answered 429 with `Retry-After`. The rate is
//! shared by every replica through Redis in cluster mode (see
//! `cluster::rate`), and kept here while Redis does not answer; the count
//! in flight is each replica's own.

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
}

/// A request let in: it counts as in flight until this drops (with the
/// request's work, which may outlive its response).
pub(super) struct Admitted(Option<(Arc<Limits>, Principal)>);

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some((limits, principal)) = self.0.take() {
            let mut in_flight = limits.in_flight.lock();
            if let Some(n) = in_flight.get_mut(&principal) {
                *n -= 1;
                if *n == 0 {
                    in_flight.remove(&principal);
                }
            }
        }
    }
}

impl Limits {
    pub(crate) fn new(settings: LimitsSettings) -> Arc<Limits> {
        let local = settings
            .rate
            .map(|r| RateLimiter::hashmap(Quota::per_second(r.per_second).allow_burst(r.burst)));
        Arc::new(Limits {
            settings,
            local,
            in_flight: Mutex::default(),
            checks: Default::default(),
        })
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
                Admitted(Some((self.clone(), principal.clone())))
            }
        };
        if let Err(wait) = self.take_rate(front, principal).await {
            front.metrics.limited(LimitReason::rate);
            return Err(Reject::RateLimited(wait));
        }
        Ok(admitted)
    }

    /// One request from the principal's rate: shared across replicas when
    /// Redis answers, else this replica's own allowance.
    async fn take_rate(&self, front: &Front, principal: &Principal) -> Result<(), Duration> {
        let (Some(rate), Some(local)) = (self.settings.rate, &self.local) else {
            return Ok(());
        };
        if let Some(cluster) = &front.cluster {
            let who = front
                .layout
                .load()
                .policy
                .principal_digest(principal)
                .unwrap_or_else(|| "anonymous".to_owned());
            // Boxed: Redis's future would make every request's large.
            if let Some(verdict) = Box::pin(cluster.take_rate(&who, rate)).await {
                return verdict;
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
        local
            .check_key(principal)
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }
}
