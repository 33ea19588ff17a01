//! The JSON-RPC multiplexer over one backend session, whatever carries it
//! (a stdio child's pipes, Streamable HTTP POSTs, an HTTP+SSE stream).
//!
//! The gateway writes its own request ids (a counter per connection) and
//! keeps `pending` from them to the caller, so concurrent requests from
//! different clients never collide. Progress tokens are rewritten to the
//! gateway id of the request that carries them and mapped back, so progress
//! reaches exactly one client. The pending map is bounded by `MAX_IN_FLIGHT`.
//!
//! Its parts: a call's life, its pending entry and guard (`calls.rs`);
//! what the backend sends, dispatched (`dispatch.rs`); the backend's own
//! requests, relayed to a client (`server_requests.rs`); the URL mode
//! elicitations handed to clients, whose completion goes to the one that
//! got each (`elicitations.rs`).

mod calls;
mod dispatch;
mod elicitations;
mod server_requests;

use crate::fast_map::FastMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};

use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::answer;
use super::events::EventSink;
use super::throttle::Throttle;
use super::{ClientKey, UpstreamError};
use crate::jsonrpc::{Outcome, RawId};
use crate::protocol::ClientCaps;
use crate::vocab::BackendName;

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
    /// URL mode elicitation id -> the client it was handed to.
    elicitations: elicitations::Elicitations,
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

    /// The client capabilities its backend session was told (per-session).
    pub(super) fn offer(&self) -> Option<ClientCaps> {
        self.owner.as_ref().map(|(_, caps)| *caps)
    }

    /// (requests awaiting the backend, server requests awaiting a client).
    pub(super) fn census(&self) -> (usize, usize) {
        let st = self.state.lock();
        (st.calls.len(), st.server_requests.len())
    }

    pub(super) fn backend(&self) -> &BackendName {
        &self.backend
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

#[cfg(test)]
mod tests;
