//! stdio backend sessions: one child process each, spoken to over its
//! pipes. The link's owner task owns the child: it ends it (stdin EOF,
//! SIGTERM to the group, SIGKILL) and reaps it, so no zombie is left.

use std::sync::Arc;

use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, LinesCodec};
use tokio_util::sync::CancellationToken;

use super::child::{self, Spawned, StdioSpec};
use super::conn::{Conn, Frame, Writes};
use super::exit::Exit;
use super::line_reader::{Line, LineReader};
use super::link::{self, EndReason, Link};
use super::sandbox::Confined;
use super::{LinkCtx, UpstreamError};
use crate::budget::{BODIES, Refused};
use crate::jsonrpc::{self, Outcome, Payload};
use crate::vocab::BackendName;
use crate::workers::Handoff;

/// A line longer than this from a backend is dropped as it is read (its
/// caller told), not a reason to buffer without bound.
const MAX_LINE: usize = 64 * 1024 * 1024;
const WRITE_QUEUE: usize = 1024;
/// Queued lines are written together up to this many bytes: one syscall
/// for a burst.
const WRITE_BATCH: usize = 64 * 1024;

/// Starts a child and runs the MCP handshake with it.
pub(super) async fn open(ctx: &LinkCtx, spec: &StdioSpec) -> Result<Arc<Link>, UpstreamError> {
    let Spawned {
        child,
        group,
        stdin,
        stdout,
        stderr,
        confined,
    } = spawn(spec, &ctx.name).await.map_err(|e| {
        tracing::warn!(backend = %ctx.name, command = %spec.command, error = %e, "cannot start the backend's command");
        // Health output names the class, never the command.
        match e.kind() {
            std::io::ErrorKind::NotFound => UpstreamError::down(&ctx.name, "command_not_found"),
            std::io::ErrorKind::PermissionDenied => {
                UpstreamError::down(&ctx.name, "command_not_executable")
            }
            _ => UpstreamError::unavailable(
                &ctx.name,
                format!("cannot start `{}`: {e}", spec.command),
            ),
        }
    })?;
    ctx.metrics.backend_session_opened(&ctx.name);

    let (tx, rx) = mpsc::channel(WRITE_QUEUE);
    let conn = ctx.conn(tx, Writes::Tracked);
    let closing = CancellationToken::new();
    tokio::spawn(write_lines(stdin, rx, conn.clone(), closing.clone()));
    tokio::spawn(log_stderr(stderr, ctx.clone()));
    let reader = tokio::spawn(read_lines(stdout, conn.clone(), ctx.clone()));

    let handshake = link::handshake(&conn, ctx.timeout, &ctx.offer).await;
    link::establish(conn, handshake, |link| {
        tokio::spawn(own(
            link,
            child,
            Ending { group, confined },
            reader,
            closing,
            ctx.clone(),
        ))
    })
    .await
}

/// A sandboxed child's start may wait on the kernel (a cgroup v1 join
/// waits for an RCU grace period, about 10 ms): off the runtime's workers.
async fn spawn(spec: &StdioSpec, name: &BackendName) -> std::io::Result<Spawned> {
    if spec.sandbox.is_none() {
        return child::spawn(spec, name);
    }
    let (spec, name) = (spec.clone(), name.clone());
    tokio::task::spawn_blocking(move || child::spawn(&spec, &name))
        .await
        .map_err(std::io::Error::other)?
}

/// The owner: waits for a close request or the child's end, then makes
/// sure the child and its descendants are gone and reaped, and says why a
/// session the gateway did not end ended.
async fn own(
    link: Arc<Link>,
    mut child: Child,
    ending: Ending,
    mut reader: tokio::task::JoinHandle<()>,
    closing: CancellationToken,
    ctx: LinkCtx,
) {
    let mut status = tokio::select! {
        _ = link.close_requested().cancelled() => None,
        status = child.wait() => status.ok(),
        _ = &mut reader => None,
    };
    // Gone already (a child that exits at once fails its handshake, and
    // the close that follows may be seen first).
    if status.is_none() {
        status = child.try_wait().ok().flatten();
    }
    // Its stdout is closed: it is ending, or chose to stop answering.
    let output_closed = reader.is_finished();
    // Closing stdin first lets a well-behaved server exit on its own.
    closing.cancel();
    let mut later = None;
    if status.is_none() {
        later = child::terminate(&mut child, &ctx.name).await;
    }
    // The leader is reaped; its descendants go with the group.
    drop(ending.group);
    reader.abort();
    let broke = ending.confined.as_ref().and_then(|c| c.broke());
    // Asked to close for a reason of the gateway's own (idle, shutdown,
    // its client gone): nothing went wrong.
    let asked = link.close_requested().is_cancelled();
    let reason = link.ended();
    if reason == EndReason::Failed {
        ctx.ended_on_its_own(match (status, later) {
            // Its cgroup says why, however the end was seen first.
            (Some(s), _) | (None, Some(s)) if broke.is_some() => Exit::bound(broke, s),
            (Some(s), _) => Exit::of(s),
            // A process that closed its stdout, then exited as stdin closed.
            (None, Some(s)) if output_closed => Exit::of(s),
            (None, _) if output_closed || !asked => Exit::Closed,
            // Still running when the gateway gave up on it.
            (None, _) => Exit::Unhealthy,
        });
    }
    ctx.metrics
        .backend_session_closed(&ctx.name, reason.label());
    // Its cgroup (killing what escaped the group) and temporary directory.
    drop(ending.confined);
}

/// What ends with the child: its process group, then its sandbox.
struct Ending {
    group: child::Group,
    confined: Option<Confined>,
}

/// Writes queued lines to the child, telling `conn` which requests got out:
/// one not written (the child died first) fails as unsent, so its caller
/// can send it to the replacement without running it twice.
async fn write_lines(
    mut stdin: ChildStdin,
    mut rx: mpsc::Receiver<Frame>,
    conn: Arc<Conn>,
    closing: CancellationToken,
) {
    let mut buf = Vec::new();
    // (gateway id, offset of its first byte in `buf`)
    let mut calls = Vec::new();
    loop {
        let first = tokio::select! {
            _ = closing.cancelled() => break,
            frame = rx.recv() => match frame { Some(f) => f, None => break },
        };
        buf.clear();
        calls.clear();
        let mut next = Some(first);
        while let Some(frame) = next.take() {
            // A request whose caller is gone (or was told it was not sent)
            // is not written.
            if let Some(id) = frame.call {
                if !conn.claim(id) {
                    next = rx.try_recv().ok();
                    continue;
                }
                calls.push((id, buf.len()));
            }
            buf.extend_from_slice(frame.line.as_bytes());
            buf.push(b'\n');
            if buf.len() < WRITE_BATCH {
                next = rx.try_recv().ok();
            }
        }
        let mut written = 0;
        let failed = loop {
            if written == buf.len() {
                break false;
            }
            match stdin.write(&buf[written..]).await {
                Ok(0) | Err(_) => break true,
                Ok(n) => written += n,
            }
        };
        for &(id, start) in &calls {
            conn.settle(id, start < written);
        }
        if failed {
            break;
        }
    }
    // Whatever is still queued never reaches the child.
    rx.close();
    while let Ok(frame) = rx.try_recv() {
        if let Some(id) = frame.call
            && conn.claim(id)
        {
            conn.settle(id, false);
        }
    }
    let _ = stdin.shutdown().await;
}

/// Reads the child's lines and dispatches them. A long one (a large
/// result) is read into its own buffer under the body budget and becomes
/// its result where it lies; one the budget refuses, or longer than
/// `MAX_LINE`, is dropped as it is read, and its caller told why.
async fn read_lines(stdout: ChildStdout, conn: Arc<Conn>, ctx: LinkCtx) {
    let mut lines = LineReader::new(stdout, MAX_LINE, &BODIES);
    // Callers on other workers get the answers of one read together (what
    // it holds is sent before the reader waits, and when it is dropped,
    // the task aborted included).
    let mut handoff = Handoff::new();
    loop {
        let notice = match lines.next(&mut handoff).await {
            Ok(Some(Line::Small(line))) if line.trim_ascii().is_empty() => None,
            Ok(Some(Line::Small(line))) => conn.dispatch_via(line, None, &mut handoff).0,
            Ok(Some(Line::Large(line, permit))) => match jsonrpc::take_result(line) {
                Ok((id, result)) => {
                    let outcome = Outcome::Result(Payload::held(result, permit));
                    conn.answer_pending(&id, outcome, &mut handoff);
                    None
                }
                // Anything but a result (its bytes held until it is read).
                Err(other) => conn.dispatch_via(&other, None, &mut handoff).0,
            },
            Ok(Some(Line::Skipped {
                said,
                refused,
                length,
            })) => {
                skipped(&conn, &ctx, said, refused, length);
                None
            }
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(backend = %ctx.name, error = %e, "backend output unreadable; session ends");
                break;
            }
        };
        if let Some(notice) = notice {
            ctx.notice(notice);
        }
    }
    // No answer can come any more: whoever waits (the handshake included,
    // for a child that exits at once) learns it now, not at its deadline.
    conn.fail_all();
}

/// A line dropped unread: the call it answers (if it is a response to
/// one) fails with why.
fn skipped(
    conn: &Conn,
    ctx: &LinkCtx,
    said: jsonrpc::Skimmed,
    refused: Option<Refused>,
    length: usize,
) {
    if refused.is_some() {
        ctx.metrics.body_refused();
    }
    if let Some(suppressed) = ctx.warnings.admit() {
        tracing::warn!(backend = %ctx.name, length, over_budget = refused.is_some(), suppressed, "a backend line was dropped unread");
    }
    let call = said
        .id
        .filter(|_| !said.method)
        .and_then(|id| id.parse::<u64>().ok());
    if let Some(id) = call {
        conn.fail(
            id,
            match refused {
                Some(refused) => UpstreamError::over_budget(&ctx.name, refused),
                None => UpstreamError::protocol(
                    &ctx.name,
                    format!("answered with a line longer than {MAX_LINE} bytes, dropped unread"),
                ),
            },
        );
    }
}

/// The backend's stderr, a line a log line, at a bounded rate.
async fn log_stderr(stderr: ChildStderr, ctx: LinkCtx) {
    let mut lines = FramedRead::new(stderr, LinesCodec::new_with_max_length(64 * 1024));
    while let Some(line) = lines.next().await {
        match line {
            Ok(line) => {
                match ctx.stderr.admit() {
                    Some(0) => {}
                    Some(n) => {
                        tracing::warn!(backend = %ctx.name, suppressed = n, "backend stderr lines dropped (rate limit)")
                    }
                    None => continue,
                }
                tracing::info!(target: "sluice::backend", backend = %ctx.name, "{line}");
            }
            Err(tokio_util::codec::LinesCodecError::MaxLineLengthExceeded) => continue,
            Err(_) => break,
        }
    }
}
