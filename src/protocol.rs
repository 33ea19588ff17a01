//! Protocol revisions the gateway speaks, and the era each belongs to.

use std::fmt;

/// A legacy (initialize-based) protocol revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LegacyVersion {
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
}

impl LegacyVersion {
    pub const ALL: [LegacyVersion; 3] = [
        LegacyVersion::V2025_11_25,
        LegacyVersion::V2025_06_18,
        LegacyVersion::V2025_03_26,
    ];
    pub const LATEST: LegacyVersion = LegacyVersion::V2025_11_25;

    pub fn parse(s: &str) -> Option<LegacyVersion> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LegacyVersion::V2025_03_26 => "2025-03-26",
            LegacyVersion::V2025_06_18 => "2025-06-18",
            LegacyVersion::V2025_11_25 => "2025-11-25",
        }
    }

    /// Batches existed only in 2025-03-26.
    pub fn allows_batches(self) -> bool {
        self == LegacyVersion::V2025_03_26
    }

    /// Negotiation: echo a version we speak, else offer our latest.
    pub fn negotiate(requested: &str) -> LegacyVersion {
        Self::parse(requested).unwrap_or(Self::LATEST)
    }
}

impl fmt::Display for LegacyVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The first revision without initialize and sessions.
pub const MODERN_FIRST: &str = "2026-07-28";

/// The stateless revisions this gateway serves.
pub const MODERN_SUPPORTED: [&str; 1] = [MODERN_FIRST];

/// Every revision, newest first, as `supported` lists name them.
pub fn supported_versions() -> Vec<&'static str> {
    MODERN_SUPPORTED
        .into_iter()
        .chain(LegacyVersion::ALL.map(LegacyVersion::as_str))
        .collect()
}

/// The key in `params._meta` that marks a 2026-07-28 request.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// What an `MCP-Protocol-Version` header names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revision {
    Legacy(LegacyVersion),
    /// A stateless revision this gateway serves.
    Modern,
    /// A revision the gateway does not speak (too old, too new, or junk).
    Unknown(String),
}

impl Revision {
    pub fn of(version: &str) -> Revision {
        let version = version.trim();
        if let Some(v) = LegacyVersion::parse(version) {
            Revision::Legacy(v)
        } else if MODERN_SUPPORTED.contains(&version) {
            Revision::Modern
        } else {
            Revision::Unknown(version.to_owned())
        }
    }
}

/// Which protocol era a request belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    Legacy,
    Modern,
}

impl Era {
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }
}

/// Versions are ISO dates, so string order is time order.
pub fn is_modern(version: &str) -> bool {
    version >= MODERN_FIRST
}

/// A log message's severity (RFC 5424 order, as MCP names them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    const ALL: [(LogLevel, &'static str); 8] = [
        (LogLevel::Debug, "debug"),
        (LogLevel::Info, "info"),
        (LogLevel::Notice, "notice"),
        (LogLevel::Warning, "warning"),
        (LogLevel::Error, "error"),
        (LogLevel::Critical, "critical"),
        (LogLevel::Alert, "alert"),
        (LogLevel::Emergency, "emergency"),
    ];

    pub fn parse(name: &str) -> Option<LogLevel> {
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(l, _)| *l)
    }

    /// From params holding a `level` field.
    pub fn of_params(params: &str) -> Option<LogLevel> {
        #[derive(serde::Deserialize)]
        struct P {
            level: String,
        }
        LogLevel::parse(&serde_json::from_str::<P>(params).ok()?.level)
    }
}

/// What a client declared it can answer: its `capabilities` in
/// `initialize`, or a 2026-07-28 request's `clientCapabilities`. A backend's
/// request that needs one the client lacks is refused, never relayed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCaps {
    pub sampling: bool,
    pub elicitation: bool,
    pub roots: bool,
    /// `roots.listChanged`: it will say when its roots change.
    pub roots_list_changed: bool,
}

impl ClientCaps {
    /// Everything (a client whose capabilities the gateway never saw).
    pub const ALL: ClientCaps = ClientCaps {
        sampling: true,
        elicitation: true,
        roots: true,
        roots_list_changed: false,
    };

    /// From a capabilities object; anything unreadable declares nothing.
    pub fn parse(capabilities: &str) -> ClientCaps {
        #[derive(serde::Deserialize)]
        struct Caps {
            sampling: Option<serde::de::IgnoredAny>,
            elicitation: Option<serde::de::IgnoredAny>,
            roots: Option<Roots>,
        }
        #[derive(serde::Deserialize)]
        struct Roots {
            #[serde(rename = "listChanged", default)]
            list_changed: bool,
        }
        match serde_json::from_str::<Caps>(capabilities) {
            Ok(c) => ClientCaps {
                sampling: c.sampling.is_some(),
                elicitation: c.elicitation.is_some(),
                roots: c.roots.is_some(),
                roots_list_changed: c.roots.is_some_and(|r| r.list_changed),
            },
            Err(_) => ClientCaps::default(),
        }
    }

    /// The capability a server-to-client request needs, if the client
    /// lacks it (None: it may be relayed).
    pub fn missing_for(&self, method: &str) -> Option<&'static str> {
        match method {
            "sampling/createMessage" if !self.sampling => Some("sampling"),
            "elicitation/create" if !self.elicitation => Some("elicitation"),
            "roots/list" if !self.roots => Some("roots"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_capabilities_decide_what_is_relayed() {
        let caps = ClientCaps::parse(r#"{"sampling":{},"roots":{"listChanged":true},"x":1}"#);
        assert!(caps.sampling && caps.roots && caps.roots_list_changed && !caps.elicitation);
        assert_eq!(caps.missing_for("sampling/createMessage"), None);
        assert_eq!(caps.missing_for("elicitation/create"), Some("elicitation"));
        assert_eq!(caps.missing_for("ping"), None);
        assert_eq!(ClientCaps::parse("{}"), ClientCaps::default());
        assert_eq!(ClientCaps::parse("not json"), ClientCaps::default());
    }
}
