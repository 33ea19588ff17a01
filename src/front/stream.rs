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
use futures_util::stream::{self, StreamExt};

use super::Front;
use super::checks;
use super::error::Reject;
use super::limits::StreamSlot;
use crate::router::ClientNotice;
use crate::sessions::Session;
use crate::upstream::Caller;

pub(super) async fn open(
    front: &Arc<Front>,
    namespace: &str,
    headers: &HeaderMap,
) -> Result<Response, Reject> {
    let layout = front.layout.load_full();
    let principal = layout
        .policy
        .authenticate(headers, namespace)
        .await?
        .principal;
    checks::accepts(headers, &["text/event-stream"])?;
    if layout.policy.stateless {
        return Err(Reject::MethodNotAllowed);
    }
    // `[limits]`: one of the principal's stream slots, for the stream's life.
    let slot = layout.limits.open_stream(front, &principal).await?;
    let ns = layout
        .router
        .namespace(namespace)
        .ok_or(Reject::UnknownNamespace)?;
    let id = checks::presented_session_id(headers).ok_or(Reject::MissingSession)?;
    let session = front.begin(id, &principal, ns).await?.session().clone();
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
            ClientNotice::Ask(_) => true,
        })
    });
    let changes = Box::pin(changes);
    let sessions = front.sessions.clone();
    let stopping = front.stopping.clone();
    let mut tick = tokio::time::interval(front.stream_keep_alive);
    tick.reset();
    let events = stream::unfold(
        (changes, claim, tick, sessions, stopping),
        |(mut changes, claim, mut tick, sessions, stopping)| async move {
            let ended = claim.0.ended().clone();
            let event = tokio::select! {
                _ = ended.cancelled() => return None,
                _ = stopping.cancelled() => return None,
                Some(notice) = changes.next() => {
                    Event::default().event("message").data(notice.line())
                }
                _ = tick.tick() => {
                    if !sessions.touch(&claim.0.id) {
                        return None;
                    }
                    Event::default().comment("keep-alive")
                }
            };
            Some((
                Ok::<_, Infallible>(event),
                (changes, claim, tick, sessions, stopping),
            ))
        },
    );
    let mut response = Sse::new(events).into_response();
    response.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    Ok(response)
}

/// Releases the session's one GET stream, and the principal's stream slot,
/// when the body is dropped.
struct StreamClaim(Arc<Session>, #[allow(dead_code)] StreamSlot);

impl Drop for StreamClaim {
    fn drop(&mut self) {
        self.0.release_stream();
    }
}
