//! The standalone GET stream: list-change notifications for one session.
//!
//! It counts as activity only while it is writable: each keep-alive comment
//! is produced only when the previous write went through, and each one
//! refreshes the session. A vanished client fails a write, the body is
//! dropped, and the session ages out like any other.

use std::convert::Infallible;
use std::sync::Arc;

use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};

use super::checks;
use super::error::Reject;
use super::limits::StreamSlot;
use super::{Front, Layout};
use crate::router::ClientNotice;
use crate::sessions::Session;
use crate::upstream::Caller;
use crate::vocab::Principal;

pub(super) async fn open(
    front: &Arc<Front>,
    namespace: &str,
    headers: &HeaderMap,
) -> Result<Response, Reject> {
    let layout = front.layout.load_full();
    let principal = who(&layout, namespace, headers).await?;
    let id = checks::presented_session_id(headers);
    let keep_alive = Some(front.stream_keep_alive);
    // The stream slot is taken once the session is found: an unknown
    // session is told 404 (the client initializes again), even at the cap.
    let beats = beats(front, &layout, namespace, id, &principal, None, keep_alive).await?;
    let events = beats.map(|beat| {
        Ok::<_, Infallible>(match beat {
            Some(line) => Event::default().event("message").data(line),
            None => Event::default().comment("keep-alive"),
        })
    });
    let mut response = Sse::new(events).into_response();
    response.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    Ok(response)
}

/// Who opens a stream of a session (here or on `/sse`), if it may: a
/// stream of JSON-RPC messages, with sessions, and one of the principal's
/// stream slots under `[limits]`, held for the stream's life.
pub(super) async fn admit(
    front: &Front,
    layout: &Layout,
    namespace: &str,
    headers: &HeaderMap,
) -> Result<(Principal, StreamSlot), Reject> {
    let principal = who(layout, namespace, headers).await?;
    let slot = layout.limits.open_stream(front, &principal).await?;
    Ok((principal, slot))
}

/// Who asks for a stream of JSON-RPC messages, with sessions.
async fn who(layout: &Layout, namespace: &str, headers: &HeaderMap) -> Result<Principal, Reject> {
    let principal = layout
        .policy
        .authenticate(headers, namespace)
        .await?
        .principal;
    checks::accepts(headers, &["text/event-stream"])?;
    if layout.policy.stateless {
        return Err(Reject::MethodNotAllowed);
    }
    Ok(principal)
}

/// What the GET stream of session `id` carries, for whoever carries it (an
/// SSE response here, the HTTP+SSE front's stream in `sse`): each notice's
/// line, and `None` at each tick of `keep_alive`, which refreshes the
/// session (and comes only once the one before was taken; a carrier that
/// writes more than this stream passes None and refreshes it itself).
/// Ends with the session, at shutdown, or when the carrier drops it;
/// `slot` (None: one of the principal's, taken once the session is found)
/// is held until then.
pub(super) async fn beats(
    front: &Arc<Front>,
    layout: &Layout,
    namespace: &str,
    id: Option<&str>,
    principal: &Principal,
    slot: Option<StreamSlot>,
    keep_alive: Option<std::time::Duration>,
) -> Result<impl Stream<Item = Option<String>> + Send + 'static, Reject> {
    let ns = layout
        .router
        .namespace(namespace)
        .ok_or(Reject::UnknownNamespace)?;
    let id = id.ok_or(Reject::MissingSession)?;
    let session = front.begin(id, principal, ns).await?.session().clone();
    let slot = match slot {
        Some(slot) => slot,
        None => layout.limits.open_stream(front, principal).await?,
    };
    if !session.claim_stream() {
        return Err(Reject::StreamConflict);
    }
    let claim = StreamClaim(session.clone(), slot);
    let caller = Caller::session(session.id.clone(), session.clone(), session.caps);
    let subscriber = session.clone();
    // Resource updates only for what this session subscribed to.
    let changes = super::follow::notices(front, ns, caller).filter(move |n| {
        std::future::ready(match n {
            ClientNotice::ListChanged(_) => true,
            ClientNotice::ResourceUpdated(uri) => subscriber.is_subscribed(uri),
            ClientNotice::Log(level, _) => subscriber.wants_log(*level),
            ClientNotice::Ask(_) | ClientNotice::ElicitationComplete(_) => true,
        })
    });
    let changes = Box::pin(changes);
    let sessions = front.sessions.clone();
    let stopping = front.stopping.clone();
    let ticks = keep_alive.is_some();
    let mut tick = tokio::time::interval(keep_alive.unwrap_or(front.stream_keep_alive));
    tick.reset();
    Ok(stream::unfold(
        (changes, claim, tick, sessions, stopping),
        move |(mut changes, claim, mut tick, sessions, stopping)| async move {
            let ended = claim.0.ended().clone();
            let beat = tokio::select! {
                _ = ended.cancelled() => return None,
                _ = stopping.cancelled() => return None,
                Some(notice) = changes.next() => Some(notice.line()),
                _ = tick.tick(), if ticks => {
                    if !sessions.touch(&claim.0.id) {
                        return None;
                    }
                    None
                }
            };
            Some((beat, (changes, claim, tick, sessions, stopping)))
        },
    ))
}

/// Releases the session's one GET stream, and the principal's stream slot,
/// when the body is dropped.
struct StreamClaim(Arc<Session>, #[allow(dead_code)] StreamSlot);

impl Drop for StreamClaim {
    fn drop(&mut self) {
        self.0.release_stream();
    }
}
