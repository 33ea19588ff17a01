//! A principal's request rate across every replica: GCRA (the generic cell
//! rate algorithm) in one Lua script, so the check and the update are one
//! atomic step in Redis and N replicas never grant N times the rate. Time
//! is Redis's own (`TIME`): the replicas' clocks need not agree.

use std::sync::LazyLock;
use std::time::Duration;

use super::{Cluster, PREFIX};
use crate::config::Rate;

/// KEYS[1]: the principal's theoretical arrival time (µs). ARGV[1]: the
/// emission interval (µs between requests at the rate); ARGV[2]: the burst
/// tolerance (µs); ARGV[3]: the requests asked for (a batch's, in order).
/// Returns how many of them may go (the first ones, as if each had come
/// alone) and, when not all, the µs until the next would be allowed.
const GCRA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local fit = 0
if now >= tat - tolerance then
  fit = math.floor((now - tat + tolerance) / interval) + 1
end
if fit > want then fit = want end
if fit > 0 then
  tat = tat + fit * interval
  redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.floor((tat - now) / 1000) + 1000)
end
local wait = 0
if fit < want then wait = tat - tolerance - now end
return {fit, wait}
";

static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(GCRA));

impl Cluster {
    /// Takes `n` requests from `principal`'s (a digest) shared allowance,
    /// in order: how many may go, and how long until the next would be
    /// allowed when not all. None: Redis did not answer (the caller decides
    /// alone).
    pub async fn take_rate(
        &self,
        principal: &str,
        rate: Rate,
        n: usize,
    ) -> Option<(usize, Duration)> {
        let key = format!("{PREFIX}rate:{principal}");
        let interval = 1_000_000 / u64::from(rate.per_second.get());
        let tolerance = interval * u64::from(rate.burst.get() - 1);
        let (granted, wait): (u64, u64) = self
            .run(async |c| {
                SCRIPT
                    .key(&key)
                    .arg(interval)
                    .arg(tolerance)
                    .arg(n)
                    .invoke_async(c)
                    .await
            })
            .await?;
        let granted = usize::try_from(granted).unwrap_or(n).min(n);
        Some((granted, Duration::from_micros(wait)))
    }
}
