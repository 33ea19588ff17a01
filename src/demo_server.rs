//! `sluice demo-server`: a small MCP server over stdio, built into the binary
//! so `sluice serve` works with no config and the gateway has a test backend.
//!
//! Wire: newline-delimited JSON-RPC 2.0 (the MCP stdio transport), legacy
//! `initialize` era (2025-03-26 .. 2025-11-25).
//!
//! Invariants:
//! - stdout carries only protocol lines; diagnostics go to stderr.
//! - Every request runs on its own task, because the gateway multiplexes many
//!   clients over one child and a slow `sleep_ms` must not delay a `ping`.
//! - Only the writer loop writes output, one whole line at a time, so the
//!   output of concurrent tasks never interleaves.
//! - Request ids and progress tokens go back as the exact bytes received.
//! - State (the `counter`) lives for one `serve` call: one backend session.
//! - The lifecycle is not enforced (requests before `initialize` are served):
//!   a test backend should not be the strict party in a gateway test.

mod methods;
mod read;
mod tools;
mod wire;

use std::io::{self, Write as _};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use read::read_loop;
use wire::write_loop;

#[cfg(test)]
mod tests;

const PAGE_SIZE_ENV: &str = "SLUICE_DEMO_PAGE_SIZE";

/// Lines queued for output before request tasks wait: bounds memory when
/// whoever reads our stdout is slow.
const OUTBOX_CAPACITY: usize = 256;

/// Serves MCP on stdin/stdout until stdin reaches EOF.
pub async fn run() -> io::Result<()> {
    let pipes = crate::std_pipes::open("demo-server")?;
    let served = serve(pipes.stdin, pipes.stdout).await;
    // `serve` dropped its end of the pipe, so the stdout thread ends once all
    // is written; waiting for it means no answer is lost at exit.
    served.and(pipes.written.await.unwrap_or(Ok(())))
}

/// Serves one session over any byte streams, with settings from the environment.
pub(crate) async fn serve<R, W>(reader: R, writer: W) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    serve_with(reader, writer, Config::from_env()).await
}

/// Settings read once at startup, apart so tests need not touch the environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Config {
    /// `tools/list` page size; `None` returns every tool in one page.
    page_size: Option<usize>,
}

impl Config {
    fn from_env() -> Self {
        let raw = std::env::var(PAGE_SIZE_ENV).ok();
        let page_size = raw
            .as_deref()
            .and_then(|r| r.trim().parse().ok())
            .filter(|&n| n > 0);
        if let (Some(raw), None) = (&raw, page_size) {
            diag(format_args!(
                "ignoring {PAGE_SIZE_ENV}={raw:?}: not a positive integer"
            ));
        }
        Config { page_size }
    }
}

pub(crate) async fn serve_with<R, W>(reader: R, writer: W, config: Config) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (out, rx) = mpsc::channel(OUTBOX_CAPACITY);
    let state = Arc::new(State {
        config,
        counter: AtomicU64::new(0),
    });
    // Joined rather than spawned, so callers' streams need not be `Send + 'static`.
    let (read, write) = tokio::join!(read_loop(reader, out, state), write_loop(writer, rx));
    read.and(write)
}

/// Per-session state shared by request tasks.
#[derive(Debug)]
struct State {
    config: Config,
    counter: AtomicU64,
}

/// Straight to stderr, not `tracing`: stdout is the protocol stream, and this
/// mode must stay clean whatever subscriber the binary installed.
fn diag(args: std::fmt::Arguments<'_>) {
    _ = writeln!(io::stderr(), "sluice demo-server: {args}");
}
