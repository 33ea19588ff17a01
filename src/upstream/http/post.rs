//! Every message to the backend is its own POST: a request from its
//! caller's task (`Endpoint` is the connection's `Post`), notifications and
//! responses from the link's writer task. Legacy POSTs carry the session's
//! headers, lent; 2026-07-28 ones carry metadata in the body, mirrored in
//! headers. What comes back (JSON, a batch, an SSE stream) is dispatched to
//! the connection, tagged with the request it answers.

use std::sync::Arc;
use std::time::Duration;

use ::http::header::CONTENT_TYPE;
use ::http::{Method, StatusCode};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::{Endpoint, MAX_BODY, MAX_POSTS, POSTING, Session, is_event_stream};
use crate::budget::{BODIES, Permit, Refused};
use crate::http1::client::{self as http_client, RequestBuilder, Response};
use crate::jsonrpc::{self, Message, Outcome, Payload};
use crate::protocol::VERSION_HEADER;
use crate::upstream::UpstreamError;
use crate::upstream::conn::{Conn, Frame, Post};
use crate::upstream::{event_stream, meta};

/// A request is its own POST, sent from the caller's task.
impl Post for Endpoint {
    fn post<'a>(&'a self, conn: &'a Conn, frame: Frame) -> BoxFuture<'a, ()> {
        // Written into a box made first: `Box::pin` made the future on the
        // stack and copied it over (callgrind: 208 instructions a call).
        let post = Box::write(Box::new_uninit(), async move {
            // Closed only with the endpoint, never while it is in use. A
            // permit is nearly always free: taken without a waiter.
            let _permit = match self.posts.try_acquire() {
                Ok(permit) => permit,
                Err(tokio::sync::TryAcquireError::NoPermits) => match self.posts.acquire().await {
                    Ok(permit) => permit,
                    Err(_) => return,
                },
                Err(tokio::sync::TryAcquireError::Closed) => return,
            };
            send(self, conn, frame).await;
        });
        Box::into_pin(post)
    }
}

impl Endpoint {
    /// A legacy call's POST, every header lent: the configured ones, then
    /// `posting`'s, then `session`'s (what `posting` and `send_lent_with`
    /// would send, without a builder).
    async fn post_lent(
        &self,
        session: &Session,
        body: &[u8],
    ) -> Result<Response, http_client::SendError> {
        let configured = self.spec.headers.current();
        let headers = configured
            .iter()
            .chain(POSTING.iter().map(|(k, v)| (k, v)))
            .chain(session.headers());
        self.spec
            .client
            .send(&Method::POST, &self.spec.target, headers, body)
            .await
    }

    /// A modern request: metadata in the body, mirrored in the headers.
    pub(super) fn post_modern(&self, line: &str, extra: &[(String, String)]) -> RequestBuilder {
        let mut req = self
            .posting()
            .header(VERSION_HEADER, crate::protocol::MODERN_FIRST);
        req = req.header_pairs(extra);
        let body = match Message::parse(line.as_bytes()) {
            Ok(Message::Request(r)) => {
                let (params, name) = meta::ensure_modern(&r.method, r.params.as_deref());
                req = req.header("mcp-method", r.method.as_str());
                if let Some(n) = name {
                    req = req.header("mcp-name", crate::mirror::encode(&n));
                }
                jsonrpc::request(&r.id, &r.method, Some(&params))
            }
            Ok(Message::Notification(n)) => {
                req = req.header("mcp-method", n.method.as_str());
                line.to_owned()
            }
            _ => line.to_owned(),
        };
        req.body(body)
    }
}

/// Sends each queued frame (notifications and responses; requests are
/// posted by their callers) as its own POST, concurrently, all owned by
/// this one task: when the link ends, the task is dropped and every POST in
/// flight with it (no detached task can outlive its backend session).
pub(super) async fn write_frames(
    wire: Arc<Endpoint>,
    conn: Arc<Conn>,
    mut rx: mpsc::Receiver<Frame>,
) {
    // Bounded like the call itself; a stream nobody waits for ends.
    let limit = wire.ctx.timeout + Duration::from_secs(1);
    let mut in_flight = FuturesUnordered::new();
    loop {
        tokio::select! {
            frame = rx.recv(), if in_flight.len() < MAX_POSTS => match frame {
                Some(frame) => in_flight.push(tokio::time::timeout(limit, send(&wire, &conn, frame))),
                None => break,
            },
            Some(_) = in_flight.next(), if !in_flight.is_empty() => {}
        }
    }
    while in_flight.next().await.is_some() {}
}

async fn send(wire: &Endpoint, conn: &Conn, frame: Frame) {
    let name = &wire.ctx.name;
    if wire.modern && frame.call.is_none() {
        // 2026-07-28 has no client notifications or responses over HTTP.
        return;
    }
    for attempt in 0..2 {
        let session = wire.session.lock().clone();
        // The legacy body is lent to both attempts: no copy, no sharing.
        let sent = if wire.modern {
            wire.post_modern(&frame.line, &frame.headers).send().await
        } else if frame.headers.is_empty() {
            wire.post_lent(&session, frame.line.as_bytes()).await
        } else {
            // A call's own headers replace configured ones: the builder's
            // `header_pairs` does that.
            wire.posting()
                .header_pairs(&frame.headers)
                .send_lent_with(session.headers(), frame.line.as_bytes())
                .await
        };
        let resp = match sent {
            Ok(r) => r,
            // A request that could not even be built (a header value the
            // backend's schema led to) fails that call, not the link.
            Err(e) if e.is_builder() => {
                if let Some(id) = frame.call {
                    conn.fail(
                        id,
                        UpstreamError::protocol(name, "request could not be built"),
                    );
                }
                return;
            }
            Err(e) => {
                if let Some(id) = frame.call {
                    conn.fail(id, UpstreamError::from_http(&wire.ctx.name, e));
                }
                wire.fatal.cancel();
                return;
            }
        };
        let status = resp.status();
        if status == StatusCode::NOT_FOUND
            && session.id.is_some()
            && attempt == 0
            && !wire.closing.is_cancelled()
        {
            // The request was not executed: re-initialize, then retry it.
            // (Boxed: the handshake's future would make every call's large.)
            if let Err(e) = Box::pin(wire.reinitialize(session.generation)).await {
                if let Some(id) = frame.call {
                    conn.fail(id, e);
                }
                wire.fatal.cancel();
                return;
            }
            continue;
        }
        if !status.is_success() {
            // A JSON-RPC error riding on a 4xx (-32021, -32602, ...) is the
            // backend's answer: it passes through, its data intact.
            if is_json(&resp)
                && let Ok(body) = resp.bytes(MAX_BODY).await
                && let Ok(Message::Response(_)) = Message::parse(&body)
            {
                dispatch(wire, conn, &body, frame.call);
                return;
            }
            if let Some(id) = frame.call {
                conn.fail(id, UpstreamError::http_status(name, "", status));
            }
            return;
        }
        deliver(wire, conn, resp, frame.call).await;
        return;
    }
}

/// Feeds a POST's response (one JSON message, a batch, or an SSE stream)
/// to the connection, tagged with the request it answers.
async fn deliver(wire: &Endpoint, conn: &Conn, resp: Response, origin: Option<u64>) {
    let mut answered = false;
    if is_event_stream(&resp) {
        let mut stream = std::pin::pin!(event_stream::of_response(resp));
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) if ev.data.len() >= OWN_BUFFER => {
                    // Read already (an event is bounded), but held from
                    // here under the budget, its result where it lies.
                    match BODIES.take(ev.data.len()) {
                        Ok(permit) => {
                            let body = Body::Own(ev.data.into_bytes(), permit);
                            answered |= dispatch_body(wire, conn, body, origin);
                        }
                        Err(refused) => {
                            over_budget(wire, conn, origin, refused);
                            return;
                        }
                    }
                }
                Ok(ev) if !ev.data.is_empty() => {
                    answered |= dispatch(wire, conn, ev.data.as_bytes(), origin);
                }
                Ok(_) => {}
                Err(e) => {
                    if wire.ctx.warnings.admit().is_some() {
                        tracing::warn!(backend = %wire.ctx.name, error = %e, "response stream broke");
                    }
                    break;
                }
            }
        }
    } else {
        match json_body(resp).await {
            Ok(body) => answered = dispatch_body(wire, conn, body, origin),
            Err(Unread::OverBudget(refused)) => {
                over_budget(wire, conn, origin, refused);
                return;
            }
            Err(Unread::Broken(e)) => {
                if wire.ctx.warnings.admit().is_some() {
                    tracing::warn!(backend = %wire.ctx.name, error = %e, "response body refused");
                }
            }
        }
    }
    if let Some(id) = origin
        && !answered
    {
        // A response stream that ended without the answer: fail, don't hang.
        conn.fail_with(id, || {
            UpstreamError::protocol(&wire.ctx.name, "response ended without an answer")
        });
    }
}

/// A JSON body at least this long (by its length, or as it arrives) is
/// read into a buffer of its own under the body budget
/// (`crate::budget`), and its result kept where it lies
/// (`jsonrpc::take_result`): held once, from its first byte until its
/// client has it. A shorter one is parsed where it lies in the
/// connection's read buffer (joined first if it came in pieces).
const OWN_BUFFER: usize = crate::budget::LARGE;

/// A JSON response's body, read whole.
enum Body {
    Shared(Bytes),
    /// In a buffer of its own, and the budget it holds.
    Own(Vec<u8>, Permit),
}

/// Why a body was not read whole.
enum Unread {
    Broken(String),
    /// It would take the bodies in flight past the budget: not read on
    /// (the connection is closed with the response, unread).
    OverBudget(Refused),
}

/// Reads a JSON response's body, at most `MAX_BODY` bytes of it, taking
/// from the body budget before reading a large one (by its length) or as
/// one of no stated length grows past `OWN_BUFFER` (doubling what it holds).
async fn json_body(resp: Response) -> Result<Body, Unread> {
    let too_large = || Unread::Broken(format!("a body larger than {MAX_BODY} bytes"));
    let length = resp.content_length();
    if length.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_large());
    }
    let known = length.map_or(0, |n| n as usize);
    let mut own = None;
    if known >= OWN_BUFFER {
        let permit = BODIES.take(known).map_err(Unread::OverBudget)?;
        own = Some((Vec::with_capacity(known), permit));
    }
    // A body that arrives in one piece (the common case) is that piece.
    let mut first = Bytes::new();
    let mut joined: Option<Vec<u8>> = None;
    let mut chunks = std::pin::pin!(resp.bytes_stream());
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(Unread::Broken)?;
        if own.is_none() && joined.is_none() {
            if first.is_empty() {
                first = chunk;
                continue;
            }
            joined = Some(std::mem::take(&mut first).to_vec());
        }
        let so_far = own.as_ref().map_or(0, |(b, _)| b.len()) + joined.as_ref().map_or(0, Vec::len);
        let total = so_far + chunk.len();
        if total > MAX_BODY {
            return Err(too_large());
        }
        if total >= OWN_BUFFER
            && let Some(buf) = joined.take()
        {
            let permit = BODIES.take(total).map_err(Unread::OverBudget)?;
            own = Some((buf, permit));
        }
        match (&mut own, &mut joined) {
            (Some((buf, permit)), _) => {
                if total > permit.bytes() {
                    let more = total.max(permit.bytes().saturating_mul(2)).min(MAX_BODY);
                    permit.grow_to(more).map_err(Unread::OverBudget)?;
                }
                buf.extend_from_slice(&chunk);
            }
            (None, Some(buf)) => buf.extend_from_slice(&chunk),
            (None, None) => unreachable!("joined above"),
        }
    }
    Ok(match (own, joined) {
        (Some((buf, permit)), _) => Body::Own(buf, permit),
        (None, Some(buf)) => Body::Shared(Bytes::from(buf)),
        (None, None) => Body::Shared(first),
    })
}

/// A body the budget refused: its call fails with an error that says so
/// (counted in `sluice_bodies_refused_total`).
fn over_budget(wire: &Endpoint, conn: &Conn, origin: Option<u64>, refused: Refused) {
    wire.ctx.metrics.body_refused();
    if let Some(id) = origin {
        conn.fail(id, UpstreamError::over_budget(&wire.ctx.name, refused));
    }
}

/// Hands a body read whole to the connection: a large result stays where
/// it lies, its budget held with it; anything else (a batch, an error, a
/// notification) is read as `dispatch` reads it. True if it answered
/// `origin`.
fn dispatch_body(wire: &Endpoint, conn: &Conn, body: Body, origin: Option<u64>) -> bool {
    match body {
        Body::Shared(body) => dispatch_shared(wire, conn, &body, origin),
        Body::Own(body, permit) => match jsonrpc::take_result(body) {
            Ok((id, result)) => {
                let outcome = Outcome::Result(Payload::held(result, permit));
                conn.answer_read(&id, outcome, origin)
            }
            Err(other) => dispatch_shared(wire, conn, &other, origin),
        },
    }
}

/// One JSON message or a batch of them, to the connection; true if one
/// answered `origin`.
fn dispatch_shared(wire: &Endpoint, conn: &Conn, body: &[u8], origin: Option<u64>) -> bool {
    // One object is the common case: a batch only when it starts with '['.
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        None => false,
        Some(b'[') => match serde_json::from_slice::<Vec<Box<RawValue>>>(body) {
            Ok(batch) => {
                // Every message is handed over, answering or not.
                let mut answered = false;
                for m in &batch {
                    answered |= dispatch(wire, conn, m.get().as_bytes(), origin);
                }
                answered
            }
            Err(e) => {
                tracing::warn!(backend = %wire.ctx.name, error = %e, "unparseable batch");
                false
            }
        },
        // Not UTF-8 is not JSON: refused as unparseable, never mangled.
        Some(_) => dispatch(wire, conn, body, origin),
    }
}

/// Hands one message to the connection; true if it answered `origin`.
pub(super) fn dispatch(wire: &Endpoint, conn: &Conn, data: &[u8], origin: Option<u64>) -> bool {
    let (notice, answered) = conn.dispatch_answering(data, origin);
    if let Some(notice) = notice {
        wire.ctx.notice(notice);
    }
    answered
}

fn is_json(resp: &Response) -> bool {
    resp.headers()
        .get_str(&CONTENT_TYPE)
        .is_some_and(|v| v.starts_with("application/json"))
}

#[cfg(test)]
mod tests {
    /// The POST of every call is a future in a box of its own
    /// (`Endpoint::post`): re-initializing inline once made it 5 KiB.
    #[test]
    #[allow(unreachable_code, clippy::diverging_sub_expression)]
    fn a_post_future_stays_small() {
        fn future_size<F: std::future::Future>(_make: impl FnOnce() -> F) -> usize {
            std::mem::size_of::<F>()
        }
        // 1,736 bytes when this was written (the same in release).
        let send = future_size(|| super::send(todo!(), todo!(), todo!()));
        assert!(send <= 2 * 1024, "http::send: {send} bytes");
    }
}
