//! Answering a request: `application/json` when the outcome comes first,
//! an SSE stream when progress or a server-to-client request comes first.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Front;
use super::post::json_response;
use crate::jsonrpc::{self, Outcome, Request};
use crate::metrics::{self, method_label};
use crate::protocol::Era;
use crate::router::Namespace;
use crate::sessions::{Active, Principal};
use crate::upstream::Caller;

/// Messages a request may emit before its response; past this a slow
/// client loses progress rather than holding gateway memory.
const EVENT_QUEUE: usize = 64;
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Where a request runs: the gateway, its namespace, who asked, and the
/// client session it keeps busy (None when stateless).
pub(super) struct Ctx {
    pub(super) front: Arc<Front>,
    pub(super) ns: Arc<Namespace>,
    pub(super) principal: Principal,
    pub(super) active: Option<Active>,
    pub(super) era: Era,
}

impl Ctx {
    /// The key of per-session isolation: the session, else the principal.
    fn caller(&self) -> Caller {
        match (&self.active, self.era) {
            (Some(a), _) => Caller::session(a.session().id.clone(), a.session().ended().clone()),
            (None, Era::Legacy) => Caller::principal(self.principal.clone()),
            (None, Era::Modern) => Caller::modern(self.principal.clone()),
        }
    }

    fn track(&self, req: &Request) -> CancellationToken {
        self.active
            .as_ref()
            .map_or_else(CancellationToken::new, |a| a.session().track(req.id.get()))
    }
}

/// Runs the request on its own task (a dropped connection is not a
/// cancellation in the legacy revisions) and streams what it produces.
pub(super) async fn serve(ctx: Ctx, req: Request, started: Instant) -> Response {
    let (events_tx, mut events) = mpsc::channel(EVENT_QUEUE);
    let (done_tx, mut done) = oneshot::channel::<String>();
    let cancel = ctx.track(&req);
    let era = ctx.era;
    // 2026-07-28: closing a request's stream cancels it. Legacy: it does not.
    let on_disconnect = (ctx.era == Era::Modern).then(|| cancel.clone().drop_guard());
    tokio::spawn(async move {
        if let Some(line) = run(&ctx, req, &events_tx, &cancel, started).await {
            let _ = done_tx.send(line);
        }
        // `ctx.active` drops here: the session is no longer busy.
    });
    tokio::select! {
        biased;
        line = &mut done => {
            on_disconnect.map(|g| g.disarm());
            match line {
                Ok(line) if events.is_empty() => {
                    let status = match era {
                        Era::Modern => super::modern::status_of(&line),
                        Era::Legacy => axum::http::StatusCode::OK,
                    };
                    let mut response = json_response(line, None);
                    *response.status_mut() = status;
                    response
                }
                Ok(line) => sse(drain(events).chain(stream::iter([line]))),
                // Cancelled by the client: nothing more is sent for it.
                Err(_) => sse(stream::empty()),
            }
        },
        Some(first) = events.recv() => {
            let head = stream::iter([first]);
            // The guard rides in the stream: dropping the body cancels.
            let rest = stream::unfold((events, Some(done), on_disconnect), |(mut events, done, guard)| async move {
                let mut done = done?;
                let finish = |guard: Option<tokio_util::sync::DropGuard>| guard.map(|g| g.disarm());
                tokio::select! {
                    biased;
                    ev = events.recv() => match ev {
                        Some(ev) => Some((ev, (events, Some(done), guard))),
                        None => {
                            let line = (&mut done).await.ok();
                            finish(guard);
                            line.map(|line| (line, (events, None, None)))
                        }
                    },
                    line = &mut done => {
                        finish(guard);
                        line.ok().map(|l| (l, (events, None, None)))
                    }
                }
            });
            sse(head.chain(rest))
        }
    }
}

/// The outcome of one request as a response line (None if cancelled).
async fn run(
    ctx: &Ctx,
    req: Request,
    events: &mpsc::Sender<String>,
    cancel: &CancellationToken,
    started: Instant,
) -> Option<String> {
    let method = method_label(&req.method);
    let caller = ctx.caller();
    let subscription = subscription(&req);
    let outcome = tokio::select! {
        o = ctx.ns.handle(&caller, &req.method, req.params, events) => Some(o),
        _ = cancel.cancelled() => None,
        // Past the shutdown grace: an answer, not a stream cut mid-way.
        _ = ctx.front.aborting.cancelled() => Some(Outcome::Error(jsonrpc::error_object(
            jsonrpc::INTERNAL_ERROR,
            "sluice is shutting down; the request was not completed",
            None,
        ))),
    };
    let outcome = match ctx.era {
        Era::Modern => outcome.map(|o| super::modern::decorate(&req.method, o)),
        Era::Legacy => outcome,
    };
    if let Some(a) = &ctx.active {
        a.session().untrack(req.id.get());
        // The session's GET stream delivers updates of what it subscribed to.
        match (subscription, &outcome) {
            (Some((true, uri)), Some(Outcome::Result(_))) if !a.session().subscribe(&uri) => {
                tracing::debug!("subscription limit reached; updates not delivered");
            }
            (Some((false, uri)), Some(Outcome::Result(_))) => a.session().unsubscribe(&uri),
            _ => {}
        }
    }
    let label = match &outcome {
        Some(Outcome::Result(_)) => metrics::Outcome::ok,
        _ => metrics::Outcome::error,
    };
    ctx.front
        .metrics
        .request(ctx.era, method, label, started.elapsed().as_secs_f64());
    outcome.map(|o| jsonrpc::response(&req.id, &o))
}

/// `resources/subscribe` (true) or `unsubscribe` (false), and its URI.
fn subscription(req: &Request) -> Option<(bool, String)> {
    let subscribe = match req.method.as_str() {
        "resources/subscribe" => true,
        "resources/unsubscribe" => false,
        _ => return None,
    };
    #[derive(serde::Deserialize)]
    struct Params {
        uri: String,
    }
    let p: Params = serde_json::from_str(req.params.as_deref()?.get()).ok()?;
    Some((subscribe, p.uri))
}

/// A request inside a batch: its response line only (progress is dropped).
pub(super) async fn outcome_line(ctx: &Ctx, req: Request) -> Option<String> {
    let (tx, _rx) = mpsc::channel(1);
    let cancel = ctx.track(&req);
    run(ctx, req, &tx, &cancel, Instant::now()).await
}

/// A client's answer to a request a backend sent it.
pub(super) fn answer(ctx: &Ctx, id: &serde_json::value::RawValue, outcome: &Outcome) {
    if !ctx.ns.answer(&ctx.caller(), id, outcome) {
        tracing::debug!("client answered a request the gateway is not waiting for");
    }
}

fn drain(mut events: mpsc::Receiver<String>) -> impl Stream<Item = String> {
    let mut queued = Vec::new();
    while let Ok(ev) = events.try_recv() {
        queued.push(ev);
    }
    stream::iter(queued)
}

/// An SSE response of JSON-RPC lines, with keep-alives, unbuffered by proxies.
pub(super) fn sse(lines: impl Stream<Item = String> + Send + 'static) -> Response {
    let events =
        lines.map(|line| Ok::<_, Infallible>(Event::default().event("message").data(line)));
    let mut response = Sse::new(events)
        .keep_alive(axum::response::sse::KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    response.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    response
}
