//! Every way the front refuses a request, and the one place that maps each
//! to an HTTP status and a JSON-RPC error body; the status of a 2026-07-28
//! reply that carries a JSON-RPC error (`modern_status`); the operator
//! endpoints' refusals (`OpsRefusal`).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::jsonrpc::RawId;
use crate::jsonrpc::{self, ParseError};
use crate::protocol;

/// The 2026-07-28 revision's own refusals (`S/2026-07-28/basic/index.mdx`).
#[derive(Debug)]
pub enum ModernError {
    /// A revision after ours: the client retries with one we list.
    UnsupportedVersion(String),
    /// A required `_meta` key is absent.
    MissingMeta(&'static str),
    /// A required header is missing or disagrees with the body.
    HeaderMismatch(String),
    /// Unknown, or removed in this revision.
    UnknownMethod(String),
}

#[derive(Debug)]
pub enum Reject {
    /// No valid credential; the `WWW-Authenticate` challenge to send.
    Unauthorized(HeaderValue),
    /// A valid token without a required scope (its challenge, and the
    /// scopes it lacks).
    InsufficientScope(Box<ScopeShortfall>),
    /// `[auth] oauth`: the issuer's keys could not be fetched yet.
    IssuerUnreachable,
    ForbiddenOrigin,
    ForbiddenHost,
    /// Host missing its form, repeated, or disagreeing with the target.
    BadHost,
    /// An HTTP/1.1 request without Host.
    MissingHost,
    NotAcceptable(&'static str),
    UnsupportedMediaType,
    PayloadTooLarge(usize),
    /// A request head (its line and headers) past `http1::codec::MAX_HEAD`
    /// bytes or `MAX_HEADERS` headers, refused by the front's own reader
    /// (hyper's, under `SLUICE_HTTP=hyper` or after a hand-off, answers
    /// the same status itself: `front::hyper_builder` gives it the bounds).
    HeadTooLarge,
    BodyUnreadable,
    /// The body did not arrive within `body_read_timeout`.
    BodyTimeout,
    Parse(ParseError),
    BatchNotAllowed,
    InitializeInBatch,
    MissingSession,
    /// A POST to the HTTP+SSE message endpoint without its `sessionId`.
    MissingCarrier,
    /// An `initialize` on an HTTP+SSE stream that has had one.
    AlreadyInitialized,
    /// An HTTP+SSE stream with as many messages running as it may.
    StreamBacklog,
    SessionNotFound,
    BadProtocolVersion,
    /// A header that mirrors the body sent more than once (its name); the
    /// body carries the request's id (null for anything else).
    RepeatedHeader {
        id: RawId,
        name: &'static str,
    },
    /// A 2026-07-28 header on a notification, response or batch.
    ModernNeedsRequest,
    /// A 2026-07-28-era request refused; the body carries its id.
    Modern {
        id: RawId,
        error: ModernError,
    },
    MethodNotAllowed,
    UnknownNamespace,
    StreamConflict,
    Busy,
    ShuttingDown,
    /// `[limits]`: over the principal's rate; the next is allowed after this.
    RateLimited(std::time::Duration),
    /// `[limits]`: the principal has as many requests in flight as allowed.
    TooManyInFlight,
    /// `[limits]`: the principal has as many GET streams open as allowed.
    TooManyStreams,
}

/// A 403's particulars (boxed: rare, and a `Reject` travels in every
/// request's `Result`).
#[derive(Debug)]
pub struct ScopeShortfall {
    /// `Bearer error="insufficient_scope", scope="..."`: every scope the
    /// endpoint needs.
    pub(crate) challenge: HeaderValue,
    /// The scopes the token lacks, space-separated.
    pub(crate) missing: String,
}

impl Reject {
    /// Which era's request was refused, for the request metrics.
    pub fn era(&self) -> crate::protocol::Era {
        match self {
            Reject::Modern { .. } => crate::protocol::Era::Modern,
            _ => crate::protocol::Era::Legacy,
        }
    }

    fn parts(&self) -> (StatusCode, i64, String) {
        use Reject::*;
        match self {
            Unauthorized(_) => (
                StatusCode::UNAUTHORIZED,
                jsonrpc::TRANSPORT_ERROR,
                "Unauthorized: a valid bearer token is required".into(),
            ),
            InsufficientScope(refusal) => (
                StatusCode::FORBIDDEN,
                jsonrpc::TRANSPORT_ERROR,
                format!(
                    "Forbidden: the token lacks scopes this endpoint requires: {}",
                    refusal.missing
                ),
            ),
            ForbiddenOrigin => (
                StatusCode::FORBIDDEN,
                jsonrpc::TRANSPORT_ERROR,
                "Forbidden: Origin not allowed".into(),
            ),
            ForbiddenHost => (
                StatusCode::FORBIDDEN,
                jsonrpc::TRANSPORT_ERROR,
                "Forbidden: Host not allowed".into(),
            ),
            BadHost => (
                StatusCode::BAD_REQUEST,
                jsonrpc::TRANSPORT_ERROR,
                "Bad Request: invalid Host header".into(),
            ),
            MissingHost => (
                StatusCode::BAD_REQUEST,
                jsonrpc::TRANSPORT_ERROR,
                "Bad Request: an HTTP/1.1 request needs a Host header".into(),
            ),
            NotAcceptable(what) => (
                StatusCode::NOT_ACCEPTABLE,
                jsonrpc::TRANSPORT_ERROR,
                format!("Not Acceptable: Accept must include {what}"),
            ),
            UnsupportedMediaType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                jsonrpc::TRANSPORT_ERROR,
                "Unsupported Media Type: Content-Type must be application/json".into(),
            ),
            PayloadTooLarge(max) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                jsonrpc::TRANSPORT_ERROR,
                format!("Payload Too Large: the limit is {max} bytes"),
            ),
            HeadTooLarge => (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                jsonrpc::TRANSPORT_ERROR,
                format!(
                    "Request Header Fields Too Large: a request head is at most {} bytes and {} headers",
                    crate::http1::codec::MAX_HEAD,
                    crate::http1::codec::MAX_HEADERS
                ),
            ),
            BodyUnreadable => (
                StatusCode::BAD_REQUEST,
                jsonrpc::TRANSPORT_ERROR,
                "Bad Request: body could not be read".into(),
            ),
            BodyTimeout => (
                StatusCode::REQUEST_TIMEOUT,
                jsonrpc::TRANSPORT_ERROR,
                "Request Timeout: the body did not arrive in time".into(),
            ),
            Parse(e) => (StatusCode::BAD_REQUEST, e.code(), e.to_string()),
            BatchNotAllowed => (
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_REQUEST,
                "Invalid Request: batches exist only in protocol 2025-03-26".into(),
            ),
            InitializeInBatch => (
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_REQUEST,
                "Invalid Request: initialize must not be batched".into(),
            ),
            MissingSession => (
                StatusCode::BAD_REQUEST,
                jsonrpc::TRANSPORT_ERROR,
                "Bad Request: Mcp-Session-Id header is required".into(),
            ),
            MissingCarrier => (
                StatusCode::BAD_REQUEST,
                jsonrpc::TRANSPORT_ERROR,
                "Bad Request: the sessionId query parameter is required".into(),
            ),
            AlreadyInitialized => (
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_REQUEST,
                "Invalid Request: this session is initialized already".into(),
            ),
            StreamBacklog => (
                StatusCode::TOO_MANY_REQUESTS,
                jsonrpc::TRANSPORT_ERROR,
                "Too Many Requests: this stream has as many messages running as allowed; retry later".into(),
            ),
            SessionNotFound => (
                StatusCode::NOT_FOUND,
                jsonrpc::SESSION_NOT_FOUND,
                "Session not found".into(),
            ),
            BadProtocolVersion => (
                StatusCode::BAD_REQUEST,
                jsonrpc::TRANSPORT_ERROR,
                "Bad Request: Unsupported protocol version".into(),
            ),
            RepeatedHeader { name, .. } => (
                StatusCode::BAD_REQUEST,
                HEADER_MISMATCH,
                format!("Header mismatch: {name} was sent more than once"),
            ),
            ModernNeedsRequest => (
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_REQUEST,
                "Invalid Request: protocol 2026-07-28 takes exactly one request per POST".into(),
            ),
            Modern { error, .. } => match error {
                ModernError::UnsupportedVersion(_) => (
                    StatusCode::BAD_REQUEST,
                    UNSUPPORTED_VERSION,
                    "Unsupported protocol version".into(),
                ),
                ModernError::MissingMeta(key) => (
                    StatusCode::BAD_REQUEST,
                    jsonrpc::INVALID_PARAMS,
                    format!("Invalid params: params._meta[\"{key}\"] is required"),
                ),
                ModernError::HeaderMismatch(why) => (
                    StatusCode::BAD_REQUEST,
                    HEADER_MISMATCH,
                    format!("Header mismatch: {why}"),
                ),
                ModernError::UnknownMethod(method) => (
                    StatusCode::NOT_FOUND,
                    jsonrpc::METHOD_NOT_FOUND,
                    format!("Method not found: {method}"),
                ),
            },
            MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                jsonrpc::TRANSPORT_ERROR,
                "Method Not Allowed".into(),
            ),
            UnknownNamespace => (
                StatusCode::NOT_FOUND,
                jsonrpc::TRANSPORT_ERROR,
                "Not Found: no such namespace".into(),
            ),
            StreamConflict => (
                StatusCode::CONFLICT,
                jsonrpc::TRANSPORT_ERROR,
                "Conflict: this session already has a GET stream".into(),
            ),
            IssuerUnreachable => (
                StatusCode::SERVICE_UNAVAILABLE,
                jsonrpc::TRANSPORT_ERROR,
                "Service Unavailable: the authorization server's keys could not be fetched; retry later".into(),
            ),
            Busy => (
                StatusCode::SERVICE_UNAVAILABLE,
                jsonrpc::TRANSPORT_ERROR,
                "Service Unavailable: every session is busy; retry later".into(),
            ),
            ShuttingDown => (
                StatusCode::SERVICE_UNAVAILABLE,
                jsonrpc::TRANSPORT_ERROR,
                "Service Unavailable: the gateway is shutting down".into(),
            ),
            RateLimited(_) => (
                StatusCode::TOO_MANY_REQUESTS,
                jsonrpc::TRANSPORT_ERROR,
                "Too Many Requests: over this principal's request rate; retry after Retry-After seconds".into(),
            ),
            TooManyInFlight => (
                StatusCode::TOO_MANY_REQUESTS,
                jsonrpc::TRANSPORT_ERROR,
                "Too Many Requests: this principal has as many requests in flight as allowed".into(),
            ),
            TooManyStreams => (
                StatusCode::TOO_MANY_REQUESTS,
                jsonrpc::TRANSPORT_ERROR,
                "Too Many Requests: this principal has as many GET streams open as allowed; close one first".into(),
            ),
        }
    }
}

/// 2026-07-28's UnsupportedProtocolVersionError.
const UNSUPPORTED_VERSION: i64 = -32022;
/// 2026-07-28's MissingRequiredClientCapabilityError.
const MISSING_CAPABILITY: i64 = -32021;
/// 2026-07-28's HeaderMismatchError.
const HEADER_MISMATCH: i64 = -32020;

/// The HTTP status of a 2026-07-28 reply that is a JSON-RPC error with
/// `code` (None: it has no integer code), whoever raised it (a backend's
/// -32021 included): the revision's request errors are 400; any other
/// error is answered in band, with 200 (`S/2026-07-28/basic/index.mdx`).
pub(super) fn modern_status(code: Option<i64>) -> StatusCode {
    match code {
        Some(UNSUPPORTED_VERSION | MISSING_CAPABILITY | HEADER_MISMATCH) => StatusCode::BAD_REQUEST,
        Some(_) | None => StatusCode::OK,
    }
}

impl Reject {
    /// The refusal of one request inside a batch, as its line in the
    /// batch's reply (the reply itself is 200): the error a refused POST's
    /// body carries, under the request's id, with `retryAfter` (seconds)
    /// in its data where a refused POST would have `Retry-After`.
    pub(super) fn batch_line(&self, id: &serde_json::value::RawValue) -> String {
        let (_, code, message) = self.parts();
        let data = match self {
            Reject::RateLimited(wait) => Some(json!({ "retryAfter": retry_after_secs(*wait) })),
            _ => None,
        };
        jsonrpc::response(
            id,
            &jsonrpc::Outcome::Error(jsonrpc::error_object(code, &message, data)),
        )
    }
}

/// A wait in whole seconds, rounded up (a client that waits that long is
/// let in), and at least one.
fn retry_after_secs(wait: std::time::Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

impl IntoResponse for Reject {
    fn into_response(self) -> Response {
        let (status, code, message) = self.parts();
        let (id, data) = match &self {
            Reject::Modern { id, error } => {
                let data = match error {
                    ModernError::UnsupportedVersion(requested) => Some(json!({
                        "supported": protocol::supported_versions(),
                        "requested": requested,
                    })),
                    _ => None,
                };
                (Some(&**id), data)
            }
            Reject::RepeatedHeader { id, .. } => (Some(&**id), None),
            _ => (None, None),
        };
        let null = jsonrpc::raw_null();
        let body = jsonrpc::response(
            id.unwrap_or(&null),
            &jsonrpc::Outcome::Error(jsonrpc::error_object(code, &message, data)),
        );
        let mut response =
            (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
        let headers = response.headers_mut();
        match self {
            Reject::Unauthorized(challenge) => {
                headers.insert(header::WWW_AUTHENTICATE, challenge.clone());
            }
            Reject::InsufficientScope(refusal) => {
                headers.insert(header::WWW_AUTHENTICATE, refusal.challenge.clone());
            }
            Reject::MethodNotAllowed => {
                headers.insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            }
            Reject::Busy
            | Reject::ShuttingDown
            | Reject::TooManyInFlight
            | Reject::StreamBacklog
            | Reject::TooManyStreams
            | Reject::IssuerUnreachable => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            Reject::RateLimited(wait) => {
                headers.insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(retry_after_secs(wait)),
                );
            }
            // The unread body is still on the wire: this connection is done.
            Reject::PayloadTooLarge(_) | Reject::BodyTimeout | Reject::HeadTooLarge => {
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        response
    }
}

/// What an operator endpoint answers instead of its document: in its own
/// terms, not as JSON-RPC.
pub(super) enum OpsRefusal {
    /// No RFC 9728 metadata at this path (no `[auth] oauth`, or a path
    /// that names no endpoint): 404, no body.
    NoMetadata,
    /// `/readyz`: what is unhealthy, each named with its problem: 503.
    NotReady(Vec<serde_json::Value>),
}

impl IntoResponse for OpsRefusal {
    fn into_response(self) -> Response {
        match self {
            OpsRefusal::NoMetadata => StatusCode::NOT_FOUND.into_response(),
            OpsRefusal::NotReady(unhealthy) => (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::CONTENT_TYPE, "application/json")],
                json!({ "status": "not ready", "unhealthy": unhealthy }).to_string(),
            )
                .into_response(),
        }
    }
}
