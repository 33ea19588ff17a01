//! One namespace: the backends it aggregates and how their names appear.
//!
//! Its dispatch is here (`handle`); the rest of its work by verb: what it
//! forwards to one backend (`forward`), the names it shows and resolves
//! (`catalog`), what it offers clients at `initialize` (`capabilities`),
//! what it tells them outside any request (`notices`), what it shows one
//! caller item by item, for operators (`view`); its merged lists
//! are `merge`'s and what a caller may call is `listed`'s.

mod capabilities;
mod catalog;
mod discovery;
mod forward;
mod notices;
mod view;

use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::json;
use serde_json::value::RawValue;

use super::index::NameIndex;
use super::kind::Kind;
use super::rounds::{self, Rounds};
use super::search::Search;
use super::tasks::TaskIndex;
use crate::config::{Discovery, Prefix, ToolFilter, ToolScopes};
use crate::jsonrpc::{self, METHOD_NOT_FOUND, Outcome, Routed};
use crate::upstream::{Answered, Backend, Caller, EventSink};
use crate::vocab::{NamespaceName, Principal};
use forward::Called;

pub(crate) use forward::{CONNECT_INPUT, CONNECT_STATE};
pub use notices::ClientNotice;
pub(crate) use view::{Item, View};

pub(super) struct Member {
    /// Its position in the namespace.
    pub(super) index: usize,
    /// Its identity, never reused (see `observed`).
    pub(super) id: u64,
    pub(super) backend: Arc<Backend>,
    tools: ToolFilter,
}

pub struct Namespace {
    pub name: NamespaceName,
    /// Its position in the config, a small tag sessions are counted by.
    pub tag: u16,
    pub(super) members: Vec<Member>,
    pub(super) prefix: Prefix,
    /// Items per page of a merged list.
    pub(super) page_size: usize,
    /// Tools only callers with these OAuth scopes see and may call.
    pub(super) tool_scopes: ToolScopes,
    /// Unprefixed names seen in lists -> member, for `prefix = "never"`.
    pub(super) index: Mutex<NameIndex>,
    tasks: Mutex<TaskIndex>,
    /// Questions the gateway asks legacy clients for 2026-07-28 backends.
    rounds: Rounds,
    /// How its clients find tools, as configured.
    discovery: Discovery,
    /// Search mode's index and settings (None: list mode).
    search: Option<Search>,
}

pub(super) fn error(code: i64, message: &str) -> Outcome {
    Outcome::Error(jsonrpc::error_object(code, message, None))
}

fn ok(v: &impl serde::Serialize) -> Outcome {
    Outcome::Result(jsonrpc::raw(v).into())
}

impl Namespace {
    pub(super) fn new(
        name: NamespaceName,
        tag: u16,
        members: Vec<(Arc<Backend>, ToolFilter)>,
        prefix: Prefix,
        page_size: usize,
        tool_scopes: ToolScopes,
        discovery: Discovery,
    ) -> Namespace {
        let search = match &discovery {
            Discovery::List => None,
            Discovery::Search {
                pinned,
                expose_found,
            } => Some(Search::new(pinned.clone(), *expose_found)),
        };
        Namespace {
            name,
            tag,
            members: members
                .into_iter()
                .enumerate()
                .map(|(index, (backend, tools))| Member {
                    index,
                    id: crate::router::observed::member_id(),
                    backend,
                    tools,
                })
                .collect(),
            prefix,
            page_size,
            tool_scopes,
            index: Mutex::new(NameIndex::default()),
            tasks: Mutex::new(TaskIndex::default()),
            rounds: Rounds::default(),
            discovery,
            search,
        }
    }

    /// Would `new` with these build the same namespace? Members are the
    /// same when they are the same running backends.
    pub(super) fn is_built_of(
        &self,
        members: &[(Arc<Backend>, ToolFilter)],
        prefix: Prefix,
        page_size: usize,
        tool_scopes: &ToolScopes,
        discovery: &Discovery,
    ) -> bool {
        self.prefix == prefix
            && self.discovery == *discovery
            && self.page_size == page_size
            && self.tool_scopes == *tool_scopes
            && self.members.len() == members.len()
            && self
                .members
                .iter()
                .zip(members)
                .all(|(m, (backend, tools))| Arc::ptr_eq(&m.backend, backend) && m.tools == *tools)
    }

    /// Whether it is in search mode.
    pub(super) fn searches(&self) -> bool {
        self.search.is_some()
    }

    /// Waits for backends still on their first start, only while the
    /// gateway itself is starting (a short, configured window).
    pub async fn settle(&self) {
        let all = self.members.iter().map(|m| m.backend.settle());
        futures_util::future::join_all(all).await;
    }

    /// (names indexed for `prefix = "never"`, tasks indexed, questions
    /// waiting, tools indexed for search).
    pub fn census(&self) -> (usize, usize, usize, usize) {
        (
            self.index.lock().len(),
            self.tasks.lock().len(),
            self.rounds.len(),
            self.search.as_ref().map_or(0, Search::len),
        )
    }

    /// Serves one client request, always with a JSON-RPC outcome. `routed`:
    /// where the name it routes on lies in `params`, if its parse found it;
    /// `seen`: the operation series a forwarded call was labelled with.
    #[allow(clippy::too_many_arguments)]
    pub async fn handle(
        &self,
        who: &Principal,
        caller: &Caller,
        method: &str,
        params: Option<Box<RawValue>>,
        routed: Routed,
        events: &EventSink,
        seen: &mut Option<crate::router::Seen>,
    ) -> Outcome {
        // Every arm but the forwarded calls is boxed: a future is as big as
        // its largest arm, and this one is moved into a box per request.
        if let Some(kind) = Kind::from_list_method(method) {
            if kind == Kind::Tool && self.search.is_some() {
                return Box::pin(self.search_list(caller, params.as_deref())).await;
            }
            return Box::pin(self.list(caller, kind, params.as_deref())).await;
        }
        match method {
            "ping" => ok(&json!({})),
            "logging/setLevel" => self.set_level(caller, params, events).await,
            "tools/call" => {
                // Search mode's own tools (list mode: one test of None).
                if let Some(tool) = self.gateway_tool(params.as_deref(), routed) {
                    let answered = self.call_gateway_tool(who, caller, tool, params, events, seen);
                    return Box::pin(answered).await;
                }
                let called = Called::new(Kind::Tool, routed);
                self.forward(who, caller, called, method, params, events, seen)
                    .await
            }
            "prompts/get" => {
                let called = Called::new(Kind::Prompt, routed);
                self.forward(who, caller, called, method, params, events, seen)
                    .await
            }
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                let called = Called::new(Kind::Resource, routed);
                self.forward(who, caller, called, method, params, events, seen)
                    .await
            }
            "completion/complete" => Box::pin(self.complete(caller, params, events)).await,
            // `tasks/result` is 2025-11-25's; `update` 2026-07-28's.
            "tasks/get" | "tasks/update" | "tasks/cancel" | "tasks/result" => {
                self.forward_task(caller, method, params, events).await
            }
            _ => error(METHOD_NOT_FOUND, &format!("Method not found: {method}")),
        }
    }

    /// A client's `notifications/roots/list_changed`: to its own backend
    /// sessions.
    pub fn roots_changed(&self, caller: &Caller) {
        for m in &self.members {
            m.backend
                .client_notification(caller, "notifications/roots/list_changed");
        }
    }

    /// Routes a client's answer to a server-to-client request back to the
    /// backend that asked (ids look like `sluice:{backend}:{token}`).
    pub fn answer(&self, caller: &Caller, id: &RawValue, outcome: &Outcome) -> Answered {
        let Ok(id) = serde_json::from_str::<String>(id.get()) else {
            return Answered::Unknown;
        };
        let Some((backend, token)) = id.strip_prefix("sluice:").and_then(|r| r.rsplit_once(':'))
        else {
            return Answered::Unknown;
        };
        if backend == rounds::ASKER {
            return self.rounds.answer(caller, token, outcome);
        }
        self.members
            .iter()
            .find(|m| m.backend.name.as_str() == backend)
            .map_or(Answered::Unknown, |m| {
                m.backend.answer(caller, token, outcome)
            })
    }
}
