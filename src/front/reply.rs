//! Answering a request: `application/json` when the outcome comes first,
//! an SSE stream when progress or a server-to-client request comes first.
//! The same machinery for both eras: where they differ, it asks the
//! request's `Rules`, which each half of `era/` gives, and never names an
//! era itself.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::http::StatusCode;
use futures_util::stream::{self, StreamExt};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Front;
use super::answer::{Answer, Json, sse};
use super::message::Message;
use crate::cancel_flag::RequestCancel;
use crate::jsonrpc::{self, Outcome, RawId, Request};
use crate::metrics::{self, method_label};
use crate::protocol::{Era, LogLevel};
use crate::router::{Namespace, Seen};
use crate::sessions::{Active, Tracked};
use crate::traces;
use crate::upstream::events::{self, Events};
use crate::upstream::{Answered, Caller, Event as BackendEvent, EventSink};
use crate::vocab::Principal;

/// Messages a request may emit before its response; past this a slow
/// client loses progress rather than holding gateway memory.
const EVENT_QUEUE: usize = 64;

/// What the eras do differently while a request runs and is answered.
/// `era::legacy::Legacy` and `era::modern::Modern` say it; the machinery
/// here asks, so that it branches on no era.
pub(super) trait Rules: Sync {
    /// Which era, for the request metrics.
    fn era(&self) -> Era;
    /// What a request is traced as, in a client session or not.
    fn span_kind(&self, in_session: bool) -> traces::SessionKind;
    /// Whether a request whose response is dropped unfinished (the client
    /// went away) is cancelled; if not, it runs on to its end.
    fn cancels_on_drop(&self) -> bool;
    /// A request's outcome as its client gets it.
    fn decorate(&self, method: &str, outcome: Outcome) -> Outcome;
    /// The HTTP status of a response that is one JSON body.
    fn status(&self, outcome: &Outcome) -> StatusCode;
    /// What becomes of a backend's questions for the client.
    fn questions(&self) -> Questions;
}

/// What becomes of a backend's questions for the client (sampling,
/// elicitation, roots) asked while its request runs.
#[derive(Clone, Copy)]
pub(super) enum Questions {
    /// Sent on the response stream as they come.
    Streamed,
    /// Gathered, with everything already queued, and handed over with the
    /// running request to this, whose outcome ends the response; a
    /// question asked after the outcome is dropped.
    Parked(fn(&Reply, Running, Vec<BackendEvent>) -> Outcome),
}

/// Where a request runs: the gateway, its namespace, who asked, the
/// client session it keeps busy (None without one), and its era's rules.
pub(super) struct Ctx {
    pub(super) front: Arc<Front>,
    pub(super) ns: Arc<Namespace>,
    pub(super) principal: Principal,
    pub(super) active: Option<Active>,
    pub(super) rules: &'static dyn Rules,
    /// Who the backends serve: the key of per-session isolation (the
    /// session, else the principal), what it can be asked, and its
    /// request's verified OAuth token.
    pub(super) caller: Caller,
    /// Counts against the principal's `[limits]` while the request runs.
    pub(super) admitted: super::limits::Admitted,
    /// The trace context the HTTP request came with (None: tracing off).
    pub(super) trace: Option<traces::Parent>,
}

impl Ctx {
    /// The span of one of this context's requests (None: tracing off).
    fn span(&self, id: &RawId, call: &Call) -> Option<traces::RequestSpan> {
        let parent = self.trace.as_ref()?;
        let version = match (&self.active, self.rules.era()) {
            (Some(a), _) => Some(a.session().version.as_str()),
            (None, Era::Modern) => Some(crate::protocol::MODERN_FIRST),
            (None, Era::Legacy) => None,
        };
        let about = traces::About {
            method: &call.method,
            params: call.params.as_deref(),
            id,
            version,
            session: self.rules.span_kind(self.active.is_some()),
            namespace: self.ns.name.as_str(),
        };
        Some(parent.request(about))
    }

    /// The request's cancellation: the client's, its session's end, or
    /// the end of the shutdown grace (`Front::aborting`); in a session it
    /// holds the request's entry there, for as long as its work.
    fn track(&self, id: &RawId) -> Cancel {
        match &self.active {
            Some(a) => Cancel::Session(a.session().track(id.get())),
            None => Cancel::Gateway(self.front.aborting.child_token()),
        }
    }
}

/// What cancels a running request. Owned by its work; others hold a
/// `Canceller`.
enum Cancel {
    /// Its entry in its session: the client's `notifications/cancelled`,
    /// the session's end.
    Session(Tracked),
    /// Without a session: a child of `Front::aborting`.
    Gateway(CancellationToken),
}

impl Cancel {
    async fn cancelled(&self) {
        match self {
            Cancel::Session(t) => t.cancel().cancelled().await,
            Cancel::Gateway(t) => t.cancelled().await,
        }
    }

    fn canceller(&self) -> Canceller {
        match self {
            Cancel::Session(t) => Canceller::Session(t.cancel().clone()),
            Cancel::Gateway(t) => Canceller::Gateway(t.clone()),
        }
    }
}

/// Cancels a running request from outside its work.
enum Canceller {
    Session(RequestCancel),
    Gateway(CancellationToken),
}

impl Canceller {
    fn cancel(&self) {
        match self {
            Canceller::Session(c) => c.cancel(),
            Canceller::Gateway(t) => t.cancel(),
        }
    }
}

/// A request running: what it emits, and its outcome. It runs in the task
/// that answers it until its response turns into a stream (or it is
/// parked); from then on, and whenever it is dropped unfinished, on a task
/// of its own. So the common call, answered with one JSON body, costs no
/// task, no channel for its outcome and no hand-off between threads.
/// Whether a dropped connection cancels it is its era's rule
/// (`Rules::cancels_on_drop`): in the legacy revisions the request
/// outlives the response; in 2026-07-28 a closed stream cancels it, unless
/// it is parked for the client's retry.
pub(super) struct Running {
    events: Events,
    work: Work,
    /// Cancelled if this is dropped unfinished (`Rules::cancels_on_drop`).
    cancel_on_drop: Option<Canceller>,
}

/// Where a request's outcome comes from (None: it was cancelled).
enum Work {
    /// Polled by whoever awaits the outcome: no channel, no task.
    Inline(Pin<Box<dyn Future<Output = Option<Outcome>> + Send>>),
    /// Running on a task of its own, which sends the outcome here.
    Detached(oneshot::Receiver<Outcome>),
    /// The outcome was taken.
    Over,
}

impl Work {
    /// The outcome. Inline work is polled as the poll of `events`' receiver,
    /// so its end (its last sender of events dropped) wakes no one: the
    /// end is this future's `Ready`.
    async fn outcome(&mut self, events: &Events) -> Option<Outcome> {
        let outcome = match self {
            Work::Inline(work) => {
                std::future::poll_fn(|cx| events.ending_in(|| work.as_mut().poll(cx))).await
            }
            Work::Detached(done) => done.await.ok(),
            Work::Over => None,
        };
        *self = Work::Over;
        outcome
    }
}

impl Running {
    pub(super) fn start(ctx: Ctx, id: &RawId, call: Call, started: Instant) -> Running {
        let (events_tx, events) = events::channel(EVENT_QUEUE);
        let cancel = ctx.track(id);
        let cancel_on_drop = ctx.rules.cancels_on_drop().then(|| cancel.canceller());
        // Boxed: moving the request (to its own task) moves a pointer, not
        // the whole call chain's state. `ctx.active` and `cancel` (the
        // request's entry in its session) drop with it: the session is busy,
        // and the request reachable there, until the request ends, however
        // it ends.
        let span = ctx.span(id, &call);
        // Written into a box made first: `Box::pin` made the 2 KiB future
        // on the stack and copied it over (callgrind: 280 instructions a
        // call, none now).
        let work = Box::write(Box::new_uninit(), async move {
            run(&ctx, call, span, &events_tx, &cancel, started).await
        });
        Running {
            events,
            work: Work::Inline(Box::into_pin(work)),
            cancel_on_drop,
        }
    }

    /// What comes first: the outcome, or something emitted before it.
    async fn first(&mut self) -> First {
        let Running { events, work, .. } = self;
        tokio::select! {
            biased;
            outcome = work.outcome(events) => match outcome {
                Some(o) => First::Done(o),
                None => First::Cancelled,
            },
            Some(event) = events.recv() => First::Event(event),
        }
    }

    /// The rest of the request runs on its own task. (Dropped outside a
    /// runtime, which only happens once it is gone, there is none to run on.)
    fn detach(&mut self) {
        if matches!(self.work, Work::Inline(_))
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
            && let Work::Inline(work) = std::mem::replace(&mut self.work, Work::Over)
        {
            let (done_tx, done) = oneshot::channel();
            runtime.spawn(async move {
                if let Some(outcome) = work.await {
                    let _ = done_tx.send(outcome);
                }
            });
            self.work = Work::Detached(done);
        }
    }

    /// The request is over: nothing is left to cancel.
    fn finish(&mut self) {
        self.cancel_on_drop = None;
    }
}

impl Drop for Running {
    /// Dropped unfinished (the client went away): the request goes on to
    /// its end, or (`Rules::cancels_on_drop`) is cancelled right after and
    /// runs only to record that.
    fn drop(&mut self) {
        if let Work::Inline(work) = std::mem::replace(&mut self.work, Work::Over)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(work);
        }
        if let Some(cancel) = self.cancel_on_drop.take() {
            cancel.cancel();
        }
    }
}

/// Runs the request and answers it, as JSON or as a stream.
pub(super) async fn serve(ctx: Ctx, req: Request, started: Instant) -> Answer {
    let (id, call) = Call::of(req);
    let (front, rules, principal) = (ctx.front.clone(), ctx.rules, ctx.principal.clone());
    let running = Running::start(ctx, &id, call, started);
    let reply = Reply {
        front,
        id,
        rules,
        principal,
    };
    reply.respond(running).await
}

/// What a request asks for, its id apart: the id stays with its answer.
pub(super) struct Call {
    method: String,
    params: Option<Box<serde_json::value::RawValue>>,
    routed: jsonrpc::Routed,
}

impl Call {
    fn of(req: Request) -> (RawId, Call) {
        let Request {
            id,
            method,
            params,
            routed,
        } = req;
        (
            id,
            Call {
                method,
                params,
                routed,
            },
        )
    }
}

/// Who a response goes to, under which id.
pub(super) struct Reply {
    pub(super) front: Arc<Front>,
    /// The id of the HTTP request being answered (a retry has a new one).
    pub(super) id: RawId,
    pub(super) rules: &'static dyn Rules,
    pub(super) principal: Principal,
}

impl Reply {
    /// Answers with `application/json` when the outcome comes first, else
    /// with a stream of what the request emits, then its outcome.
    pub(super) async fn respond(self, mut running: Running) -> Answer {
        let first = running.first().await;
        let stream = match first {
            First::Done(outcome) if running.events.is_empty() => {
                running.finish();
                // A large result is framed, not copied (`jsonrpc::Framed`).
                return Answer::Json(Json {
                    status: self.rules.status(&outcome),
                    body: jsonrpc::response_or_framed(&self.id, outcome).into(),
                    session: None,
                });
            }
            First::Done(outcome) => {
                let mut flow = Flow::new(self, running);
                let lines = match flow.running.take() {
                    Some(running) => flow.last(running, Some(outcome)),
                    None => Vec::new(),
                };
                sse(stream::iter(lines))
            }
            // Cancelled by the client: nothing more is sent for it.
            First::Cancelled => sse(stream::empty()),
            First::Event(event) => {
                // The stream is polled only as fast as the client reads; the
                // request must not wait for that.
                running.detach();
                let mut flow = Flow::new(self, running);
                let head = flow.take(event);
                let rest = stream::unfold(flow, |mut flow| async move {
                    let lines = flow.next().await?;
                    Some((stream::iter(lines), flow))
                })
                .flatten();
                sse(stream::iter(head).chain(rest))
            }
        };
        Answer::Http(stream)
    }
}

/// What a running request has produced when its response must start.
enum First {
    Done(Outcome),
    Event(BackendEvent),
    Cancelled,
}

/// A response stream in progress. The running request rides in it:
/// dropping the stream (a closed connection) drops the request.
struct Flow {
    reply: Reply,
    running: Option<Running>,
    /// The backend's questions for this client, gathered to be parked
    /// (`Questions::Parked`).
    asked: Vec<BackendEvent>,
}

impl Flow {
    fn new(reply: Reply, running: Running) -> Flow {
        Flow {
            reply,
            running: Some(running),
            asked: Vec::new(),
        }
    }

    /// The messages an event becomes; questions to be parked wait.
    fn take(&mut self, event: BackendEvent) -> Vec<Message> {
        match (&event, self.reply.rules.questions()) {
            (BackendEvent::Request { .. }, Questions::Parked(park)) => {
                self.asked.push(event);
                // Everything already queued goes into the same answer.
                let mut lines = Vec::new();
                while let Some(more) = self.running.as_mut().and_then(|r| r.events.try_recv()) {
                    match more {
                        BackendEvent::Request { .. } => self.asked.push(more),
                        BackendEvent::Notification(line) => lines.push(Message::line(line)),
                    }
                }
                lines.push(self.park(park));
                lines
            }
            _ => vec![Message::line(event.line())],
        }
    }

    /// Hands the running request over with its questions; the response
    /// ends with what `park` makes of them.
    fn park(&mut self, park: fn(&Reply, Running, Vec<BackendEvent>) -> Outcome) -> Message {
        let running = self.running.take();
        let asked = std::mem::take(&mut self.asked);
        let outcome = match running {
            Some(running) => park(&self.reply, running, asked),
            None => unreachable!("parked once"),
        };
        Message::response(&self.reply.id, outcome)
    }

    /// The next messages of the stream; None once the outcome was sent.
    async fn next(&mut self) -> Option<Vec<Message>> {
        let step = {
            let running = self.running.as_mut()?;
            tokio::select! {
                biased;
                event = running.events.recv() => Step::Event(event),
                outcome = running.work.outcome(&running.events) => Step::Done(outcome),
            }
        };
        match step {
            Step::Event(Some(event)) => Some(self.take(event)),
            // The task is over: its outcome is all there is left.
            Step::Event(None) => {
                let mut running = self.running.take()?;
                let outcome = running.work.outcome(&running.events).await;
                Some(self.last(running, outcome))
            }
            Step::Done(outcome) => {
                let running = self.running.take()?;
                Some(self.last(running, outcome))
            }
        }
    }

    /// What was emitted before the outcome, then the outcome (if the
    /// request was not cancelled; a large result framed, as it lies).
    /// Questions asked too late to be parked are dropped.
    fn last(&self, mut running: Running, outcome: Option<Outcome>) -> Vec<Message> {
        running.finish();
        let streamed = matches!(self.reply.rules.questions(), Questions::Streamed);
        let mut lines: Vec<Message> = std::iter::from_fn(|| running.events.try_recv())
            .filter(|e| streamed || matches!(e, BackendEvent::Notification(_)))
            .map(|e| Message::line(e.line()))
            .collect();
        lines.extend(outcome.map(|o| Message::response(&self.reply.id, o)));
        lines
    }
}

enum Step {
    Event(Option<BackendEvent>),
    Done(Option<Outcome>),
}

/// The outcome of one request (None if cancelled).
async fn run(
    ctx: &Ctx,
    call: Call,
    span: Option<traces::RequestSpan>,
    events: &EventSink,
    cancel: &Cancel,
    started: Instant,
) -> Option<Outcome> {
    let method = method_label(&call.method);
    let subscription = subscription(&call);
    // The level a session's log messages are filtered at (the router
    // tells the backends).
    let log_level = (call.method == "logging/setLevel")
        .then(|| {
            call.params
                .as_deref()
                .and_then(|p| LogLevel::of_params(p.get()))
        })
        .flatten();
    // The series the router observed a forwarded call under.
    let mut seen = None;
    // Pinned where it is made: wrapped for tracing, it is not moved again.
    // Dropped at the block's end, giving `seen` back.
    let outcome = {
        let handled = std::pin::pin!(ctx.ns.handle(
            &ctx.principal,
            &ctx.caller,
            &call.method,
            call.params,
            call.routed,
            events,
            &mut seen,
        ));
        // One wait besides the work: a second on `aborting` would take its
        // lock, shared by every runtime, at each poll of every request.
        tokio::select! {
            biased;
            o = traces::RequestSpan::around(span.as_ref(), handled) => Some(o),
            _ = cancel.cancelled() => match ctx.front.aborting.is_cancelled() {
                // Past the shutdown grace: an answer, not a stream cut mid-way.
                true => Some(Outcome::Error(jsonrpc::error_object(
                    jsonrpc::INTERNAL_ERROR,
                    "sluice is shutting down; the request was not completed",
                    None,
                ))),
                false => None,
            },
        }
    };
    let outcome = outcome.map(|o| ctx.rules.decorate(&call.method, o));
    if let Some(a) = &ctx.active {
        // The session's GET stream delivers updates of what it subscribed to.
        match (subscription, &outcome) {
            (Some((true, uri)), Some(Outcome::Result(_))) if !a.session().subscribe(&uri) => {
                tracing::debug!("subscription limit reached; updates not delivered");
            }
            (Some((false, uri)), Some(Outcome::Result(_))) => a.session().unsubscribe(&uri),
            _ => {}
        }
        if let Some(level) = log_level {
            a.session().set_log_level(level);
        }
    }
    if let Some(span) = span {
        span.end(outcome.as_ref());
    }
    let label = match &outcome {
        Some(Outcome::Result(_)) => metrics::Outcome::ok,
        _ => metrics::Outcome::error,
    };
    let took = crate::clock::tokio_now().saturating_duration_since(started);
    let seconds = took.as_secs_f64();
    let m = &ctx.front.metrics;
    m.request(ctx.rules.era(), method, label, seconds);
    Seen::served(seen.as_ref(), m, method, outcome.as_ref(), seconds);
    outcome
}

/// `resources/subscribe` (true) or `unsubscribe` (false), and its URI.
fn subscription(call: &Call) -> Option<(bool, String)> {
    let subscribe = match call.method.as_str() {
        "resources/subscribe" => true,
        "resources/unsubscribe" => false,
        _ => return None,
    };
    #[derive(serde::Deserialize)]
    struct Params {
        uri: String,
    }
    let p: Params = serde_json::from_str(call.params.as_deref()?.get()).ok()?;
    Some((subscribe, p.uri))
}

/// A request inside a batch: its response only (progress is dropped), a
/// large result framed, as it lies.
pub(super) async fn outcome_message(ctx: &Ctx, req: Request) -> Option<Message> {
    let (tx, _rx) = events::channel(1);
    let (id, call) = Call::of(req);
    let cancel = ctx.track(&id);
    let span = ctx.span(&id, &call);
    let outcome = run(ctx, call, span, &tx, &cancel, Instant::now()).await?;
    Some(Message::response(&id, outcome))
}

/// A client's answer to a request a backend sent it; in cluster mode one
/// this replica does not hold goes to the replica that does.
pub(super) async fn answer(ctx: &Ctx, id: &serde_json::value::RawValue, outcome: &Outcome) {
    let caller = &ctx.caller;
    match ctx.ns.answer(caller, id, outcome) {
        Answered::Delivered => {}
        Answered::NotYours => ctx.front.metrics.answer_dropped("not_yours"),
        Answered::Unknown => match serde_json::from_str::<String>(id.get()) {
            Ok(id) if ctx.front.cluster.is_some() => {
                ctx.front.answer_elsewhere(caller, &id, outcome).await;
            }
            _ => {
                tracing::debug!("client answered a request the gateway is not waiting for");
                ctx.front.metrics.answer_dropped("unknown");
            }
        },
    }
}

#[cfg(test)]
mod tests;
