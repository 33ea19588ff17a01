//! The deprecated HTTP+SSE transport (2024-11-05): one long GET stream
//! carries every server message; the first event names the URL to POST
//! client messages to. It is a duplex pipe like stdio, so the connection
//! multiplexer works unchanged on top of it.

use std::sync::Arc;
use std::time::Duration;

use ::http::header::{ACCEPT, CONTENT_TYPE};
use ::http::{Method, Uri};
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::conn::{Conn, Frame, Writes};
use super::deadline::Deadline;
use super::event_stream;
use super::exit::Exit;
use super::http::HttpSpec;
use super::link::{self, EndReason, Link};
use super::{LinkCtx, UpstreamError};
use crate::http1::client::Target;
use crate::workers::Handoff;

const WRITE_QUEUE: usize = 1024;
/// A POST is only acknowledged (the answer comes on the stream).
const POST_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) async fn open(ctx: &LinkCtx, spec: &Arc<HttpSpec>) -> Result<Arc<Link>, UpstreamError> {
    let unreachable =
        |e: &dyn std::fmt::Display| UpstreamError::unavailable(&ctx.name, e.to_string());
    let deadline = Deadline::after(ctx.timeout);
    let _ = deadline.run(&ctx.name, spec.headers.ready()).await;
    let get = spec
        .client
        .request(Method::GET, &spec.target)
        .headers(&spec.headers.current())
        .header(ACCEPT, "text/event-stream")
        .send();
    let resp = deadline
        .run(&ctx.name, get)
        .await?
        .map_err(|e| UpstreamError::from_http(&ctx.name, e))?;
    if !resp.status().is_success() {
        return Err(unreachable(&format!("GET answered HTTP {}", resp.status())));
    }
    let mut stream = Box::pin(event_stream::of_response(resp));
    // The first event must be `endpoint`: where to POST.
    let endpoint = match deadline.run(&ctx.name, stream.next()).await? {
        Some(Ok(ev)) if ev.event.as_deref() == Some("endpoint") => {
            endpoint(&spec.url, ev.data.trim())
                .and_then(|uri| spec.client.target(&uri).map_err(|_| "bad endpoint"))
                .map_err(|why| UpstreamError::protocol(&ctx.name, why))?
        }
        _ => return Err(UpstreamError::protocol(&ctx.name, "no endpoint event")),
    };
    ctx.metrics.backend_session_opened(&ctx.name);

    let (tx, rx) = mpsc::channel(WRITE_QUEUE);
    let conn = ctx.conn(tx, Writes::Untracked);
    let writer = tokio::spawn(post_frames(spec.clone(), endpoint, conn.clone(), rx));
    let reader_conn = conn.clone();
    let reader_ctx = ctx.clone();
    let reader = tokio::spawn(async move {
        // Callers on other workers get the answers of one read together.
        let mut handoff = Handoff::new();
        while let Some(Ok(ev)) = handoff.next(&mut stream).await {
            if ev.event.as_deref().unwrap_or("message") == "message"
                && let Some(notice) = reader_conn.dispatch_via(&ev.data, None, &mut handoff).0
            {
                reader_ctx.notice(notice);
            }
        }
        // The stream is the only way answers come: fail whoever waits.
        reader_conn.fail_all();
    });
    let handshake = link::handshake(&conn, ctx.timeout, &ctx.offer).await;
    link::establish(conn, handshake, |link| {
        tokio::spawn(own(link, writer, reader, ctx.clone()))
    })
    .await
}

/// Where to POST: the `endpoint` event, resolved against the stream's URL.
/// The configured headers (credentials) go with every POST, so the
/// endpoint must be on the backend's own origin, as the official SDKs insist.
fn endpoint(base: &url::Url, event: &str) -> Result<Uri, &'static str> {
    let url = base.join(event).map_err(|_| "bad endpoint")?;
    if url.origin() == base.origin() {
        url.as_str().parse().map_err(|_| "bad endpoint")
    } else {
        Err("endpoint event names another origin; refused")
    }
}

/// Dropping the GET stream ends the session: the transport has no DELETE.
async fn own(
    link: Arc<Link>,
    writer: tokio::task::JoinHandle<()>,
    mut reader: tokio::task::JoinHandle<()>,
    ctx: LinkCtx,
) {
    let lost = tokio::select! {
        _ = link.close_requested().cancelled() => false,
        _ = &mut reader => {
            tracing::warn!(backend = %ctx.name, "backend event stream ended");
            true
        }
    };
    writer.abort();
    reader.abort();
    let reason = link.ended();
    if reason == EndReason::Failed {
        ctx.ended_on_its_own(if lost { Exit::Closed } else { Exit::Unhealthy });
    }
    ctx.metrics
        .backend_session_closed(&ctx.name, reason.label());
}

async fn post_frames(
    spec: Arc<HttpSpec>,
    endpoint: Target,
    conn: Arc<Conn>,
    mut rx: mpsc::Receiver<Frame>,
) {
    while let Some(frame) = rx.recv().await {
        let req = spec
            .client
            .request(Method::POST, &endpoint)
            .headers(&spec.headers.current())
            .header(CONTENT_TYPE, "application/json")
            .header_pairs(&frame.headers)
            .body(frame.line);
        let failed = match tokio::time::timeout(POST_TIMEOUT, req.send()).await {
            Ok(Ok(r)) if r.status().is_success() => None,
            Ok(Ok(r)) => Some(UpstreamError::http_status(
                conn.backend(),
                "POST ",
                r.status(),
            )),
            Ok(Err(e)) => Some(UpstreamError::from_http(conn.backend(), e)),
            Err(_) => Some(UpstreamError::unavailable(
                conn.backend(),
                "POST not answered in time",
            )),
        };
        if let (Some(e), Some(id)) = (failed, frame.call) {
            conn.fail(id, e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::endpoint;

    #[test]
    fn endpoints_stay_on_the_backend_origin() {
        let base = url::Url::parse("http://127.0.0.1:8000/sse").unwrap();
        assert_eq!(
            endpoint(&base, "/messages?s=1").unwrap().to_string(),
            "http://127.0.0.1:8000/messages?s=1"
        );
        assert!(endpoint(&base, "http://127.0.0.1:8000/m").is_ok());
        for elsewhere in [
            "http://127.0.0.1:8001/m",
            "https://127.0.0.1:8000/m",
            "//evil.example/m",
            "http://evil.example/m",
        ] {
            assert!(endpoint(&base, elsewhere).is_err(), "{elsewhere}");
        }
    }
}
