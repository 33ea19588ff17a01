//! Durations as written in config files: one unsigned integer and one unit
//! (`250ms`, `5s`, `30m`, `1h`, `1d`). A bare `0` is accepted because "zero"
//! needs no unit; every other value must carry one, so `60` is never silently
//! read as seconds where the author meant milliseconds.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Visitor};

const UNITS: &str = "ms, s, m, h or d";

pub(super) fn parse(text: &str) -> Result<Duration, String> {
    let bad = |why: &str| format!("invalid duration `{text}`: {why}");
    let s = text.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    if digits.is_empty() {
        return Err(bad(&format!(
            "expected an integer followed by {UNITS} (e.g. \"30s\")"
        )));
    }
    let n: u64 = digits.parse().map_err(|_| bad("number too large"))?;
    let millis_per = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "" => return Err(bad(&format!("missing unit ({UNITS})"))),
        _ => return Err(bad(&format!("unknown unit `{unit}` (use {UNITS})"))),
    };
    n.checked_mul(millis_per)
        .map(Duration::from_millis)
        .ok_or_else(|| bad("number too large"))
}

/// An exact spelling in the same syntax `parse` accepts, so `sluice
/// check` output can be pasted back into a config file.
pub(super) fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".to_owned();
    }
    // A unit above seconds only for two of it or more: the docs' "60s"
    // and "24h" read better than "1m" and "1d".
    for (unit, per, least) in [
        ("d", 86_400_000, 2),
        ("h", 3_600_000, 2),
        ("m", 60_000, 2),
        ("s", 1_000, 1),
    ] {
        if ms.is_multiple_of(per) && ms / per >= least {
            return format!("{}{unit}", ms / per);
        }
    }
    format!("{ms}ms")
}

/// File-side duration. Its own `Deserialize` puts the offending value in the
/// message, and the TOML deserializer attaches the value's span, so a bad
/// duration is reported with its key and line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileDuration(pub(super) Duration);

impl<'de> Deserialize<'de> for FileDuration {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = FileDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string such as \"30s\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FileDuration, E> {
                parse(v).map(FileDuration).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(V)
    }
}
