//! The 2025 revisions (2025-03-26, 2025-06-18, 2025-11-25): `initialize`
//! opens a client session that every later request names (unless
//! `sessions = "stateless"`); notifications and responses are accepted
//! with 202; 2025-03-26 takes batches. A response dropped unfinished does
//! not cancel its request (the client cancels with
//! `notifications/cancelled`), and a backend's questions for the client go
//! on the response stream as they come.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use serde_json::json;
use tokio::time::Instant;

use super::posted::Posted;
use crate::auth::Identity;
use crate::front::answer::{Answer, Json};
use crate::front::checks;
use crate::front::error::Reject;
use crate::front::headers::{HeaderLookup, RequestHeaders};
use crate::front::limits::Limits;
use crate::front::message::Message as Outbound;
use crate::front::reply::{self, Ctx, Questions, Rules};
use crate::front::{Front, Layout};
use crate::jsonrpc::{self, Body as RpcBody, Message, Notification, Outcome};
use crate::protocol::{ClientCaps, Era, LegacyVersion};
use crate::router::Namespace;
use crate::sessions::Active;
use crate::traces::SessionKind;
use crate::upstream::Caller;
use crate::vocab::Principal;

/// The 2025 revisions' rules for the reply machinery.
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

    /// A dropped connection is not a cancellation in the 2025 revisions.
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

/// A 2025 revision's POST (`version`: the one its header named, if any).
pub(super) async fn serve(
    posted: Posted<'_>,
    message: RpcBody,
    version: Option<LegacyVersion>,
) -> Result<Answer, Reject> {
    let Posted {
        front,
        layout,
        ns,
        headers,
        who: Identity {
            principal,
            token,
            scopes,
        },
        admitted,
        started,
    } = posted;
    if let RpcBody::Single(Message::Request(r)) = &message
        && r.method == "initialize"
    {
        ns.settle().await;
        let RpcBody::Single(Message::Request(r)) = message else {
            unreachable!("matched above")
        };
        return Box::pin(initialize(front, &ns, principal, r, started)).await;
    }
    let active = begin(front, layout, &ns, &headers, &principal).await?;
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
        caller: caller.with_token(token).with_scopes(scopes),
        admitted,
        trace: front.traces.parent(|name| headers.get_str(name)),
    };
    drop(headers);
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
                .or(version)
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

/// The client's session (None when stateless).
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
    let body = jsonrpc::response(&req.id, &Outcome::Result(jsonrpc::raw(&result).into()));
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
    // The clock itself: an `initialize` is answered within the poll it
    // began in, whose one reading (`clock::now`) would make it 0.
    let seconds = Instant::now()
        .saturating_duration_since(started)
        .as_secs_f64();
    let initialize = crate::metrics::method_label("initialize");
    let answered = crate::metrics::Outcome::ok;
    front
        .metrics
        .request(Era::Legacy, initialize, answered, seconds);
    front.metrics.server_operation(initialize, None, seconds);
    Ok(Answer::Json(Json {
        status: StatusCode::OK,
        body: body.into(),
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
            async move { reply::outcome_message(&ctx, r).await }
        })
        .buffered(width)
        .filter_map(std::future::ready);
    let answers = stream::iter(errors.into_iter().map(Outbound::line)).chain(answers);
    // `[`, then each answer with a separating comma, then `]`: a large
    // result among them written as it lies, never copied into a line.
    let items = answers.enumerate().flat_map(|(i, answer)| {
        let comma: &[u8] = if i == 0 { b"" } else { b"," };
        stream::iter(answer.written(comma, b""))
    });
    let body = stream::once(std::future::ready(Bytes::from_static(b"[")))
        .chain(items)
        .chain(stream::once(std::future::ready(Bytes::from_static(b"]"))))
        .map(Ok::<_, std::convert::Infallible>);
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response())
}
