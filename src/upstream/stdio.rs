//! The supervisor of a stdio backend: exactly one task owns the child.
//!
//! It spawns the child, runs the MCP handshake and a list call (healthy
//! means both succeeded, not that a process exists), serves until the child
//! exits or the gateway stops, and restarts with capped exponential backoff.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, LinesCodec};
use tokio_util::sync::CancellationToken;

use super::child::{self, Spawned};
use super::conn::Conn;
use super::{Backend, Health, InitInfo};
use crate::config::BackendName;
use crate::jsonrpc::Outcome;

/// A line longer than this from a backend is a protocol error, not a reason
/// to buffer without bound.
const MAX_LINE: usize = 64 * 1024 * 1024;
const WRITE_QUEUE: usize = 1024;
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A run this long resets the backoff.
const STABLE_AFTER: Duration = Duration::from_secs(10);

pub(super) struct StdioSpec {
    pub(super) command: String,
    pub(super) args: Vec<String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) cwd: Option<std::path::PathBuf>,
}

pub(super) async fn supervise(backend: Arc<Backend>, spec: StdioSpec, stop: CancellationToken) {
    let mut backoff = BACKOFF_FIRST;
    loop {
        let started = tokio::time::Instant::now();
        match run_once(&backend, &spec, &stop).await {
            Ok(()) => {}
            Err(e) => {
                tracing::warn!(backend = %backend.name, error = %e, "backend failed");
                backend.set_health(Health::Down(e));
            }
        }
        if stop.is_cancelled() {
            backend.set_health(Health::Stopped);
            return;
        }
        if started.elapsed() >= STABLE_AFTER {
            backoff = BACKOFF_FIRST;
        }
        tracing::info!(backend = %backend.name, delay_ms = backoff.as_millis() as u64, "restarting backend");
        tokio::select! {
            _ = stop.cancelled() => {
                backend.set_health(Health::Stopped);
                return;
            }
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// One incarnation of the child. Returns Ok when the gateway stopped it,
/// Err with the reason otherwise.
async fn run_once(
    backend: &Arc<Backend>,
    spec: &StdioSpec,
    stop: &CancellationToken,
) -> Result<(), String> {
    let Spawned {
        mut child,
        stdin,
        stdout,
        stderr,
    } = child::spawn(&spec.command, &spec.args, &spec.env, spec.cwd.as_deref())
        .map_err(|e| format!("cannot start `{}`: {e}", spec.command))?;
    let pid = child.id();
    backend.metrics.backend_session_opened(&backend.name);

    let (tx, rx) = mpsc::channel(WRITE_QUEUE);
    let conn = Conn::new(backend.name.clone(), tx);
    let closing = CancellationToken::new();
    tokio::spawn(write_lines(stdin, rx, closing.clone()));
    tokio::spawn(log_stderr(stderr, backend.name.clone()));
    let mut reader = tokio::spawn(read_lines(stdout, conn.clone(), backend.clone()));

    let outcome = tokio::select! {
        _ = stop.cancelled() => Ok(()),
        status = child.wait() => Err(match status {
            Ok(s) => format!("exited ({s})"),
            Err(e) => format!("wait failed: {e}"),
        }),
        _ = &mut reader => Err("closed its stdout".to_owned()),
        r = serve(backend, &conn) => r,
    };
    backend.set_health(match &outcome {
        Ok(()) => Health::Stopped,
        Err(e) => Health::Down(e.clone()),
    });
    // Fail in-flight calls now rather than at their timeout.
    conn.fail_all();
    closing.cancel();
    let still_running = child.try_wait().ok().flatten().is_none();
    if still_running {
        child::terminate(&mut child, &backend.name).await;
    } else {
        child::kill_group(pid);
    }
    reader.abort();
    let reason = if outcome.is_ok() {
        "shutdown"
    } else {
        "exited"
    };
    backend
        .metrics
        .backend_session_closed(&backend.name, reason);
    outcome
}

/// Handshake, health check, then serve until the connection breaks.
async fn serve(backend: &Arc<Backend>, conn: &Arc<Conn>) -> Result<(), String> {
    let info = handshake(backend, conn).await?;
    backend.set_health(Health::Up(conn.clone(), Arc::new(info)));
    tracing::info!(backend = %backend.name, "backend healthy");
    // The child's exit (or stop) ends this incarnation, via the select above.
    std::future::pending::<()>().await;
    Ok(())
}

async fn handshake(backend: &Backend, conn: &Conn) -> Result<InitInfo, String> {
    let params = crate::jsonrpc::raw(&serde_json::json!({
        "protocolVersion": crate::protocol::LegacyVersion::LATEST.as_str(),
        "capabilities": { "sampling": {}, "elicitation": {}, "roots": { "listChanged": true } },
        "clientInfo": { "name": "sluice", "version": env!("CARGO_PKG_VERSION") },
    }));
    let timeout = backend.timeout;
    let outcome = conn
        .call("initialize", Some(params), None, timeout)
        .await
        .map_err(|e| format!("initialize failed: {e}"))?;
    let info = match outcome {
        Outcome::Result(r) => {
            InitInfo::parse(&r).map_err(|e| format!("bad initialize result: {e}"))?
        }
        Outcome::Error(e) => return Err(format!("initialize refused: {}", e.get())),
    };
    conn.notify("notifications/initialized", None)
        .await
        .map_err(|e| e.to_string())?;
    let probe = info.health_probe();
    match conn.call(probe, None, None, timeout).await {
        Ok(Outcome::Result(_)) => Ok(info),
        Ok(Outcome::Error(e)) => Err(format!("{probe} refused: {}", e.get())),
        Err(e) => Err(format!("{probe} failed: {e}")),
    }
}

async fn write_lines(
    stdin: tokio::process::ChildStdin,
    mut rx: mpsc::Receiver<String>,
    closing: CancellationToken,
) {
    let mut out = BufWriter::new(stdin);
    loop {
        let line = tokio::select! {
            _ = closing.cancelled() => break,
            line = rx.recv() => match line { Some(l) => l, None => break },
        };
        let ok = out.write_all(line.as_bytes()).await.is_ok() && out.write_all(b"\n").await.is_ok();
        // Flush only when the queue is drained: batches writes under load.
        if !ok || (rx.is_empty() && out.flush().await.is_err()) {
            break;
        }
    }
    let _ = out.shutdown().await;
}

async fn read_lines(stdout: tokio::process::ChildStdout, conn: Arc<Conn>, backend: Arc<Backend>) {
    let mut lines = FramedRead::new(stdout, LinesCodec::new_with_max_length(MAX_LINE));
    while let Some(line) = lines.next().await {
        match line {
            Ok(line) if line.trim().is_empty() => {}
            Ok(line) => {
                if let Some(change) = conn.dispatch(&line) {
                    backend.list_changed(&change);
                }
            }
            Err(e) => {
                tracing::warn!(backend = %backend.name, error = %e, "backend output unreadable");
                break;
            }
        }
    }
    conn.fail_all();
}

async fn log_stderr(stderr: tokio::process::ChildStderr, backend: BackendName) {
    let mut lines = FramedRead::new(stderr, LinesCodec::new_with_max_length(64 * 1024));
    while let Some(line) = lines.next().await {
        match line {
            Ok(line) => tracing::info!(target: "sluice::backend", backend = %backend, "{line}"),
            Err(tokio_util::codec::LinesCodecError::MaxLineLengthExceeded) => continue,
            Err(_) => break,
        }
    }
}
