//! The command line (contract: `sluice serve | check | keygen | demo-server`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version,
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
        #[arg(long)]
        config: Option<PathBuf>,
        /// Overrides server.listen.
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// Validate a config and print the effective backends and namespaces.
    Check {
        #[arg(long)]
        config: PathBuf,
    },
    /// Print a new key for sealed session ids, in the form
    /// SLUICE_SESSION_KEY takes (comma-separate several to rotate).
    Keygen,
    /// A small stdio MCP server: the built-in default and a test backend.
    DemoServer,
}
