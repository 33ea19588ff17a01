//! What a namespace tells its clients outside any request: list changes,
//! resource updates, backends' log messages and questions, in the names
//! the namespace shows.

use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use serde_json::json;
use tokio_stream::wrappers::BroadcastStream;

use super::Namespace;
use crate::jsonrpc;
use crate::protocol::LogLevel;
use crate::router::kind::Kind;
use crate::upstream::{Caller, Notice};

const TOOLS_CHANGED: &str = "notifications/tools/list_changed";

/// What a client is told of its backends outside any request.
#[derive(Debug, Clone)]
pub enum ClientNotice {
    /// A `notifications/*/list_changed` method.
    ListChanged(&'static str),
    /// A resource the client may have subscribed to changed (exposed URI).
    ResourceUpdated(String),
    /// A backend's log message, as a JSON-RPC line.
    Log(LogLevel, Arc<str>),
    /// A request for this client from its own backend session (a JSON-RPC
    /// line); the client answers it like any server request.
    Ask(String),
    /// `notifications/elicitation/complete` for this client alone (a
    /// JSON-RPC line): a backend's, or the gateway's own when the principal
    /// connected a backend it was asked to.
    ElicitationComplete(Arc<str>),
}

impl ClientNotice {
    /// What a client is told when its namespace's members change.
    pub fn all_lists_changed() -> [ClientNotice; 3] {
        [
            ClientNotice::ListChanged(TOOLS_CHANGED),
            ClientNotice::ListChanged("notifications/prompts/list_changed"),
            ClientNotice::ListChanged("notifications/resources/list_changed"),
        ]
    }

    /// The JSON-RPC notification a legacy client gets.
    pub fn line(&self) -> String {
        match self {
            ClientNotice::ListChanged(method) => jsonrpc::notification(method, None),
            ClientNotice::ResourceUpdated(uri) => jsonrpc::notification(
                "notifications/resources/updated",
                Some(&jsonrpc::raw(&json!({ "uri": uri }))),
            ),
            ClientNotice::Log(_, line) => line.to_string(),
            ClientNotice::Ask(line) => line.clone(),
            ClientNotice::ElicitationComplete(line) => line.to_string(),
        }
    }
}

impl Namespace {
    /// What the backends announce that `caller` may be told, in the names
    /// this namespace shows: list changes, and updates of resources (by
    /// their exposed URI; the client's subscriptions decide what is sent).
    /// A lagging stream skips announcements: one list change says it all.
    pub fn notices(
        self: &Arc<Self>,
        caller: Caller,
    ) -> impl Stream<Item = ClientNotice> + Send + 'static {
        let streams = self.members.iter().map(|m| {
            let ns = self.clone();
            let caller = caller.clone();
            let member = m.index;
            BroadcastStream::new(m.backend.subscribe_changes()).filter_map(move |n| {
                let notice = match n {
                    Ok(n) if n.is_for(&caller) => match n {
                        Notice::ListChanged(kind) => Some(ClientNotice::ListChanged(kind.method())),
                        Notice::ResourceUpdated { uri, .. } => ns
                            .expose(&ns.members[member], Kind::Resource, &uri)
                            .map(ClientNotice::ResourceUpdated),
                        Notice::Log { level, line, .. } => Some(ClientNotice::Log(level, line)),
                        Notice::ElicitationComplete { line, .. } => {
                            Some(ClientNotice::ElicitationComplete(line))
                        }
                        Notice::Ask {
                            id, method, params, ..
                        } => Some(ClientNotice::Ask(jsonrpc::request(
                            &jsonrpc::raw(&id),
                            &method,
                            params.as_deref(),
                        ))),
                        Notice::Connected { id, .. } => {
                            let params = jsonrpc::raw(&json!({ "elicitationId": id }));
                            let line = jsonrpc::notification(
                                "notifications/elicitation/complete",
                                Some(&params),
                            );
                            Some(ClientNotice::ElicitationComplete(line.into()))
                        }
                    },
                    _ => None,
                };
                std::future::ready(notice)
            })
        });
        let backends = futures_util::stream::select_all(streams);
        // Search mode's `expose_found`: this session's searches found tools.
        let Some(search) = self.search.as_ref().filter(|s| s.expose_found) else {
            return backends.boxed();
        };
        let key = caller.key().clone();
        let found = BroadcastStream::new(search.found.subscribe()).filter_map(move |k| {
            let ours = matches!(k, Ok(k) if k == key);
            std::future::ready(ours.then_some(ClientNotice::ListChanged(TOOLS_CHANGED)))
        });
        futures_util::stream::select(backends, found).boxed()
    }
}
