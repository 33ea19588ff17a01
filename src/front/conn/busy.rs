//! A connection that hyper serves marks each request busy in its
//! `Phase`, from the call until its response body has ended or been
//! dropped (an SSE stream's whole life), so the connection is never
//! displaced with a request in progress; idle between requests. hyper
//! reads a body only as its handler asks for it: a request whose body is
//! not there when the handler asks for it is receiving from then until it
//! has come (`Arriving`), counted from the request's call, as the own path
//! counts from its head. A body that came with its head is busy
//! throughout, as on the own path.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, HttpBody};
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::future::BoxFuture;

use super::super::Edge;
use crate::front::places::Phase;

/// `Edge` as hyper's service, marking its connection's phase.
#[derive(Clone)]
pub(super) struct Busy {
    edge: Edge,
    phase: Option<Arc<Phase>>,
}

impl Busy {
    pub(super) fn new(edge: Edge, phase: Option<Arc<Phase>>) -> Busy {
        Busy { edge, phase }
    }
}

impl hyper::service::Service<Request<hyper::body::Incoming>> for Busy {
    type Response = Response<Marked>;
    type Error = std::convert::Infallible;
    type Future = Call;

    fn call(&self, req: Request<hyper::body::Incoming>) -> Call {
        let held = match &self.phase {
            // Displaced as its head arrived: its socket is shut, so
            // nothing reaches the client; answer without serving it.
            Some(phase) if !phase.begin() => {
                let refused = StatusCode::SERVICE_UNAVAILABLE.into_response();
                return Call {
                    fut: Box::pin(std::future::ready(Ok(refused))),
                    held: None,
                };
            }
            Some(phase) => Some(Held(phase.clone())),
            None => None,
        };
        let req = match &self.phase {
            Some(phase) if !req.body().is_end_stream() => req.map(|body| {
                Body::new(Arriving {
                    body,
                    phase: Some(phase.clone()),
                    began: crate::clock::now(),
                    came: 0,
                    waited: false,
                })
            }),
            _ => req.map(Body::new),
        };
        Call {
            fut: self.edge.serve(req),
            held,
        }
    }
}

/// A request's body as hyper reads it for the handler: once the handler
/// finds it missing, the connection is receiving until it has come.
struct Arriving {
    body: hyper::body::Incoming,
    /// None once the body has come.
    phase: Option<Arc<Phase>>,
    /// The request's call: when its head had come.
    began: Instant,
    /// Bytes of the body given to the handler.
    came: usize,
    /// The handler has found the body missing.
    waited: bool,
}

/// The connection was displaced before its request's body had come: the
/// request does not run on it.
#[derive(Debug, thiserror::Error)]
#[error("the connection gave way before the body's end")]
struct Displaced;

impl HttpBody for Arriving {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, axum::BoxError>>> {
        let this = &mut *self;
        let Some(phase) = &this.phase else {
            return Pin::new(&mut this.body).poll_frame(cx).map_err(Into::into);
        };
        let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) else {
            if !this.waited {
                this.waited = true;
                if !phase.receive(this.came, this.began) {
                    return Poll::Ready(Some(Err(Displaced.into())));
                }
            }
            return Poll::Pending;
        };
        let n = match &frame {
            Some(Ok(f)) => f.data_ref().map_or(0, Bytes::len),
            _ => 0,
        };
        this.came += n;
        let live = if frame.is_none() || this.body.is_end_stream() {
            let live = phase.begin();
            this.phase = None;
            live
        } else {
            !this.waited || phase.received(n)
        };
        if !live {
            return Poll::Ready(Some(Err(Displaced.into())));
        }
        Poll::Ready(frame.map(|f| f.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The request's busy mark, ended when dropped.
struct Held(Arc<Phase>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.end(crate::clock::now());
    }
}

/// A request being served: its response's body takes the mark along.
pub(super) struct Call {
    fut: BoxFuture<'static, Result<Response, std::convert::Infallible>>,
    held: Option<Held>,
}

impl Future for Call {
    type Output = Result<Response<Marked>, std::convert::Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Ok(response) = std::task::ready!(self.fut.as_mut().poll(cx));
        let held = self.held.take();
        Poll::Ready(Ok(response.map(|body| Marked { body, _held: held })))
    }
}

/// A response body holding its request's busy mark.
pub(super) struct Marked {
    body: Body,
    _held: Option<Held>,
}

impl HttpBody for Marked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}
