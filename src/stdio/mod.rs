//! `sluice stdio`: the gateway on its own stdin and stdout, for desktop
//! clients that launch MCP servers as programs. One client, one session:
//! each stdin line is one JSON-RPC message, posted to the namespace's
//! endpoint through the front's router in the process (`client`), so the
//! eras, sessions, checks and routes are the HTTP edge's own; what comes
//! back is written to stdout as lines (`lines`), and nothing else is:
//! logs go to stderr.
//!
//! - A request runs in a task of its own, at most `MAX_IN_FLIGHT` at once.
//!   Past that, up to `MAX_WAITING` more wait in order for a free place
//!   while stdin is still read: the requests running may wait on the
//!   client's answers to a backend's questions, which come after them.
//!   With that many waiting, stdin is not read, so a flooding client meets
//!   backpressure. `initialize` and every notification and response run
//!   in order, before the next line is read.
//! - After a 2025 revision's `initialize`, the session's GET stream is
//!   relayed too: what backends send unasked (list changes, logs, their
//!   questions). The client's answers to questions are posted back.
//! - `notifications/cancelled` ends the named request's task: its answer
//!   is dropped unwritten (for 2026-07-28, that is its cancellation), and
//!   a session's is posted as well, which cancels a 2025 one.
//! - At end of input (the client closed stdin or died), SIGINT or SIGTERM:
//!   the requests are dropped, the session deleted, and the gateway shut
//!   down as `serve` is, its children killed with their process groups.
//!
//! `[auth]` does not apply: the client is the user who started the
//! process, as for any stdio server. The edge's policy has no
//! authenticator, and the client is the anonymous principal.

mod client;
mod lines;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::HeaderValue;
use bytes::Bytes;
use serde_json::value::RawValue;
use tokio::task::{AbortHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::app::{Assembled, Edge, ServeError};
use crate::config::Config;
use crate::front::{Message, relay};
use client::{Client, Session};
use lines::{Line, Out};

/// Requests answered at once.
const MAX_IN_FLIGHT: usize = 64;
/// Requests waiting for a place; stdin waits past them.
const MAX_WAITING: usize = 64;
/// How long the last lines get to reach the client at the end.
const FLUSH: Duration = Duration::from_secs(2);

/// Serves one client on stdin and stdout until it goes (or a signal),
/// then shuts the gateway down. `namespace`: the one served (None: the
/// default).
pub async fn serve(
    config: Config,
    source: Option<PathBuf>,
    namespace: Option<String>,
) -> Result<(), ServeError> {
    let mut hangups = crate::app::hangups()?;
    let stop = crate::app::wait_for_signal()?;
    let namespace = namespace.unwrap_or_else(|| crate::config::DEFAULT_NAMESPACE.to_owned());
    let path = match namespace.as_str() {
        crate::config::DEFAULT_NAMESPACE => "/mcp".to_owned(),
        ns => format!("/ns/{ns}/mcp"),
    };
    let unknown = || ServeError::UnknownNamespace(namespace.clone());
    // Only the namespace's own backends start (a reload keeps to it too).
    let config = config.narrowed_to(&namespace).ok_or_else(unknown)?;
    let path: axum::http::Uri = path.parse().map_err(|_| unknown())?;
    let max_line = config.server.max_body_bytes;
    let write_timeout = config.server.write_timeout;
    let edge = Edge {
        auth: None,
        tls: None,
        loopback_host_only: true,
        only: config.namespaces.first().map(|n| n.name.clone()),
    };
    let mut gateway = Assembled::start(config, source, edge).await?;
    tracing::info!(
        namespace,
        backends = gateway.front.layout.load().backends.len(),
        "sluice serving on stdin and stdout"
    );
    let gone = CancellationToken::new();
    let pipes = crate::std_pipes::open("stdio")?;
    let (out, writer) = lines::write(pipes.stdout, write_timeout, gone.clone());
    let (input, reader) = lines::read(tokio::io::BufReader::new(pipes.stdin), max_line);
    let mut conversation = Conversation {
        client: Client::new(
            gateway.front.clone(),
            &namespace,
            path,
            &gateway.reloader.config.metrics.path,
        ),
        out,
        session: None,
        listening: None,
        requests: JoinSet::new(),
        running: HashMap::new(),
        waiting: VecDeque::new(),
    };
    let mut input = input;
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = gone.cancelled() => break,
            Some(()) = hangups.recv() => gateway.reloader.reload(),
            Some(done) = conversation.requests.join_next_with_id() => {
                if let Ok((task, id)) = done {
                    conversation.finished(task, &id);
                }
                conversation.start_waiting();
            }
            line = input.recv(), if conversation.waiting.len() < MAX_WAITING => {
                match line {
                    Some(line) => conversation.take(line).await,
                    None => break,
                }
            }
        }
    }
    tracing::info!("the client is gone; shutting down");
    reader.abort();
    conversation.end().await;
    // Whatever is queued goes out, within a bound.
    let flushed = async {
        _ = writer.await;
        _ = pipes.written.await;
    };
    if tokio::time::timeout(FLUSH, flushed).await.is_err() {
        tracing::warn!("the last lines did not reach the client in time");
    }
    gateway.finish().await;
    Ok(())
}

/// The one client's state, owned by the serve loop.
struct Conversation {
    client: Client,
    out: Out,
    session: Option<Session>,
    /// The session's GET stream, relayed.
    listening: Option<tokio::task::JoinHandle<()>>,
    /// Requests being answered; each ends with its id.
    requests: JoinSet<String>,
    /// Their tasks by id, as written (for `notifications/cancelled`).
    running: HashMap<String, (AbortHandle, Arc<AtomicBool>)>,
    /// Requests read at the limit, waiting for a place, in order.
    waiting: VecDeque<(Bytes, String)>,
}

/// The fields of a message the loop acts on; the rest passes through raw.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

impl Conversation {
    async fn take(&mut self, line: Line) {
        let text = match line {
            Line::Text(t) => t,
            Line::TooLong(n) => {
                let why =
                    format!("a line of {n} bytes is longer than server.max_body_bytes; dropped");
                tracing::warn!("{why}");
                let error = crate::jsonrpc::error_response(None, crate::jsonrpc::PARSE_ERROR, &why);
                self.out.send(Message::line(error)).await;
                return;
            }
        };
        if text.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let Ok(envelope) = serde_json::from_slice::<Envelope>(&text) else {
            // Not one message (a batch, or no JSON): the front says which.
            self.post_in_order(text.clone(), true).await;
            return;
        };
        match (envelope.method.as_deref(), envelope.id) {
            (Some("initialize"), Some(id)) => {
                let id = id.to_owned();
                self.initialize(text.clone(), &id).await;
            }
            (Some(_), Some(id)) => {
                self.waiting.push_back((text.clone(), id.get().to_owned()));
                self.start_waiting();
            }
            (Some("notifications/cancelled"), None) => {
                let cancelled = envelope.params.and_then(request_id);
                // One still waiting is dropped: it never ran, so it is
                // neither answered nor posted.
                if let Some(id) = &cancelled
                    && let Some(at) = self.waiting.iter().position(|(_, w)| w == id)
                {
                    self.waiting.remove(at);
                    return;
                }
                if let Some((task, flag)) = cancelled.and_then(|id| self.running.remove(&id)) {
                    // First: the answer's end the notice brings is not
                    // written as a failure. A 2026-07-28 request is
                    // cancelled by its stream's end, a session's by the
                    // notice.
                    flag.store(true, Ordering::Release);
                    task.abort();
                    if self.session.is_some() {
                        self.post_in_order(text.clone(), false).await;
                    }
                }
            }
            // Notifications, and answers to a backend's questions.
            _ => self.post_in_order(text.clone(), false).await,
        }
    }

    /// Posts a line and relays its answer before the next line is read.
    async fn post_in_order(&mut self, line: Bytes, answer_refusals: bool) {
        let response = self.client.post(line, self.session.as_ref()).await;
        relay(response, &self.out, None, answer_refusals).await;
    }

    /// `initialize` opens the session later lines name, so it is answered
    /// before the next line is read; its GET stream is open before the
    /// client hears of the session, so nothing said after is missed.
    async fn initialize(&mut self, line: Bytes, id: &RawValue) {
        let response = self.client.post(line, None).await;
        let session_id = response.headers().get("mcp-session-id").cloned();
        let body = match client::json_body(response).await {
            Ok(body) => body,
            Err(refused) => return relay(refused, &self.out, Some(id), false).await,
        };
        // Without an id (`sessions = "stateless"`) there is no session to name.
        if let (Some(session_id), Some(version)) = (session_id, negotiated(&body)) {
            // A client that initializes again starts over.
            self.close_session().await;
            let session = Session {
                id: session_id,
                version,
            };
            let stream = self.client.listen(&session).await;
            self.listening = Some(tokio::spawn(listen(stream, self.out.clone())));
            self.session = Some(session);
        }
        self.out.send(Message::of_pieces(vec![body])).await;
    }

    /// Waiting requests start, in order, while there is room.
    fn start_waiting(&mut self) {
        while self.requests.len() < MAX_IN_FLIGHT
            && let Some((line, id)) = self.waiting.pop_front()
        {
            self.request(line, id);
        }
    }

    /// A request runs in a task of its own, its answer relayed as it comes.
    fn request(&mut self, line: Bytes, id: String) {
        let session = self.session.clone();
        let client = self.client.clone();
        let cancelled = Arc::new(AtomicBool::new(false));
        let out = lines::Unless {
            out: self.out.clone(),
            cancelled: cancelled.clone(),
        };
        let key = id.clone();
        let task = self.requests.spawn(async move {
            let response = client.post(line, session.as_ref()).await;
            let raw = RawValue::from_string(id.clone()).ok();
            relay(response, &out, raw.as_deref(), false).await;
            id
        });
        // The same id twice: the client can tell the answers apart no
        // better than we can; the newer one is the one cancelled.
        self.running.insert(key, (task, cancelled));
    }

    /// A request's task ended: it is no longer there to cancel (unless a
    /// newer request took its id).
    fn finished(&mut self, task: tokio::task::Id, id: &str) {
        if self.running.get(id).is_some_and(|(t, _)| t.id() == task) {
            self.running.remove(id);
        }
    }

    async fn close_session(&mut self) {
        if let Some(stream) = self.listening.take() {
            stream.abort();
        }
        if let Some(session) = self.session.take() {
            let status = self.client.delete(&session).await;
            tracing::debug!(%status, "session deleted");
        }
    }

    /// The client is gone: nothing more is answered, and the session ends.
    async fn end(mut self) {
        self.requests.abort_all();
        while self.requests.join_next().await.is_some() {}
        self.close_session().await;
    }
}

/// Relays the session's GET stream until it ends.
async fn listen(stream: axum::response::Response, out: Out) {
    if !stream.status().is_success() {
        tracing::warn!(status = %stream.status(), "the session's stream was refused");
        return;
    }
    relay(stream, &out, None, false).await;
    tracing::debug!("the session's stream ended");
}

/// `params.requestId` of a `notifications/cancelled`, as written.
fn request_id(params: &RawValue) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Cancelled<'a> {
        #[serde(borrow, rename = "requestId")]
        request_id: &'a RawValue,
    }
    serde_json::from_str::<Cancelled>(params.get())
        .ok()
        .map(|c| c.request_id.get().to_owned())
}

/// The revision an `initialize` result names, as its header carries it.
fn negotiated(body: &[u8]) -> Option<HeaderValue> {
    #[derive(serde::Deserialize)]
    struct Response {
        result: Negotiated,
    }
    #[derive(serde::Deserialize)]
    struct Negotiated {
        #[serde(rename = "protocolVersion")]
        protocol_version: String,
    }
    let r: Response = serde_json::from_slice(body).ok()?;
    HeaderValue::from_str(&r.result.protocol_version).ok()
}
