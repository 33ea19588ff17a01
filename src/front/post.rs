//! POST: one JSON-RPC message (or a 2025-03-26 batch) from a client.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use futures_util::stream::{self, StreamExt};
use serde_json::json;
use tokio::time::Instant;

use super::answer::{Answer, Json};
use super::checks;
use super::error::{ModernError, Reject};
use super::headers::{HeaderLookup, RequestHeaders};
use super::limits::Limits;
use super::reply::{self, Ctx, Questions, Rules};
use super::{Front, Layout};
use crate::jsonrpc::{self, Body as RpcBody, Message, Notification, Outcome};
use crate::protocol::{self, ClientCaps, Era, LegacyVersion, Revision};
use crate::router::Namespace;
use crate::sessions::Active;
use crate::traces::SessionKind;
use crate::upstream::Caller;
use crate::vocab::Principal;

/// The 2025 revisions' rules for the reply machinery: a dropped
/// connection is not a cancellation (the client cancels with
/// `notifications/cancelled`), and a backend's questions go on the
/// response stream as they come.
struct Legacy;

impl Rules for Legacy {
    fn era(&self) -> Era {
        Era::Legacy
    }

    fn span_kind(&self, in_session: bool) -> SessionKind {
        match in_session {
            true => SessionKind::Session,
            false => SessionKind::Stateless,
        }
    }

    fn cancels_on_drop(&self) -> bool {
        false
    }

    /// A backend's result goes to the client as it is.
    fn decorate(&self, _method: &str, outcome: Outcome) -> Outcome {
        outcome
    }

    /// An error is answered in-band too.
    fn status(&self, _outcome: &Outcome) -> StatusCode {
        StatusCode::OK
    }

    fn questions(&self) -> Questions {
        Questions::Streamed
    }
}

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

async fn handle(
    front: &Arc<Front>,
    layout: &Layout,
    namespace: Cow<'static, str>,
    owned_headers: RequestHeaders,
    body: Body,
) -> Result<Answer, Reject> {
    let started = crate::clock::tokio_now();
    if front.stopping.is_cancelled() {
        return Err(Reject::ShuttingDown);
    }
    let headers = &owned_headers;
    let who = layout.policy.authenticate(headers, &namespace).await?;
    let admitted = layout.limits.admit(front, &who.principal).await?;
    checks::json_content(headers)?;
    checks::accepts(headers, &["application/json", "text/event-stream"])?;
    let ns = layout
        .router
        .namespace(&namespace)
        .ok_or(Reject::UnknownNamespace)?
        .clone();
    let bytes = read_body(
        body,
        headers,
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
        let id = request_id(&message);
        return Err(Reject::RepeatedHeader { id, name });
    }
    // Modern by its body's `_meta`, or by its header even when the body
    // lacks the `_meta` (then it is refused as the modern request it is).
    let header = checks::protocol_version(headers)?.map(Revision::of);
    if let RpcBody::Single(Message::Request(r)) = &message
        && (matches!(header, Some(Revision::Modern)) || is_modern(r.params.as_deref()))
    {
        let RpcBody::Single(Message::Request(r)) = message else {
            unreachable!("matched above")
        };
        // Every arm but the common legacy call is boxed: a future is as big
        // as its largest arm, and this one is moved whole into a box for
        // every request (front::Edge).
        return Box::pin(super::modern::handle(
            front,
            ns,
            who,
            admitted,
            &headers.map(),
            r,
            started,
        ))
        .await
        .map(Answer::from);
    }
    let crate::auth::Identity { principal, token } = who;
    let header_version = match header {
        None => None,
        Some(Revision::Legacy(v)) => Some(v),
        Some(Revision::Modern) => return Err(Reject::ModernNeedsRequest),
        // A revision nobody speaks: the answer lists the ones we do.
        Some(Revision::Unknown(requested)) => {
            let id = request_id(&message);
            return Err(Reject::Modern {
                id,
                error: ModernError::UnsupportedVersion(requested),
            });
        }
    };
    if let RpcBody::Single(Message::Request(r)) = &message
        && r.method == "initialize"
    {
        ns.settle().await;
        let RpcBody::Single(Message::Request(r)) = message else {
            unreachable!("matched above")
        };
        return Box::pin(initialize(front, &ns, principal, r, started)).await;
    }
    let active = begin(front, layout, &ns, headers, &principal).await?;
    // The key of per-session isolation: the session, else the principal.
    let caller = match &active {
        Some(a) => {
            let s = a.session();
            Caller::session(s.id.clone(), s.clone(), s.caps)
        }
        None => Caller::principal(principal.clone()),
    };
    let ctx = Ctx {
        front: front.clone(),
        ns,
        active,
        principal,
        rules: &Legacy,
        caller: caller.with_token(token),
        admitted,
        trace: front.traces.parent(|name| headers.get_str(name)),
    };
    drop(owned_headers);
    match message {
        RpcBody::Single(Message::Request(r)) => Ok(reply::serve(ctx, r, started).await),
        RpcBody::Single(Message::Notification(n)) => {
            notification(&ctx, &n);
            Ok(StatusCode::ACCEPTED.into_response().into())
        }
        RpcBody::Single(Message::Response(r)) => {
            Box::pin(reply::answer(&ctx, &r.id, &r.outcome)).await;
            Ok(StatusCode::ACCEPTED.into_response().into())
        }
        RpcBody::Batch(items) => {
            // Without a session (stateless) the header, else 2025-03-26, decides.
            let version = ctx
                .active
                .as_ref()
                .map(|a| a.session().version)
                .or(header_version)
                .unwrap_or(LegacyVersion::V2025_03_26);
            if !version.allows_batches() {
                return Err(Reject::BatchNotAllowed);
            }
            Box::pin(batch(ctx, &layout.limits, items))
                .await
                .map(Answer::from)
        }
    }
}

/// The id a refusal of the whole POST answers: a single request's, else
/// null.
fn request_id(message: &RpcBody) -> jsonrpc::RawId {
    match message {
        RpcBody::Single(Message::Request(r)) => r.id.clone(),
        _ => jsonrpc::raw_null(),
    }
}

/// The client's session for a legacy request (None when stateless).
async fn begin(
    front: &Arc<Front>,
    layout: &Layout,
    ns: &Namespace,
    headers: &RequestHeaders,
    principal: &Principal,
) -> Result<Option<Active>, Reject> {
    if layout.policy.stateless {
        return Ok(None);
    }
    let id = checks::presented_session_id(headers).ok_or(Reject::MissingSession)?;
    front.begin(id, principal, ns).await.map(Some)
}

/// The body, whole: at most `max` bytes, arriving within `deadline` (a
/// client that sends a body a byte at a time holds nothing for long).
async fn read_body(
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

/// Whether `params._meta["io.modelcontextprotocol/protocolVersion"]` names
/// a 2026-07-28-or-later revision: such a request is served statelessly.
fn is_modern(params: Option<&serde_json::value::RawValue>) -> bool {
    modern_version(params).is_some()
}

fn modern_version(params: Option<&serde_json::value::RawValue>) -> Option<String> {
    let params = params?;
    // Cheap test first: almost every request lacks the key.
    if !protocol::may_name_modern_version(params.get()) {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct P {
        #[serde(rename = "_meta")]
        meta: Option<std::collections::HashMap<String, serde_json::Value>>,
    }
    let p: P = serde_json::from_str(params.get()).ok()?;
    let v = p.meta?.remove(protocol::META_PROTOCOL_VERSION)?;
    let v = v.as_str()?;
    protocol::is_modern(v).then(|| v.to_owned())
}

async fn initialize(
    front: &Front,
    ns: &Namespace,
    principal: Principal,
    req: jsonrpc::Request,
    started: Instant,
) -> Result<Answer, Reject> {
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "protocolVersion")]
        protocol_version: String,
        #[serde(default)]
        capabilities: Option<Box<serde_json::value::RawValue>>,
    }
    let Some(params) = req
        .params
        .as_deref()
        .and_then(|p| serde_json::from_str::<Params>(p.get()).ok())
    else {
        let err = jsonrpc::error_object(
            jsonrpc::INVALID_PARAMS,
            "initialize requires params.protocolVersion",
            None,
        );
        return Ok(Answer::json(jsonrpc::response(
            &req.id,
            &Outcome::Error(err),
        )));
    };
    let version = LegacyVersion::negotiate(&params.protocol_version);
    let caps = params
        .capabilities
        .as_deref()
        .map_or_else(ClientCaps::default, |c| ClientCaps::parse(c.get()));
    let mut result = json!({
        "protocolVersion": version.as_str(),
        "capabilities": ns.capabilities(),
        "serverInfo": { "name": "sluice", "version": env!("CARGO_PKG_VERSION") },
    });
    if let Some(text) = ns.instructions() {
        result["instructions"] = json!(text);
    }
    let body = jsonrpc::response(&req.id, &Outcome::Result(jsonrpc::raw(&result)));
    // The session exists only once everything above has succeeded.
    let session = if front.layout.load().policy.stateless {
        None
    } else {
        Some(
            front
                .sessions
                .open_in(
                    principal.clone(),
                    version,
                    caps,
                    &front.binding(&principal, ns.name.as_str()),
                    ns.tag,
                )
                .map_err(|_| Reject::Busy)?,
        )
    };
    if let Some(s) = &session {
        front
            .count_for_principal(&principal, &s.id, s.sealed())
            .await;
    }
    front.metrics.request(
        Era::Legacy,
        crate::metrics::method_label("initialize"),
        crate::metrics::Outcome::ok,
        crate::clock::tokio_now()
            .saturating_duration_since(started)
            .as_secs_f64(),
    );
    Ok(Answer::Json(Json {
        status: StatusCode::OK,
        body,
        session: session.map(|s| s.id.clone()),
    }))
}

fn notification(ctx: &Ctx, n: &Notification) {
    if n.method == "notifications/roots/list_changed" {
        ctx.ns.roots_changed(&ctx.caller);
        return;
    }
    if n.method != "notifications/cancelled" {
        return;
    }
    let active = ctx.active.as_ref();
    #[derive(serde::Deserialize)]
    struct Cancelled {
        #[serde(rename = "requestId")]
        request_id: Box<serde_json::value::RawValue>,
    }
    let Some(c) = n
        .params
        .as_deref()
        .and_then(|p| serde_json::from_str::<Cancelled>(p.get()).ok())
    else {
        return;
    };
    if let Some(a) = active {
        a.session().cancel(c.request_id.get());
    }
}

/// Requests of one batch served at once; the rest wait their turn.
const BATCH_CONCURRENCY: usize = 8;

/// A 2025-03-26 batch: its requests run at most `BATCH_CONCURRENCY` at a
/// time, and the reply is streamed as they finish (in order), so a large
/// batch never holds every answer in memory at once. Under `[limits]`
/// each request counts as if it had come alone (see `limits`): those past
/// the principal's rate are answered with the refusal and never run, and
/// no more run at once than the principal has slots free. Notifications
/// and responses take nothing from the limits: they run no call, and have
/// no reply to carry a refusal.
async fn batch(
    mut ctx: Ctx,
    limits: &Limits,
    items: Vec<Result<Message, jsonrpc::ParseError>>,
) -> Result<Response, Reject> {
    if items
        .iter()
        .any(|m| matches!(m, Ok(Message::Request(r)) if r.method == "initialize"))
    {
        return Err(Reject::InitializeInBatch);
    }
    let mut errors = Vec::new();
    let mut requests = Vec::new();
    // The same signal twice tells a backend nothing more.
    let mut roots_told = false;
    for item in items {
        match item {
            Err(e) => errors.push(jsonrpc::error_response(None, e.code(), &e.to_string())),
            Ok(Message::Request(r)) => requests.push(r),
            Ok(Message::Notification(n)) => {
                let roots = n.method == "notifications/roots/list_changed";
                if !(roots && roots_told) {
                    notification(&ctx, &n);
                }
                roots_told |= roots;
            }
            Ok(Message::Response(r)) => reply::answer(&ctx, &r.id, &r.outcome).await,
        }
    }
    // The first request came in with the POST; the others take their own.
    let more = requests.len().saturating_sub(1);
    let granted = limits.admit_more(&ctx.front, &ctx.principal, more).await;
    let refused = Reject::RateLimited(granted.wait);
    let let_in = requests.len().min(1 + granted.n);
    for r in requests.drain(let_in..) {
        errors.push(refused.batch_line(&r.id));
        ctx.front.metrics.request(
            Era::Legacy,
            crate::metrics::method_label(&r.method),
            crate::metrics::Outcome::rejected,
            0.0,
        );
    }
    if errors.is_empty() && requests.is_empty() {
        return Ok(StatusCode::ACCEPTED.into_response());
    }
    let width = ctx.admitted.widen(requests.len().min(BATCH_CONCURRENCY));
    let ctx = Arc::new(ctx);
    let answers = stream::iter(requests)
        .map(move |r| {
            let ctx = ctx.clone();
            async move { reply::outcome_line(&ctx, r).await }
        })
        .buffered(width)
        .filter_map(std::future::ready);
    let lines = stream::iter(errors).chain(answers);
    // `[`, then each line with a separating comma, then `]`.
    let body = stream::once(std::future::ready("[".to_owned()))
        .chain(
            lines
                .enumerate()
                .map(|(i, line)| if i == 0 { line } else { format!(",{line}") }),
        )
        .chain(stream::once(std::future::ready("]".to_owned())))
        .map(Ok::<_, std::convert::Infallible>);
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response())
}
