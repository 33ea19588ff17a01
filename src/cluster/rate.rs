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
/// tolerance (µs). Returns 0 when the request may go, else the µs to wait.
const GCRA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local allow_at = tat - tolerance
if now < allow_at then
  return math.floor(allow_at - now)
end
local next = tat + interval
redis.call('SET', KEYS[1], string.format('%d', next), 'PX', math.floor((next - now) / 1000) + 1000)
return 0
";

static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(GCRA));

impl Cluster {
    /// Takes one request from `principal`'s (a digest) shared allowance:
    /// Ok, or Err with how long until the next would be allowed. None:
    /// Redis did not answer (the caller decides alone).
    pub async fn take_rate(&self, principal: &str, rate: Rate) -> Option<Result<(), Duration>> {
        let key = format!("{PREFIX}rate:{principal}");
        let interval = 1_000_000 / u64::from(rate.per_second.get());
        let tolerance = interval * u64::from(rate.burst.get() - 1);
        let wait: u64 = self
            .run(async |c| {
                SCRIPT
                    .key(&key)
                    .arg(interval)
                    .arg(tolerance)
                    .invoke_async(c)
                    .await
            })
            .await?;
        Some(match wait {
            0 => Ok(()),
            us => Err(Duration::from_micros(us)),
        })
    }
}
