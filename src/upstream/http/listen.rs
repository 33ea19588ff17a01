//! The standalone stream of what the backend sends outside any request:
//! the legacy GET stream, or a 2026-07-28 `subscriptions/listen`.

use std::sync::Arc;
use std::time::Duration;

use ::http::header::ACCEPT;
use ::http::{Method, StatusCode};
use futures_util::StreamExt;
use serde_json::json;

use super::post::dispatch;
use super::{Endpoint, is_event_stream};
use crate::jsonrpc;
use crate::upstream::conn::Conn;
use crate::upstream::{Notice, event_stream};

/// The standalone GET stream (legacy) or `subscriptions/listen` (modern):
/// list changes and other unsolicited messages. Reconnects with backoff
/// while the link lives; a 405 means there is none.
pub(super) async fn listen(wire: Arc<Endpoint>, conn: Arc<Conn>) {
    let mut backoff = Duration::from_millis(500);
    loop {
        let session = wire.session.lock().clone();
        let resp = if wire.modern {
            let all = json!({ "notifications": {
                "toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true } });
            let line = jsonrpc::request(
                &jsonrpc::raw(&"sluice-listen"),
                "subscriptions/listen",
                Some(&jsonrpc::raw(&all)),
            );
            wire.post_modern(&line, &[]).send()
        } else {
            wire.request(Method::GET, &session)
                .header(ACCEPT, "text/event-stream")
                .send()
        };
        // Until the headers come: a backend that accepts and never answers
        // is retried like one that refused.
        let resp = match tokio::time::timeout(wire.ctx.timeout, resp).await {
            Ok(r) => r,
            Err(_) => {
                tracing::debug!(backend = %wire.ctx.name, "GET stream not answered in time");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        match resp {
            Ok(r) if r.status() == StatusCode::METHOD_NOT_ALLOWED => return,
            Ok(r) if r.status() == StatusCode::NOT_FOUND && session.id.is_some() => {
                if wire.reinitialize(session.generation).await.is_err() {
                    wire.fatal.cancel();
                    return;
                }
                continue;
            }
            Ok(r) if r.status().is_success() && is_event_stream(&r) => {
                backoff = Duration::from_millis(500);
                let mut stream = std::pin::pin!(event_stream::of_response(r));
                while let Some(Ok(ev)) = stream.next().await {
                    if wire.modern && wire.ctx.watched.acknowledged(&ev.data) {
                        continue;
                    }
                    if !ev.data.is_empty() {
                        dispatch(&wire, &conn, ev.data.as_bytes(), None);
                    }
                }
                // Changes from now on would go unseen: what was kept for
                // lack of them is dropped, and clients told to list again.
                for kind in wire.ctx.watched.end() {
                    wire.ctx.notice(Notice::ListChanged(kind));
                }
            }
            Ok(r) => {
                tracing::debug!(backend = %wire.ctx.name, status = %r.status(), "no GET stream");
            }
            // Nothing listens where the backend was: it is gone, and the
            // link with it (health turns down now, not at the next call).
            Err(e) if e.is_connect() => {
                tracing::debug!(backend = %wire.ctx.name, error = %e, "backend refused the GET stream");
                wire.fatal.cancel();
                return;
            }
            Err(e) => {
                tracing::debug!(backend = %wire.ctx.name, error = %e, "GET stream failed");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}
