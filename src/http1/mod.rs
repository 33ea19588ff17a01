//! HTTP/1.1 as the gateway speaks it itself: the wire format, with no I/O
//! of its own, for both directions (`codec`: request and response heads,
//! read and written, a body's framing, the limits; the front's connection
//! and the client both use it), and the client that backends, the OAuth
//! issuer and the OTLP collector are reached with (`client`), beside it
//! so that no caller reaches into `upstream` for it, and the proxies it
//! goes through (`proxy`); a header value as text (`header_text`). It imports nothing above the runtime's own
//! utilities.

pub(crate) mod client;
pub(crate) mod codec;
pub(crate) mod header_text;
pub mod proxy;

use std::sync::OnceLock;

/// Who speaks HTTP/1.1 for the gateway, from `SLUICE_HTTP`: its own code
/// (`own`, the default: the front's fast path, `codec` and `client`) or
/// hyper for everything (`hyper`: every client connection is served by
/// hyper from its first byte, every backend exchange sent by hyper-util's
/// pooled client). The libraries are the twin the own code is held equal
/// to: CI runs the end-to-end suite both ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    #[default]
    Own,
    Hyper,
}

static ENGINE: OnceLock<Engine> = OnceLock::new();

impl Engine {
    pub fn from_env() -> Result<Engine, String> {
        match std::env::var("SLUICE_HTTP").as_deref() {
            Err(_) | Ok("" | "own") => Ok(Engine::Own),
            Ok("hyper") => Ok(Engine::Hyper),
            Ok(other) => Err(format!(
                "SLUICE_HTTP must be \"own\" or \"hyper\", not {other:?}"
            )),
        }
    }

    /// Fixes the engine for the process; the binary does this at start,
    /// before any connection is served or client made.
    pub fn install(self) {
        let _ = ENGINE.set(self);
    }

    /// The engine in force: the one installed, else the environment's as
    /// first read (an unknown value reads as the default; the binary has
    /// refused it before this).
    pub(crate) fn current() -> Engine {
        *ENGINE.get_or_init(|| Engine::from_env().unwrap_or_default())
    }
}
