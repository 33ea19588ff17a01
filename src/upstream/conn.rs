//! The JSON-RPC multiplexer over one backend session, whatever carries it
//! (a stdio child's pipes, Streamable HTTP POSTs, an HTTP+SSE stream).
//!
//! The gateway writes its own request ids (a counter per connection) and
//! keeps `pending` from them to the caller, so concurrent requests from
//! different clients never collide. Progress tokens are rewritten to the
//! gateway id of the request that carries them and mapped back, so progress
//! reaches exactly one client. The pending map is bounded by `MAX_IN_FLIGHT`.

use crate::fast_map::FastMap;
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use futures_util::future::BoxFuture;
use indexmap::IndexMap;
use parking_lot::Mutex;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::answer;
use super::deadline::Deadline;
use super::events::{Event, EventSink};
use super::notice::Notice;
use super::throttle::Throttle;
use super::{ClientKey, UpstreamError};
use crate::jsonrpc::{self, Incoming, Outcome, RawId};
use crate::protocol::ClientCaps;
use crate::vocab::BackendName;
use crate::workers::Handoff;

/// Requests one backend connection may have in flight.
pub(super) const MAX_IN_FLIGHT: usize = 4096;
/// Server-to-client requests awaiting a client's answer.
const MAX_SERVER_REQUESTS: usize = 256;
/// The `origin` of a question asked outside any call.
const OUTSIDE_CALLS: u64 = 0;
/// How long a question asked outside any call waits for its answer.
const ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The client a request is for, and its response stream: whatever the
/// backend sends about the request goes there, and only that client may
/// answer the backend's requests (and only those it declared it can).
#[derive(Clone)]
pub(super) struct Listener {
    pub(super) events: EventSink,
    pub(super) client: ClientKey,
    pub(super) caps: ClientCaps,
}

/// A `Listener` as a caller lends it: the call's pending entry makes the
/// one owned copy (each copy counts a sender and a client key).
#[derive(Clone, Copy)]
pub(super) struct ListenerRef<'a> {
    pub(super) events: &'a EventSink,
    pub(super) client: &'a ClientKey,
    pub(super) caps: ClientCaps,
}

impl Listener {
    #[cfg(test)]
    pub(super) fn by_ref(&self) -> ListenerRef<'_> {
        ListenerRef {
            events: &self.events,
            client: &self.client,
            caps: self.caps,
        }
    }
}

impl ListenerRef<'_> {
    fn to_owned(self) -> Listener {
        Listener {
            events: self.events.clone(),
            client: self.client.clone(),
            caps: self.caps,
        }
    }
}

/// What became of a client's answer to a server-to-client request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    Delivered,
    /// No such request is waiting (never sent, answered, or expired).
    Unknown,
    /// Another client answered: dropped, the request still waits.
    NotYours,
}

/// Whether the wire reports which requests it wrote. A pipe does: a request
/// the child never got can be sent again elsewhere. An HTTP request may have
/// been executed even when it failed, so it never counts as unsent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Writes {
    Tracked,
    Untracked,
}

/// How far a request got toward the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// Queued for a tracked wire: not one byte written yet.
    Queued,
    /// In the wire's hands: it settles the call (`Conn::settle`).
    Writing,
    /// Written, or on an untracked wire: it may have reached the backend.
    Maybe,
}

/// One message for the wire. `call` is the gateway id when the message is a
/// request the gateway awaits: a Streamable HTTP wire reads the answer from
/// that request's own response.
pub(super) struct Frame {
    pub(super) line: String,
    pub(super) call: Option<u64>,
    /// Extra HTTP headers for transports that have them (`Mcp-Param-*`).
    pub(super) headers: Vec<(String, String)>,
}

/// A wire that sends each request itself, in the caller's task (Streamable
/// HTTP: a POST a request, its answer on that POST's response). No queue
/// and no writer task stand between a call and the backend, so a call costs
/// no hand-off between tasks. The link still ends every request in flight:
/// its owner fails the waiting calls (`fail_all`) when it begins to close,
/// and each drops its request.
pub(super) trait Post: Send + Sync {
    /// Sends `frame` and delivers what comes back to `conn`; settles the
    /// call (answer or failure) before it returns.
    fn post<'a>(&'a self, conn: &'a Conn, frame: Frame) -> BoxFuture<'a, ()>;
}

pub(super) struct Conn {
    backend: BackendName,
    /// Shared by every connection of the backend: bounds its warnings.
    warnings: Arc<Throttle>,
    /// Whose backend session this is (per-session isolation), and what that
    /// client can be asked: requests sent outside any call go to it.
    owner: Option<(ClientKey, ClientCaps)>,
    /// Roots the gateway answers `roots/list` with itself (a shared
    /// backend's configured roots); None: the client is asked.
    roots: Option<Arc<[String]>>,
    /// Itself, for timers that must not keep it alive.
    me: std::sync::Weak<Conn>,
    writer: mpsc::Sender<Frame>,
    /// Requests go out through this instead of `writer` (see `Post`).
    post: std::sync::OnceLock<Arc<dyn Post>>,
    writes: Writes,
    next_id: AtomicU64,
    state: Mutex<Pending>,
    /// `state.server_requests.len()`, written under the lock: a call that
    /// was answered ends without the lock while no question waits.
    asked: AtomicUsize,
}

#[derive(Default)]
struct Pending {
    calls: FastMap<u64, PendingCall>,
    /// Token in the id given to the client -> the backend's request.
    server_requests: FastMap<String, ServerRequest>,
    /// Set once the connection is gone: new calls fail at once.
    closed: bool,
}

impl Pending {
    /// The one in-flight request whose client can receive messages, when
    /// there is exactly one: nothing else ties an unsolicited message to a
    /// client on a connection many share.
    fn sole_caller(&self) -> Option<(u64, Listener)> {
        let mut candidates = self
            .calls
            .iter()
            .filter_map(|(id, c)| Some((*id, c.to.clone()?)));
        match (candidates.next(), candidates.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    }
}

struct PendingCall {
    reply: answer::Settle<Result<Outcome, UpstreamError>>,
    /// The caller's worker, where its answer is delivered.
    shard: usize,
    to: Option<Listener>,
    client_token: Option<Box<RawValue>>,
    delivery: Delivery,
}

/// A backend's request relayed to a client, awaiting that client's answer.
struct ServerRequest {
    backend_id: RawId,
    /// The gateway id of the call it belongs to.
    origin: u64,
    /// The one client allowed to answer.
    client: ClientKey,
}

/// Removes the pending entry if the caller gives up (timeout, client gone)
/// and tells the backend, so nothing waits on an answer nobody reads.
struct CallGuard<'a> {
    conn: &'a Conn,
    id: u64,
    /// The call's answer came (its entry is gone with it).
    answered: bool,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        // Nothing to undo: questions of this call would be waiting, and none
        // can come after its answer (they are tied to it by its entry).
        if self.answered && self.conn.asked.load(Ordering::Acquire) == 0 {
            return;
        }
        let (was_pending, unanswered) = {
            let mut st = self.conn.state.lock();
            // A client may answer after the response it came with (legacy):
            // the questions outlive the call, for `ASK_TIMEOUT`.
            let mut unanswered = Vec::new();
            for (token, r) in st.server_requests.iter_mut() {
                if r.origin == self.id {
                    r.origin = OUTSIDE_CALLS;
                    unanswered.push(token.clone());
                }
            }
            (st.calls.remove(&self.id).is_some(), unanswered)
        };
        for token in unanswered {
            self.conn.expire_later(token);
        }
        if was_pending {
            let params = jsonrpc::raw(&serde_json::json!({
                "requestId": self.id,
                "reason": "cancelled by the gateway",
            }));
            self.conn.send(jsonrpc::notification(
                "notifications/cancelled",
                Some(&params),
            ));
        }
    }
}

impl Conn {
    #[cfg(test)]
    pub(super) fn new(
        backend: BackendName,
        warnings: Arc<Throttle>,
        writer: mpsc::Sender<Frame>,
        writes: Writes,
    ) -> Arc<Conn> {
        Self::for_owner(backend, warnings, writer, writes, None, None)
    }

    /// A connection with an owner (per-session) or configured roots.
    pub(super) fn for_owner(
        backend: BackendName,
        warnings: Arc<Throttle>,
        writer: mpsc::Sender<Frame>,
        writes: Writes,
        owner: Option<(ClientKey, ClientCaps)>,
        roots: Option<Arc<[String]>>,
    ) -> Arc<Conn> {
        Arc::new_cyclic(|me| Conn {
            me: me.clone(),
            backend,
            warnings,
            owner,
            roots,
            writer,
            post: std::sync::OnceLock::new(),
            writes,
            next_id: AtomicU64::new(first_id(writes)),
            state: Mutex::new(Pending::default()),
            asked: AtomicUsize::new(0),
        })
    }

    /// From now on requests are sent by `post` in the caller's task;
    /// notifications and responses still go through the writer.
    pub(super) fn post_directly(&self, post: Arc<dyn Post>) {
        let _ = self.post.set(post);
    }

    /// Sends a request and waits for its outcome.
    pub(super) async fn call(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
        to: Option<ListenerRef<'_>>,
        timeout: std::time::Duration,
    ) -> Result<Outcome, UpstreamError> {
        self.call_with(method, params.as_deref(), to, timeout, Vec::new())
            .await
    }

    /// `call`, with HTTP headers for the transport to send along.
    pub(super) async fn call_with(
        &self,
        method: &str,
        params: Option<&RawValue>,
        to: Option<ListenerRef<'_>>,
        timeout: std::time::Duration,
        headers: Vec<(String, String)>,
    ) -> Result<Outcome, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (params, client_token) = match (params, to) {
            (Some(p), Some(_)) => {
                let (p, token) = rewrite_progress_token(p, id);
                (Some(p), token)
            }
            (p, _) => (p.map(Cow::Borrowed), None),
        };
        let (tx, rx) = answer::channel();
        {
            let mut st = self.state.lock();
            if st.closed {
                return Err(UpstreamError::not_sent(&self.backend));
            }
            if st.calls.len() >= MAX_IN_FLIGHT {
                return Err(UpstreamError::overloaded(&self.backend));
            }
            st.calls.insert(
                id,
                PendingCall {
                    reply: tx,
                    shard: crate::workers::shard(),
                    to: to.map(ListenerRef::to_owned),
                    client_token,
                    delivery: match self.writes {
                        Writes::Tracked => Delivery::Queued,
                        Writes::Untracked => Delivery::Maybe,
                    },
                },
            );
        }
        let mut guard = CallGuard {
            conn: self,
            id,
            answered: false,
        };
        let frame = Frame {
            line: jsonrpc::numbered_request(id, method, params.as_deref()),
            call: Some(id),
            headers,
        };
        // One deadline for queueing and answering: a backend that stops
        // reading (a full write queue) is as late as one that stops writing.
        let deadline = Deadline::after(timeout);
        let answer = match self.post.get() {
            Some(post) => {
                deadline
                    .run(&self.backend, self.posted(post.as_ref(), frame, rx))
                    .await
            }
            None => {
                deadline
                    .run(&self.backend, self.writer.send(frame))
                    .await?
                    .map_err(|_| UpstreamError::not_sent(&self.backend))?;
                deadline.run(&self.backend, rx).await
            }
        };
        guard.answered = answer.is_ok();
        let outcome = match answer {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(UpstreamError::exited(&self.backend)),
            Err(timeout) => Err(timeout),
        };
        drop(guard);
        outcome
    }

    /// A request sent by the wire itself: the answer may come while the
    /// response is still being read (an SSE stream), or once it is.
    async fn posted(
        &self,
        post: &dyn Post,
        frame: Frame,
        mut rx: answer::Answer<Result<Outcome, UpstreamError>>,
    ) -> Result<Result<Outcome, UpstreamError>, answer::Closed> {
        let mut send = post.post(self, frame);
        let mut sent = false;
        std::future::poll_fn(|cx| {
            // The wire first: an answer it reads settles the call without
            // waking the task (`answer`), and is looked at just below, in
            // the same poll. A finished wire has settled the call.
            if !sent {
                sent = rx.settled_by(|| send.as_mut().poll(cx)).is_ready();
            }
            Pin::new(&mut rx).poll(cx)
        })
        .await
    }

    pub(super) async fn notify(
        &self,
        method: &str,
        params: Option<&RawValue>,
        deadline: Deadline,
    ) -> Result<(), UpstreamError> {
        let frame = Frame {
            line: jsonrpc::notification(method, params),
            call: None,
            headers: Vec::new(),
        };
        deadline
            .run(&self.backend, self.writer.send(frame))
            .await?
            .map_err(|_| UpstreamError::exited(&self.backend))
    }

    /// Queues a message the gateway does not await, without waiting.
    pub(super) fn send(&self, line: String) -> bool {
        let frame = Frame {
            line,
            call: None,
            headers: Vec::new(),
        };
        self.writer.try_send(frame).is_ok()
    }

    /// Delivers a client's answer to a server-to-client request, if that
    /// client is the one it was relayed to.
    pub(super) fn answer(&self, token: &str, from: &ClientKey, outcome: &Outcome) -> Answered {
        let request = {
            let mut st = self.state.lock();
            match st.server_requests.get(token) {
                None => return Answered::Unknown,
                Some(r) if r.client != *from => return Answered::NotYours,
                Some(_) => {
                    let request = st.server_requests.remove(token);
                    self.note_asked(&st);
                    request
                }
            }
        };
        if let Some(r) = request {
            self.send(jsonrpc::response(&r.backend_id, outcome));
        }
        Answered::Delivered
    }

    /// Ends one waiting call with an error (its transport failed).
    pub(super) fn fail(&self, id: u64, error: UpstreamError) {
        self.fail_with(id, || error);
    }

    /// `fail`, the error made only if the call is still waiting (after a
    /// response stream, it almost never is).
    pub(super) fn fail_with(&self, id: u64, error: impl FnOnce() -> UpstreamError) {
        if let Some(call) = self.state.lock().calls.remove(&id) {
            call.reply.send(Err(error()));
        }
    }

    pub(super) fn backend(&self) -> &BackendName {
        &self.backend
    }

    /// `dispatch_answering`'s notice alone.
    #[cfg(test)]
    pub(super) fn dispatch(&self, line: impl AsRef<[u8]>, origin: Option<u64>) -> Option<Notice> {
        self.dispatch_via(line, origin, &mut Handoff::new()).0
    }

    /// Handles one message from the backend. `origin` is the gateway id of
    /// the request whose response stream carried it, when the transport
    /// tells. Returns what the backend announced for clients, if anything,
    /// and whether the message answered the call `origin`.
    pub(super) fn dispatch_answering(
        &self,
        line: impl AsRef<[u8]>,
        origin: Option<u64>,
    ) -> (Option<Notice>, bool) {
        let (notice, answered) = self.dispatch_via(line, origin, &mut Handoff::new());
        (notice, answered.is_some() && answered == origin)
    }

    /// `dispatch` for a reader that answers callers on other workers: their
    /// answers go with `handoff`'s next flush. Also returns the call the
    /// message answered, if any.
    pub(super) fn dispatch_via(
        &self,
        line: impl AsRef<[u8]>,
        origin: Option<u64>,
        handoff: &mut Handoff,
    ) -> (Option<Notice>, Option<u64>) {
        let msg = match Incoming::parse(line.as_ref()) {
            Ok(m) => m,
            Err(e) => {
                if let Some(suppressed) = self.warnings.admit() {
                    tracing::warn!(backend = %self.backend, error = %e, suppressed, "unparseable message from backend");
                }
                return (None, None);
            }
        };
        match msg {
            Incoming::Response { id, outcome } => {
                let id: Option<u64> = serde_json::from_str(id.get()).ok();
                let call = id.and_then(|id| self.state.lock().calls.remove(&id));
                match call {
                    Some(call) => handoff.run_on(call.shard, move || {
                        call.reply.send(Ok(outcome));
                    }),
                    None => {
                        tracing::debug!(backend = %self.backend, "response for no pending request");
                        return (None, None);
                    }
                }
                (None, id)
            }
            Incoming::Notification(n) => (self.on_notification(n, origin), None),
            Incoming::Request(r) => (self.on_server_request(r, origin), None),
        }
    }

    fn on_notification(&self, n: jsonrpc::Notification, origin: Option<u64>) -> Option<Notice> {
        match n.method.as_str() {
            "notifications/progress" => {
                let params = n.params?;
                let mut fields: IndexMap<String, Box<RawValue>> =
                    serde_json::from_str(params.get()).ok()?;
                let token: u64 = serde_json::from_str(fields.get("progressToken")?.get()).ok()?;
                let st = self.state.lock();
                let call = st.calls.get(&token)?;
                let (Some(to), Some(client_token)) = (&call.to, &call.client_token) else {
                    return None;
                };
                let events = &to.events;
                fields.insert("progressToken".into(), client_token.clone());
                let line =
                    jsonrpc::notification("notifications/progress", Some(&jsonrpc::raw(&fields)));
                // A slow client loses progress, never blocks the backend for others.
                let _ = events.try_send(Event::Notification(line));
                None
            }
            m if m.ends_with("/list_changed") || m == "notifications/resources/updated" => {
                Notice::of(m, n.params.as_deref())
            }
            // On a request's own stream it belongs to that request's client;
            // sent outside any request, to every client that set a level.
            "notifications/message" => match origin {
                Some(id) => {
                    let to = self.state.lock().calls.get(&id).and_then(|c| c.to.clone());
                    if let Some(to) = to {
                        let line = jsonrpc::notification(&n.method, n.params.as_deref());
                        let _ = to.events.try_send(Event::Notification(line));
                    }
                    None
                }
                None => Notice::of(&n.method, n.params.as_deref()),
            },
            _ => None,
        }
    }

    /// A server request rides on the response stream of the client request
    /// that caused it when the transport says so (`origin`). Over a stdio
    /// pipe nothing ties it to a request: route it only when exactly one
    /// request that can carry it is in flight, else refuse it so the backend
    /// is not left waiting.
    fn on_server_request(&self, r: jsonrpc::Request, origin: Option<u64>) -> Option<Notice> {
        if r.method == "ping" {
            let pong = Outcome::Result(jsonrpc::raw(&serde_json::json!({})));
            self.send(jsonrpc::response(&r.id, &pong));
            return None;
        }
        if r.method == "roots/list"
            && let Some(roots) = &self.roots
        {
            let list: Vec<_> = roots
                .iter()
                .map(|uri| serde_json::json!({ "uri": uri }))
                .collect();
            let result = Outcome::Result(jsonrpc::raw(&serde_json::json!({ "roots": list })));
            self.send(jsonrpc::response(&r.id, &result));
            return None;
        }
        let mut ask = None;
        let refusal = {
            let mut st = self.state.lock();
            let target = match origin {
                Some(id) => st.calls.get(&id).map(|c| (id, c.to.clone())),
                None => st.sole_caller().map(|(id, to)| (id, Some(to))),
            };
            match target {
                // Outside any call, a per-session backend asks its own client
                // (on the client's GET stream), if the client can answer.
                None if origin.is_none() && self.owner.is_some() => {
                    let Some((client, caps)) = &self.owner else {
                        unreachable!("checked in the guard")
                    };
                    match caps.missing_for(&r.method, r.params.as_deref().map(RawValue::get)) {
                        Some(_) => Some((
                            jsonrpc::METHOD_NOT_FOUND,
                            "the client did not declare the capability it needs",
                        )),
                        None if st.server_requests.len() >= MAX_SERVER_REQUESTS => Some((
                            jsonrpc::INTERNAL_ERROR,
                            "too many server requests awaiting answers",
                        )),
                        None => {
                            let token = crate::vocab::random::hex(16);
                            st.server_requests.insert(
                                token.clone(),
                                ServerRequest {
                                    backend_id: r.id.clone(),
                                    origin: OUTSIDE_CALLS,
                                    client: client.clone(),
                                },
                            );
                            self.note_asked(&st);
                            ask = Some(token);
                            None
                        }
                    }
                }
                Some((_, Some(to)))
                    if to
                        .caps
                        .missing_for(&r.method, r.params.as_deref().map(RawValue::get))
                        .is_some() =>
                {
                    let missing = to
                        .caps
                        .missing_for(&r.method, r.params.as_deref().map(RawValue::get))
                        .unwrap_or_default();
                    // What the client itself would answer: it has no such method.
                    Some((
                        jsonrpc::METHOD_NOT_FOUND,
                        match missing {
                            "sampling" => "the client did not declare the sampling capability",
                            "elicitation" => {
                                "the client did not declare the elicitation capability"
                            }
                            _ => "the client did not declare the roots capability",
                        },
                    ))
                }
                Some((origin, Some(to))) if st.server_requests.len() < MAX_SERVER_REQUESTS => {
                    // Unguessable: an id is the capability to answer.
                    let token = crate::vocab::random::hex(16);
                    let event = Event::Request {
                        id: format!("sluice:{}:{token}", self.backend),
                        method: r.method.clone(),
                        params: r.params.clone(),
                    };
                    if to.events.try_send(event).is_ok() {
                        st.server_requests.insert(
                            token,
                            ServerRequest {
                                backend_id: r.id.clone(),
                                origin,
                                client: to.client,
                            },
                        );
                        self.note_asked(&st);
                        None
                    } else {
                        Some((
                            jsonrpc::INTERNAL_ERROR,
                            "the client's stream is not accepting messages",
                        ))
                    }
                }
                Some((_, Some(_))) => Some((
                    jsonrpc::INTERNAL_ERROR,
                    "too many server requests awaiting answers",
                )),
                Some((_, None)) => Some((
                    jsonrpc::INTERNAL_ERROR,
                    "the request it belongs to cannot carry it",
                )),
                None if origin.is_some() => Some((
                    jsonrpc::INTERNAL_ERROR,
                    "the request it belongs to has ended",
                )),
                None => Some((
                    jsonrpc::INTERNAL_ERROR,
                    "not exactly one client request in flight on this shared backend; use per-session isolation",
                )),
            }
        };
        if let Some(token) = ask {
            self.expire_later(token.clone());
            return Some(Notice::Ask {
                id: format!("sluice:{}:{token}", self.backend),
                method: r.method,
                params: r.params,
                client: None,
            });
        }
        if let Some((code, why)) = refusal {
            if let Some(suppressed) = self.warnings.admit() {
                tracing::warn!(backend = %self.backend, method = %r.method, why, suppressed, "refused server-to-client request");
            }
            let err = jsonrpc::error_object(
                code,
                &format!("sluice cannot route {}: {why}", r.method),
                None,
            );
            self.send(jsonrpc::response(&r.id, &Outcome::Error(err)));
        }
        None
    }

    /// Unanswered (no GET stream open, a client that never replies), a
    /// question is refused after `ASK_TIMEOUT`, so the backend is not left
    /// waiting.
    fn expire_later(&self, token: String) {
        let conn = self.me.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                tokio::time::sleep(ASK_TIMEOUT).await;
                if let Some(conn) = conn.upgrade() {
                    conn.expire(&token);
                }
            });
        }
    }

    /// Refuses a question that got no answer.
    fn expire(&self, token: &str) {
        let request = {
            let mut st = self.state.lock();
            let request = st.server_requests.remove(token);
            self.note_asked(&st);
            request
        };
        if let Some(r) = request {
            let err = jsonrpc::error_object(
                jsonrpc::INTERNAL_ERROR,
                "sluice: the client did not answer in time",
                None,
            );
            self.send(jsonrpc::response(&r.backend_id, &Outcome::Error(err)));
        }
    }

    /// Under the lock, after `server_requests` changed.
    fn note_asked(&self, st: &Pending) {
        self.asked
            .store(st.server_requests.len(), Ordering::Release);
    }

    /// The client capabilities its backend session was told (per-session).
    pub(super) fn offer(&self) -> Option<ClientCaps> {
        self.owner.as_ref().map(|(_, caps)| *caps)
    }

    /// (requests awaiting the backend, server requests awaiting a client).
    pub(super) fn census(&self) -> (usize, usize) {
        let st = self.state.lock();
        (st.calls.len(), st.server_requests.len())
    }

    /// The connection is gone: every waiting caller gets an error now, but
    /// for requests a tracked wire is writing: it settles those.
    pub(super) fn fail_all(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        st.server_requests.clear();
        self.note_asked(&st);
        for (_, call) in st.calls.extract_if(|_, c| c.delivery != Delivery::Writing) {
            let error = match call.delivery {
                Delivery::Queued => UpstreamError::not_sent(&self.backend),
                _ => UpstreamError::exited(&self.backend),
            };
            call.reply.send(Err(error));
        }
    }

    /// A tracked wire takes a request to write it: false when its caller
    /// is gone (or was told it was not sent), so it must not be written.
    pub(super) fn claim(&self, id: u64) -> bool {
        let mut st = self.state.lock();
        match st.calls.get_mut(&id) {
            Some(call) if call.delivery == Delivery::Queued => {
                call.delivery = Delivery::Writing;
                true
            }
            _ => false,
        }
    }

    /// A tracked wire is done with a claimed request: `written` if any of
    /// it reached the pipe (the backend may act on it), else it is failed
    /// as unsent, for the caller to send elsewhere.
    pub(super) fn settle(&self, id: u64, written: bool) {
        let mut st = self.state.lock();
        if !written {
            if let Some(call) = st.calls.remove(&id) {
                call.reply.send(Err(UpstreamError::not_sent(&self.backend)));
            }
        } else if st.closed {
            st.calls.remove(&id);
        } else if let Some(call) = st.calls.get_mut(&id) {
            call.delivery = Delivery::Maybe;
        }
    }
}

/// The first gateway id of a connection. An HTTP backend session may be
/// shared by replicas (cluster mode), so each starts at its own random
/// point (below 2^48: exact in any JSON number) and ids in flight on the
/// backend do not collide.
fn first_id(writes: Writes) -> u64 {
    match writes {
        Writes::Tracked => 1,
        Writes::Untracked => 1 + crate::vocab::random::below_pow2(47),
    }
}

/// Replaces `params._meta.progressToken` with the gateway's request id and
/// returns the client's token; every other field stays raw.
fn rewrite_progress_token(
    params: &RawValue,
    id: u64,
) -> (Cow<'_, RawValue>, Option<Box<RawValue>>) {
    let unchanged = (Cow::Borrowed(params), None);
    // Most calls carry no token: don't take them apart for nothing.
    static PROGRESS_TOKEN: jsonrpc::Needle = jsonrpc::Needle::new("\"progressToken\"");
    if !PROGRESS_TOKEN.in_text(params.get()) {
        return unchanged;
    }
    let Ok(mut fields) = serde_json::from_str::<IndexMap<String, Box<RawValue>>>(params.get())
    else {
        return unchanged;
    };
    let Some(meta) = fields.get("_meta") else {
        return unchanged;
    };
    let Ok(mut meta) = serde_json::from_str::<IndexMap<String, Box<RawValue>>>(meta.get()) else {
        return unchanged;
    };
    let Some(token) = meta.insert("progressToken".into(), jsonrpc::raw_u64(id)) else {
        return unchanged;
    };
    fields.insert("_meta".into(), jsonrpc::raw(&meta));
    (Cow::Owned(jsonrpc::raw(&fields)), Some(token))
}

#[cfg(test)]
mod tests;
