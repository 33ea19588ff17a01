//! sluice: an MCP gateway that owns every session it touches.
//!
//! Data flows one way:
//! `front` (HTTP, era, auth) -> `sessions` (bounded table) -> `router`
//! (namespaces, names, merging) -> `upstream` (backends and their sessions).
//! `config`, `metrics` and `cli` sit beside them; `app` wires them together
//! and `reload` applies a new config to them while they run.

pub mod app;
pub(crate) mod auth;
pub(crate) mod cancel_flag;
pub mod cli;
pub(crate) mod clock;
pub mod cluster;
pub mod config;
pub mod demo_server;
pub(crate) mod fast_map;
pub mod front;
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod http1;
pub mod jsonrpc;
pub mod metrics;
pub mod mirror;
pub mod probe;
pub mod protocol;
mod random;
pub(crate) mod raw_io;
pub(crate) mod reload;
pub mod router;
pub mod sessions;
pub(crate) mod timers;
pub(crate) mod traces;
pub mod upstream;
pub mod vocab;
pub mod workers;
