//! What a namespace forwards to one backend: calls, gets and reads by
//! their exposed names, completions, tasks, and the log level to every
//! backend that logs.

use serde_json::json;
use serde_json::value::RawValue;

use super::{Member, Namespace, error, ok};
use crate::config::Prefix;
use crate::jsonrpc::{
    self, Fields, INVALID_PARAMS, Outcome, Payload, Routed, parse_fields, routed_string,
    string_field,
};
use crate::metrics::{self, ErrorType, Series};
use crate::router::audit::Trail;
use crate::router::kind::Kind;
use crate::router::rounds;
use crate::router::tasks;
use crate::router::{Seen, observed};
use crate::router::{links, names};
use crate::upstream::{Caller, EventSink};
use crate::vocab::Principal;

/// What a forwarded call names (a tool, a prompt, a resource), and where
/// its parse found the name in its params.
#[derive(Clone, Copy)]
pub(in crate::router) struct Called {
    kind: Kind,
    routed: Routed,
}

impl Called {
    pub(in crate::router) fn new(kind: Kind, routed: Routed) -> Called {
        Called { kind, routed }
    }
}

impl Namespace {
    /// tools/call, prompts/get, resources/*, on the audit trail (`who`
    /// asked) when it is read.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn forward(
        &self,
        who: &Principal,
        caller: &Caller,
        called: Called,
        method: &str,
        params: Option<Box<RawValue>>,
        events: &EventSink,
        seen: &mut Option<Seen>,
    ) -> Outcome {
        let mut trail = Trail::begin(who, &self.name, method);
        let outcome = self
            .route(caller, called, method, params, events, &mut trail, seen)
            .await;
        if let Some(trail) = trail {
            trail.end(&outcome);
        }
        outcome
    }

    /// Renames, then forwards to one backend. `seen`: the call's series in
    /// the operation histograms, once its name has passed the catalog.
    #[allow(clippy::too_many_arguments)]
    async fn route(
        &self,
        caller: &Caller,
        Called { kind, routed }: Called,
        method: &str,
        params: Option<Box<RawValue>>,
        events: &EventSink,
        trail: &mut Option<Trail<'_>>,
        seen: &mut Option<Seen>,
    ) -> Outcome {
        let key = kind.id_key();
        let exposed = match routed_string(params.as_deref(), key, routed) {
            Err(()) => return error(INVALID_PARAMS, "params must be an object"),
            Ok(None) => return error(INVALID_PARAMS, &format!("params.{key} is required")),
            Ok(Some(exposed)) => exposed,
        };
        if let Some(t) = trail {
            t.name(&exposed);
            t.arguments(params.as_deref());
        }
        let unlisted = |trail: &mut Option<Trail<'_>>| {
            if let Some(t) = trail {
                t.unlisted();
            }
            not_found(kind, &exposed)
        };
        let Some((i, original)) = self.resolve(caller, kind, &exposed).await else {
            return unlisted(trail);
        };
        if let Some(t) = trail {
            t.backend(&self.members[i].backend.name);
        }
        // A tool the caller's scopes do not reach is not there for it.
        if kind == Kind::Tool && !self.may_use(caller, &exposed) {
            return unlisted(trail);
        }
        // A tool's series is kept with its catalog entry: the look-up
        // that finds it listed finds it too.
        let listed = match kind {
            Kind::Tool => {
                let make = || new_tool_series(&self.members[i], &exposed, original);
                self.lists_tool_now(caller, i, original, make)
            }
            _ => self.lists_now(caller, i, kind, original).then_some(None),
        };
        let kept = match listed {
            Some(kept) => kept,
            None => {
                // Boxed: rare, and its future would make every call's large.
                match Box::pin(self.lists(caller, i, kind, original)).await {
                    Ok(true) => None,
                    // The authorization code flow: a tool of a backend the
                    // principal has not connected is not listed to them;
                    // its call says where to connect.
                    Ok(false) if kind == Kind::Tool => {
                        let backend = &self.members[i].backend;
                        return match backend.not_connected(caller) {
                            Some(url) => connect_first(caller, &backend.name, &url),
                            None => unlisted(trail),
                        };
                    }
                    Ok(false) => return unlisted(trail),
                    Err(failed) => return failed,
                }
            }
        };
        // One backend session serves every client of a shared backend: one
        // client's unsubscribe would end the others' subscriptions. The
        // gateway stops delivering to that client instead (see `notices`).
        if method == "resources/unsubscribe" && self.members[i].backend.is_shared() {
            return ok(&json!({}));
        }
        // Found while the names are at hand: the params move below.
        let series = match (kind, kept) {
            (_, Some(kept)) => kept,
            (Kind::Tool, None) => tool_series(&self.members[i], &exposed, original),
            _ => series(&self.members[i], method),
        };
        // An unchanged name leaves the params exactly as the client sent them.
        let params = if original == exposed {
            params
        } else {
            let mut fields = parse_fields(params.as_deref()).unwrap_or_default();
            fields.insert(key.into(), jsonrpc::raw(&original));
            Some(jsonrpc::raw(&fields))
        };
        let m = &self.members[i];
        let (outcome, backend_error) = self
            .call_rounds(caller, m, method, params, events, &series)
            .await;
        // A grant the backend refused, or whose refresh was refused, is
        // dropped: the principal is told where to connect again.
        if kind == Kind::Tool
            && matches!(outcome, Outcome::Error(_))
            && let Some(url) = m.backend.not_connected(caller)
        {
            return connect_first(caller, &m.backend.name, &url);
        }
        *seen = Some(Seen {
            series,
            backend_error,
        });
        let Outcome::Result(r) = outcome else {
            return outcome;
        };
        // URIs in results take the form the client can follow back.
        // A result left as it is stays the backend's (a large one with
        // its share of the body budget).
        let rewritten = match (self.prefix, method) {
            (Prefix::Never, _) => None,
            (Prefix::Always, "resources/read") => links::resource_contents(&r, &m.backend.name),
            (Prefix::Always, "tools/call") => links::tool_result(&r, &m.backend.name),
            (Prefix::Always, "prompts/get") => links::prompt_result(&r, &m.backend.name),
            (Prefix::Always, _) => None,
        };
        Outcome::Result(self.expose_task(i, rewritten.map_or(r, Payload::from)))
    }

    /// A result that names a task: the client sees the task id it will
    /// route back with (prefixed), or the index learns its backend.
    fn expose_task(&self, member: usize, result: Payload) -> Payload {
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
                .map_or(result, Payload::from)
            }
        }
    }

    /// A level for log messages goes to every backend that logs. On a
    /// shared backend it is the level for everyone: the last one set wins.
    pub(super) async fn set_level(
        &self,
        caller: &Caller,
        params: Option<Box<RawValue>>,
        events: &EventSink,
    ) -> Outcome {
        let logging = self
            .members
            .iter()
            .filter(|m| m.backend.info().is_some_and(|i| i.has("logging")));
        let method = "logging/setLevel";
        let calls = logging.map(|m| {
            let (series, params) = (series(m, method), params.clone());
            async move { self.call(caller, m, method, params, events, &series).await }
        });
        for outcome in futures_util::future::join_all(calls).await {
            if let (Outcome::Error(e), _) = outcome {
                tracing::debug!(error = e.get(), "a backend refused logging/setLevel");
            }
        }
        ok(&json!({}))
    }

    /// tasks/get|update|cancel: to the backend that made the task.
    pub(super) async fn forward_task(
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
        let params = Some(jsonrpc::raw(&fields));
        match self
            .call(caller, m, method, params, events, &series(m, method))
            .await
        {
            (Outcome::Result(r), _) => Outcome::Result(self.expose_task(i, r)),
            (o, _) => o,
        }
    }

    pub(super) async fn complete(
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
        let (m, method) = (&self.members[i], "completion/complete");
        let params = Some(jsonrpc::raw(&fields));
        self.call(caller, m, method, params, events, &series(m, method))
            .await
            .0
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
        series: &Series,
    ) -> (Outcome, Option<ErrorType>) {
        if !(caller.is_legacy() && m.backend.is_modern()) {
            return self.call(caller, m, method, params, events, series).await;
        }
        let mut params = params;
        for _ in 0..rounds::MAX_ROUNDS {
            let (outcome, error) = self
                .call(caller, m, method, params.clone(), events, series)
                .await;
            let Some(needed) = rounds::needed(&outcome) else {
                return (outcome, error);
            };
            params = match self
                .rounds
                .ask(caller, events, needed, params.as_deref())
                .await
            {
                Ok(retry) => Some(retry),
                Err(refusal) => return (refusal, None),
            };
        }
        let failed = error(
            jsonrpc::INTERNAL_ERROR,
            "sluice: the backend still needed input after every round",
        );
        (failed, Some(ErrorType::code(jsonrpc::INTERNAL_ERROR)))
    }

    /// One request to one backend, observed in the client's operation
    /// histogram; and what its outcome says of a failure.
    async fn call(
        &self,
        caller: &Caller,
        m: &Member,
        method: &str,
        params: Option<Box<RawValue>>,
        events: &EventSink,
        series: &Series,
    ) -> (Outcome, Option<ErrorType>) {
        m.backend.settle().await;
        let started = crate::clock::now();
        let called = m.backend.call(caller, method, params, Some(events)).await;
        let took = crate::clock::now().saturating_duration_since(started);
        let (error, outcome) = match called {
            Ok(o) => (ErrorType::of(&o, method == "tools/call"), o),
            Err(e) => (
                Some(ErrorType::transport(e.reason())),
                error(jsonrpc::INTERNAL_ERROR, &e.to_string()),
            ),
        };
        m.backend.metrics().asked(series, error, took.as_secs_f64());
        (outcome, error)
    }
}

/// The series of a request forwarded to `m` that names no tool.
fn series(m: &Member, method: &str) -> Series {
    let method = metrics::method_label(method);
    observed::series(m.id, method, "", || {
        let backend = &m.backend;
        backend
            .metrics()
            .series(method, backend.name.as_str(), "", "")
    })
}

/// The series of a `tools/call` of `exposed` (`original` to the backend),
/// once its name has passed the catalog, when the catalog entry does not
/// keep it for `m`.
fn tool_series(m: &Member, exposed: &str, original: &str) -> Series {
    let method = metrics::Method::TOOLS_CALL;
    observed::series(m.id, method, exposed, || {
        new_tool_series(m, exposed, original)
    })
}

fn new_tool_series(m: &Member, exposed: &str, original: &str) -> Series {
    let backend = &m.backend;
    let name = backend.name.as_str();
    let method = metrics::Method::TOOLS_CALL;
    backend.metrics().series(method, name, exposed, original)
}

/// A tool's call for a principal without a grant (the authorization code
/// flow), naming where to connect: to a client that declared URL mode
/// elicitation (2025-11-25), JSON-RPC error -32042 with that URL, which it
/// shows its user; to any other, the tool's own error, which a model reads.
fn connect_first(caller: &Caller, backend: &crate::vocab::BackendName, url: &url::Url) -> Outcome {
    let text = format!(
        "Not connected to {backend}: open {url} in your browser to connect {backend} \
         (sign in and consent there), then retry this call. The link works once, \
         for 10 minutes, and only for you: do not share it."
    );
    if caller.caps().elicitation_url {
        let id = url
            .path_segments()
            .and_then(|mut s| s.next_back())
            .unwrap_or_default();
        let data = json!({"elicitations": [{
            "mode": "url",
            "elicitationId": id,
            "url": url.as_str(),
            "message": format!("Connect {backend}: sign in and consent, then retry."),
        }]});
        return Outcome::Error(jsonrpc::error_object(
            URL_ELICITATION_REQUIRED,
            &text,
            Some(data),
        ));
    }
    ok(&json!({
        "content": [{"type": "text", "text": text}],
        "isError": true,
    }))
}

/// JSON-RPC error code: URL mode elicitation required (2025-11-25).
const URL_ELICITATION_REQUIRED: i64 = -32042;

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
