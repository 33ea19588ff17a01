//! The command line (contract: `sluice serve | stdio | check | tools | keygen | demo-server | probe`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    // The commit too: build.rs reads it from git (or SLUICE_COMMIT).
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("SLUICE_COMMIT"), ")"),
    about = "An MCP gateway that owns every session it touches"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway (with no --config: the built-in demo backend).
    Serve {
        /// The config file: TOML, or the `mcpServers` JSON of desktop
        /// clients (docs/configuration.md). Without it, the built-in demo.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Overrides server.listen.
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// The gateway on stdin and stdout, for desktop clients that launch MCP
    /// servers as programs (one client; logs on stderr; with no --config:
    /// the built-in demo backend).
    Stdio {
        /// The config file: TOML, or the `mcpServers` JSON of desktop
        /// clients. Without it, the built-in demo.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The namespace served (default: the default namespace).
        #[arg(long)]
        namespace: Option<String>,
    },
    /// Validate a config and print the effective backends and namespaces.
    Check {
        /// The config file to check (TOML or `mcpServers` JSON).
        #[arg(long)]
        config: PathBuf,
    },
    /// Start the backends, print what each namespace offers a principal
    /// (tools, prompts, resources and templates, with the backend and its
    /// own name behind each), then stop them.
    Tools {
        /// The config file (TOML or `mcpServers` JSON).
        #[arg(long)]
        config: PathBuf,
        /// One namespace only (default: every namespace).
        #[arg(long)]
        namespace: Option<String>,
        /// As this named static principal (`NAME=TOKEN` in
        /// `bearer_tokens_env`) sees it, its scopes applied (default: a
        /// caller no scope restricts).
        #[arg(long)]
        principal: Option<String>,
        /// One JSON document instead of columns.
        #[arg(long)]
        json: bool,
    },
    /// Print a new key for sealed session ids, in the form
    /// SLUICE_SESSION_KEY takes (comma-separate several to rotate).
    Keygen,
    /// A small stdio MCP server: the built-in default and a test backend.
    DemoServer,
    /// Session hygiene of any Streamable HTTP MCP server: which eras it
    /// speaks, what an abandoned session costs, whether DELETE, unknown ids
    /// and idle sessions are handled as clients need.
    Probe {
        /// The server's MCP endpoint, e.g. http://127.0.0.1:3001/mcp.
        url: String,
        /// Sessions to open and abandon (no DELETE).
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=sluice_max_sessions()))]
        sessions: u64,
        /// Sessions opened at once.
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=256))]
        concurrency: u64,
        /// The server's process: its RSS and its children's are sampled.
        #[arg(long, conflicts_with = "metrics")]
        pid: Option<u32>,
        /// A Prometheus endpoint exporting process_resident_memory_bytes.
        #[arg(long)]
        metrics: Option<String>,
        /// How long to leave the sessions idle before presenting one again
        /// (longer than the server's idle timeout): "90s", "5m". 0: skip.
        #[arg(long, default_value = "0s", value_parser = probe_wait)]
        wait: std::time::Duration,
        /// A header for every request, "Name: value" (repeatable).
        #[arg(long = "header")]
        headers: Vec<String>,
        /// One JSON document instead of lines.
        #[arg(long)]
        json: bool,
    },
}

const fn sluice_max_sessions() -> u64 {
    crate::probe::MAX_SESSIONS as u64
}

fn probe_wait(text: &str) -> Result<std::time::Duration, String> {
    let d = crate::config::parse_duration(text)?;
    if d > crate::probe::MAX_WAIT {
        return Err(format!(
            "at most {}",
            crate::config::format_duration(crate::probe::MAX_WAIT)
        ));
    }
    Ok(d)
}
