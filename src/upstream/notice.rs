//! What a backend announces outside any request, as clients will see it:
//! list changes for everyone, and resource updates for the clients that
//! subscribed (when a per-session backend session sent one, only its own
//! client).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use tokio::sync::broadcast;

use super::{Backend, Caller, ClientKey};
use crate::protocol::LogLevel;
use crate::vocab::Principal;

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

/// The lists a 2026-07-28 backend acknowledged it will announce changes
/// of on the gateway's `subscriptions/listen` stream, while that stream is
/// open: until it announces one, such a list is kept whatever its `ttlMs`
/// (the backend says when it changes; a client's list costs it nothing).
#[derive(Debug, Default)]
pub(super) struct Watched(AtomicU8);

impl Watched {
    fn bit(kind: ListKind) -> u8 {
        1 << kind as u8
    }

    /// From an acknowledgement on the listen stream: what it honours.
    pub(super) fn acknowledged(&self, data: &str) -> bool {
        #[derive(serde::Deserialize)]
        struct Ack {
            method: String,
            params: Params,
        }
        #[derive(serde::Deserialize)]
        struct Params {
            #[serde(default)]
            notifications: std::collections::HashMap<String, serde_json::Value>,
        }
        if !data.contains("notifications/subscriptions/acknowledged") {
            return false;
        }
        let Ok(ack) = serde_json::from_str::<Ack>(data) else {
            return false;
        };
        if ack.method != "notifications/subscriptions/acknowledged" {
            return false;
        }
        let honoured = |key: &str| ack.params.notifications.get(key) == Some(&true.into());
        let bits = [
            ("toolsListChanged", ListKind::Tools),
            ("promptsListChanged", ListKind::Prompts),
            ("resourcesListChanged", ListKind::Resources),
        ]
        .into_iter()
        .filter(|(key, _)| honoured(key))
        .fold(0, |bits, (_, kind)| bits | Self::bit(kind));
        self.0.store(bits, Ordering::Release);
        true
    }

    /// The stream ended: what was watched, no longer.
    pub(super) fn end(&self) -> Vec<ListKind> {
        let bits = self.0.swap(0, Ordering::AcqRel);
        ListKind::ALL
            .into_iter()
            .filter(|k| bits & Self::bit(*k) != 0)
            .collect()
    }

    /// Whether changes of the list `method` reads are announced.
    pub(super) fn covers(&self, method: &str) -> bool {
        let kind = match method {
            "tools/list" => ListKind::Tools,
            "prompts/list" => ListKind::Prompts,
            "resources/list" | "resources/templates/list" => ListKind::Resources,
            _ => return false,
        };
        self.0.load(Ordering::Acquire) & Self::bit(kind) != 0
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
    /// `notifications/elicitation/complete` sent outside any request, as
    /// the backend wrote it, for the client the elicitation was handed to
    /// (None: the gateway does not know it, and nobody is told).
    ElicitationComplete {
        line: Arc<str>,
        client: Option<ClientKey>,
    },
    /// The gateway's own: `principal` connected this backend (the
    /// authorization code flow) from the start id `id`, which a client
    /// asked by URL elicitation knows as its `elicitationId`.
    Connected {
        id: String,
        principal: Principal,
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
                client.as_ref().is_none_or(|c| match c {
                    // A principal's own link: any client of that principal.
                    ClientKey::Principal(p) => caller.who() == Some(p),
                    ClientKey::Session(_) => *c == caller.key,
                })
            }
            // Only ever for the one client it was meant for.
            Notice::Ask { client, .. } => client.as_ref() == Some(&caller.key),
            Notice::ElicitationComplete { client, .. } => {
                client.as_ref().is_some_and(|c| match c {
                    ClientKey::Principal(p) => caller.who() == Some(p),
                    ClientKey::Session(_) => *c == caller.key,
                })
            }
            // 2025-11-25 sessions that take URL elicitation (the 2026-07-28
            // era has no such notification): every one of the principal's,
            // since any may have been asked; the others ignore its id.
            Notice::Connected { principal, .. } => {
                caller.who() == Some(principal)
                    && caller.caps().elicitation_url
                    && caller.is_legacy()
            }
        }
    }
}

impl Backend {
    /// What the backend announces for clients (list changes, resource
    /// updates), as it happens.
    pub fn subscribe_changes(&self) -> broadcast::Receiver<Notice> {
        self.changes.subscribe()
    }

    /// `principal` connected from start id `id` (the authorization code
    /// flow's callback): their sessions are told, on any replica.
    pub fn connected(&self, principal: &Principal, id: &str) {
        self.announce(Notice::Connected {
            id: id.to_owned(),
            principal: principal.clone(),
        });
    }

    pub(super) fn announce(&self, notice: Notice) {
        if let Some(relay) = self.relay.get() {
            relay(&notice);
        }
        self.announce_here(notice);
    }

    /// What another replica's session of this backend announced.
    pub fn announce_here(&self, notice: Notice) {
        if let Notice::ListChanged(kind) = &notice {
            self.cache.invalidate(kind.method());
        }
        let _ = self.changes.send(notice);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acknowledgement_says_what_is_watched_until_the_stream_ends() {
        let w = Watched::default();
        assert!(!w.covers("tools/list"));
        // Not an acknowledgement: nothing changes.
        assert!(
            !w.acknowledged(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#)
        );
        let ack = r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true,"promptsListChanged":false,"resourcesListChanged":true},"_meta":{"io.modelcontextprotocol/subscriptionId":"sluice-listen"}}}"#;
        assert!(w.acknowledged(ack));
        assert!(w.covers("tools/list"));
        assert!(!w.covers("prompts/list"));
        assert!(w.covers("resources/templates/list") && w.covers("resources/list"));
        assert!(!w.covers("tools/call"));
        assert_eq!(w.end(), [ListKind::Tools, ListKind::Resources]);
        assert!(!w.covers("tools/list"));
        assert!(w.end().is_empty());
    }
}
