//! A stateful Streamable HTTP MCP backend for tests: it stands in for a
//! browser-backed server (Playwright MCP keeps one browser context per
//! session), so a test can watch what a gateway does to backend sessions.
//!
//! `stateful_backend --listen 127.0.0.1:0 [--max-sessions N] [--max-lifetime SECS]`
//! prints `stateful_backend listening on 127.0.0.1:PORT` once bound, then serves:
//! - `/mcp`: MCP over Streamable HTTP (rmcp, legacy revisions, stateful);
//!   tools `counter`, `echo`, `whoami`, `slow`, `ask`, `change`, `change_here`;
//! - `GET /stats`: session and request counters as JSON;
//! - `POST /admin/forget`: drop every session, as a restart would.
//!
//! It exits on SIGTERM/SIGINT, when its stdin reaches EOF (so spawn it with a
//! piped stdin and keep the handle), or after `--max-lifetime` seconds, so a
//! test that forgets it never leaves it running.

use std::{
    collections::HashMap,
    io::{Read, Write},
    net::SocketAddr,
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicU64, Ordering::SeqCst},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    body::Body,
    extract::{Request, State},
    http::{Method, StatusCode},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use clap::Parser;
use rmcp::{
    ErrorData as McpError, Peer, RoleServer, ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{
        Implementation, InitializeRequestParams, InitializeResult, ListToolsResult,
        PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion, ServerCapabilities,
        ServerConfig,
    },
    schemars,
    service::{NotificationContext, RequestContext},
    tool, tool_handler, tool_router,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
        session::{
            SessionManager,
            local::{LocalSessionManager, SessionConfig},
        },
    },
};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Cli {
    /// Loopback address to bind, e.g. 127.0.0.1:0.
    #[arg(long)]
    listen: SocketAddr,
    /// Answer 503 to an initialize that would exceed this many live sessions.
    #[arg(long)]
    max_sessions: Option<u64>,
    /// Exit after this many seconds whatever happens.
    #[arg(long, default_value_t = 600)]
    max_lifetime: u64,
}

/// Only the revisions that still have sessions and an initialize handshake.
const VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
];

// Counters for /stats. `LIVE` moves only in `SessionCtx::new` and `Drop`, so
// it counts objects that really exist, not what the bookkeeping believes.
static LIVE: AtomicU64 = AtomicU64::new(0);
static OPENED: AtomicU64 = AtomicU64::new(0);
static CLOSED: AtomicU64 = AtomicU64::new(0);
static MAX_LIVE: AtomicU64 = AtomicU64::new(0);
static TOOLS_LIST_CALLS: AtomicU64 = AtomicU64::new(0);
static INITIALIZE_CALLS: AtomicU64 = AtomicU64::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);
static LIST_VERSION: AtomicU64 = AtomicU64::new(1);
/// Bumped by /admin/forget; a context remembers the generation it was born in.
static GENERATION: AtomicU64 = AtomicU64::new(0);
static NEXT_CTX: AtomicU64 = AtomicU64::new(1);

/// What `change` and the waits need to know about each live context.
struct Entry {
    generation: u64,
    session_id: Option<String>,
    peer: Peer<RoleServer>,
    /// Cancels the context's in-flight tool calls (see `end_sessions`).
    kill: CancellationToken,
}

fn registry() -> &'static Mutex<HashMap<u64, Entry>> {
    static REGISTRY: OnceLock<Mutex<HashMap<u64, Entry>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// The per-session object, like a browser context: created by `initialize`,
/// dropped with the session's handler when rmcp ends the session.
struct SessionCtx {
    id: u64,
    counter: AtomicU64,
    kill: CancellationToken,
    _weight: Vec<u8>,
}

impl SessionCtx {
    fn new(peer: Peer<RoleServer>) -> Self {
        let id = NEXT_CTX.fetch_add(1, SeqCst);
        let kill = CancellationToken::new();
        let entry = Entry {
            generation: GENERATION.load(SeqCst),
            session_id: None,
            peer,
            kill: kill.clone(),
        };
        registry().lock().unwrap().insert(id, entry);
        OPENED.fetch_add(1, SeqCst);
        let live = LIVE.fetch_add(1, SeqCst) + 1;
        MAX_LIVE.fetch_max(live, SeqCst);
        SessionCtx {
            id,
            counter: AtomicU64::new(0),
            kill,
            _weight: vec![0x5a; 64 * 1024],
        }
    }
}

impl Drop for SessionCtx {
    fn drop(&mut self) {
        registry().lock().unwrap().remove(&self.id);
        LIVE.fetch_sub(1, SeqCst);
        CLOSED.fetch_add(1, SeqCst);
    }
}

/// Finishes ending the sessions whose contexts match, once rmcp has closed
/// them: cancels their in-flight tool calls (rmcp would let those run on for
/// up to 5 s, holding the handler and so the context), then waits until the
/// contexts are dropped, which rmcp does on another task, or two seconds pass.
async fn end_sessions(matching: impl Fn(&Entry) -> bool) {
    for entry in registry().lock().unwrap().values().filter(|e| matching(e)) {
        entry.kill.cancel();
    }
    for _ in 0..200 {
        if !registry().lock().unwrap().values().any(&matching) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    text: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct SlowArgs {
    /// How long to sleep, in milliseconds.
    ms: u64,
}

/// One instance per session: StreamableHttpService calls the factory for
/// each new session (and for a few throwaway lookups, hence the lazy context).
struct Backend {
    tool_router: ToolRouter<Self>,
    ctx: OnceLock<SessionCtx>,
}

impl Backend {
    fn ctx(&self) -> Result<&SessionCtx, McpError> {
        self.ctx
            .get()
            .ok_or_else(|| McpError::invalid_request("session not initialized", None))
    }
}

#[tool_router]
impl Backend {
    #[tool(description = "Increment and return this session's counter")]
    async fn counter(&self) -> Result<String, McpError> {
        Ok((self.ctx()?.counter.fetch_add(1, SeqCst) + 1).to_string())
    }

    #[tool(description = "Return the text")]
    async fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(description = "Name the backend session serving this call")]
    async fn whoami(&self) -> Result<String, McpError> {
        Ok(format!("ctx-{}", self.ctx()?.id))
    }

    #[tool(description = "Sleep for ms milliseconds, reporting progress if asked")]
    async fn slow(
        &self,
        Parameters(SlowArgs { ms }): Parameters<SlowArgs>,
        cx: RequestContext<RoleServer>,
    ) -> Result<String, String> {
        let kill = self.ctx().map_err(|e| e.message.to_string())?.kill.clone();
        let token = cx.meta.get_progress_token();
        let mut done = 0;
        while done < ms {
            let step = (ms - done).min(100);
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(step)) => {}
                // notifications/cancelled from the client:
                _ = cx.ct.cancelled() => return Err(format!("cancelled after {done}ms")),
                // DELETE or forget:
                _ = kill.cancelled() => return Err(format!("session ended after {done}ms")),
            }
            done += step;
            if let Some(token) = &token {
                let progress = ProgressNotificationParam::new(token.clone(), done as f64)
                    .with_total(ms as f64);
                let _ = cx.peer.notify_progress(progress).await;
            }
        }
        Ok(format!("slept {ms}ms"))
    }

    #[tool(description = "Ask the client to sample a message and return its text")]
    async fn ask(&self, cx: RequestContext<RoleServer>) -> Result<String, String> {
        let kill = self.ctx().map_err(|e| e.message.to_string())?.kill.clone();
        tokio::select! {
            reply = sample(&cx.peer) => reply,
            _ = kill.cancelled() => Err("session ended".to_string()),
        }
    }

    #[tool(description = "Bump the tool list version and tell every session")]
    async fn change(&self) -> String {
        LIST_VERSION.fetch_add(1, SeqCst);
        let peers: Vec<_> = registry()
            .lock()
            .unwrap()
            .values()
            .map(|e| e.peer.clone())
            .collect();
        for peer in peers {
            let _ = peer.notify_tool_list_changed().await;
        }
        "changed".to_string()
    }

    #[tool(description = "Bump the tool list version and tell this session only")]
    async fn change_here(&self, cx: RequestContext<RoleServer>) -> String {
        LIST_VERSION.fetch_add(1, SeqCst);
        let _ = cx.peer.notify_tool_list_changed().await;
        "changed here".to_string()
    }
}

/// A sampling/createMessage round trip to the client. Sampling is deprecated
/// from 2026-07-28 on, but it is exactly the server-to-client request that the
/// legacy revisions served here carry.
#[allow(deprecated)]
async fn sample(peer: &Peer<RoleServer>) -> Result<String, String> {
    use rmcp::model::{CreateMessageRequestParams, SamplingMessage};
    let params = CreateMessageRequestParams::new(vec![SamplingMessage::user_text("ping")], 16);
    let reply = peer.create_message(params).await;
    let reply = reply.map_err(|e| format!("sampling failed: {e}"))?;
    let blocks = reply.message.content.into_vec();
    Ok(blocks
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect())
}

#[tool_handler]
impl ServerHandler for Backend {
    fn get_info(&self) -> ServerConfig {
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(caps).with_server_info(Implementation::new(
            "stateful_backend",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        VERSIONS.into()
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        INITIALIZE_CALLS.fetch_add(1, SeqCst);
        cx.peer.set_peer_info(request.clone());
        let result = self.negotiate_initialize(&request)?;
        if self.ctx.get().is_none() {
            let _ = self.ctx.set(SessionCtx::new(cx.peer.clone()));
        }
        Ok(result)
    }

    async fn on_initialized(&self, cx: NotificationContext<RoleServer>) {
        // The first message after initialize carries our Mcp-Session-Id; noting
        // it lets a DELETE wait until this very context is gone.
        let session_id = cx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.headers.get("mcp-session-id")?.to_str().ok());
        if let (Ok(ctx), Some(sid)) = (self.ctx(), session_id)
            && let Some(entry) = registry().lock().unwrap().get_mut(&ctx.id)
        {
            entry.session_id = Some(sid.to_string());
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        TOOLS_LIST_CALLS.fetch_add(1, SeqCst);
        let mut tools = self.tool_router.list_all();
        // Let a test see that a list was fetched after `change`.
        let version = LIST_VERSION.load(SeqCst);
        for tool in tools.iter_mut().filter(|t| t.name == "change") {
            tool.description = Some(format!("Bump the tool list version (now {version})").into());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }
}

struct App {
    sessions: Arc<LocalSessionManager>,
    max_sessions: Option<u64>,
    /// Serializes initialize while --max-sessions is set, so the bound is exact.
    init_gate: tokio::sync::Mutex<()>,
}

fn stats() -> serde_json::Value {
    serde_json::json!({
        "live_sessions": LIVE.load(SeqCst),
        "opened": OPENED.load(SeqCst),
        "closed": CLOSED.load(SeqCst),
        "max_live": MAX_LIVE.load(SeqCst),
        "tools_list_calls": TOOLS_LIST_CALLS.load(SeqCst),
        "initialize_calls": INITIALIZE_CALLS.load(SeqCst),
        "refused": REFUSED.load(SeqCst),
        "list_version": LIST_VERSION.load(SeqCst),
    })
}

/// Drops every session as a restart would: rmcp forgets the ids (so they
/// answer 404) and each session's worker, handler and context go away.
async fn forget(State(app): State<Arc<App>>) -> Json<serde_json::Value> {
    let generation = GENERATION.fetch_add(1, SeqCst);
    let handles: Vec<_> = app.sessions.sessions.write().await.drain().collect();
    for (_, handle) in handles {
        let _ = handle.close().await;
    }
    end_sessions(|e| e.generation <= generation).await;
    Json(stats())
}

/// In front of rmcp on /mcp: enforces --max-sessions with a real HTTP 503,
/// and holds a DELETE's answer until that session's context is dropped, so
/// /stats read after a DELETE already shows it.
async fn gate(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if req.method() == Method::DELETE {
        let sid = req.headers().get("mcp-session-id").cloned();
        let sid = sid.as_ref().and_then(|v| v.to_str().ok());
        // rmcp answers 202 to a DELETE of an unknown id; a restarted server
        // answers 404 to every request naming an old session, so do the same.
        if let Some(sid) = sid
            && !app.sessions.has_session(&sid.into()).await.unwrap_or(true)
        {
            return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
        }
        let response = next.run(req).await;
        if let Some(sid) = sid {
            end_sessions(|e| e.session_id.as_deref() == Some(sid)).await;
        }
        return response;
    }
    let Some(max) = app.max_sessions else {
        return next.run(req).await;
    };
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 4 << 20).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "body too large").into_response();
    };
    let is_initialize = serde_json::from_slice::<serde_json::Value>(&bytes)
        .is_ok_and(|v| v.get("method").and_then(|m| m.as_str()) == Some("initialize"));
    let req = Request::from_parts(parts, Body::from(bytes));
    if !is_initialize {
        return next.run(req).await;
    }
    // rmcp answers initialize only after the handler ran, so once `next`
    // returns the new context is counted in LIVE.
    let _serial = app.init_gate.lock().await;
    if LIVE.load(SeqCst) >= max {
        REFUSED.fetch_add(1, SeqCst);
        let msg = format!("live sessions at --max-sessions {max}");
        return (StatusCode::SERVICE_UNAVAILABLE, msg).into_response();
    }
    next.run(req).await
}

/// Resolves when the process should go: a signal, stdin EOF, or old age.
async fn shutdown(max_lifetime: Duration) -> &'static str {
    let stdin_eof = CancellationToken::new();
    let eof = stdin_eof.clone();
    // A plain thread: tokio's stdin needs a feature this crate does not enable.
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while matches!(std::io::stdin().read(&mut buf), Ok(n) if n > 0) {}
        eof.cancel();
    });
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("install SIGTERM handler");
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = tokio::signal::ctrl_c() => "SIGINT",
        _ = stdin_eof.cancelled() => "stdin EOF",
        _ = tokio::time::sleep(max_lifetime) => "--max-lifetime reached",
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    if !cli.listen.ip().is_loopback() {
        return Err(format!("--listen {} is not a loopback address", cli.listen).into());
    }
    // Quiet unless RUST_LOG asks: forget makes rmcp log expected errors.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"));
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(filter)
        .init();

    // No idle expiry: sessions end only by DELETE, forget or exit, so the
    // counts change only when a test makes them.
    let mut session_config = SessionConfig::default();
    session_config.keep_alive = None;
    let mut manager = LocalSessionManager::default();
    manager.session_config = session_config;
    let sessions = Arc::new(manager);

    let ct = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(true)
        .with_cancellation_token(ct.clone());
    let factory = || {
        Ok(Backend {
            tool_router: Backend::tool_router(),
            ctx: OnceLock::new(),
        })
    };
    let mcp = StreamableHttpService::new(factory, sessions.clone(), config);

    let app = Arc::new(App {
        sessions,
        max_sessions: cli.max_sessions,
        init_gate: tokio::sync::Mutex::new(()),
    });
    let router = Router::new()
        .route_service("/mcp", mcp)
        .layer(middleware::from_fn_with_state(app.clone(), gate))
        .route("/stats", get(|| async { Json(stats()) }))
        .route("/admin/forget", post(forget))
        .with_state(app);

    let listener = tokio::net::TcpListener::bind(cli.listen).await?;
    let mut stdout = std::io::stdout();
    writeln!(
        stdout,
        "stateful_backend listening on {}",
        listener.local_addr()?
    )?;
    stdout.flush()?;

    tokio::select! {
        served = async { axum::serve(listener, router).await } => served?,
        why = shutdown(Duration::from_secs(cli.max_lifetime)) => {
            eprintln!("stateful_backend: exiting on {why}");
        }
    }
    ct.cancel();
    Ok(())
}
