//! What a backend says about itself when a session opens (`initialize`) or
//! when it is probed (`server/discover`, 2026-07-28).

use serde_json::value::RawValue;

use super::UpstreamError;
use crate::jsonrpc::Outcome;
use crate::vocab::BackendName;

/// What the backend told us about itself in `initialize`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InitInfo {
    pub capabilities: serde_json::Map<String, serde_json::Value>,
    pub instructions: Option<String>,
    pub protocol_version: String,
}

impl InitInfo {
    pub(super) fn from_outcome(
        backend: &BackendName,
        outcome: &Outcome,
    ) -> Result<InitInfo, UpstreamError> {
        match outcome {
            Outcome::Result(r) => Self::parse(backend, r, "initialize", None),
            Outcome::Error(e) => Err(UpstreamError::protocol(
                backend,
                format!("initialize refused: {}", e.get()),
            )),
        }
    }

    /// From a 2026-07-28 `server/discover` result.
    pub(super) fn from_discover(
        backend: &BackendName,
        result: &RawValue,
    ) -> Result<InitInfo, UpstreamError> {
        Self::parse(
            backend,
            result,
            "discover",
            Some(crate::protocol::MODERN_FIRST),
        )
    }

    /// `initialize` names the negotiated version; `server/discover` lists
    /// versions, and the gateway speaks the one it knows (`version`).
    fn parse(
        backend: &BackendName,
        result: &RawValue,
        what: &str,
        version: Option<&str>,
    ) -> Result<InitInfo, UpstreamError> {
        #[derive(serde::Deserialize)]
        struct Wire {
            #[serde(default)]
            capabilities: serde_json::Map<String, serde_json::Value>,
            #[serde(default)]
            instructions: Option<String>,
            #[serde(rename = "protocolVersion", default)]
            protocol_version: Option<String>,
        }
        let w: Wire = serde_json::from_str(result.get())
            .map_err(|e| UpstreamError::protocol(backend, format!("bad {what} result: {e}")))?;
        let protocol_version = version
            .map(str::to_owned)
            .or(w.protocol_version)
            .ok_or_else(|| {
                UpstreamError::protocol(backend, format!("{what} result has no protocolVersion"))
            })?;
        Ok(InitInfo {
            capabilities: w.capabilities,
            instructions: w.instructions,
            protocol_version,
        })
    }

    /// A 2026-07-28 backend: stateless, metadata on every request.
    pub fn is_modern(&self) -> bool {
        crate::protocol::is_modern(&self.protocol_version)
    }

    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.contains_key(capability)
    }

    /// The cheapest list call the backend supports, for the health check.
    pub(super) fn health_probe(&self) -> &'static str {
        ["tools", "prompts", "resources"]
            .into_iter()
            .zip(["tools/list", "prompts/list", "resources/list"])
            .find(|(cap, _)| self.has(cap))
            .map_or("ping", |(_, m)| m)
    }
}
