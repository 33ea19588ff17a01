//! The 2026-07-28 front: a request carrying
//! `params._meta["io.modelcontextprotocol/protocolVersion"]` stands alone.
//! No session, nothing kept: it is checked (required `_meta`, headers that
//! must mirror the body, known method), answered, and forgotten. Its
//! results say what they are and who answered (`decorate`); the
//! revision's request errors are 400 whoever raised them; a closed stream
//! cancels its request; a backend's questions end the response with
//! `input_required`, the request parked in the `bridge` until the client's
//! retry answers them.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use indexmap::IndexMap;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::posted::Posted;
use crate::auth::Identity;
use crate::front::answer::json_response;
use crate::front::bridge::{self, Resumed};
use crate::front::consent;
use crate::front::error::{self, ModernError, Reject};
use crate::front::headers::HeaderLookup;
use crate::front::reply::{self, Ctx, Questions, Reply, Rules, Running};
use crate::front::{Front, listen};
use crate::jsonrpc::{self, Outcome, Payload, Request};
use crate::protocol::{self, ClientCaps, Era};
use crate::router::Namespace;
use crate::traces::SessionKind;
use crate::upstream::{Caller, Event};
use crate::vocab::Principal;

type Fields = IndexMap<String, Box<RawValue>>;

/// Requests the 2026-07-28 revision still has, served through the router.
const ROUTED: [&str; 11] = [
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
];

/// The `_meta` keys every modern request must carry.
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// 2026-07-28's rules for the reply machinery.
struct Modern;

impl Rules for Modern {
    fn era(&self) -> Era {
        Era::Modern
    }

    fn span_kind(&self, _in_session: bool) -> SessionKind {
        SessionKind::Modern
    }

    /// Closing a request's stream is its cancellation.
    fn cancels_on_drop(&self) -> bool {
        true
    }

    fn decorate(&self, method: &str, outcome: Outcome) -> Outcome {
        decorate(method, outcome)
    }

    fn status(&self, outcome: &Outcome) -> StatusCode {
        match outcome {
            Outcome::Result(_) => StatusCode::OK,
            Outcome::Error(e) => error::modern_status(jsonrpc::error_code(e)),
        }
    }

    /// A 2026-07-28 client cannot be asked mid-request.
    fn questions(&self) -> Questions {
        Questions::Parked(park)
    }
}

/// The running request waits in the bridge for the client's retry; its
/// response ends with the questions, as `input_required`.
fn park(reply: &Reply, running: Running, asked: Vec<Event>) -> Outcome {
    let parked = reply
        .front
        .bridge
        .park(reply.principal.clone(), running, asked);
    decorate("tools/call", parked)
}

/// A 2026-07-28 request, answered alone.
pub(super) async fn serve(posted: Posted<'_>, req: Request) -> Result<Response, Reject> {
    let (front, ns, started) = (posted.front, posted.ns, posted.started);
    let Identity {
        principal,
        token,
        scopes,
    } = posted.who;
    let headers = &posted.headers.map();
    let refuse = |id: &jsonrpc::RawId, error| Reject::Modern {
        id: id.clone(),
        error,
    };
    let fields = check_request(headers, &req).map_err(|e| refuse(&req.id, e))?;
    if req.method == "tools/call" {
        check_param_headers(&ns, &principal, headers, &fields)
            .await
            .map_err(|why| refuse(&req.id, ModernError::HeaderMismatch(why)))?;
    }
    // A retry answering the gateway's own request to connect a backend.
    let (req, fields) = match consent::Retry::of(&fields) {
        Some(retry) if ROUTED.contains(&req.method.as_str()) => {
            let (id, method) = (req.id.clone(), req.method.clone());
            // Boxed: the rare wait must not grow every request's future.
            match Box::pin(retry.resume(front, &principal, req, fields)).await {
                Ok(req) => {
                    let fields = check_request(headers, &req).map_err(|e| refuse(&req.id, e))?;
                    (req, fields)
                }
                Err(ended) => {
                    let ended = decorate(&method, ended);
                    let body = jsonrpc::response_or_framed(&id, ended);
                    return Ok(json_response(body, None));
                }
            }
        }
        _ => (req, fields),
    };

    match req.method.as_str() {
        "server/discover" => {
            ns.settle().await;
            let result = discover(&ns);
            record(front, "server/discover", started);
            Ok(json_response(
                jsonrpc::response(&req.id, &Outcome::Result(jsonrpc::raw(&result).into())),
                None,
            ))
        }
        "subscriptions/listen" => {
            let caller = Caller::modern(principal, client_caps(&fields));
            Ok(listen::open(front, &ns, caller, req.id, &fields))
        }
        m if ROUTED.contains(&m)
            && let Some(state) = bridge::retry_state(&fields) =>
        {
            let caller = Caller::modern(principal.clone(), client_caps(&fields))
                .with_token(token)
                .with_scopes(scopes);
            let outcome = match front
                .bridge
                .resume(&ns, &caller, &principal, &state, &fields)
            {
                Some(Resumed::Running(running)) => {
                    let reply = Reply {
                        front: front.clone(),
                        id: req.id,
                        rules: &Modern,
                        principal,
                    };
                    return Ok(reply.respond(running).await.into_response());
                }
                Some(Resumed::Asked(asked)) => decorate("tools/call", asked),
                None => Outcome::Error(jsonrpc::error_object(
                    jsonrpc::INVALID_PARAMS,
                    "requestState is unknown or expired: send the request again without it",
                    None,
                )),
            };
            Ok(json_response(
                jsonrpc::response_or_framed(&req.id, outcome),
                None,
            ))
        }
        m if ROUTED.contains(&m) => {
            let caller = Caller::modern(principal.clone(), client_caps(&fields))
                .with_token(token)
                .with_scopes(scopes);
            let ctx = Ctx {
                front: front.clone(),
                ns,
                principal,
                active: None,
                rules: &Modern,
                caller,
                admitted: posted.admitted,
                trace: front.traces.parent(|name| headers.get_str(name)),
            };
            Ok(reply::serve(ctx, req, started).await.into_response())
        }
        other => Err(refuse(
            &req.id,
            ModernError::UnknownMethod(other.to_owned()),
        )),
    }
}

/// What every modern request must carry, checked without I/O: the
/// required `_meta`, a supported version, and headers that mirror the
/// body. Returns the params' fields.
pub(in crate::front) fn check_request(
    headers: &HeaderMap,
    req: &Request,
) -> Result<Fields, ModernError> {
    let fields: Fields = req
        .params
        .as_deref()
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or_default();
    let meta: Fields = fields
        .get("_meta")
        .and_then(|m| serde_json::from_str(m.get()).ok())
        .unwrap_or_default();
    let version: String = meta
        .get(protocol::META_PROTOCOL_VERSION)
        .and_then(|v| serde_json::from_str(v.get()).ok())
        .ok_or(ModernError::MissingMeta(protocol::META_PROTOCOL_VERSION))?;
    if !meta
        .get(CLIENT_CAPABILITIES)
        .is_some_and(|c| c.get().starts_with('{'))
    {
        return Err(ModernError::MissingMeta(CLIENT_CAPABILITIES));
    }
    // A header that disagrees with the body is a header error, whatever
    // the versions: only an agreed but unknown version is -32022.
    check_version_header(headers, &version).map_err(ModernError::HeaderMismatch)?;
    if !protocol::MODERN_SUPPORTED.contains(&version.as_str()) {
        return Err(ModernError::UnsupportedVersion(version));
    }
    check_headers(headers, &req.method, &fields).map_err(ModernError::HeaderMismatch)?;
    Ok(fields)
}

/// The request's `clientCapabilities` (checked present by `check_request`).
fn client_caps(fields: &Fields) -> ClientCaps {
    let meta: Fields = fields
        .get("_meta")
        .and_then(|m| serde_json::from_str(m.get()).ok())
        .unwrap_or_default();
    meta.get(CLIENT_CAPABILITIES)
        .map_or_else(ClientCaps::default, |c| ClientCaps::parse(c.get()))
}

fn record(front: &Front, method: &'static str, started: Instant) {
    let (method, seconds) = (
        crate::metrics::method_label(method),
        started.elapsed().as_secs_f64(),
    );
    let answered = crate::metrics::Outcome::ok;
    front
        .metrics
        .request(Era::Modern, method, answered, seconds);
    front.metrics.server_operation(method, None, seconds);
}

/// A header's value; surrounding whitespace is not part of it. Sent
/// twice, it has no one value to check.
fn header<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, String> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(_), Some(_)) => Err(format!("{name} was sent more than once")),
        (Some(v), None) => v
            .to_str()
            .map(|s| Some(s.trim()))
            .map_err(|_| format!("{name} has invalid characters")),
    }
}

fn check_version_header(headers: &HeaderMap, version: &str) -> Result<(), String> {
    match header(headers, "mcp-protocol-version")? {
        Some(v) if v == version => Ok(()),
        Some(v) => Err(format!(
            "MCP-Protocol-Version {v} disagrees with _meta ({version})"
        )),
        None => Err("MCP-Protocol-Version is required".into()),
    }
}

/// `Mcp-Method` and `Mcp-Name` must mirror the body
/// (`S/2026-07-28/basic/transports/streamable-http.mdx`, SEP-2243).
fn check_headers(headers: &HeaderMap, method: &str, fields: &Fields) -> Result<(), String> {
    let header = |name: &str| header(headers, name).map(|v| v.map(str::to_owned));
    match header("mcp-method")? {
        Some(m) if m == method => {}
        Some(m) => return Err(format!("Mcp-Method {m} disagrees with the body ({method})")),
        None => return Err("Mcp-Method is required".into()),
    }
    if let Some(key) = name_key(method) {
        let body: Option<String> = fields
            .get(key)
            .and_then(|v| serde_json::from_str(v.get()).ok());
        match (header("mcp-name")?, body) {
            (Some(h), Some(b)) if crate::mirror::decode(&h).as_deref() == Some(b.as_str()) => {}
            (Some(_), Some(_)) => return Err("Mcp-Name disagrees with the body".into()),
            (None, _) => return Err("Mcp-Name is required".into()),
            (Some(_), None) => return Err(format!("params.{key} is required")),
        }
    }
    Ok(())
}

/// The params field `Mcp-Name` mirrors for `method`, if any.
fn name_key(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

/// The headers a conforming HTTP client sends with a 2026-07-28 request
/// (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`), for a
/// client inside the gateway's process (`stdio`), so that its requests
/// pass the same checks as any other. None when `body` is not a 2026-07-28
/// request: it then speaks a 2025 revision.
pub(crate) async fn client_headers(
    front: &Front,
    namespace: &str,
    principal: &Principal,
    body: &[u8],
) -> Option<HeaderMap> {
    let Ok(jsonrpc::Message::Request(req)) = jsonrpc::Message::parse(body) else {
        return None;
    };
    let version = super::modern_version(req.params.as_deref())?;
    let fields: Fields = req
        .params
        .as_deref()
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or_default();
    let mut headers = HeaderMap::new();
    let mut put = |name: &str, value: &str| {
        if let (Ok(n), Ok(v)) = (
            axum::http::HeaderName::from_bytes(name.as_bytes()),
            axum::http::HeaderValue::from_str(value),
        ) {
            headers.append(n, v);
        }
    };
    put("mcp-protocol-version", &version);
    put("mcp-method", &req.method);
    let name: Option<String> = name_key(&req.method)
        .and_then(|key| fields.get(key))
        .and_then(|v| serde_json::from_str(v.get()).ok());
    if let Some(name) = &name {
        put("mcp-name", &crate::mirror::encode(name));
    }
    if req.method == "tools/call"
        && let Some(name) = &name
        && let Some(ns) = front.layout.load().router.namespace(namespace).cloned()
    {
        let caller = Caller::modern(principal.clone(), client_caps(&fields));
        if let Some(schema) = Box::pin(ns.tool_schema(&caller, name)).await {
            let arguments: Option<Value> = fields
                .get("arguments")
                .and_then(|a| serde_json::from_str(a.get()).ok());
            let annotations = crate::mirror::annotations(&schema);
            for (header, value) in crate::mirror::params(&annotations, arguments.as_ref()) {
                put(&header, &value);
            }
        }
    }
    Some(headers)
}

/// `Mcp-Param-*` must mirror the arguments the tool's schema marks with
/// `x-mcp-header`. An unknown tool is left to fail as a call.
async fn check_param_headers(
    ns: &Namespace,
    principal: &Principal,
    headers: &HeaderMap,
    fields: &Fields,
) -> Result<(), String> {
    let Some(name) = fields
        .get("name")
        .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
    else {
        return Ok(());
    };
    let caller = Caller::modern(principal.clone(), client_caps(fields));
    // Boxed: a schema not yet known is listed, and that future would make
    // every call's large (moved into a box per request).
    let Some(schema) = Box::pin(ns.tool_schema(&caller, &name)).await else {
        return Ok(());
    };
    let arguments: Option<Value> = fields
        .get("arguments")
        .and_then(|a| serde_json::from_str(a.get()).ok());
    crate::mirror::check_params(
        headers,
        &crate::mirror::annotations(&schema),
        arguments.as_ref(),
    )
}

/// `server/discover` for a namespace: what every backend offers, merged.
fn discover(ns: &Namespace) -> Value {
    let mut capabilities = ns.capabilities();
    // Logging is per request in 2026-07-28 (`logLevel`), not a capability.
    if let Some(caps) = capabilities.as_object_mut() {
        caps.remove("logging");
    }
    let mut result = json!({
        "resultType": "complete",
        "supportedVersions": protocol::supported_versions(),
        "capabilities": capabilities,
        // Lists change when backends say so; nothing here is worth caching.
        "ttlMs": 0,
        "cacheScope": "public",
        "_meta": { SERVER_INFO: server_info() },
    });
    if let Some(text) = ns.instructions() {
        result["instructions"] = json!(text);
    }
    result
}

fn server_info() -> Value {
    json!({ "name": "sluice", "version": env!("CARGO_PKG_VERSION") })
}

/// Every modern result says what it is and who answered; lists say how long
/// they may be cached. Fields a backend set are kept as it set them.
fn decorate(method: &str, outcome: Outcome) -> Outcome {
    let Outcome::Result(raw) = outcome else {
        return outcome;
    };
    // A large one (a tool's large result) is decorated where it lies.
    let raw = match raw.get().len() >= jsonrpc::FRAMED_FROM {
        true => match decorate_in_place(method, raw) {
            Ok(decorated) => return Outcome::Result(decorated),
            Err(raw) => raw,
        },
        false => raw,
    };
    decorate_by_copy(method, raw)
}

/// `decorate`, the result taken apart and written again.
fn decorate_by_copy(method: &str, raw: Payload) -> Outcome {
    let Ok(mut fields) = serde_json::from_str::<Fields>(raw.get()) else {
        return Outcome::Result(raw);
    };
    fields
        .entry("resultType".into())
        .or_insert_with(|| jsonrpc::raw("complete"));
    if method.ends_with("/list") {
        fields
            .entry("ttlMs".into())
            .or_insert_with(|| jsonrpc::raw(&0));
        fields
            .entry("cacheScope".into())
            .or_insert_with(|| jsonrpc::raw("public"));
    }
    let mut meta: Fields = fields
        .get("_meta")
        .and_then(|m| serde_json::from_str(m.get()).ok())
        .unwrap_or_default();
    meta.insert(SERVER_INFO.into(), jsonrpc::raw(&server_info()));
    fields.insert("_meta".into(), jsonrpc::raw(&meta));
    Outcome::Result(jsonrpc::raw(&fields).into())
}

/// `decorate` without taking the result apart: the members it lacks
/// written in front of its own, and its `_meta` (if any) replaced by the
/// one with `serverInfo` (`Payload::prepend_members`), so that a large
/// result is never copied; held under the body budget as it came. Given
/// back when it is unusual (not an object, a key repeated or escaped).
fn decorate_in_place(method: &str, result: Payload) -> Result<Payload, Payload> {
    #[derive(serde::Deserialize)]
    struct Top<'a> {
        #[serde(rename = "resultType")]
        result_type: Option<IgnoredAny>,
        #[serde(rename = "ttlMs")]
        ttl: Option<IgnoredAny>,
        #[serde(rename = "cacheScope")]
        cache_scope: Option<IgnoredAny>,
        #[serde(rename = "_meta", borrow)]
        meta: Option<&'a RawValue>,
    }
    let Ok(top) = serde_json::from_str::<Top>(result.get()) else {
        return Err(result);
    };
    let mut members = String::new();
    if top.result_type.is_none() {
        members.push_str(r#""resultType":"complete","#);
    }
    if method.ends_with("/list") && top.ttl.is_none() {
        members.push_str(r#""ttlMs":0,"#);
    }
    if method.ends_with("/list") && top.cache_scope.is_none() {
        members.push_str(r#""cacheScope":"public","#);
    }
    let mut meta: Fields = top
        .meta
        .and_then(|m| serde_json::from_str(m.get()).ok())
        .unwrap_or_default();
    meta.insert(SERVER_INFO.into(), jsonrpc::raw(&server_info()));
    members.push_str(r#""_meta":"#);
    members.push_str(jsonrpc::raw(&meta).get());
    let at = |m: &RawValue| {
        let start = m.get().as_ptr() as usize - result.get().as_ptr() as usize;
        start..start + m.get().len()
    };
    let dropped = top.meta.map(at);
    result.prepend_members(&members, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decorated where it lies, a large result reads as it would taken
    /// apart and written again (fields in another order aside).
    #[test]
    fn a_large_result_is_decorated_where_it_lies_as_it_would_be_by_copy() {
        let text = "t".repeat(jsonrpc::FRAMED_FROM);
        for (method, result) in [
            (
                "tools/call",
                format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#),
            ),
            (
                "tools/call",
                format!(r#"{{ "_meta" : {{"a":1}} , "x":"{text}" }}"#),
            ),
            (
                "tools/call",
                format!(r#"{{"x":"{text}","resultType":"task","_meta":{{}}}}"#),
            ),
            (
                "tools/list",
                format!(r#"{{"tools":[],"ttlMs":5,"x":"{text}"}}"#),
            ),
        ] {
            let raw = || Payload::from(RawValue::from_string(result.clone()).unwrap());
            let in_place = decorate_in_place(method, raw()).unwrap();
            let Outcome::Result(by_copy) = decorate_by_copy(method, raw()) else {
                panic!()
            };
            let read = |p: &Payload| serde_json::from_str::<Value>(p.get()).unwrap();
            assert_eq!(read(&in_place), read(&by_copy), "{method}");
            assert!(in_place.get().len() < result.len() + 200);
        }
        // Unusual: given back as it came.
        for result in [
            format!(r#"["{text}"]"#),
            format!(r#"{{"\u005fmeta":{{}},"x":"{text}"}}"#),
            format!(r#"{{"_meta":{{}},"_meta":{{}},"x":"{text}"}}"#),
        ] {
            let raw = Payload::from(RawValue::from_string(result.clone()).unwrap());
            assert_eq!(
                decorate_in_place("tools/call", raw).unwrap_err().get(),
                result
            );
        }
    }

    #[test]
    fn results_are_decorated_and_backend_fields_kept() {
        let raw = RawValue::from_string(r#"{"tools":[],"ttlMs":5000,"x":1.50}"#.into()).unwrap();
        let Outcome::Result(r) = decorate("tools/list", Outcome::Result(raw.into())) else {
            panic!()
        };
        let v: Value = serde_json::from_str(r.get()).unwrap();
        assert_eq!(v["resultType"], "complete");
        assert_eq!(v["ttlMs"], 5000);
        assert_eq!(v["cacheScope"], "public");
        assert_eq!(v["_meta"][SERVER_INFO]["name"], "sluice");
        assert!(r.get().contains(r#""x":1.50"#));
    }
}
