//! Where a request goes: a URL prepared once, and the origin a pooled
//! connection is matched by.

use std::sync::Arc;

use http::Uri;
use http::header::HeaderValue;
use http::uri::{Authority, PathAndQuery, Scheme};

/// Where a connection goes: scheme and authority, in lower case, in one
/// string (compared at every checkout; `Authority`'s own comparison folds
/// case byte by byte).
#[derive(Clone, PartialEq)]
pub(super) struct Origin(Arc<str>);

impl Origin {
    fn of(uri: &Uri) -> Origin {
        let scheme = uri.scheme_str().unwrap_or_default();
        let authority = uri.authority().map_or("", Authority::as_str);
        Origin(
            format!("{scheme}://{authority}")
                .to_ascii_lowercase()
                .into(),
        )
    }
}

/// A URL prepared once for the requests to it (a backend's, with its
/// config): what a connection is opened to, and what each request carries
/// (RFC 9112 §3.2: the path in the request line, the host in `Host`).
#[derive(Clone)]
pub(crate) struct Target(pub(super) Arc<Prepared>);

/// Never the URL: a configured one may carry credentials.
impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Target")
    }
}

pub(super) struct Prepared {
    pub(super) uri: Uri,
    pub(super) origin: Origin,
    pub(super) path: PathAndQuery,
    pub(super) host: HeaderValue,
}

impl Target {
    pub(crate) fn new(uri: &Uri) -> Result<Target, String> {
        let host = uri.host().ok_or("the URL has no host")?;
        let host = match uri.port_u16() {
            Some(port) if Some(port) != default_port(uri.scheme()) => {
                HeaderValue::try_from(format!("{host}:{port}"))
            }
            _ => HeaderValue::from_str(host),
        }
        .map_err(|_| "the URL's host is not a valid header value")?;
        let path = uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        Ok(Target(Arc::new(Prepared {
            uri: uri.clone(),
            origin: Origin::of(uri),
            path,
            host,
        })))
    }
}

fn default_port(scheme: Option<&Scheme>) -> Option<u16> {
    match scheme?.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}
