//! The client's library twin (`SLUICE_HTTP=hyper`, `http1::Engine`):
//! every exchange sent by hyper-util's pooled client instead of this
//! module's own connections, with what a backend can tell apart kept the
//! same. The connector is the same one (`TCP_NODELAY`, the 5 s connect
//! timeout, TLS by rustls with the platform's verifier); the pools have
//! the same bounds (one per worker shard, at most `MAX_IDLE` idle
//! connections per backend, closed after `IDLE_TIMEOUT`); the request
//! head carries the same `Host`, the headers given less the framing ones,
//! and its length as `codec` says it. A request a pooled connection
//! refused before taking it is sent again, as here (hyper-util's own
//! retry). One written and then closed on before any answer hyper-util
//! does not send again: here it is, once, on a new connection (a client
//! that pools none), as the own client does, though hyper-util does not
//! say whether the connection was a reused one (the own client retries
//! only then). Through a forward proxy, a connection the proxy's answer
//! does not say it keeps is poisoned, so that hyper-util's pool drops it
//! as the own one does (`target::proxy_keeps`). What the gateway's
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
use hyper_util::client::legacy::connect::capture_connection;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::{Connector, IDLE_TIMEOUT, MAX_IDLE, Prepared, SendError, chain};
use crate::http1::codec as h1;

/// hyper-util's client, one per worker shard (as the own pools are).
pub(super) struct Twin {
    clients: Box<[legacy::Client<Connector, Full<Bytes>>]>,
    /// Keeps no connection: every request it sends goes on a new one.
    unpooled: legacy::Client<Connector, Full<Bytes>>,
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
        let unpooled = legacy::Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(connector.clone());
        Twin { clients, unpooled }
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
        if let Some((name, value)) = target.forward.as_ref().and_then(|f| f.auth.as_ref()) {
            map.insert(name.clone(), value.clone());
        }
        for (name, value) in headers.filter(|(name, _)| !h1::is_framing(name)) {
            map.append(name.clone(), value.clone());
        }
        if h1::says_length(method, body.len()) {
            map.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
        }
        let body = Bytes::copy_from_slice(body);
        let mut request = request
            .body(Full::new(body.clone()))
            .map_err(|_| SendError::Builder)?;
        // Through a forward proxy, its connection is kept only as long as
        // the proxy says it keeps it (`target::proxy_keeps`).
        let forwarded = target
            .forward
            .is_some()
            .then(|| capture_connection(&mut request));
        let client = &self.clients[crate::workers::shard() % self.clients.len()];
        let again = copy_of(&request, &body);
        let response = match client.request(request).await {
            Err(e) if closed_unanswered(&e) => {
                tracing::debug!(error = %chain(&e), "a connection closed on the request; sending it again on a new one");
                self.unpooled.request(again).await
            }
            sent => sent,
        };
        let response = response.map_err(|e| {
            if e.is_connect() {
                // The connector's own error, as the own client reports it.
                let cause = std::error::Error::source(&e).map_or_else(|| e.to_string(), chain);
                SendError::Connect(cause.into())
            } else {
                SendError::Library(chain(&e))
            }
        })?;
        let (parts, body) = response.into_parts();
        if let Some(captured) = forwarded {
            let said = |name: &str| {
                parts
                    .headers
                    .get_all(name)
                    .iter()
                    .fold(h1::Connection::default(), |seen, value: &HeaderValue| {
                        seen.and(h1::Connection::of(value.as_bytes()))
                    })
            };
            if !super::target::proxy_keeps(said("connection"), said("proxy-connection"))
                && let Some(connected) = captured.connection_metadata().as_ref()
            {
                connected.poison();
            }
        }
        // What the head says, as the own client reports it (hyper has
        // refused lengths that disagree).
        let length = parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|v| h1::content_length(v.as_bytes()));
        Ok((parts.status, parts.headers, length, Body(body)))
    }
}

/// The request again, for `closed_unanswered`.
fn copy_of(request: &http::Request<Full<Bytes>>, body: &Bytes) -> http::Request<Full<Bytes>> {
    let mut again = http::Request::new(Full::new(body.clone()));
    *again.method_mut() = request.method().clone();
    *again.uri_mut() = request.uri().clone();
    *again.headers_mut() = request.headers().clone();
    again
}

/// hyper-util's error says the connection closed or was reset before the
/// answer's head was whole (`Conn::closed_unanswered`'s twin).
fn closed_unanswered(e: &legacy::Error) -> bool {
    if e.is_connect() {
        return false;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message)
        {
            return true;
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return super::conn::is_closed(io);
        }
        source = s.source();
    }
    false
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
