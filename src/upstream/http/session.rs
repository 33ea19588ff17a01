//! A backend session's life on its endpoint: opened (`initialize`, then
//! `notifications/initialized`, under one deadline), opened again once
//! after the backend forgot it (a 404), ended by a DELETE; one whose opening
//! did not finish is ended on drop (`Unfinished`).

use std::sync::Arc;

use ::http::Method;
use ::http::header::HeaderValue;

use super::{DELETE_TIMEOUT, Endpoint, Session, answer_of};
use crate::http1::client::RequestBuilder;
use crate::jsonrpc;
use crate::protocol::SESSION_HEADER;
use crate::upstream::deadline::Deadline;
use crate::upstream::link::{self, EndReason};
use crate::upstream::{InitInfo, UpstreamError};

impl Endpoint {
    /// Opens a session: initialize, remember its id and version, initialized.
    /// One deadline covers it all; from the moment the backend names a
    /// session, a failure or a cancellation at any await ends that session.
    pub(super) async fn initialize(&self) -> Result<InitInfo, UpstreamError> {
        let name = &self.ctx.name;
        let deadline = Deadline::after(self.ctx.timeout);
        let fresh = Session {
            id: None,
            ..(**self.session.lock()).clone()
        };
        let id = jsonrpc::raw(&"sluice-initialize");
        let body = jsonrpc::request(
            &id,
            "initialize",
            Some(&link::initialize_params(&self.ctx.offer)),
        );
        let resp = deadline
            .run(name, self.post(&fresh, body).send())
            .await?
            .map_err(|e| UpstreamError::from_http(name, e))?;
        if !resp.status().is_success() {
            // Reachable, but refusing sessions (a modern-only server).
            return Err(UpstreamError::http_status(
                name,
                "initialize ",
                resp.status(),
            ));
        }
        let opened = Session {
            id: resp.headers().get(&SESSION_HEADER),
            ..fresh
        };
        let mut unfinished = Unfinished::new(self, &opened);
        let outcome = deadline.try_run(name, answer_of(name, resp, &id)).await?;
        let info = InitInfo::from_outcome(name, &outcome)?;
        let version = HeaderValue::from_str(&info.protocol_version)
            .map_err(|_| UpstreamError::protocol(name, "bad protocolVersion"))?;
        let session = Session {
            version,
            generation: self.session.lock().generation + 1,
            ..opened
        };
        unfinished.session = session.clone();
        let note = jsonrpc::notification("notifications/initialized", None);
        let resp = deadline
            .run(name, self.post(&session, note).send())
            .await?
            .map_err(|e| UpstreamError::from_http(name, e))?;
        if !resp.status().is_success() {
            return Err(UpstreamError::http_status(
                name,
                "notifications/initialized ",
                resp.status(),
            ));
        }
        unfinished.disarm();
        *self.session.lock() = Arc::new(session);
        self.ctx.metrics.backend_session_opened(name);
        Ok(info)
    }

    /// After a 404: re-initialize, unless a concurrent caller already did.
    pub(super) async fn reinitialize(&self, seen: u64) -> Result<(), UpstreamError> {
        let _one = self.reinit.lock().await;
        if self.closing.is_cancelled() {
            return Err(UpstreamError::unavailable(
                &self.ctx.name,
                "session closing",
            ));
        }
        if self.session.lock().generation != seen {
            return Ok(());
        }
        tracing::info!(backend = %self.ctx.name, "backend forgot our session; re-initializing");
        self.ctx
            .metrics
            .backend_session_closed(&self.ctx.name, EndReason::Expired.label());
        self.initialize().await.map(|_| ())
    }

    pub(super) async fn delete(&self) {
        let session = self.session.lock().clone();
        if session.id.is_none() {
            return;
        }
        let req = self.request(Method::DELETE, &session).send();
        if let Ok(Ok(resp)) = tokio::time::timeout(DELETE_TIMEOUT, req).await {
            tracing::debug!(backend = %self.ctx.name, status = %resp.status(), "backend session deleted");
        }
    }
}

/// A backend session whose opening has not finished. Nobody else knows its
/// id, so unless disarmed it is ended on drop (an error, or a cancellation
/// at any await of the opening): the DELETE runs on its own task.
struct Unfinished {
    delete: Option<RequestBuilder>,
    session: Session,
    ctx_name: crate::vocab::BackendName,
}

impl Unfinished {
    fn new(endpoint: &Endpoint, session: &Session) -> Unfinished {
        Unfinished {
            delete: session
                .id
                .is_some()
                .then(|| endpoint.request(Method::DELETE, session)),
            session: session.clone(),
            ctx_name: endpoint.ctx.name.clone(),
        }
    }

    fn disarm(&mut self) {
        self.delete = None;
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        let Some(req) = self.delete.take() else {
            return;
        };
        // The version header may have been settled since the request was
        // built; the session id is what the backend needs.
        let req = match &self.session.id {
            Some(id) => req.header(SESSION_HEADER, id.clone()),
            None => return,
        };
        let name = self.ctx_name.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = tokio::time::timeout(DELETE_TIMEOUT, req.send()).await;
                tracing::debug!(backend = %name, "unfinished backend session ended");
            });
        }
    }
}
