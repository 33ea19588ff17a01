//! The authorization code flow's endpoints (`oauth.flow =
//! "authorization_code"`, issue 50):
//!
//! - `GET /oauth/start/{id}`: a start id (single use, one principal, one
//!   backend, 10 minutes) sets the flow cookie and sends the browser to
//!   the authorization server;
//! - `GET /oauth/callback`: the state opened for the browser holding that
//!   cookie, the code exchanged, the principal's grant kept;
//! - `GET /oauth/connections`: the caller's own grants (bearer
//!   authenticated like `/mcp`), never a token; a start URL for each
//!   backend not connected;
//! - `DELETE /oauth/connections/{backend}`: the caller's grant revoked (when
//!   the server offers RFC 7009) and forgotten;
//! - `GET /.well-known/oauth-client/{backend}`: the Client ID Metadata
//!   Document the gateway is known by at that backend's authorization
//!   server (when it fetches such documents), public like any client's.
//!
//! The browser endpoints answer plain pages; their refusals are 400 pages
//! naming why (unknown, expired, used, another browser).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use super::Front;
use crate::cluster::RedisGrants;
use crate::upstream::Backend;
use crate::upstream::oauth::{CodeFlow, GrantStore, Refused};
use crate::vocab::Principal;

/// The flow cookie's name.
const COOKIE: &str = "sluice_oauth_flow";

fn page(status: StatusCode, text: &str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        format!("{text}\n"),
    )
        .into_response()
}

fn refused(front: &Front, backend: Option<&str>, why: &Refused) -> Response {
    front
        .metrics
        .oauth_flow(backend.unwrap_or("unknown"), why.label());
    page(StatusCode::BAD_REQUEST, &format!("Not connected: {why}."))
}

/// Cluster mode: where start ids and used states are shared.
fn store(front: &Front) -> Option<RedisGrants> {
    let cluster = front.cluster.as_ref()?;
    Some(RedisGrants::new(cluster.clone(), front.sessions.clone()))
}

fn flow_of(front: &Front, backend: &str) -> Option<(Arc<Backend>, Arc<CodeFlow>)> {
    let layout = front.layout.load();
    let b = layout
        .backends
        .iter()
        .find(|b| b.name.as_str() == backend)?;
    let flow = b.code_flow()?.clone();
    Some((b.clone(), flow))
}

pub(super) async fn start(State(front): State<Arc<Front>>, Path(id): Path<String>) -> Response {
    let store = store(&front);
    let store = store.as_ref().map(|s| s as &dyn GrantStore);
    let (principal, backend) = match CodeFlow::take_start(store, &id).await {
        Ok(found) => found,
        Err(why) => return refused(&front, None, &why),
    };
    let Some((_, flow)) = flow_of(&front, backend.as_str()) else {
        return refused(&front, None, &Refused::UnknownStart);
    };
    // The sessions' key ring when there is one: the callback then opens
    // the state on any replica, and after a restart.
    let ring = front.sessions.key_ring();
    let (cookie, url) = match flow.begin(&principal, &id, ring.as_deref()).await {
        Ok(begun) => begun,
        Err(why) => {
            tracing::warn!(backend = %backend, "oauth start failed: {why}");
            return refused(&front, Some(backend.as_str()), &why);
        }
    };
    let secure = if flow.secure() { "; Secure" } else { "" };
    let set = format!(
        "{COOKIE}={cookie}; HttpOnly; SameSite=Lax; Path={}; Max-Age=600{secure}",
        flow.callback_path()
    );
    (
        StatusCode::FOUND,
        [
            (header::LOCATION, url.to_string()),
            (header::SET_COOKIE, set),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
    )
        .into_response()
}

/// The callback's query: `code` and `state`, or `error`.
#[derive(Default)]
struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

impl Callback {
    fn parse(uri: &Uri) -> Callback {
        let mut q = Callback::default();
        let query = uri.query().unwrap_or_default();
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            let slot = match &*k {
                "code" => &mut q.code,
                "state" => &mut q.state,
                "error" => &mut q.error,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(v.into_owned());
            }
        }
        q
    }
}

pub(super) async fn callback(
    State(front): State<Arc<Front>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let q = Callback::parse(&uri);
    let cookie = cookie(&headers).unwrap_or_default();
    let Some(state) = q.state.as_deref() else {
        return refused(&front, None, &Refused::UnknownStart);
    };
    let (ring, store) = (front.sessions.key_ring(), store(&front));
    let store = store.as_ref().map(|s| s as &dyn GrantStore);
    let opened = match CodeFlow::open_state(ring.as_deref(), store, state, cookie.as_bytes()).await
    {
        Ok(s) => s,
        Err(why) => return refused(&front, None, &why),
    };
    let name = opened.backend.as_str();
    let Some((backend, flow)) = flow_of(&front, name) else {
        return refused(&front, Some(name), &Refused::UnknownStart);
    };
    if let Some(error) = q.error {
        return refused(&front, Some(name), &Refused::Denied(error));
    }
    let Some(code) = q.code.as_deref() else {
        return refused(&front, Some(name), &Refused::Denied("no code".into()));
    };
    if let Err(why) = flow.finish(&opened.principal, &opened.pkce, code).await {
        tracing::warn!(backend = %name, "oauth callback failed: {why}");
        return refused(&front, Some(name), &why);
    }
    backend.connected(&opened.principal, &opened.started);
    front.metrics.oauth_flow(name, "connected");
    front.metrics.oauth_grants(name, flow.grants().await);
    let mut answer = page(
        StatusCode::OK,
        &format!("Connected to {name}: you can close this tab and retry from your MCP client."),
    );
    if let Ok(clear) = format!(
        "{COOKIE}=; HttpOnly; SameSite=Lax; Path={}; Max-Age=0",
        flow.callback_path()
    )
    .parse()
    {
        answer.headers_mut().insert(header::SET_COOKIE, clear);
    }
    answer
}

pub(super) async fn client_document(
    State(front): State<Arc<Front>>,
    Path(backend): Path<String>,
) -> Response {
    let Some(document) = flow_of(&front, &backend).and_then(|(_, f)| f.metadata_document()) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        document.to_string(),
    )
        .into_response()
}

fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (k, v) = pair.trim().split_once('=')?;
            (k == COOKIE).then(|| v.to_owned())
        })
}

pub(super) async fn connections(State(front): State<Arc<Front>>, headers: HeaderMap) -> Response {
    let layout = front.layout.load_full();
    let principal = match caller(&layout, &headers).await {
        Ok(principal) => principal,
        Err(reject) => return reject,
    };
    let mut out = Vec::new();
    for b in &layout.backends {
        let Some(flow) = b.code_flow() else {
            continue;
        };
        out.push(match flow.connection(&principal).await {
            Some(c) => serde_json::json!({
                "backend": b.name.as_str(),
                "connected": true,
                "connected_at": c.connected,
                "expires": c.expires,
                "scope": c.scope,
                "refreshable": c.refreshable,
            }),
            None => serde_json::json!({
                "backend": b.name.as_str(),
                "connected": false,
                "start_url": flow.start_url(&principal).await.as_str(),
            }),
        });
    }
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        serde_json::json!({ "connections": out }).to_string(),
    )
        .into_response()
}

pub(super) async fn disconnect(
    State(front): State<Arc<Front>>,
    Path(backend): Path<String>,
    headers: HeaderMap,
) -> Response {
    let layout = front.layout.load_full();
    let principal = match caller(&layout, &headers).await {
        Ok(principal) => principal,
        Err(reject) => return reject,
    };
    let Some((_, flow)) = flow_of(&front, &backend) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let gone = flow.disconnect(&principal).await;
    front.metrics.oauth_grants(&backend, flow.grants().await);
    match gone {
        true => StatusCode::NO_CONTENT.into_response(),
        false => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Who asks, by the same bearer token as `/mcp` (a connection is the
/// caller's own, whichever namespace it uses).
async fn caller(layout: &super::Layout, headers: &HeaderMap) -> Result<Principal, Response> {
    match layout
        .policy
        .authenticate(headers, crate::config::DEFAULT_NAMESPACE)
        .await
    {
        Ok(identity) => Ok(identity.principal),
        Err(reject) => Err(reject.into_response()),
    }
}
