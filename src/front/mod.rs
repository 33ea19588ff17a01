//! Front: the HTTP edge. Parses each request once, checks headers, Origin,
//! auth and body size, picks the era, and writes statuses and SSE. Statuses
//! for refusals and errors come only from `error`.

mod answer;
mod authority;
mod bridge;
mod checks;
mod conn;
mod consent;
mod era;
mod error;
mod event_pieces;
mod follow;
mod headers;
mod limits;
mod listen;
mod message;
mod oauth;
mod ops;
mod places;
mod post;
mod relay;
mod replicas;
mod reply;
pub mod server;
mod sse;
mod sse_body;
mod status;
mod stream;
mod tls;

use std::borrow::Cow;
use std::future::{Future, ready};
use std::sync::Arc;

use axum::Router as HttpRouter;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, Method, Request};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post as post_route};
use futures_util::future::Either;
use tokio_util::sync::CancellationToken;

pub use checks::Policy;
/// For `fuzzing`: what a connection makes of a client's bytes.
pub(crate) use conn::{hyper_builder, read_whole as read_requests};
pub(crate) use era::modern::client_headers;
pub(crate) use limits::Limits;
pub(crate) use message::Message;
pub(crate) use relay::{MAX_ANSWER, Sink, relay};
pub(crate) use tls::Certs;

/// For `fuzzing`: the Host/Origin parsers on one value.
pub fn check_authority(value: &str) {
    if let Some(a) = authority::parse_authority(value) {
        let _ = a.host.is_loopback();
    }
    if let Some(a) = authority::parse_origin(value) {
        let _ = a.host.is_loopback();
    }
}

/// For `fuzzing`: the 2026-07-28 checks of a request's headers and body.
pub fn check_modern(headers: &axum::http::HeaderMap, body: &[u8]) {
    if let Ok(crate::jsonrpc::Message::Request(r)) = crate::jsonrpc::Message::parse(body) {
        let _ = era::modern::check_request(headers, &r);
    }
}
pub use error::Reject;

use crate::config::Secret;
use crate::metrics::{self, Metrics};
use crate::router::Router;
use crate::sessions::Sessions;
use crate::upstream::Backend;
use answer::Answer;
use headers::RequestHeaders;

/// What a config reload replaces whole (`app::reload`). A request uses
/// the one it began with, start to end.
pub struct Layout {
    pub policy: Policy,
    pub router: Router,
    pub backends: Vec<Arc<Backend>>,
    /// `[limits]`: requests in flight and per second, per principal.
    pub(crate) limits: Arc<Limits>,
}

/// Everything the front needs, shared by all connections.
pub struct Front {
    pub layout: arc_swap::ArcSwap<Layout>,
    pub sessions: Arc<Sessions>,
    pub metrics: Arc<Metrics>,
    pub metrics_token: Option<Secret>,
    /// Cancelled when the gateway begins to shut down.
    pub(crate) stopping: crate::cancel_flag::CancelFlag,
    /// Cancelled when the shutdown grace has run out (the sessions are
    /// ended with it): requests still in flight are answered with an error
    /// instead of a cut stream. A stateless request's cancellation is a
    /// child of it.
    pub aborting: CancellationToken,
    /// How long a request body may take to arrive.
    pub body_read_timeout: std::time::Duration,
    /// Items per 2025-03-26 batch.
    pub max_batch_items: usize,
    /// Session ids are sealed (and so bound to principal and namespace).
    pub sealed_ids: bool,
    /// Cluster mode: the replicas' shared state (see `replicas`).
    pub cluster: Option<std::sync::Arc<crate::cluster::Cluster>>,
    /// `max_sessions_per_principal`, held across replicas in cluster mode.
    pub principal_cap: usize,
    /// The status page's last hour of samples.
    pub(crate) status: status::History,
    /// Sent after each reload swaps the layout (see `follow`).
    pub reloads: tokio::sync::watch::Sender<()>,
    /// 2026-07-28 calls waiting for the client's answers (see `bridge`).
    pub(crate) bridge: bridge::Bridge,
    /// How often a GET stream writes a keep-alive comment (and so refreshes
    /// its session): 15 s, or a third of the idle TTL if that is shorter, so
    /// a writable stream always keeps its session alive.
    pub stream_keep_alive: std::time::Duration,
    /// `[tracing]`: spans per request and backend call (or nothing).
    pub(crate) traces: crate::traces::Traces,
    /// `[server] tls`: the listener's certificate (None: plain TCP).
    pub(crate) tls: Option<Arc<Certs>>,
    /// The HTTP+SSE transport's open streams (see `sse`).
    pub(crate) sse: sse::Carriers,
}

/// Every endpoint. `POST /mcp`, nearly all the traffic, goes straight to
/// its handler; the rest through axum's router.
pub fn routes(front: Arc<Front>, metrics_path: &str) -> Edge {
    Edge {
        rest: router(front.clone(), metrics_path),
        front,
    }
}

/// The HTTP service of each client connection.
#[derive(Clone)]
pub struct Edge {
    front: Arc<Front>,
    rest: HttpRouter,
}

impl Edge {
    /// `POST /mcp` (or `/ns/{namespace}/mcp`): the same guard as every
    /// route, then the namespace's handler, under `layout` (the one current
    /// when the request began). Not an `async fn`: each layer of them holds its
    /// arguments beside the next layer's future, and a future is copied
    /// whole (all 2 KiB of this chain) when the layer above first polls it.
    fn post_mcp<'a>(
        front: &'a Arc<Front>,
        layout: &'a Arc<Layout>,
        headers: RequestHeaders,
        target: Option<&axum::http::uri::Authority>,
        version: axum::http::Version,
        namespace: Cow<'static, str>,
        body: Body,
    ) -> impl Future<Output = Answer> + use<'a> {
        match layout.policy.guard(&headers, target, version) {
            Ok(()) => Either::Left(post::answer(front, layout, namespace, headers, body)),
            Err(reject) => Either::Right(ready(front.refuse(&Method::POST, reject).into())),
        }
    }

    /// A request hyper read, its body as the connection hands it over
    /// (`conn::busy` watches it arrive).
    fn serve(
        &self,
        req: Request<Body>,
    ) -> futures_util::future::BoxFuture<'static, Result<Response, std::convert::Infallible>> {
        if req.method() == Method::POST && req.uri().path() == "/mcp" {
            let front = self.front.clone();
            let (parts, body) = req.into_parts();
            let headers = RequestHeaders::Hyper(parts.headers);
            let default = Cow::Borrowed(crate::config::DEFAULT_NAMESPACE);
            Box::pin(async move {
                let layout = front.layout.load_full();
                let target = parts.uri.authority();
                let version = parts.version;
                let answer =
                    Edge::post_mcp(&front, &layout, headers, target, version, default, body);
                Ok(answer.await.into_response())
            })
        } else {
            Box::pin(tower::ServiceExt::oneshot(self.rest.clone(), req))
        }
    }
}

impl hyper::service::Service<Request<hyper::body::Incoming>> for Edge {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures_util::future::BoxFuture<'static, Result<Response, Self::Error>>;

    fn call(&self, req: Request<hyper::body::Incoming>) -> Self::Future {
        self.serve(req.map(Body::new))
    }
}

/// Every endpoint through axum's router, for callers in the process
/// (`stdio`) as for connections.
pub(crate) fn router(front: Arc<Front>, metrics_path: &str) -> HttpRouter {
    HttpRouter::new()
        .route("/mcp", any(default_namespace))
        .route("/ns/{namespace}/mcp", any(named_namespace))
        .route("/sse", get(sse::open_stream))
        .route("/ns/{namespace}/sse", get(sse::open_stream))
        .route("/messages", post_route(sse::take_message))
        .route("/ns/{namespace}/messages", post_route(sse::take_message))
        .route(crate::auth::WELL_KNOWN, get(ops::resource_metadata))
        .route(
            &format!("{}/{{*endpoint}}", crate::auth::WELL_KNOWN),
            get(ops::resource_metadata),
        )
        .route(
            "/.well-known/oauth-client/{backend}",
            get(oauth::client_document),
        )
        .route("/oauth/start/{id}", get(oauth::start))
        .route("/oauth/callback", get(oauth::callback))
        .route("/oauth/connections", get(oauth::connections))
        .route(
            "/oauth/connections/{backend}",
            axum::routing::delete(oauth::disconnect),
        )
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/status", get(status::page))
        .route(metrics_path, get(ops::metrics))
        .layer(axum::middleware::from_fn_with_state(front.clone(), guard))
        .with_state(front)
}

/// Every endpoint, operator ones included, passes the rebinding guard: a
/// page on another origin must not read backend names or metrics either.
async fn guard(
    State(front): State<Arc<Front>>,
    req: Request<Body>,
    next: axum::middleware::Next,
) -> Response {
    let guarded =
        front
            .layout
            .load()
            .policy
            .guard(req.headers(), req.uri().authority(), req.version());
    match guarded {
        Ok(()) => next.run(req).await,
        Err(reject) => front.refuse(req.method(), reject),
    }
}

async fn default_namespace(State(front): State<Arc<Front>>, req: Request<Body>) -> Answer {
    mcp(front, Cow::Borrowed(crate::config::DEFAULT_NAMESPACE), req).await
}

async fn named_namespace(
    State(front): State<Arc<Front>>,
    Path(namespace): Path<String>,
    req: Request<Body>,
) -> Answer {
    mcp(front, Cow::Owned(namespace), req).await
}

async fn mcp(front: Arc<Front>, namespace: Cow<'static, str>, req: Request<Body>) -> Answer {
    let method = req.method().clone();
    let result = match method {
        Method::POST => {
            let (parts, body) = req.into_parts();
            let headers = RequestHeaders::Hyper(parts.headers);
            let layout = front.layout.load_full();
            return post::answer(&front, &layout, namespace, headers, body).await;
        }
        Method::GET => Box::pin(stream::open(&front, &namespace, req.headers()))
            .await
            .map(Answer::from),
        Method::DELETE => Box::pin(delete(&front, &namespace, req.headers()))
            .await
            .map(Answer::from),
        _ => Err(Reject::MethodNotAllowed),
    };
    result.unwrap_or_else(|reject| front.refuse(&method, reject).into())
}

/// Samples what the status page shows until `stop` (one task).
pub(crate) async fn sample_status(front: Arc<Front>, stop: CancellationToken) {
    status::sample_until(front, stop).await;
}

impl Front {
    /// `/metrics` and `/status` need `[metrics] token_env`'s token when set.
    fn operator_access(&self, headers: &axum::http::HeaderMap) -> Result<(), Reject> {
        let Some(token) = &self.metrics_token else {
            return Ok(());
        };
        let presented = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(crate::auth::bearer);
        match presented {
            Some(p) if token.matches(p) => Ok(()),
            _ => Err(Reject::Unauthorized(HeaderValue::from_static("Bearer"))),
        }
    }

    /// The session a request names (`id` as the client presented it): from
    /// memory, or rebuilt from its sealed id (in cluster mode after Redis's
    /// say).
    async fn begin(
        self: &std::sync::Arc<Self>,
        id: &str,
        principal: &crate::vocab::Principal,
        ns: &crate::router::Namespace,
    ) -> Result<crate::sessions::Active, Reject> {
        let bound = self.binding(principal, ns.name.as_str());
        let tag = ns.tag;
        if let Ok(active) = self.sessions.begin_in(id, principal, &bound, tag) {
            return Ok(active);
        }
        // Boxed: Redis's future would make every request's large.
        let presented = crate::vocab::SessionId::from_header(id);
        if !Box::pin(self.resume_elsewhere(&presented, principal, &bound, tag)).await {
            return Err(Reject::SessionNotFound);
        }
        self.sessions
            .begin_in(id, principal, &bound, tag)
            .map_err(|_| Reject::SessionNotFound)
    }

    /// What a sealed session id is bound to: the principal and the
    /// namespace (empty with table ids, which need no binding).
    fn binding(&self, principal: &crate::vocab::Principal, namespace: &str) -> Vec<u8> {
        if self.sealed_ids {
            self.layout.load().policy.binding(principal, namespace)
        } else {
            Vec::new()
        }
    }

    /// A refusal's response, counted.
    fn refuse(&self, method: &Method, reject: Reject) -> Response {
        let label = match *method {
            Method::GET => "GET",
            Method::DELETE => "DELETE",
            _ => "other",
        };
        self.metrics.request(
            reject.era(),
            metrics::method_label(label),
            metrics::Outcome::rejected,
            0.0,
        );
        reject.into_response()
    }
}

async fn delete(
    front: &Front,
    namespace: &str,
    headers: &axum::http::HeaderMap,
) -> Result<Response, Reject> {
    let layout = front.layout.load_full();
    let principal = layout
        .policy
        .authenticate(headers, namespace)
        .await?
        .principal;
    if layout.policy.stateless {
        return Err(Reject::MethodNotAllowed);
    }
    // `[limits]`: a DELETE is a request in flight, as a POST is.
    let _admitted = layout.limits.admit(front, &principal).await?;
    let id = checks::session_id(headers).ok_or(Reject::MissingSession)?;
    let revoked = front
        .sessions
        .delete(&id, &principal, &front.binding(&principal, namespace))
        .map_err(|_| Reject::SessionNotFound)?;
    front.ended_everywhere(&id, revoked).await;
    Ok(axum::http::StatusCode::OK.into_response())
}
