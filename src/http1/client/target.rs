//! Where a request goes: a URL prepared once, with the proxy it goes
//! through, and the origin a pooled connection is matched by.

use std::sync::Arc;

use http::Uri;
use http::header::{HeaderName, HeaderValue, PROXY_AUTHORIZATION};
use http::uri::{Authority, PathAndQuery, Scheme};

use crate::http1::codec::Connection;
use crate::http1::proxy::{Proxy, ProxyUrl};

/// Where a connection goes: scheme and authority, in lower case, and the
/// proxy it goes through, in one string (compared at every checkout;
/// `Authority`'s own comparison folds case byte by byte). A connection
/// through a proxy is never taken for a direct one, nor the reverse.
#[derive(Clone, PartialEq)]
pub(super) struct Origin(Arc<str>);

impl Origin {
    fn of(uri: &Uri, proxy: Option<&ProxyUrl>) -> Origin {
        let scheme = uri.scheme_str().unwrap_or_default();
        let authority = uri.authority().map_or("", Authority::as_str);
        let mut key = format!("{scheme}://{authority}");
        if let Some(proxy) = proxy {
            key.push_str(" via ");
            key.push_str(proxy.uri.authority().map_or("", Authority::as_str));
        }
        Origin(key.to_ascii_lowercase().into())
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
    /// An `http` target through a proxy, which forwards its requests.
    pub(super) forward: Option<Forward>,
}

/// What a request a proxy forwards carries (RFC 9112 §3.2.2).
pub(super) struct Forward {
    /// The request line's target in absolute form.
    pub(super) absolute: Box<str>,
    /// `Proxy-Authorization`, when the proxy's URL has credentials.
    pub(super) auth: Option<(HeaderName, HeaderValue)>,
    pub(super) proxy: Arc<ProxyUrl>,
}

/// Whether a forward proxy's answer says it keeps the connection for
/// another request: only when it says so (`keep-alive`, and no `close`).
/// An HTTP/1.1 proxy that says nothing is not taken at its word: one that
/// forwards a single request per connection (tinyproxy) drops its origin's
/// `Connection` and says nothing of its own, then closes once its origin
/// has, and a request written meanwhile goes on to that closing origin,
/// where it is lost, refused or answered with an error (issue 49).
/// `Proxy-Connection` is the older spelling some proxies answer with.
pub(super) fn proxy_keeps(connection: Connection, proxy_connection: Connection) -> bool {
    let said = connection.and(proxy_connection);
    said.keep_alive && !said.close
}

impl Prepared {
    /// The request line's target: the path, or the whole URL for a proxy.
    pub(super) fn request_target(&self) -> &str {
        self.forward
            .as_ref()
            .map_or(self.path.as_str(), |f| &f.absolute)
    }
}

impl Target {
    /// `uri`, through the proxy `proxy` picks for it (decided here, once).
    pub(super) fn new(uri: &Uri, proxy: &Proxy) -> Result<Target, String> {
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
        let via = proxy.route(uri);
        let forward = via
            .filter(|_| uri.scheme() == Some(&Scheme::HTTP))
            .map(|proxy| Forward {
                absolute: format!("http://{}{}", host.to_str().unwrap_or_default(), path).into(),
                auth: proxy.auth.clone().map(|a| (PROXY_AUTHORIZATION, a)),
                proxy: proxy.clone(),
            });
        Ok(Target(Arc::new(Prepared {
            uri: uri.clone(),
            origin: Origin::of(uri, via.map(|p| &**p)),
            path,
            host,
            forward,
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
