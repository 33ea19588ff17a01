//! The client's library twin (`SLUICE_HTTP=hyper`, `http1::Engine`):
//! every exchange sent by hyper-util's pooled client instead of this
//! module's own connections, with what a backend can tell apart kept the
//! same. The connector is the same one (`TCP_NODELAY`, the 5 s connect
//! timeout, TLS by rustls with the platform's verifier); the pools have
//! the same bounds (one per worker shard, at most `MAX_IDLE` idle
//! connections per backend, closed after `IDLE_TIMEOUT`); the request
//! head carries the same `Host`, the headers given less the framing ones,
//! and its length as `codec` says it. A request a pooled connection
//! refused before taking it is sent again, as here. What the gateway's
//! own client is held equal to: CI runs the end-to-end suite both ways.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use http::header::{CONTENT_LENGTH, HOST, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper_util::client::legacy;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::{Connector, IDLE_TIMEOUT, MAX_IDLE, Prepared, SendError, chain};
use crate::http1::codec as h1;

/// hyper-util's client, one per worker shard (as the own pools are).
pub(super) struct Twin {
    clients: Box<[legacy::Client<Connector, Full<Bytes>>]>,
}

impl Twin {
    pub(super) fn new(connector: &Connector) -> Twin {
        let clients = (0..crate::workers::shards())
            .map(|_| {
                legacy::Client::builder(TokioExecutor::new())
                    .pool_idle_timeout(IDLE_TIMEOUT)
                    .pool_max_idle_per_host(MAX_IDLE)
                    .pool_timer(TokioTimer::new())
                    .build(connector.clone())
            })
            .collect();
        Twin { clients }
    }

    /// `Client::send`, through hyper.
    pub(super) async fn send<'h>(
        &self,
        method: &Method,
        target: &Prepared,
        headers: impl Iterator<Item = (&'h HeaderName, &'h HeaderValue)>,
        body: &[u8],
    ) -> Result<(StatusCode, HeaderMap, Option<u64>, Body), SendError> {
        let mut request = http::Request::builder()
            .method(method.clone())
            .uri(target.uri.clone());
        let map = request.headers_mut().ok_or(SendError::Builder)?;
        map.insert(HOST, target.host.clone());
        for (name, value) in headers.filter(|(name, _)| !h1::is_framing(name)) {
            map.append(name.clone(), value.clone());
        }
        if h1::says_length(method, body.len()) {
            map.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
        }
        let request = request
            .body(Full::new(Bytes::copy_from_slice(body)))
            .map_err(|_| SendError::Builder)?;
        let client = &self.clients[crate::workers::shard() % self.clients.len()];
        let response = client.request(request).await.map_err(|e| {
            if e.is_connect() {
                // The connector's own error, as the own client reports it.
                let cause = std::error::Error::source(&e).map_or_else(|| e.to_string(), chain);
                SendError::Connect(cause.into())
            } else {
                SendError::Library(chain(&e))
            }
        })?;
        let (parts, body) = response.into_parts();
        // What the head says, as the own client reports it (hyper has
        // refused lengths that disagree).
        let length = parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|v| h1::content_length(v.as_bytes()));
        Ok((parts.status, parts.headers, length, Body(body)))
    }
}

/// A response's body as hyper reads it: its data, trailers skipped.
pub(super) struct Body(Incoming);

impl Stream for Body {
    type Item = Result<Bytes, String>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let body = &mut self.get_mut().0;
        loop {
            return match std::task::ready!(Pin::new(&mut *body).poll_frame(cx)) {
                None => Poll::Ready(None),
                Some(Err(e)) => Poll::Ready(Some(Err(chain(&e)))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if data.is_empty() => continue,
                    Ok(data) => Poll::Ready(Some(Ok(data))),
                    Err(_) => continue, // trailers
                },
            };
        }
    }
}
