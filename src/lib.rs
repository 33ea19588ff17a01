//! sluice: an MCP gateway that owns every session it touches.
//!
//! A request flows `front` (HTTP, era, auth) -> `sessions` (bounded table)
//! -> `router` (namespaces, names, merging) -> `upstream` (backends and
//! their sessions). The modules are built in layers, bottom to top: the
//! vocabulary and runtime utilities, the protocol, HTTP/1.1, config,
//! metrics, traces, sessions, upstream, then what uses backends (cluster,
//! router, auth), the front and the probe, reload, and the wiring (`app`,
//! `stdio`, `cli`). `tests/layers.rs` holds the order; docs/architecture.md draws it.

pub mod app;
pub(crate) mod auth;
pub mod budget;
pub(crate) mod cancel_flag;
pub mod catalogue;
pub mod cli;
pub(crate) mod clock;
pub mod cluster;
pub mod config;
pub mod demo_server;
pub(crate) mod fast_map;
pub mod front;
#[doc(hidden)]
pub mod fuzzing;
pub mod http1;
pub mod jsonrpc;
pub mod metrics;
pub mod mirror;
pub mod probe;
pub mod protocol;
pub(crate) mod raw_io;
pub(crate) mod reload;
pub mod router;
pub mod sessions;
pub(crate) mod std_pipes;
pub mod stdio;
pub(crate) mod timers;
pub(crate) mod traces;
pub mod upstream;
pub mod vocab;
pub mod workers;
