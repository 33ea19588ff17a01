//! The HTTP client to backends: hyper-util's pooled HTTP/1.1 client, TLS by
//! rustls with the platform's verifier. Not reqwest: its per-request URL
//! handling (a parse for its redirect policy, another for the URI, IDNA
//! included) was a sixth of the gateway's instructions per forwarded call
//! (bench/RESULTS.md). The shape below is the little the backends need.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, TryStreamExt};
use http::header::{CONTENT_LENGTH, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// One per backend: its pooled connections.
#[derive(Clone, Debug)]
pub(crate) struct Client {
    inner: Arc<hyper_util::client::legacy::Client<Connector, Full<Bytes>>>,
}

impl Client {
    pub(crate) fn new() -> Result<Client, String> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(Duration::from_secs(5)));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .try_with_platform_verifier()
            .map_err(|e| format!("TLS: {e}"))?
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let inner = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_timer(TokioTimer::new())
            .build(https);
        Ok(Client {
            inner: Arc::new(inner),
        })
    }

    pub(crate) fn request(&self, method: Method, uri: &Uri) -> RequestBuilder {
        let mut req = http::Request::new(Full::new(Bytes::new()));
        *req.method_mut() = method;
        *req.uri_mut() = uri.clone();
        RequestBuilder {
            client: self.clone(),
            req,
            bad: false,
        }
    }
}

/// A request being built; like `http::request::Builder`, a bad header is
/// kept as an error until `send`. Headers go straight into the request
/// (the builder moves a large `Result` through every call).
pub(crate) struct RequestBuilder {
    client: Client,
    req: http::Request<Full<Bytes>>,
    bad: bool,
}

impl RequestBuilder {
    pub(crate) fn headers(mut self, headers: &HeaderMap) -> Self {
        let own = self.req.headers_mut();
        own.reserve(headers.len());
        for (k, v) in headers {
            own.append(k.clone(), v.clone());
        }
        self
    }

    pub(crate) fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: TryInto<HeaderName>,
        V: TryInto<HeaderValue>,
    {
        match (name.try_into(), value.try_into()) {
            (Ok(k), Ok(v)) => {
                self.req.headers_mut().append(k, v);
            }
            _ => self.bad = true,
        }
        self
    }

    pub(crate) fn body(mut self, body: impl Into<Bytes>) -> Self {
        *self.req.body_mut() = Full::new(body.into());
        self
    }

    pub(crate) async fn send(self) -> Result<Response, SendError> {
        if self.bad {
            return Err(SendError::Builder);
        }
        let resp = self
            .client
            .inner
            .request(self.req)
            .await
            .map_err(SendError::Http)?;
        Ok(Response(resp))
    }
}

/// Why a request got no response. Never names the URL: a configured URL
/// may carry credentials, and these reach clients, logs and /readyz.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    #[error("request could not be built")]
    Builder,
    #[error("{}", chain(.0))]
    Http(hyper_util::client::legacy::Error),
}

impl SendError {
    pub(crate) fn is_builder(&self) -> bool {
        matches!(self, SendError::Builder)
    }

    /// Nothing accepted the connection.
    pub(crate) fn is_connect(&self) -> bool {
        matches!(self, SendError::Http(e) if e.is_connect())
    }
}

/// "client error (Connect): tcp connect error: Connection refused": the
/// cause is what an operator needs.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

pub(crate) struct Response(http::Response<hyper::body::Incoming>);

impl Response {
    pub(crate) fn status(&self) -> StatusCode {
        self.0.status()
    }

    pub(crate) fn headers(&self) -> &HeaderMap {
        self.0.headers()
    }

    pub(crate) fn content_length(&self) -> Option<u64> {
        self.0
            .headers()
            .get(CONTENT_LENGTH)?
            .to_str()
            .ok()?
            .parse()
            .ok()
    }

    /// The body as it arrives (trailers skipped).
    pub(crate) fn bytes_stream(self) -> impl Stream<Item = Result<Bytes, String>> + Send {
        self.0.into_body().into_data_stream().map_err(|e| chain(&e))
    }
}
