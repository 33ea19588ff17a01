//! A call to a backend: traced, over the caller's link, with the headers a
//! 2026-07-28 backend expects and the client's token exchanged where the
//! backend takes it; sent again, once, when its session died before it
//! left. And what goes back: a client's answer to the backend's question,
//! a client's notification about itself.

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::{
    Answered, Backend, Caller, EventSink, Pool, RESTART_WAIT, TransportSpec, UpstreamError,
};
use super::{conn, meta};
use crate::jsonrpc::{self, Outcome};
use crate::traces;

impl Backend {
    /// Sends a request. Progress and server-to-client requests caused by it
    /// go to `events`.
    pub async fn call(
        &self,
        caller: &Caller,
        method: &str,
        params: Option<Box<RawValue>>,
        events: Option<&EventSink>,
    ) -> Result<Outcome, UpstreamError> {
        let to = events.map(|events| conn::ListenerRef {
            events,
            client: &caller.key,
            caps: caller.caps,
        });
        // Traced: the backend continues the trace from the gateway's span.
        let span = traces::BackendSpan::start(&self.name, self.transport(), method, || self.peer());
        let trace = span.as_ref().map(traces::BackendSpan::fields);
        let params = match &trace {
            Some(fields) => meta::with_trace(params.as_deref(), fields).or(params),
            None => params,
        };
        let result = self.send(caller, method, params, to, trace).await;
        if let Some(span) = span {
            span.end(&result);
        }
        result
    }

    async fn send(
        &self,
        caller: &Caller,
        method: &str,
        params: Option<Box<RawValue>>,
        to: Option<conn::ListenerRef<'_>>,
        trace: Option<Vec<(&'static str, String)>>,
    ) -> Result<Outcome, UpstreamError> {
        // Boxed: the exchange's future is large, and most backends have none.
        // (With the authorization code flow, the principal's grant is
        // refreshed there first when due.)
        let authorization = match self.exchanges() || self.code_entries().is_some() {
            true => Box::pin(self.authorization(caller)).await?,
            false => None,
        };
        let mut retried = false;
        loop {
            // The rare paths are boxed: their futures (opening a session,
            // reading a tool's schema) would make every call's large.
            let link = match self.ready_link(caller) {
                Some(link) => link,
                None => Box::pin(self.link_for(caller)).await?,
            };
            let _in_use = link.begin();
            let (sent, mut headers) = if link.info.is_modern() {
                let headers = Box::pin(self.param_headers(caller, method, params.as_deref())).await;
                let sent = match caller.is_legacy() {
                    true => {
                        meta::declared_by(params.as_deref(), &caller.declared()).map(Cow::Owned)
                    }
                    false => None,
                };
                (sent.or(params.as_deref().map(Cow::Borrowed)), headers)
            } else {
                (meta::strip_modern(params.as_deref()), Vec::new())
            };
            if let Some(fields) = &trace {
                headers.extend(fields.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
            }
            if let Some(value) = &authorization {
                headers.push(("authorization".to_owned(), value.clone()));
            }
            let result = link
                .conn
                .call_with(method, sent.as_deref(), to, self.ctx.timeout, headers)
                .await;
            match &result {
                // Its session died before the request left (the supervisor
                // may not know yet): never executed, so it goes to the
                // replacement instead of failing.
                Err(e) if e.is_not_sent() && !retried => {
                    retried = true;
                    // Until its owner has seen it end, the dead link is
                    // still the one `link_for` finds.
                    let _ = tokio::time::timeout(RESTART_WAIT, link.dead().cancelled()).await;
                    continue;
                }
                Err(e) if e.is_unreachable() => self.wake.notify_one(),
                Err(e) => self.refused(caller.who(), e),
                _ => {}
            }
            return result;
        }
    }

    /// A grant's token the backend refuses (revoked, say): the grant is
    /// dropped, so the principal is asked to connect again.
    pub(super) fn refused(&self, who: Option<&crate::vocab::Principal>, e: &UpstreamError) {
        if e.is_refused_credential()
            && let (Some(code), Some(p)) = (self.code_entries(), who)
        {
            code.flow.forget(p, "the backend refused its token");
        }
    }

    /// Where its calls are counted (the gateway's one `Metrics`).
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.ctx.metrics
    }

    /// Whether calls made for a client carry its token exchanged.
    fn exchanges(&self) -> bool {
        match &self.transport {
            TransportSpec::Http(spec) | TransportSpec::Sse(spec) => spec.headers.exchanges(),
            TransportSpec::Stdio(_) => false,
        }
    }

    /// The `Authorization` of a call made for `caller` on a backend that
    /// takes the client's token exchanged (None: the link's own headers).
    async fn authorization(&self, caller: &Caller) -> Result<Option<String>, UpstreamError> {
        if let Some(code) = self.code_entries() {
            // Its entry's headers carry it: the links opened with it send it.
            if let Some(p) = caller.who() {
                code.prepare(p).await;
            }
            return Ok(None);
        }
        let (TransportSpec::Http(spec) | TransportSpec::Sse(spec)) = &self.transport else {
            return Ok(None);
        };
        spec.headers
            .for_client(&spec.client, caller.token.as_deref(), self.ctx.timeout)
            .await
            .map_err(|why| {
                // Bounded: a client without a token may call in a loop.
                if let Some(suppressed) = self.ctx.warnings.admit() {
                    tracing::warn!(backend = %self.name, suppressed, "no token for a client's call: {why}");
                }
                UpstreamError::unauthorized(&self.name, why)
            })
    }

    /// The `Mcp-Param-*` headers a modern backend expects on a tools/call,
    /// computed from its own schema (the gateway may have renamed the tool).
    async fn param_headers(
        &self,
        caller: &Caller,
        method: &str,
        params: Option<&RawValue>,
    ) -> Vec<(String, String)> {
        if method != "tools/call" {
            return Vec::new();
        }
        #[derive(serde::Deserialize)]
        struct Call {
            name: String,
            #[serde(default)]
            arguments: Option<serde_json::Value>,
        }
        let Some(call) = params.and_then(|p| serde_json::from_str::<Call>(p.get()).ok()) else {
            return Vec::new();
        };
        match self.tool_schema(caller, &call.name).await {
            Some(schema) => crate::mirror::params(
                &crate::mirror::annotations(&schema),
                call.arguments.as_ref(),
            ),
            None => Vec::new(),
        }
    }

    /// Delivers a client's answer to a request this backend sent it.
    /// Only the client the request was relayed to may answer it; any other
    /// answer is dropped and counted.
    pub fn answer(&self, caller: &Caller, token: &str, outcome: &Outcome) -> Answered {
        let link = self.existing_link(caller);
        let answered = link.map_or(Answered::Unknown, |l| {
            l.conn.answer(token, &caller.key, outcome)
        });
        if answered == Answered::NotYours {
            tracing::warn!(backend = %self.name, "a client answered a server request relayed to another; dropped");
        }
        answered
    }

    /// Passes a client's notification about itself (its roots changed) to
    /// its own backend session, if it has one here; a shared backend's
    /// roots are the configured ones and do not change with a client.
    pub fn client_notification(&self, caller: &Caller, method: &str) {
        if let Pool::PerSession(p) = &self.pool
            && let Some(link) = p.existing(caller)
        {
            link.conn.send(jsonrpc::notification(method, None));
        }
    }
}
