//! Conformance fixture backend: the surface that the official MCP conformance
//! suite (`@modelcontextprotocol/conformance`) expects of a server, on rmcp.
//!
//! ```text
//! conformance_fixture [--listen 127.0.0.1:0] [--max-lifetime 900] [--list-ttl-ms 300000] [--ignore-stdin] [--legacy-only]
//! ```
//!
//! Serves Streamable HTTP at `/mcp` for both protocol eras on one endpoint:
//! `initialize` opens a legacy session (2025-03-26 .. 2025-11-25), and a
//! request whose `params._meta` names `2026-07-28` is served statelessly
//! (`server/discover`, MRTR `input_required`, caching hints,
//! `subscriptions/listen`). Prints `conformance_fixture listening on ADDR`
//! once bound, and exits on SIGTERM/SIGINT, on stdin EOF (unless
//! `--ignore-stdin`), or after `--max-lifetime` seconds. It binds loopback
//! addresses only. With `--legacy-only` it is a 2025-11-25 server alone: a
//! POST whose `MCP-Protocol-Version` header names 2026-07-28 or later gets
//! 400 with no body (so a gateway's `server/discover` probe finds a legacy
//! backend, and bridges its questions for 2026-07-28 clients).
//!
//! Run by `tests/conformance/run`; the surface is listed in
//! `tests/conformance/README.md`.

use std::{net::SocketAddr, process::ExitCode, time::Duration};

use axum::response::IntoResponse as _;
use rmcp::transport::{
    StreamableHttpServerConfig, StreamableHttpService,
    streamable_http_server::session::local::LocalSessionManager,
};
use tokio_util::sync::CancellationToken;

#[path = "conformance_fixture/catalog.rs"]
mod catalog;
#[path = "conformance_fixture/handler.rs"]
mod handler;
#[path = "conformance_fixture/mrtr.rs"]
mod mrtr;
#[path = "conformance_fixture/tasks.rs"]
mod tasks;
#[path = "conformance_fixture/tools.rs"]
mod tools;
#[path = "conformance_fixture/url_elicitation.rs"]
mod url_elicitation;

const USAGE: &str = "usage: conformance_fixture [--listen 127.0.0.1:PORT] [--max-lifetime SECONDS] [--list-ttl-ms MS] [--ignore-stdin] [--legacy-only]";

struct Options {
    listen: SocketAddr,
    max_lifetime: Duration,
    watch_stdin: bool,
    legacy_only: bool,
}

fn parse_args() -> Result<Options, String> {
    let mut options = Options {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        max_lifetime: Duration::from_secs(900),
        watch_stdin: true,
        legacy_only: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg.clone(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag.as_str() {
            "--listen" => {
                let raw = value("--listen")?;
                options.listen = raw
                    .parse()
                    .map_err(|e| format!("--listen {raw}: {e} (want IP:PORT)"))?;
            }
            "--max-lifetime" => {
                let raw = value("--max-lifetime")?;
                let seconds: u64 = raw
                    .parse()
                    .map_err(|e| format!("--max-lifetime {raw}: {e} (want whole seconds)"))?;
                if seconds == 0 {
                    return Err("--max-lifetime must be at least 1 second".into());
                }
                options.max_lifetime = Duration::from_secs(seconds);
            }
            "--list-ttl-ms" => {
                let raw = value("--list-ttl-ms")?;
                let ms = raw
                    .parse::<u64>()
                    .map_err(|e| format!("--list-ttl-ms {raw}: {e}"))?;
                handler::CACHE_TTL_MS.store(ms, std::sync::atomic::Ordering::Relaxed);
            }
            "--ignore-stdin" => options.watch_stdin = false,
            "--legacy-only" => options.legacy_only = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if !options.listen.ip().is_loopback() {
        return Err(format!(
            "--listen {}: only loopback addresses are allowed",
            options.listen
        ));
    }
    Ok(options)
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = match parse_args() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("conformance_fixture: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FIXTURE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .init();

    match serve(options).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("conformance_fixture: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(options: Options) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(options.listen).await?;
    let local = listener.local_addr()?;
    let shutdown = CancellationToken::new();

    let fixture = handler::Fixture::new();
    let config = StreamableHttpServerConfig::default()
        // Both eras on one endpoint: `initialize` opens a legacy session,
        // 2026-07-28 `_meta` requests are served statelessly.
        .with_legacy_session_mode(true)
        // SEP-1699 polling: a retry hint on every SSE stream.
        .with_sse_retry(Some(Duration::from_millis(500)))
        // DNS-rebinding defence: loopback Host and Origin only.
        .with_allowed_hosts(["localhost", "127.0.0.1", "::1"])
        .with_allowed_origins([
            "http://localhost:*",
            "http://127.0.0.1:*",
            "http://[::1]:*",
            "https://localhost:*",
            "https://127.0.0.1:*",
            "https://[::1]:*",
        ])
        .with_cancellation_token(shutdown.child_token());
    let service = StreamableHttpService::new(
        move || Ok(fixture.clone()),
        LocalSessionManager::default().into(),
        config,
    );
    let mut router = axum::Router::new().route_service("/mcp", service);
    if options.legacy_only {
        router = router.layer(axum::middleware::from_fn(refuse_modern));
    }

    println!("conformance_fixture listening on {local}");
    use std::io::Write as _;
    std::io::stdout().flush()?;

    tokio::spawn(watch_for_shutdown(
        shutdown.clone(),
        options.max_lifetime,
        options.watch_stdin,
    ));
    let stop = shutdown.clone();
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await?;
    Ok(())
}

/// `--legacy-only`: a 2026-07-28 request is refused as a server that knows
/// only the 2025 revisions refuses an unsupported `MCP-Protocol-Version`.
async fn refuse_modern(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let modern = request
        .headers()
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v >= "2026-07-28");
    if modern {
        return axum::http::StatusCode::BAD_REQUEST.into_response();
    }
    next.run(request).await
}

/// Cancels `shutdown` on SIGTERM, SIGINT, stdin EOF or the lifetime limit.
async fn watch_for_shutdown(shutdown: CancellationToken, lifetime: Duration, watch_stdin: bool) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("conformance_fixture: cannot install signal handlers");
        shutdown.cancel();
        return;
    };
    // stdin EOF: a plain thread reads until EOF (tokio's stdin is not enabled
    // in this crate's tokio features).
    let (eof_tx, eof_rx) = tokio::sync::oneshot::channel::<()>();
    if watch_stdin {
        std::thread::spawn(move || {
            use std::io::Read as _;
            let mut stdin = std::io::stdin().lock();
            let mut buf = [0u8; 256];
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            let _ = eof_tx.send(());
        });
    } else {
        std::mem::forget(eof_tx);
    }
    let stdin_closed = async {
        let _ = eof_rx.await;
    };
    let reason = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        () = stdin_closed => "stdin closed",
        () = tokio::time::sleep(lifetime) => "max lifetime reached",
    };
    eprintln!("conformance_fixture: stopping ({reason})");
    shutdown.cancel();
    // Open SSE streams (listen subscriptions, GET streams) end with the
    // token; give them a moment, then leave regardless.
    tokio::time::sleep(Duration::from_secs(2)).await;
    std::process::exit(0);
}
