//! One namespace: the backends it aggregates and how their names appear.

use std::borrow::Cow;
use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use indexmap::IndexMap;
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio_stream::wrappers::BroadcastStream;

use super::cursor::Cursor;
use super::index::NameIndex;
use super::kind::Kind;
use super::rounds::{self, Rounds};
use super::tasks::{self, TaskIndex};
use super::{links, names};
use crate::config::{Prefix, ToolFilter, ToolScopes};
use crate::jsonrpc::{self, INVALID_PARAMS, METHOD_NOT_FOUND, Outcome};
use crate::protocol::LogLevel;
use crate::upstream::{Answered, Backend, Caller, EventSink, Notice};
use crate::vocab::NamespaceName;

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
}

impl ClientNotice {
    /// What a client is told when its namespace's members change.
    pub fn all_lists_changed() -> [ClientNotice; 3] {
        [
            ClientNotice::ListChanged("notifications/tools/list_changed"),
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
        }
    }
}

type Fields = IndexMap<String, Box<RawValue>>;

/// Gateway pages of a merged list followed to learn the names in it.
const MAX_LIST_PAGES: usize = 64;

pub(super) struct Member {
    /// Its position in the namespace.
    pub(super) index: usize,
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
}

pub(super) fn error(code: i64, message: &str) -> Outcome {
    Outcome::Error(jsonrpc::error_object(code, message, None))
}

fn ok(v: &impl serde::Serialize) -> Outcome {
    Outcome::Result(jsonrpc::raw(v))
}

pub(super) fn parse_fields(raw: Option<&RawValue>) -> Option<Fields> {
    serde_json::from_str(raw.map_or("{}", RawValue::get)).ok()
}

pub(super) fn string_field(fields: &Fields, key: &str) -> Option<String> {
    serde_json::from_str(fields.get(key)?.get()).ok()
}

/// The string at `key` of a params object, found without copying the other
/// fields (the hot path reads one name and passes the rest through).
/// `Err(())`: params is not an object; `Ok(None)`: no such string. As with
/// `parse_fields`, a repeated key's last value counts. A string without
/// escapes is borrowed, not copied.
pub(crate) fn peek_string<'a>(
    raw: Option<&'a RawValue>,
    key: &str,
) -> Result<Option<Cow<'a, str>>, ()> {
    let text = raw.map_or("{}", RawValue::get);
    let mut last = None;
    let read = jsonrpc::members(text, |k, v| {
        if k == key {
            last = Some(v);
        }
        Some(())
    });
    match read {
        Some(()) => Ok(last.and_then(|v| match v {
            jsonrpc::Value::Str(s, _) => Some(Cow::Borrowed(s)),
            jsonrpc::Value::Raw(raw) => serde_json::from_str(raw.get()).ok().map(Cow::Owned),
        })),
        // Keys with escapes in them: serde decodes them.
        None => peek_string_with_serde(raw, key).map(|s| s.map(Cow::Owned)),
    }
}

/// What `peek_string` reads, read by serde (the fuzz target compares them).
pub(crate) fn peek_string_with_serde(
    raw: Option<&RawValue>,
    key: &str,
) -> Result<Option<String>, ()> {
    let fields = parse_fields(raw).ok_or(())?;
    Ok(string_field(&fields, key))
}

impl Namespace {
    pub(super) fn new(
        name: NamespaceName,
        tag: u16,
        members: Vec<(Arc<Backend>, ToolFilter)>,
        prefix: Prefix,
        page_size: usize,
        tool_scopes: ToolScopes,
    ) -> Namespace {
        Namespace {
            name,
            tag,
            members: members
                .into_iter()
                .enumerate()
                .map(|(index, (backend, tools))| Member {
                    index,
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
    ) -> bool {
        self.prefix == prefix
            && self.page_size == page_size
            && self.tool_scopes == *tool_scopes
            && self.members.len() == members.len()
            && self
                .members
                .iter()
                .zip(members)
                .all(|(m, (backend, tools))| Arc::ptr_eq(&m.backend, backend) && m.tools == *tools)
    }

    /// Waits for backends still on their first start, only while the
    /// gateway itself is starting (a short, configured window).
    pub async fn settle(&self) {
        let all = self.members.iter().map(|m| m.backend.settle());
        futures_util::future::join_all(all).await;
    }

    /// Capabilities advertised to clients: the union of the healthy
    /// backends'. Tools are always offered: a gateway exists to aggregate them.
    pub fn capabilities(&self) -> Value {
        let infos: Vec<_> = self
            .members
            .iter()
            .filter_map(|m| m.backend.info())
            .collect();
        let has = |c: &str| infos.iter().any(|i| i.has(c));
        let mut caps = serde_json::Map::new();
        caps.insert("tools".into(), json!({ "listChanged": true }));
        if has("prompts") {
            caps.insert("prompts".into(), json!({ "listChanged": true }));
        }
        if has("resources") {
            let subscribe = infos.iter().any(|i| {
                i.capabilities
                    .get("resources")
                    .and_then(|r| r.get("subscribe"))
                    == Some(&json!(true))
            });
            caps.insert(
                "resources".into(),
                json!({ "listChanged": true, "subscribe": subscribe }),
            );
        }
        if has("completions") {
            caps.insert("completions".into(), json!({}));
        }
        // Extensions (tasks, ...) that any backend offers, first one wins.
        let mut extensions = serde_json::Map::new();
        for info in &infos {
            if let Some(Value::Object(ext)) = info.capabilities.get("extensions") {
                for (k, v) in ext {
                    extensions.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
        if !extensions.is_empty() {
            caps.insert("extensions".into(), Value::Object(extensions));
        }
        // 2025-11-25 tasks: what the first backend that has them offers
        // (task ids are routed back to the backend that made them).
        if let Some(tasks) = infos.iter().find_map(|i| i.capabilities.get("tasks")) {
            caps.insert("tasks".into(), tasks.clone());
        }
        caps.insert("logging".into(), json!({}));
        Value::Object(caps)
    }

    pub fn instructions(&self) -> Option<String> {
        let parts: Vec<String> = self
            .members
            .iter()
            .filter_map(|m| {
                let text = m.backend.info()?.instructions.clone()?;
                Some(format!("[{}] {text}", m.backend.name))
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// (names indexed for `prefix = "never"`, tasks indexed).
    pub fn census(&self) -> (usize, usize, usize) {
        (
            self.index.lock().len(),
            self.tasks.lock().len(),
            self.rounds.len(),
        )
    }

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
                        Notice::Ask {
                            id, method, params, ..
                        } => Some(ClientNotice::Ask(jsonrpc::request(
                            &jsonrpc::raw(&id),
                            &method,
                            params.as_deref(),
                        ))),
                    },
                    _ => None,
                };
                std::future::ready(notice)
            })
        });
        futures_util::stream::select_all(streams)
    }

    /// Serves one client request, always with a JSON-RPC outcome.
    pub async fn handle(
        &self,
        caller: &Caller,
        method: &str,
        params: Option<Box<RawValue>>,
        events: &EventSink,
    ) -> Outcome {
        // Every arm but the forwarded calls is boxed: a future is as big as
        // its largest arm, and this one is moved into a box per request.
        if let Some(kind) = Kind::from_list_method(method) {
            return Box::pin(self.list(caller, kind, params.as_deref())).await;
        }
        match method {
            "ping" => ok(&json!({})),
            "logging/setLevel" => self.set_level(caller, params, events).await,
            "tools/call" => {
                self.forward(caller, Kind::Tool, method, params, events)
                    .await
            }
            "prompts/get" => {
                self.forward(caller, Kind::Prompt, method, params, events)
                    .await
            }
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                self.forward(caller, Kind::Resource, method, params, events)
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

    /// The input schema of an exposed tool, for checking `Mcp-Param-*`.
    pub async fn tool_schema(&self, caller: &Caller, exposed: &str) -> Option<serde_json::Value> {
        let (i, original) = self.resolve(caller, Kind::Tool, exposed).await?;
        self.members[i].backend.tool_schema(caller, original).await
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

    /// The name a client sees for `original` of member `m`, if exposed.
    /// Whether `caller` may see and call the tool clients know as `exposed`.
    pub(super) fn may_use(&self, caller: &Caller, exposed: &str) -> bool {
        match caller.scopes() {
            None => true,
            Some(held) => self.tool_scopes.allows(exposed, held),
        }
    }

    pub(super) fn expose(&self, m: &Member, kind: Kind, original: &str) -> Option<String> {
        let base = match kind {
            Kind::Tool => m.tools.expose(original)?,
            _ => original.to_owned(),
        };
        let exposed = match (self.prefix, kind.is_uri()) {
            (Prefix::Never, _) => base,
            (Prefix::Always, false) => names::prefixed(&m.backend.name, &base),
            (Prefix::Always, true) => names::prefixed_uri(&m.backend.name, &base),
        };
        if kind == Kind::Tool && !names::valid_tool_name(&exposed) {
            tracing::warn!(backend = %m.backend.name, tool = %exposed, "tool name breaks the spec's naming rule; dropped");
            return None;
        }
        Some(exposed)
    }

    /// The member and original name behind an exposed name.
    async fn resolve<'a>(
        &'a self,
        caller: &Caller,
        kind: Kind,
        exposed: &'a str,
    ) -> Option<(usize, &'a str)> {
        if self.prefix == Prefix::Always {
            return self.members.iter().enumerate().find_map(|(i, m)| {
                let rest = if kind.is_uri() {
                    names::strip_uri(&m.backend.name, exposed)?
                } else {
                    names::strip(&m.backend.name, exposed)?
                };
                let original = match kind {
                    Kind::Tool => m.tools.original(rest)?,
                    _ => rest,
                };
                Some((i, original))
            });
        }
        let lookup = |this: &'a Self| {
            let i = this
                .index
                .lock()
                .lookup(kind, exposed, |i| this.version(i))?;
            let original = match kind {
                Kind::Tool => this.members[i].tools.original(exposed)?,
                _ => exposed,
            };
            Some((i, original))
        };
        if let Some(hit) = lookup(self) {
            return Some(hit);
        }
        // A name never listed through us: walk the lists once, then retry.
        // (Boxed, as below: these futures would make every call's large.)
        Box::pin(self.fill_index(caller, kind)).await;
        if let Some(hit) = lookup(self) {
            return Some(hit);
        }
        if kind.is_uri() {
            return Box::pin(self.resolve_uri(caller, exposed)).await;
        }
        None
    }

    /// A URI no list named (a template's instance, or one only the backend
    /// knows): the backend whose template matches it, else the only
    /// backend that serves resources.
    async fn resolve_uri<'a>(&self, caller: &Caller, uri: &'a str) -> Option<(usize, &'a str)> {
        self.fill_index(caller, Kind::Template).await;
        let by_template = self
            .index
            .lock()
            .templates(|i| self.version(i))
            .into_iter()
            .find(|(template, _)| names::template_matches(template, uri))
            .map(|(_, i)| i);
        if let Some(i) = by_template {
            return Some((i, uri));
        }
        let mut serving = self
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.backend.info().is_some_and(|i| i.has("resources")));
        match (serving.next(), serving.next()) {
            (Some((i, _)), None) => Some((i, uri)),
            _ => None,
        }
    }

    /// The current list version of member `i` (see `NameIndex`).
    fn version(&self, i: usize) -> u64 {
        self.members[i].backend.list_version()
    }

    /// Reads the merged list once, so the index learns its names.
    async fn fill_index(&self, caller: &Caller, kind: Kind) {
        let mut cursor = Some(Cursor::start());
        for _ in 0..MAX_LIST_PAGES {
            let Some(c) = cursor.take() else { return };
            let params = jsonrpc::raw(&json!({ "cursor": c.encode() }));
            match self.list(caller, kind, Some(&params)).await {
                Outcome::Result(r) => {
                    cursor = parse_fields(Some(&r))
                        .and_then(|f| string_field(&f, "nextCursor"))
                        .and_then(|s| Cursor::decode(&s));
                }
                Outcome::Error(_) => return,
            }
        }
    }

    /// tools/call, prompts/get, resources/*: rename, forward to one backend.
    async fn forward(
        &self,
        caller: &Caller,
        kind: Kind,
        method: &str,
        params: Option<Box<RawValue>>,
        events: &EventSink,
    ) -> Outcome {
        let key = kind.id_key();
        let exposed = match peek_string(params.as_deref(), key) {
            Err(()) => return error(INVALID_PARAMS, "params must be an object"),
            Ok(None) => return error(INVALID_PARAMS, &format!("params.{key} is required")),
            Ok(Some(exposed)) => exposed,
        };
        let Some((i, original)) = self.resolve(caller, kind, &exposed).await else {
            return not_found(kind, &exposed);
        };
        // A tool the caller's scopes do not reach is not there for it.
        if kind == Kind::Tool && !self.may_use(caller, &exposed) {
            return not_found(kind, &exposed);
        }
        match self.lists(caller, i, kind, original).await {
            Ok(true) => {}
            Ok(false) => return not_found(kind, &exposed),
            Err(failed) => return failed,
        }
        // One backend session serves every client of a shared backend: one
        // client's unsubscribe would end the others' subscriptions. The
        // gateway stops delivering to that client instead (see `notices`).
        if method == "resources/unsubscribe" && self.members[i].backend.is_shared() {
            return ok(&json!({}));
        }
        // An unchanged name leaves the params exactly as the client sent them.
        let params = if original == exposed {
            params
        } else {
            let mut fields = parse_fields(params.as_deref()).unwrap_or_default();
            fields.insert(key.into(), jsonrpc::raw(&original));
            Some(jsonrpc::raw(&fields))
        };
        let m = &self.members[i];
        let outcome = self.call_rounds(caller, m, method, params, events).await;
        let Outcome::Result(r) = outcome else {
            return outcome;
        };
        // URIs in results take the form the client can follow back.
        let r = match (self.prefix, method) {
            (Prefix::Never, _) => r,
            (Prefix::Always, "resources/read") => {
                links::resource_contents(&r, &m.backend.name).unwrap_or(r)
            }
            (Prefix::Always, "tools/call") => links::tool_result(&r, &m.backend.name).unwrap_or(r),
            (Prefix::Always, "prompts/get") => {
                links::prompt_result(&r, &m.backend.name).unwrap_or(r)
            }
            (Prefix::Always, _) => r,
        };
        Outcome::Result(self.expose_task(i, r))
    }

    /// A result that names a task: the client sees the task id it will
    /// route back with (prefixed), or the index learns its backend.
    fn expose_task(&self, member: usize, result: Box<RawValue>) -> Box<RawValue> {
        let Some(at) = tasks::task_id(&result) else {
            return result;
        };
        let task = match &at {
            tasks::TaskAt::Top(t) | tasks::TaskAt::Nested(t) => t.clone(),
        };
        match self.prefix {
            Prefix::Never => {
                self.tasks.lock().remember(&task, member);
                result
            }
            Prefix::Always => {
                let exposed = names::prefixed(&self.members[member].backend.name, &task);
                match at {
                    tasks::TaskAt::Top(_) => replace_field(&result, "taskId", &exposed),
                    tasks::TaskAt::Nested(_) => {
                        let mut fields = parse_fields(Some(&result)).unwrap_or_default();
                        let inner = fields
                            .get("task")
                            .and_then(|t| replace_field(t, "taskId", &exposed));
                        inner.map(|inner| {
                            fields.insert("task".into(), inner);
                            jsonrpc::raw(&fields)
                        })
                    }
                }
                .unwrap_or(result)
            }
        }
    }

    /// A level for log messages goes to every backend that logs. On a
    /// shared backend it is the level for everyone: the last one set wins.
    async fn set_level(
        &self,
        caller: &Caller,
        params: Option<Box<RawValue>>,
        events: &EventSink,
    ) -> Outcome {
        let logging = self
            .members
            .iter()
            .filter(|m| m.backend.info().is_some_and(|i| i.has("logging")));
        let calls =
            logging.map(|m| self.call(caller, m, "logging/setLevel", params.clone(), events));
        for outcome in futures_util::future::join_all(calls).await {
            if let Outcome::Error(e) = outcome {
                tracing::debug!(error = e.get(), "a backend refused logging/setLevel");
            }
        }
        ok(&json!({}))
    }

    /// tasks/get|update|cancel: to the backend that made the task.
    async fn forward_task(
        &self,
        caller: &Caller,
        method: &str,
        params: Option<Box<RawValue>>,
        events: &EventSink,
    ) -> Outcome {
        let Some(mut fields) = parse_fields(params.as_deref()) else {
            return error(INVALID_PARAMS, "params must be an object");
        };
        let Some(exposed) = string_field(&fields, "taskId") else {
            return error(INVALID_PARAMS, "params.taskId is required");
        };
        let owner = match self.prefix {
            Prefix::Always => self.members.iter().enumerate().find_map(|(i, m)| {
                names::strip(&m.backend.name, &exposed).map(|t| (i, t.to_owned()))
            }),
            Prefix::Never => {
                let known = self.tasks.lock().owner(&exposed);
                // One backend: it is the owner even of tasks we never saw.
                known
                    .or_else(|| (self.members.len() == 1).then_some(0))
                    .map(|i| (i, exposed.clone()))
            }
        };
        let Some((i, original)) = owner else {
            return error(INVALID_PARAMS, &format!("Unknown task: {exposed}"));
        };
        fields.insert("taskId".into(), jsonrpc::raw(&original));
        let m = &self.members[i];
        match self
            .call(caller, m, method, Some(jsonrpc::raw(&fields)), events)
            .await
        {
            Outcome::Result(r) => Outcome::Result(self.expose_task(i, r)),
            o => o,
        }
    }

    async fn complete(
        &self,
        caller: &Caller,
        params: Option<Box<RawValue>>,
        events: &EventSink,
    ) -> Outcome {
        let Some(mut fields) = parse_fields(params.as_deref()) else {
            return error(INVALID_PARAMS, "params must be an object");
        };
        let Some(mut reference) = parse_fields(fields.get("ref").map(|r| &**r)) else {
            return error(INVALID_PARAMS, "params.ref is required");
        };
        let (kind, key) = match string_field(&reference, "type").as_deref() {
            Some("ref/prompt") => (Kind::Prompt, "name"),
            Some("ref/resource") => (Kind::Resource, "uri"),
            _ => {
                return error(
                    INVALID_PARAMS,
                    "params.ref.type must be ref/prompt or ref/resource",
                );
            }
        };
        let Some(exposed) = string_field(&reference, key) else {
            return error(INVALID_PARAMS, &format!("params.ref.{key} is required"));
        };
        let Some((i, original)) = self.resolve(caller, kind, &exposed).await else {
            return not_found(kind, &exposed);
        };
        match self.lists(caller, i, kind, original).await {
            Ok(true) => {}
            Ok(false) => return not_found(kind, &exposed),
            Err(failed) => return failed,
        }
        reference.insert(key.into(), jsonrpc::raw(&original));
        fields.insert("ref".into(), jsonrpc::raw(&reference));
        self.call(
            caller,
            &self.members[i],
            "completion/complete",
            Some(jsonrpc::raw(&fields)),
            events,
        )
        .await
    }

    /// `call`, answering a 2026-07-28 backend's `input_required` on a
    /// legacy client's behalf by asking the client (see `rounds`).
    async fn call_rounds(
        &self,
        caller: &Caller,
        m: &Member,
        method: &str,
        params: Option<Box<RawValue>>,
        events: &EventSink,
    ) -> Outcome {
        if !(caller.is_legacy() && m.backend.is_modern()) {
            return self.call(caller, m, method, params, events).await;
        }
        let mut params = params;
        for _ in 0..rounds::MAX_ROUNDS {
            let outcome = self.call(caller, m, method, params.clone(), events).await;
            let Some(needed) = rounds::needed(&outcome) else {
                return outcome;
            };
            params = match self
                .rounds
                .ask(caller, events, needed, params.as_deref())
                .await
            {
                Ok(retry) => Some(retry),
                Err(refusal) => return refusal,
            };
        }
        error(
            jsonrpc::INTERNAL_ERROR,
            "sluice: the backend still needed input after every round",
        )
    }

    async fn call(
        &self,
        caller: &Caller,
        m: &Member,
        method: &str,
        params: Option<Box<RawValue>>,
        events: &EventSink,
    ) -> Outcome {
        m.backend.settle().await;
        match m.backend.call(caller, method, params, Some(events)).await {
            Ok(o) => o,
            Err(e) => error(jsonrpc::INTERNAL_ERROR, &e.to_string()),
        }
    }
}

fn not_found(kind: Kind, exposed: &str) -> Outcome {
    match kind {
        Kind::Tool => error(INVALID_PARAMS, &format!("Unknown tool: {exposed}")),
        Kind::Prompt => error(INVALID_PARAMS, &format!("Unknown prompt: {exposed}")),
        Kind::Resource | Kind::Template => Outcome::Error(jsonrpc::error_object(
            INVALID_PARAMS,
            &format!("Resource not found: {exposed}"),
            Some(json!({ "uri": exposed })),
        )),
    }
}

/// A copy of an object with one string field replaced, the rest raw.
fn replace_field(object: &RawValue, key: &str, value: &str) -> Option<Box<RawValue>> {
    let mut fields: Fields = serde_json::from_str(object.get()).ok()?;
    fields.insert(key.into(), jsonrpc::raw(value));
    Some(jsonrpc::raw(&fields))
}

#[cfg(test)]
mod peek_tests {
    use super::{RawValue, parse_fields, peek_string, string_field};

    fn peek(json: &str) -> Result<Option<String>, ()> {
        let raw: Box<RawValue> = serde_json::from_str(json).unwrap();
        peek_string(Some(&raw), "name").map(|s| s.map(String::from))
    }

    #[test]
    fn reads_what_the_full_parse_reads() {
        for json in [
            r#"{"name":"a__echo","arguments":{"name":"inner"}}"#,
            r#"{"arguments":{"x":[1,{"name":"no"}]},"n\u0061me":"escaped"}"#,
            r#"{"name":"first","name":"last"}"#,
            r#"{"name":7}"#,
            r#"{"other":"x"}"#,
            r#"{}"#,
        ] {
            let raw: Box<RawValue> = serde_json::from_str(json).unwrap();
            let full = parse_fields(Some(&raw)).and_then(|f| string_field(&f, "name"));
            assert_eq!(peek(json), Ok(full), "{json}");
        }
        assert_eq!(peek(r#"{"name":"last","name":"x"}"#), Ok(Some("x".into())));
        assert_eq!(peek_string(None, "name"), Ok(None));
    }

    #[test]
    fn refuses_what_is_not_an_object() {
        for json in [r#"["name"]"#, r#""name""#, "7", "null"] {
            assert_eq!(peek(json), Err(()), "{json}");
            let raw: Box<RawValue> = serde_json::from_str(json).unwrap();
            assert!(parse_fields(Some(&raw)).is_none(), "{json}");
        }
    }
}
