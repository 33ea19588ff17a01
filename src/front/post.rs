//! POST: one JSON-RPC message (or a 2025-03-26 batch) from a client,
//! admitted by the checks both eras share (the shutdown, the bearer token,
//! `[limits]`, Content-Type and Accept, the namespace, the body and its
//! parse, headers repeated), then served by its era (`era`).

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, header};
use futures_util::FutureExt;

use super::answer::Answer;
use super::checks;
use super::era::{self, Posted};
use super::error::Reject;
use super::headers::{HeaderLookup, RequestHeaders};
use super::{Front, Layout};
use crate::jsonrpc::Message;

/// A POST's answer, a refusal included. Not an `async fn`: a layer of
/// them would hold its arguments beside the next layer's future, in the
/// one the connection holds (`front::Edge`).
pub(super) fn answer<'a>(
    front: &'a Arc<Front>,
    layout: &'a Layout,
    namespace: Cow<'static, str>,
    headers: RequestHeaders,
    body: Body,
) -> impl Future<Output = Answer> + 'a {
    handle(front, layout, namespace, headers, body)
        .map(|answer| answer.unwrap_or_else(|reject| front.refuse(&Method::POST, reject).into()))
}

/// The checks both eras share, then the POST's era serves it.
async fn handle(
    front: &Arc<Front>,
    layout: &Layout,
    namespace: Cow<'static, str>,
    headers: RequestHeaders,
    body: Body,
) -> Result<Answer, Reject> {
    let started = crate::clock::tokio_now();
    if front.stopping.is_cancelled() {
        return Err(Reject::ShuttingDown);
    }
    let who = layout.policy.authenticate(&headers, &namespace).await?;
    let admitted = layout.limits.admit(front, &who.principal).await?;
    checks::json_content(&headers)?;
    checks::accepts(&headers, &["application/json", "text/event-stream"])?;
    let ns = layout
        .router
        .namespace(&namespace)
        .ok_or(Reject::UnknownNamespace)?
        .clone();
    let bytes = read_body(
        body,
        &headers,
        layout.policy.max_body_bytes,
        started.into_std() + front.body_read_timeout,
    )
    .await?;
    let message = Message::parse_body(&bytes, front.max_batch_items).map_err(Reject::Parse)?;
    // The body and the head are slices of the connection's read buffer:
    // while they live, hyper's next read (it reads ahead while the request
    // runs) needs a new buffer. The message holds copies.
    drop(bytes);

    if let Some(name) = headers.repeated_mirror() {
        let id = era::request_id(&message);
        return Err(Reject::RepeatedHeader { id, name });
    }
    let posted = Posted {
        front,
        layout,
        ns,
        headers,
        who,
        admitted,
        started,
    };
    era::serve(posted, message).await
}

/// The body, whole: at most `max` bytes, arriving within `deadline` (a
/// client that sends a body a byte at a time holds nothing for long).
pub(super) async fn read_body(
    body: Body,
    headers: &RequestHeaders,
    max: usize,
    deadline: std::time::Instant,
) -> Result<bytes::Bytes, Reject> {
    use http_body_util::BodyExt;
    let declared = headers
        .get_str(&header::CONTENT_LENGTH)
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(Reject::PayloadTooLarge(max));
    }
    let mut body = std::pin::pin!(body);
    // A body that came whole is one frame, taken as it is; only one in
    // pieces is copied together.
    let mut whole: Option<bytes::Bytes> = None;
    let mut pieces = bytes::BytesMut::new();
    loop {
        let frame = crate::timers::timeout_at(deadline, body.frame())
            .await
            .map_err(|_| Reject::BodyTimeout)?;
        let data = match frame {
            None => break,
            Some(Err(_)) => return Err(Reject::BodyUnreadable),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue, // trailers
            },
        };
        let read = whole.as_ref().map_or(pieces.len(), bytes::Bytes::len);
        if read + data.len() > max {
            return Err(Reject::PayloadTooLarge(max));
        }
        match whole.take() {
            None if pieces.is_empty() => whole = Some(data),
            first => {
                pieces.extend_from_slice(&first.unwrap_or_default());
                pieces.extend_from_slice(&data);
            }
        }
    }
    Ok(whole.unwrap_or_else(|| pieces.freeze()))
}
