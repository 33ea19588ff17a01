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
use crate::sessions::Active;

/// Messages a request may emit before its response; past this a slow
/// client loses progress rather than holding gateway memory.
const EVENT_QUEUE: usize = 64;
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Runs the request on its own task (a dropped connection is not a
/// cancellation in the legacy revisions) and streams what it produces.
pub(super) async fn serve(
    front: Arc<Front>,
    ns: Arc<Namespace>,
    req: Request,
    active: Option<Active>,
    started: Instant,
) -> Response {
    let (events_tx, mut events) = mpsc::channel(EVENT_QUEUE);
    let (done_tx, mut done) = oneshot::channel::<String>();
    let cancel = active
        .as_ref()
        .map_or_else(CancellationToken::new, |a| a.session().track(req.id.get()));
    tokio::spawn(async move {
        let line = run(
            &front,
            &ns,
            req,
            &events_tx,
            &cancel,
            active.as_ref(),
            started,
        )
        .await;
        if let Some(line) = line {
            let _ = done_tx.send(line);
        }
        // `active` drops here: the session is no longer busy.
    });
    tokio::select! {
        biased;
        line = &mut done => match line {
            Ok(line) if events.is_empty() => json_response(line, None),
            Ok(line) => sse(drain(events).chain(stream::iter([line]))),
            // Cancelled by the client: nothing more is sent for it.
            Err(_) => sse(stream::empty()),
        },
        first = events.recv() => {
            let head = stream::iter(first);
            let rest = stream::unfold((events, Some(done)), |(mut events, done)| async move {
                let mut done = done?;
                tokio::select! {
                    biased;
                    ev = events.recv() => match ev {
                        Some(ev) => Some((ev, (events, Some(done)))),
                        None => (&mut done).await.ok().map(|line| (line, (events, None))),
                    },
                    line = &mut done => line.ok().map(|l| (l, (events, None))),
                }
            });
            sse(head.chain(rest))
        }
    }
}

/// The outcome of one request as a response line (None if cancelled).
async fn run(
    front: &Front,
    ns: &Namespace,
    req: Request,
    events: &mpsc::Sender<String>,
    cancel: &CancellationToken,
    active: Option<&Active>,
    started: Instant,
) -> Option<String> {
    let method = method_label(&req.method);
    let outcome = tokio::select! {
        o = ns.handle(&req.method, req.params, events) => Some(o),
        _ = cancel.cancelled() => None,
    };
    if let Some(a) = active {
        a.session().untrack(req.id.get());
    }
    let label = match &outcome {
        Some(Outcome::Result(_)) => metrics::Outcome::ok,
        _ => metrics::Outcome::error,
    };
    front
        .metrics
        .request(Era::Legacy, method, label, started.elapsed().as_secs_f64());
    outcome.map(|o| jsonrpc::response(&req.id, &o))
}

/// A request inside a batch: its response line only (progress is dropped).
pub(super) async fn outcome_line(
    front: Arc<Front>,
    ns: Arc<Namespace>,
    req: Request,
    active: Option<&Active>,
) -> Option<String> {
    let (tx, _rx) = mpsc::channel(1);
    let cancel = active.map_or_else(CancellationToken::new, |a| a.session().track(req.id.get()));
    run(&front, &ns, req, &tx, &cancel, active, Instant::now()).await
}

fn drain(mut events: mpsc::Receiver<String>) -> impl Stream<Item = String> {
    let mut queued = Vec::new();
    while let Ok(ev) = events.try_recv() {
        queued.push(ev);
    }
    stream::iter(queued)
}

fn sse(lines: impl Stream<Item = String> + Send + 'static) -> Response {
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
