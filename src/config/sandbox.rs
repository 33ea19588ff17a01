//! `sandbox = { ... }` on a stdio backend (or `[defaults] sandbox` for
//! every one): the bounds the kernel holds its child to. A field left out
//! is a bound not applied; what the host can enforce is decided at start
//! (`upstream::sandbox`), not here.

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use serde::de::{self, Visitor};

/// A stdio child's bounds, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// Bytes of memory (a cgroup's `memory.max`, else `RLIMIT_DATA`).
    pub memory: Option<u64>,
    /// Processes and threads at once (a cgroup's `pids.max`).
    pub processes: Option<u64>,
    /// `RLIMIT_NOFILE`.
    pub open_files: Option<u64>,
    pub network: NetworkAccess,
    /// Paths readable beyond what the command needs to run (None: reads
    /// are not restricted).
    pub read: Option<Vec<PathBuf>>,
    /// Paths writable beyond the child's private temporary directory
    /// (None: writes are not restricted).
    pub write: Option<Vec<PathBuf>>,
    /// A bound the host cannot enforce stops the backend (true) or is
    /// logged and skipped (false).
    pub require: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkAccess {
    All,
    None,
}

impl NetworkAccess {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkAccess::All => "all",
            NetworkAccess::None => "none",
        }
    }
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileSandbox {
    pub(super) memory: Option<FileBytes>,
    pub(super) processes: Option<u64>,
    pub(super) open_files: Option<u64>,
    pub(super) network: Option<String>,
    pub(super) read: Option<Vec<PathBuf>>,
    pub(super) write: Option<Vec<PathBuf>>,
    pub(super) require: Option<bool>,
}

const UNITS: &str = "B, KiB, MiB, GiB or TiB";

/// `"512MiB"`, `"2GiB"`, or a bare count of bytes. Powers of 1024 only:
/// `MB` is refused rather than guessed.
pub(super) fn parse_bytes(text: &str) -> Result<u64, String> {
    let bad = |why: &str| format!("invalid size `{text}`: {why}");
    let s = text.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    if digits.is_empty() {
        return Err(bad(&format!("expected an integer followed by {UNITS}")));
    }
    let n: u64 = digits.parse().map_err(|_| bad("number too large"))?;
    let per: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        other => return Err(bad(&format!("unknown unit `{other}` (use {UNITS})"))),
    };
    n.checked_mul(per).ok_or_else(|| bad("number too large"))
}

/// The largest unit that spells `bytes` exactly.
pub fn format_bytes(bytes: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes != 0 && bytes.trailing_zeros() >= shift {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileBytes(pub(super) u64);

impl<'de> Deserialize<'de> for FileBytes {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = FileBytes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"512MiB\" or a number of bytes")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FileBytes, E> {
                parse_bytes(v).map(FileBytes).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<FileBytes, E> {
                Ok(FileBytes(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<FileBytes, E> {
                u64::try_from(v)
                    .map(FileBytes)
                    .map_err(|_| E::custom("a size cannot be negative"))
            }
        }
        deserializer.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_and_spell_back() {
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("2GiB"), Ok(2 << 30));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(
            parse_bytes("512MB")
                .unwrap_err()
                .contains("unknown unit `MB`")
        );
        assert!(parse_bytes("MiB").is_err());
        assert_eq!(format_bytes(512 << 20), "512MiB");
        assert_eq!(format_bytes(1000), "1000B");
        assert_eq!(format_bytes(3 << 10), "3KiB");
    }
}
