//! Protocol revisions the gateway speaks, and the era each belongs to.

use std::fmt;

use http::HeaderName;

/// Streamable HTTP's session header, named once: a `&str` key is parsed
/// again at every lookup.
pub(crate) const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
/// Streamable HTTP's protocol version header.
pub(crate) const VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// 2026-07-28's headers mirroring the body's method and the name it acts on.
pub(crate) const METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
pub(crate) const NAME_HEADER: HeaderName = HeaderName::from_static("mcp-name");

/// A legacy (initialize-based) protocol revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LegacyVersion {
    /// The HTTP+SSE transport's revision, spoken by old clients on `/sse`
    /// (`front::sse`) and by some on the MCP endpoint.
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
}

impl LegacyVersion {
    pub const ALL: [LegacyVersion; 4] = [
        LegacyVersion::V2025_11_25,
        LegacyVersion::V2025_06_18,
        LegacyVersion::V2025_03_26,
        LegacyVersion::V2024_11_05,
    ];
    pub const LATEST: LegacyVersion = LegacyVersion::V2025_11_25;

    pub fn parse(s: &str) -> Option<LegacyVersion> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LegacyVersion::V2024_11_05 => "2024-11-05",
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

/// Whether raw JSON could carry `META_PROTOCOL_VERSION` (a byte search, no
/// parse): almost no legacy request does, so this is checked first. Most
/// params have no `/` at all (the key has one), and looking for one byte
/// costs a tenth of looking for the key.
pub fn may_name_modern_version(raw: &str) -> bool {
    static KEY: crate::jsonrpc::Needle = crate::jsonrpc::Needle::new(META_PROTOCOL_VERSION);
    memchr::memchr(b'/', raw.as_bytes()).is_some() && KEY.in_text(raw)
}

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
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
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
    /// Form-mode elicitation (an empty `elicitation` object means this).
    pub elicitation: bool,
    /// URL-mode elicitation (`elicitation.url`, 2025-11-25).
    pub elicitation_url: bool,
    pub roots: bool,
    /// `roots.listChanged`: it will say when its roots change.
    pub roots_list_changed: bool,
}

impl ClientCaps {
    /// Everything (a client whose capabilities the gateway never saw).
    pub const ALL: ClientCaps = ClientCaps {
        sampling: true,
        elicitation: true,
        elicitation_url: true,
        roots: true,
        roots_list_changed: false,
    };

    /// From a capabilities object; anything unreadable declares nothing.
    pub fn parse(capabilities: &str) -> ClientCaps {
        #[derive(serde::Deserialize)]
        struct Caps {
            sampling: Option<serde::de::IgnoredAny>,
            elicitation: Option<Elicitation>,
            roots: Option<Roots>,
        }
        #[derive(serde::Deserialize)]
        struct Elicitation {
            form: Option<serde::de::IgnoredAny>,
            url: Option<serde::de::IgnoredAny>,
        }
        #[derive(serde::Deserialize)]
        struct Roots {
            #[serde(rename = "listChanged", default)]
            list_changed: bool,
        }
        match serde_json::from_str::<Caps>(capabilities) {
            Ok(c) => ClientCaps {
                sampling: c.sampling.is_some(),
                // `{}` is form mode, for the revisions before modes.
                elicitation: c
                    .elicitation
                    .as_ref()
                    .is_some_and(|e| e.form.is_some() || e.url.is_none()),
                elicitation_url: c.elicitation.as_ref().is_some_and(|e| e.url.is_some()),
                roots: c.roots.is_some(),
                roots_list_changed: c.roots.is_some_and(|r| r.list_changed),
            },
            Err(_) => ClientCaps::default(),
        }
    }

    /// The capability a server-to-client request needs, if the client
    /// lacks it (None: it may be relayed). `params` tells the elicitation
    /// mode apart.
    pub fn missing_for(&self, method: &str, params: Option<&str>) -> Option<&'static str> {
        let url_mode = || params.is_some_and(|p| p.contains("\"url\"") && is_url_mode(p));
        match method {
            "sampling/createMessage" if !self.sampling => Some("sampling"),
            "elicitation/create" if url_mode() && !self.elicitation_url => Some("elicitation"),
            "elicitation/create" if !url_mode() && !self.elicitation => Some("elicitation"),
            "roots/list" if !self.roots => Some("roots"),
            _ => None,
        }
    }

    /// The capabilities object a client declaring these would send (what
    /// `parse` reads back as the same), e.g. for a 2026-07-28 backend that
    /// checks what the request's client declared before it asks.
    pub fn declared(&self) -> serde_json::Value {
        let mut caps = serde_json::Map::new();
        if self.sampling {
            caps.insert("sampling".into(), serde_json::json!({}));
        }
        let mut modes = serde_json::Map::new();
        if self.elicitation {
            modes.insert("form".into(), serde_json::json!({}));
        }
        if self.elicitation_url {
            modes.insert("url".into(), serde_json::json!({}));
        }
        if !modes.is_empty() {
            caps.insert("elicitation".into(), modes.into());
        }
        if self.roots {
            let roots = serde_json::json!({ "listChanged": self.roots_list_changed });
            caps.insert("roots".into(), roots);
        }
        caps.into()
    }

    /// The capabilities as five bits (sealed into ids; a cache key).
    pub fn bits(&self) -> u8 {
        u8::from(self.sampling)
            | u8::from(self.elicitation) << 1
            | u8::from(self.roots) << 2
            | u8::from(self.roots_list_changed) << 3
            | u8::from(self.elicitation_url) << 4
    }

    pub fn from_bits(b: u8) -> ClientCaps {
        ClientCaps {
            sampling: b & 1 != 0,
            elicitation: b & 2 != 0,
            roots: b & 4 != 0,
            roots_list_changed: b & 8 != 0,
            elicitation_url: b & 16 != 0,
        }
    }

    /// The capabilities object a backend is told (see `LinkCtx::offer`).
    pub fn to_json(&self) -> serde_json::Value {
        let mut caps = serde_json::Map::new();
        if self.sampling {
            caps.insert("sampling".into(), serde_json::json!({}));
        }
        let mut modes = serde_json::Map::new();
        if self.elicitation {
            modes.insert("form".into(), serde_json::json!({}));
        }
        if self.elicitation_url {
            modes.insert("url".into(), serde_json::json!({}));
        }
        if !modes.is_empty() {
            caps.insert("elicitation".into(), serde_json::Value::Object(modes));
        }
        if self.roots {
            caps.insert(
                "roots".into(),
                serde_json::json!({ "listChanged": self.roots_list_changed }),
            );
        }
        serde_json::Value::Object(caps)
    }
}

/// Whether elicitation params ask for URL mode (`"mode": "url"`).
fn is_url_mode(params: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct P {
        mode: Option<String>,
    }
    serde_json::from_str::<P>(params).is_ok_and(|p| p.mode.as_deref() == Some("url"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_capabilities_decide_what_is_relayed() {
        let caps = ClientCaps::parse(r#"{"sampling":{},"roots":{"listChanged":true},"x":1}"#);
        assert!(caps.sampling && caps.roots && caps.roots_list_changed && !caps.elicitation);
        assert_eq!(caps.missing_for("sampling/createMessage", None), None);
        assert_eq!(
            caps.missing_for("elicitation/create", None),
            Some("elicitation")
        );
        assert_eq!(caps.missing_for("ping", None), None);
        // Modes: `{}` is form; URL mode must be declared.
        let form = ClientCaps::parse(r#"{"elicitation":{}}"#);
        assert!(form.elicitation && !form.elicitation_url);
        let url = r#"{"mode":"url","url":"https://x","elicitationId":"1","message":"m"}"#;
        assert_eq!(
            form.missing_for("elicitation/create", Some(url)),
            Some("elicitation")
        );
        let both = ClientCaps::parse(r#"{"elicitation":{"form":{},"url":{}}}"#);
        assert_eq!(both.missing_for("elicitation/create", Some(url)), None);
        assert_eq!(
            both.to_json()["elicitation"],
            serde_json::json!({"form":{},"url":{}})
        );
        assert_eq!(ClientCaps::parse("{}"), ClientCaps::default());
        assert_eq!(ClientCaps::parse("not json"), ClientCaps::default());
    }
}
