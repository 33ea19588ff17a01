//! Operator endpoints: liveness, readiness, metrics.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::Front;
use super::error::OpsRefusal;
use crate::metrics::Format;

/// OAuth 2.0 Protected Resource Metadata (RFC 9728) of the endpoint whose
/// path follows the well-known prefix; 404 without `[auth] oauth`.
pub(super) async fn resource_metadata(
    State(front): State<Arc<Front>>,
    uri: axum::http::Uri,
) -> Response {
    let suffix = uri
        .path()
        .strip_prefix(crate::auth::WELL_KNOWN)
        .unwrap_or_default();
    let layout = front.layout.load();
    let namespaces = layout.router.namespaces();
    let names: Vec<&str> = namespaces.iter().map(|ns| ns.name.as_str()).collect();
    match layout
        .policy
        .auth
        .as_ref()
        .and_then(|a| a.metadata(suffix, &names))
    {
        Some(doc) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "max-age=300"),
            ],
            doc,
        )
            .into_response(),
        None => OpsRefusal::NoMetadata.into_response(),
    }
}

pub(super) async fn healthz() -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        r#"{"status":"ok"}"#,
    )
        .into_response()
}

/// 200 when every backend is healthy, else 503 naming the unhealthy ones.
pub(super) async fn readyz(State(front): State<Arc<Front>>) -> Response {
    let mut unhealthy: Vec<_> = front
        .layout
        .load()
        .backends
        .iter()
        .filter_map(|b| {
            b.problem()
                .map(|p| json!({ "backend": b.name.as_str(), "problem": p }))
        })
        .collect();
    // Cluster mode: sessions are still served without Redis, but what it
    // shares (revocations, caps, the bus) is not: not ready.
    if front.cluster.as_ref().is_some_and(|c| !c.is_up()) {
        unhealthy.push(json!({ "component": "redis", "problem": "unreachable" }));
    }
    if !unhealthy.is_empty() {
        return OpsRefusal::NotReady(unhealthy).into_response();
    }
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        json!({ "status": "ready" }).to_string(),
    )
        .into_response()
}

pub(super) async fn metrics(State(front): State<Arc<Front>>, headers: HeaderMap) -> Response {
    if let Err(refused) = front.operator_access(&headers) {
        return refused.into_response();
    }
    // The bounded maps are counted when asked, not on every change.
    let layout = front.layout.load_full();
    for b in &layout.backends {
        b.census();
        // Grants also go by refresh failures, refusals and eviction (and,
        // in cluster mode, by other replicas: Redis counts them).
        if let Some(flow) = b.code_flow() {
            front
                .metrics
                .oauth_grants(b.name.as_str(), flow.grants().await);
        }
    }
    layout.router.census(&front.metrics);
    front
        .metrics
        .entries("parked_calls", "gateway", front.bridge.len());
    front
        .metrics
        .entries("revoked_ids", "gateway", front.sessions.revoked());
    // OpenMetrics for a scraper that asks for it, else the classic text.
    let accept: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let format = Format::negotiate(&accept.join(","));
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, format.content_type()),
            (header::VARY, "Accept"),
        ],
        front.metrics.render_as(format),
    )
        .into_response()
}
