//! A 2026-07-28 client's retry after the gateway asked it, by URL
//! elicitation, to connect a backend (the authorization code flow; the
//! router's `connect_first` asks). Its `requestState` names the backend.
//! Accepted, the retry waits, at most `WAIT`, for the principal's
//! connection (the callback announces it, on whichever replica it lands),
//! then goes on as the original request without the gateway's own input:
//! still not connected, it is asked again. Declined or cancelled, the
//! call ends as the tool's error.
//!
//! The state needs no seal: it only names a backend, and the grant waited
//! for and then used is the retrying principal's own.

use std::time::Duration;

use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use super::Front;
use crate::jsonrpc::{self, Fields, Outcome, Request, Routed};
use crate::router::{CONNECT_INPUT, CONNECT_STATE};
use crate::upstream::Notice;
use crate::vocab::Principal;

/// How long an accepted retry waits for the connection: under the minute
/// the SDKs give a request by default, so the client hears back and asks
/// again rather than failing on its own clock.
const WAIT: Duration = Duration::from_secs(45);

/// A retry that answers the gateway's own input request.
pub(super) struct Retry {
    backend: String,
    accepted: bool,
}

impl Retry {
    /// From a request's params: None unless its `requestState` is the
    /// gateway's connect state.
    pub(super) fn of(fields: &Fields) -> Option<Retry> {
        let state: String = serde_json::from_str(fields.get("requestState")?.get()).ok()?;
        let backend = state.strip_prefix(CONNECT_STATE)?.to_owned();
        #[derive(serde::Deserialize)]
        struct Answer {
            action: String,
        }
        let accepted = fields
            .get("inputResponses")
            .and_then(|r| serde_json::from_str::<Fields>(r.get()).ok())
            .and_then(|r| serde_json::from_str::<Answer>(r.get(CONNECT_INPUT)?.get()).ok())
            .is_some_and(|a| a.action == "accept");
        Some(Retry { backend, accepted })
    }

    /// Waits for the connection when accepted; the request to go on with
    /// (the original, without the gateway's input), or the outcome that
    /// ends it (declined).
    pub(super) async fn resume(
        self,
        front: &Front,
        principal: &Principal,
        req: Request,
        fields: Fields,
    ) -> Result<Request, Outcome> {
        if !self.accepted {
            return Err(Outcome::Result(
                jsonrpc::raw(&json!({
                    "content": [{"type": "text", "text": format!(
                        "Not connected to {}: the user did not consent.", self.backend
                    )}],
                    "isError": true,
                }))
                .into(),
            ));
        }
        tokio::select! {
            () = connected(front, &self.backend, principal) => {}
            () = tokio::time::sleep(WAIT) => {}
            () = front.stopping.cancelled() => {}
        }
        Ok(without_input(req, fields))
    }
}

/// Returns once `principal` holds a grant for `backend` (at once when it
/// does, or when there is no such flow).
async fn connected(front: &Front, backend: &str, principal: &Principal) {
    let layout = front.layout.load_full();
    let Some(b) = layout.backends.iter().find(|b| b.name.as_str() == backend) else {
        return;
    };
    let Some(flow) = b.code_flow() else {
        return;
    };
    // Subscribed before looking, so a connection made in between is heard.
    let mut changes = b.subscribe_changes();
    if flow.connected(principal) {
        return;
    }
    loop {
        match changes.recv().await {
            Ok(Notice::Connected { principal: p, .. }) if p == *principal => return,
            Err(RecvError::Closed) => return,
            // Lagged: the announcement may have been skipped; look again.
            Err(RecvError::Lagged(_)) if flow.connected(principal) => return,
            _ => {}
        }
    }
}

/// The original request: params without the gateway's `requestState` and
/// its answer in `inputResponses` (the rest as it came).
fn without_input(mut req: Request, mut fields: Fields) -> Request {
    fields.shift_remove("requestState");
    if let Some(responses) = fields.shift_remove("inputResponses")
        && let Ok(mut responses) = serde_json::from_str::<Fields>(responses.get())
    {
        responses.shift_remove(CONNECT_INPUT);
        if !responses.is_empty() {
            fields.insert("inputResponses".into(), jsonrpc::raw(&responses));
        }
    }
    req.params = Some(jsonrpc::raw(&fields));
    req.routed = Routed::default();
    req
}
