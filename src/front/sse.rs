//! The deprecated HTTP+SSE transport (2024-11-05) for clients that speak
//! nothing else: `GET /sse` opens a stream whose first event names the
//! message endpoint (`/messages?sessionId=...`), each message is POSTed
//! there (202), and everything the gateway says comes as `event: message`
//! on the stream.
//!
//! Only a carrier: every message is run through the `POST /mcp` path
//! (`post::answer`) with the headers a Streamable HTTP client would send,
//! so the 2025 revisions' rules, sessions, checks and routing stay in
//! `era/legacy.rs`. The client's `initialize` opens an ordinary session
//! whose id the carrier keeps; its GET stream (`stream::beats`) brings what
//! the backends say outside any request. The carrier's id (in the endpoint
//! URL) is its own, unguessable, never logged, and only finds the carrier:
//! each POST is authenticated again and must be the stream's principal.
//!
//! Bounds: the stream holds one of its principal's stream slots; before
//! `initialize` it lasts at most the idle TTL (and gives way when a
//! quarter of `max_connections` are waiting), after it as long as its
//! session (idle TTL while unwritable, capacity, principal cap, DELETE of
//! the id it never sees, shutdown). Its outbound queue holds `QUEUE`
//! messages, and at most `IN_FLIGHT` messages run at once; a client that
//! stops reading stalls the queue, its connection's writes end at
//! `write_timeout`, and the stream's drop ends the session as a DELETE
//! would, with every task it owned.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use parking_lot::Mutex;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::checks;
use super::error::Reject;
use super::headers::RequestHeaders;
use super::limits::StreamSlot;
use super::message::Message as Outbound;
use super::relay::{MAX_ANSWER, Sink, relay};
use super::sse_body::{self, Event};
use super::{Front, Layout, post, stream as get_stream};
use crate::jsonrpc::{Body as RpcBody, Message};
use crate::protocol::{SESSION_HEADER, VERSION_HEADER};
use crate::vocab::{Principal, SessionId};

/// Messages waiting for the client to read them, per stream.
const QUEUE: usize = 64;
/// Messages of one stream running at once; past it a POST gets 429.
const IN_FLIGHT: usize = 64;
/// The carrier's id: 128 bits from the OS, as hex.
const ID_BYTES: usize = 16;
/// Streams waiting for their `initialize`, at most, as a share of
/// `max_connections`: a stream's connection is never displaced, so
/// streams nobody initializes could otherwise hold every place.
const WAITING_SHARE: usize = 4;

/// The open streams, by carrier id. Each entry lives as long as its
/// stream's body, so there are never more than open connections.
#[derive(Default)]
pub(crate) struct Carriers(Mutex<HashMap<String, Arc<Shared>>>);

/// One client's stream, as its POSTs and its tasks see it.
struct Shared {
    id: String,
    namespace: String,
    principal: Principal,
    queue: mpsc::Sender<Outbound>,
    /// Cancelled when the stream ends, by any path: every task of the
    /// stream ends with it.
    done: CancellationToken,
    /// An `initialize` has been taken (one at a time, once).
    initializing: AtomicBool,
    /// The session `initialize` opened, and its revision.
    session: Mutex<Option<(SessionId, HeaderValue)>>,
    /// The principal's stream slot, held by the stream, then by its
    /// session's GET stream.
    slot: Mutex<Option<StreamSlot>>,
    in_flight: Arc<Semaphore>,
    /// When the stream opened: the oldest waiting one gives way first.
    opened: std::time::Instant,
}

/// `GET /sse` and `GET /ns/{namespace}/sse`.
pub(super) async fn open_stream(
    State(front): State<Arc<Front>>,
    namespace: Option<Path<String>>,
    req: Request<Body>,
) -> Response {
    // The endpoint beside the stream's own path. A namespace that exists
    // is a name of `[A-Za-z0-9_-]`: nothing to escape.
    let (namespace, endpoint) = match namespace {
        Some(Path(ns)) => {
            let endpoint = format!("/ns/{ns}/messages");
            (Cow::Owned(ns), endpoint)
        }
        None => (Cow::Borrowed(DEFAULT), "/messages".to_owned()),
    };
    let opened = open(&front, &namespace, endpoint, req.headers()).await;
    opened.unwrap_or_else(|reject| front.refuse(&Method::GET, reject))
}

/// `POST /messages` and `POST /ns/{namespace}/messages`.
pub(super) async fn take_message(
    State(front): State<Arc<Front>>,
    namespace: Option<Path<String>>,
    req: Request<Body>,
) -> Response {
    let namespace = namespace.map_or(Cow::Borrowed(DEFAULT), |Path(ns)| Cow::Owned(ns));
    let taken = message(&front, &namespace, req).await;
    taken.unwrap_or_else(|reject| front.refuse(&Method::POST, reject))
}

const DEFAULT: &str = crate::config::DEFAULT_NAMESPACE;

/// `GET /sse`: the stream, its first event the message endpoint.
async fn open(
    front: &Arc<Front>,
    namespace: &str,
    mut endpoint: String,
    headers: &HeaderMap,
) -> Result<Response, Reject> {
    if front.stopping.is_cancelled() {
        return Err(Reject::ShuttingDown);
    }
    let layout = front.layout.load_full();
    // A stream of a session, as a GET stream is (405 without sessions).
    let (principal, slot) = get_stream::admit(front, &layout, namespace, headers).await?;
    layout
        .router
        .namespace(namespace)
        .ok_or(Reject::UnknownNamespace)?;
    let (queue, outbound) = mpsc::channel(QUEUE);
    let shared = Arc::new(Shared {
        id: crate::vocab::random::hex(ID_BYTES),
        namespace: namespace.to_owned(),
        principal,
        queue,
        done: CancellationToken::new(),
        initializing: AtomicBool::new(false),
        session: Mutex::new(None),
        slot: Mutex::new(Some(slot)),
        in_flight: Arc::new(Semaphore::new(IN_FLIGHT)),
        opened: std::time::Instant::now(),
    });
    endpoint.push_str("?sessionId=");
    endpoint.push_str(&shared.id);
    let waiting = (layout.limits.connections() / WAITING_SHARE).max(1);
    front.sse.admit(shared.clone(), waiting);
    let owner = Owner {
        front: front.clone(),
        shared,
    };
    // Without `initialize` within the idle TTL, the stream is ended.
    let unused = Box::pin(tokio::time::sleep(front.sessions.idle_ttl()));
    // Keep-alives as on a GET stream: each refreshes the session, and the
    // next is made only once it has been written.
    let mut tick = tokio::time::interval(front.stream_keep_alive);
    tick.reset();
    let first = Event::Named("endpoint", endpoint);
    let messages = stream::unfold(
        (owner, outbound, unused, tick),
        |(owner, mut outbound, mut unused, mut tick)| async move {
            let done = owner.shared.done.clone();
            let stopping = owner.front.stopping.clone();
            let event = loop {
                let initialized = owner.shared.session.lock().is_some();
                tokio::select! {
                    _ = done.cancelled() => return None,
                    _ = stopping.cancelled() => return None,
                    message = outbound.recv() => break Event::Message(message?),
                    _ = tick.tick() => {
                        let session = owner.shared.session.lock().as_ref().map(|(id, _)| id.clone());
                        if session.is_some_and(|id| !owner.front.sessions.touch(&id)) {
                            return None;
                        }
                        break Event::Comment("keep-alive");
                    }
                    _ = &mut unused, if !initialized => {
                        if owner.shared.session.lock().is_none() {
                            return None;
                        }
                    }
                }
            };
            Some((event, (owner, outbound, unused, tick)))
        },
    );
    let events = stream::once(std::future::ready(first)).chain(messages);
    // Keep-alives are the ticks above.
    Ok(sse_body::response(events, None))
}

/// A POST to the message endpoint: checked here as `/mcp` checks a POST's
/// transport (token, body size and time, JSON), answered 202, and run
/// through `/mcp`'s path, its answer sent on the stream.
async fn message(
    front: &Arc<Front>,
    namespace: &str,
    req: Request<Body>,
) -> Result<Response, Reject> {
    let started = std::time::Instant::now();
    if front.stopping.is_cancelled() {
        return Err(Reject::ShuttingDown);
    }
    let (parts, body) = req.into_parts();
    let layout = front.layout.load_full();
    let principal = layout
        .policy
        .authenticate(&parts.headers, namespace)
        .await?
        .principal;
    let id = carrier_id(parts.uri.query()).ok_or(Reject::MissingCarrier)?;
    let shared = front
        .sse
        .find(id, namespace, &principal)
        .ok_or(Reject::SessionNotFound)?;
    checks::json_content(&parts.headers)?;
    let headers = RequestHeaders::Hyper(parts.headers);
    let bytes = post::read_body(
        body,
        &headers,
        layout.policy.max_body_bytes,
        started + front.body_read_timeout,
    )
    .await?;
    let parsed = Message::parse_body(&bytes, front.max_batch_items).map_err(Reject::Parse)?;
    let RequestHeaders::Hyper(client) = headers else {
        unreachable!("made above")
    };
    let request = match &parsed {
        RpcBody::Single(Message::Request(r)) => Some(r),
        _ => None,
    };
    if request.is_some_and(|r| r.method == "initialize") {
        return shared.initialize(front, &layout, &client, bytes).await;
    }
    let id = request.map(|r| r.id.clone());
    let permit = shared
        .in_flight
        .clone()
        .try_acquire_owned()
        .map_err(|_| Reject::StreamBacklog)?;
    let headers = shared.headers(&client, bytes.len());
    let (front, carrier) = (front.clone(), shared.clone());
    shared.spawn(async move {
        let answer = post::answer(&front, &layout, carrier.ns(), headers, Body::from(bytes)).await;
        relay(answer.into_response(), &*carrier, id.as_deref(), false).await;
        drop(permit);
    });
    Ok(StatusCode::ACCEPTED.into_response())
}

/// The `sessionId` of a message endpoint's query.
fn carrier_id(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("sessionId="))
        .filter(|id| !id.is_empty())
}

impl Carriers {
    /// Takes a new stream; past `waiting` streams that have not had their
    /// `initialize`, the one that has waited longest is ended (as the
    /// session table makes room: abandoned streams never lock clients out).
    /// A scan of the open streams, once per stream opened.
    fn admit(&self, shared: Arc<Shared>, waiting: usize) {
        let mut carriers = self.0.lock();
        let (count, oldest) = carriers
            .values()
            .filter(|c| c.session.lock().is_none() && !c.done.is_cancelled())
            .fold((0, None::<&Arc<Shared>>), |(n, oldest), c| {
                let older = oldest.filter(|o| o.opened <= c.opened).unwrap_or(c);
                (n + 1, Some(older))
            });
        if count >= waiting
            && let Some(oldest) = oldest
        {
            oldest.done.cancel();
        }
        carriers.insert(shared.id.clone(), shared);
    }

    /// The stream `id` names, if it is `principal`'s in `namespace`.
    fn find(&self, id: &str, namespace: &str, principal: &Principal) -> Option<Arc<Shared>> {
        let found = self.0.lock().get(id).cloned()?;
        (found.namespace == namespace && found.principal == *principal).then_some(found)
    }
}

impl Shared {
    fn ns(&self) -> Cow<'static, str> {
        Cow::Owned(self.namespace.clone())
    }

    /// Runs `work` until it ends or the stream does.
    fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        let done = self.done.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = done.cancelled() => {}
                _ = work => {}
            }
        });
    }

    /// Queues a message for the stream; false once the stream has ended.
    async fn send(&self, message: Outbound) -> bool {
        tokio::select! {
            sent = self.queue.send(message) => sent.is_ok(),
            _ = self.done.cancelled() => false,
        }
    }

    /// What a Streamable HTTP client of this session would send with a
    /// POST: both types accepted, JSON, the session and its revision once
    /// there is one, and the client's own credential and trace context.
    fn headers(&self, client: &HeaderMap, length: usize) -> RequestHeaders {
        let mut headers = HeaderMap::with_capacity(8);
        headers.insert(header::CONTENT_TYPE, super::answer::JSON);
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        if let Some((id, version)) = &*self.session.lock()
            && let Ok(id) = HeaderValue::from_str(id.as_str())
        {
            headers.insert(SESSION_HEADER, id);
            headers.insert(VERSION_HEADER, version.clone());
        }
        for name in PASSED {
            if let Some(value) = client.get(&name) {
                headers.insert(name, value.clone());
            }
        }
        RequestHeaders::Hyper(headers)
    }

    /// The client's `initialize`, served before the POST is answered, so
    /// that a refusal (the table full of busy sessions: 503) is the POST's
    /// status as it would be on `/mcp`, and so that the session exists
    /// before anything else is run.
    async fn initialize(
        self: &Arc<Self>,
        front: &Arc<Front>,
        layout: &Arc<Layout>,
        client: &HeaderMap,
        bytes: Bytes,
    ) -> Result<Response, Reject> {
        if self.initializing.swap(true, Ordering::AcqRel) {
            return Err(Reject::AlreadyInitialized);
        }
        let headers = self.headers(client, bytes.len());
        let answer = post::answer(front, layout, self.ns(), headers, Body::from(bytes)).await;
        let response = answer.into_response();
        if !response.status().is_success() {
            self.initializing.store(false, Ordering::Release);
            return Ok(response);
        }
        let session = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let line = axum::body::to_bytes(response.into_body(), MAX_ANSWER)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let version = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| HeaderValue::from_str(v["result"]["protocolVersion"].as_str()?).ok());
        let (Some(session), Some(version)) = (session, version) else {
            // Refused in band (bad params): the client may try again.
            self.initializing.store(false, Ordering::Release);
            self.send(Outbound::line(line)).await;
            return Ok(StatusCode::ACCEPTED.into_response());
        };
        *self.session.lock() = Some((SessionId::from_header(&session), version));
        self.send(Outbound::line(line)).await;
        let slot = self.slot.lock().take();
        if let Some(slot) = slot {
            let beats = get_stream::beats(
                front,
                layout,
                &self.namespace,
                Some(&session),
                &self.principal,
                Some(slot),
                // The client's stream refreshes the session as it is written.
                None,
            )
            .await;
            match beats {
                Ok(beats) => self.spawn(self.clone().relay(beats)),
                Err(reject) => tracing::debug!(?reject, "HTTP+SSE: no stream for the session"),
            }
        }
        Ok(StatusCode::ACCEPTED.into_response())
    }

    /// The session's GET stream, onto the client's; its end (the session
    /// ended: idle, evicted, shutdown) ends the client's stream.
    async fn relay(self: Arc<Self>, beats: impl futures_util::Stream<Item = Option<String>>) {
        let mut beats = std::pin::pin!(beats);
        while let Some(beat) = beats.next().await {
            if let Some(line) = beat
                && !self.send(Outbound::line(line)).await
            {
                break;
            }
        }
        self.done.cancel();
    }
}

impl Sink for Shared {
    async fn send(&self, message: Outbound) -> bool {
        Shared::send(self, message).await
    }
}

/// The client's headers a run through `/mcp` is given.
const PASSED: [HeaderName; 4] = [
    header::AUTHORIZATION,
    HeaderName::from_static("traceparent"),
    HeaderName::from_static("tracestate"),
    HeaderName::from_static("baggage"),
];

/// Held by the stream's body: its drop (the client gone, a failed write,
/// the session's end, shutdown) forgets the carrier, ends its tasks and
/// ends its session as a DELETE would.
struct Owner {
    front: Arc<Front>,
    shared: Arc<Shared>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        let shared = &self.shared;
        shared.done.cancel();
        self.front.sse.0.lock().remove(&shared.id);
        let Some((id, _)) = shared.session.lock().take() else {
            return;
        };
        // At shutdown every session is ended (and counted) as such.
        if self.front.stopping.is_cancelled() {
            return;
        }
        let bound = self.front.binding(&shared.principal, &shared.namespace);
        let Ok(revoked) = self.front.sessions.delete(&id, &shared.principal, &bound) else {
            return;
        };
        // Cluster mode: Redis told, each command under its own deadline.
        if revoked.is_some() && self.front.cluster.is_some() {
            let front = self.front.clone();
            tokio::spawn(async move { front.ended_everywhere(&id, revoked).await });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_carrier_id_is_read_from_the_query() {
        assert_eq!(carrier_id(Some("sessionId=ab12")), Some("ab12"));
        assert_eq!(carrier_id(Some("x=1&sessionId=ab12")), Some("ab12"));
        assert_eq!(carrier_id(Some("sessionId=")), None);
        assert_eq!(carrier_id(Some("session=ab12")), None);
        assert_eq!(carrier_id(None), None);
    }
}
