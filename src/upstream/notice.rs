//! What a backend announces outside any request, as clients will see it:
//! list changes for everyone, and resource updates for the clients that
//! subscribed (when a per-session backend session sent one, only its own
//! client).

use std::sync::Arc;

use super::{Caller, ClientKey};
use crate::protocol::LogLevel;

/// The list-change notifications, by the list they invalidate.
pub(super) const LIST_CHANGED: [&str; 3] = [
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
];

/// Which list a `list_changed` is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ListKind {
    Tools,
    Prompts,
    Resources,
}

impl ListKind {
    pub const ALL: [ListKind; 3] = [ListKind::Tools, ListKind::Prompts, ListKind::Resources];

    /// The notification that announces it.
    pub fn method(self) -> &'static str {
        match self {
            ListKind::Tools => LIST_CHANGED[0],
            ListKind::Prompts => LIST_CHANGED[1],
            ListKind::Resources => LIST_CHANGED[2],
        }
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum Notice {
    ListChanged(ListKind),
    /// `notifications/message` sent outside any request, as the backend wrote it.
    Log {
        level: LogLevel,
        line: Arc<str>,
        /// As for `ResourceUpdated`.
        client: Option<ClientKey>,
    },
    /// A per-session backend's request outside any call (`roots/list` after
    /// its handshake, say), for its own client's GET stream.
    Ask {
        /// The gateway's id for it: the client answers under this id.
        id: String,
        method: String,
        params: Option<Box<serde_json::value::RawValue>>,
        client: Option<ClientKey>,
    },
    /// `notifications/resources/updated`, with the backend's own URI.
    ResourceUpdated {
        uri: Arc<str>,
        /// The client whose backend session sent it (per-session
        /// isolation); None on a shared backend session.
        client: Option<ClientKey>,
    },
}

impl Notice {
    /// From a backend notification; None for the ones the gateway does not
    /// relay this way (a backend cannot invent list kinds).
    pub(super) fn of(method: &str, params: Option<&serde_json::value::RawValue>) -> Option<Notice> {
        if let Some(kind) = ListKind::ALL.into_iter().find(|k| k.method() == method) {
            return Some(Notice::ListChanged(kind));
        }
        if method == "notifications/message" {
            let params = params?;
            return Some(Notice::Log {
                level: LogLevel::of_params(params.get())?,
                line: crate::jsonrpc::notification(method, Some(params)).into(),
                client: None,
            });
        }
        if method != "notifications/resources/updated" {
            return None;
        }
        #[derive(serde::Deserialize)]
        struct Updated {
            uri: String,
        }
        let updated: Updated = serde_json::from_str(params?.get()).ok()?;
        Some(Notice::ResourceUpdated {
            uri: updated.uri.into(),
            client: None,
        })
    }

    /// Whether it may go to this caller at all.
    pub fn is_for(&self, caller: &Caller) -> bool {
        match self {
            Notice::ListChanged(_) => true,
            Notice::ResourceUpdated { client, .. } | Notice::Log { client, .. } => {
                client.as_ref().is_none_or(|c| *c == caller.key)
            }
            // Only ever for the one client it was meant for.
            Notice::Ask { client, .. } => client.as_ref() == Some(&caller.key),
        }
    }
}
