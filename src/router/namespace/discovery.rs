//! Search mode's verbs (`discovery = "search"`): the short `tools/list`
//! (the gateway's `search_tools` and `call_tool`, the pins, what the
//! session found), `search_tools` over the members' indexed catalogues,
//! and `call_tool`, which is a direct `tools/call` of the tool it names:
//! the same `forward` (catalog check, scopes, per-session backends,
//! audit line and metrics under the real name, a backend's questions
//! bridged), only with the params it would have had.
//!
//! A tool found by search may also be called by its own name: the
//! catalogue is the namespace's in both modes, only the list is short.

use std::sync::Arc;

use serde_json::json;
use serde_json::value::RawValue;

use super::forward::Called;
use super::{Namespace, error, ok};
use crate::config::Discovery;
use crate::jsonrpc::{self, Fields, INVALID_PARAMS, Outcome, Routed, parse_fields, string_field};
use crate::router::Seen;
use crate::router::audit::Trail;
use crate::router::filter::NameFilter;
use crate::router::kind::Kind;
use crate::router::search::{self, Catalogue, Search, Viewer};
use crate::upstream::{Caller, EventSink};
use crate::vocab::Principal;

/// The gateway's own tools, as listed.
const SEARCH_TOOLS: &str = r#"{"name":"search_tools","title":"Search tools","description":"Find the tools this server offers for a task. Say what you want to do in a few words (\"create a GitHub issue\", \"read a file\") or give part of a tool's name. The answer lists the best matching tools, best first, each with its full definition (name, description, input schema). Call one with call_tool, giving its name and arguments; search again with other words if none fits.","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"What you want to do, in a few words, or a tool's name"},"limit":{"type":"integer","minimum":1,"maximum":50,"default":8,"description":"How many tools to return (default 8, at most 50)"}},"required":["query"]},"outputSchema":{"type":"object","properties":{"tools":{"type":"array","items":{"type":"object"}}},"required":["tools"]},"annotations":{"title":"Search tools","readOnlyHint":true,"openWorldHint":false}}"#;
const CALL_TOOL: &str = r#"{"name":"call_tool","title":"Call a tool","description":"Call a tool that search_tools found, by its exact name, with arguments that follow its input schema. The result is that tool's own.","inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"The tool's name, exactly as search_tools gave it"},"arguments":{"type":"object","description":"The tool's arguments, as its input schema describes them"}},"required":["name"]}}"#;

impl Namespace {
    /// Which of the gateway's own tools a `tools/call` names, in search
    /// mode (None: another tool, or list mode).
    pub(super) fn gateway_tool(
        &self,
        params: Option<&RawValue>,
        routed: Routed,
    ) -> Option<&'static str> {
        self.search.as_ref()?;
        let name = jsonrpc::routed_string(params, "name", routed).ok()??;
        [Discovery::SEARCH_TOOLS, Discovery::CALL_TOOL]
            .into_iter()
            .find(|t| *t == name)
    }

    /// `tools/list` in search mode: the gateway's tools, the pins and the
    /// session's found tools the caller may see, past the request's filter.
    pub(super) async fn search_list(&self, caller: &Caller, params: Option<&RawValue>) -> Outcome {
        let Some(search) = &self.search else {
            return self.list(caller, Kind::Tool, params).await;
        };
        let Some(fields) = parse_fields(params) else {
            return error(INVALID_PARAMS, "params must be an object");
        };
        if string_field(&fields, "cursor").is_some() {
            return error(INVALID_PARAMS, "Invalid cursor");
        }
        let filter = match NameFilter::of(&fields) {
            Ok(filter) => filter,
            Err(refused) => return refused,
        };
        let (catalogues, rebuilt) = self.catalogues(caller).await;
        let viewer = Viewer::new(&self.tool_scopes, caller.scopes());
        let found = match (search.expose_found, caller.client_session()) {
            (true, Some(session)) => session.found(),
            _ => Vec::new(),
        };
        let mut listed: Vec<&str> = vec![SEARCH_TOOLS, CALL_TOOL];
        let mut names: Vec<&str> = vec![Discovery::SEARCH_TOOLS, Discovery::CALL_TOOL];
        for (i, name) in search.pinned.iter().chain(found.iter()).enumerate() {
            if names.contains(&name.as_str()) {
                continue;
            }
            match catalogues.iter().find_map(|c| c.get(name)) {
                Some(tool) if viewer.sees(tool) => {
                    listed.push(tool.definition.get());
                    names.push(name);
                }
                Some(_) => {}
                None if rebuilt && i < search.pinned.len() => {
                    tracing::warn!(namespace = %self.name, tool = %name, "pinned tool is not listed by its backend; left out");
                }
                None => {}
            }
        }
        let shown: Vec<&str> = listed
            .into_iter()
            .zip(&names)
            .filter(|(_, name)| filter.as_ref().is_none_or(|f| f.matches(name)))
            .map(|(definition, _)| definition)
            .collect();
        Outcome::Result(raw_json(&format!("{{\"tools\":[{}]}}", shown.join(","))).into())
    }

    /// A `tools/call` of `search_tools` or `call_tool`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn call_gateway_tool(
        &self,
        who: &Principal,
        caller: &Caller,
        tool: &'static str,
        params: Option<Box<RawValue>>,
        events: &EventSink,
        seen: &mut Option<Seen>,
    ) -> Outcome {
        let Some(fields) = parse_fields(params.as_deref()) else {
            return error(INVALID_PARAMS, "params must be an object");
        };
        let arguments = fields.get("arguments").map(|a| &**a);
        if tool == Discovery::SEARCH_TOOLS {
            return self.search_tools(who, caller, arguments).await;
        }
        let Some(mut args) = parse_fields(arguments) else {
            return tool_error("call_tool's arguments must be an object");
        };
        let Some(name) = string_field(&args, "name") else {
            return tool_error("call_tool needs `name`: a tool's name as search_tools gave it");
        };
        let inner = args.shift_remove("arguments");
        if inner
            .as_deref()
            .is_some_and(|a| parse_fields(Some(a)).is_none())
        {
            return tool_error("call_tool's `arguments` must be an object: the tool's arguments");
        }
        match name.as_str() {
            Discovery::SEARCH_TOOLS => {
                return self.search_tools(who, caller, inner.as_deref()).await;
            }
            Discovery::CALL_TOOL => {
                return tool_error("call_tool calls another tool; name that tool");
            }
            _ => {}
        }
        // The params the tool's direct call would have had: the client's
        // own (`_meta`, its progress token, a task), naming the tool.
        let mut direct: Fields = fields;
        direct.insert("name".into(), jsonrpc::raw(&name));
        match inner {
            Some(inner) => direct.insert("arguments".into(), inner),
            None => direct.shift_remove("arguments"),
        };
        let called = Called::new(Kind::Tool, Routed::default());
        let params = Some(jsonrpc::raw(&direct));
        self.forward(who, caller, called, "tools/call", params, events, seen)
            .await
    }

    /// `search_tools {query, limit}`: the best matching tools' definitions.
    async fn search_tools(
        &self,
        who: &Principal,
        caller: &Caller,
        arguments: Option<&RawValue>,
    ) -> Outcome {
        let mut trail = Trail::begin(who, &self.name, "tools/call");
        if let Some(t) = &mut trail {
            t.name(Discovery::SEARCH_TOOLS);
            t.arguments(
                arguments
                    .map(|a| jsonrpc::raw(&json!({ "arguments": a })))
                    .as_deref(),
            );
        }
        let outcome = self.searched(caller, arguments).await;
        if let Some(trail) = trail {
            trail.end(&outcome);
        }
        outcome
    }

    async fn searched(&self, caller: &Caller, arguments: Option<&RawValue>) -> Outcome {
        #[derive(serde::Deserialize)]
        struct Asked {
            query: String,
            limit: Option<i64>,
        }
        let Some(search) = &self.search else {
            return error(INVALID_PARAMS, "Unknown tool: search_tools");
        };
        let asked = arguments.and_then(|a| serde_json::from_str::<Asked>(a.get()).ok());
        let Some(asked) = asked else {
            return tool_error(
                "search_tools needs `query` (a string) and takes `limit` (an integer)",
            );
        };
        if asked.query.trim().is_empty() || asked.query.len() > search::MAX_QUERY {
            return tool_error(&format!(
                "search_tools' `query` must say what to find, in at most {} bytes",
                search::MAX_QUERY
            ));
        }
        let limit = match asked.limit {
            None => search::DEFAULT_LIMIT,
            Some(n) if n >= 1 => usize::try_from(n)
                .unwrap_or(usize::MAX)
                .min(search::MAX_LIMIT),
            Some(_) => return tool_error("search_tools' `limit` must be 1 or more"),
        };
        let (catalogues, _) = self.catalogues(caller).await;
        let viewer = Viewer::new(&self.tool_scopes, caller.scopes());
        let best = search::rank(&catalogues, &asked.query, limit, &viewer);
        let tools: Vec<&search::Tool> = best
            .iter()
            .map(|&(c, i)| &catalogues[c].tools[i as usize])
            .collect();
        self.expose_found(search, caller, &tools);
        let definitions: Vec<&str> = tools.iter().map(|t| t.definition.get()).collect();
        let found = format!("{{\"tools\":[{}]}}", definitions.join(","));
        let text = jsonrpc::raw(&found);
        let result = format!(
            "{{\"content\":[{{\"type\":\"text\",\"text\":{}}}],\"structuredContent\":{found}}}",
            text.get()
        );
        Outcome::Result(raw_json(&result).into())
    }

    /// `expose_found`: the tools a legacy session's search returned join
    /// its list; its GET stream hears that the list changed.
    fn expose_found(&self, search: &Search, caller: &Caller, tools: &[&search::Tool]) {
        let Some(session) = caller.client_session().filter(|_| search.expose_found) else {
            return;
        };
        let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        if session.note_found(&names, search::MAX_FOUND) {
            let _ = search.found.send(caller.key().clone());
        }
    }

    /// Every member's catalogue for `caller`, indexed anew where its
    /// backend's lists changed since; and whether any was.
    async fn catalogues(&self, caller: &Caller) -> (Vec<Arc<Catalogue>>, bool) {
        let Some(search) = &self.search else {
            return (Vec::new(), false);
        };
        let mut out = Vec::with_capacity(self.members.len());
        let mut rebuilt = false;
        for m in &self.members {
            // Per-principal credentials: not there for a principal it
            // hides, its tools neither found nor pinned (the catalogue
            // kept is every caller's, so this is asked before it).
            if m.backend.hides(caller) {
                continue;
            }
            let profile = m.backend.list_profile(caller);
            let cached = || search.cached(m.index, profile, m.backend.list_version());
            if let Some(c) = cached() {
                out.push(c);
                continue;
            }
            let _one = search.building.lock().await;
            if let Some(c) = cached() {
                out.push(c);
                continue;
            }
            // The version before the read: a change during it reads again.
            let version = m.backend.list_version();
            let Some(items) = self.member_items(caller, m, Kind::Tool).await else {
                continue;
            };
            let items = self.without_gateway_names(m, items);
            let scopes = &self.tool_scopes;
            let catalogue = Arc::new(Catalogue::build(version, items, |n| scopes.needs_bits(n)));
            search.keep(m.index, profile, catalogue.clone());
            out.push(catalogue);
            rebuilt = true;
        }
        (out, rebuilt)
    }

    /// A backend's tool listed under a gateway tool's name (possible only
    /// unprefixed) is not searched: the name is the gateway's.
    fn without_gateway_names(&self, m: &super::Member, mut items: Vec<Fields>) -> Vec<Fields> {
        items.retain(|item| {
            let name = string_field(item, "name");
            let shadowed = name.as_deref().is_some_and(Discovery::is_gateway_tool);
            if shadowed {
                tracing::warn!(backend = %m.backend.name, tool = ?name, "a backend tool has the name of a gateway tool in search mode; left out");
            }
            !shadowed
        });
        items
    }
}

/// A tool's own failure: told to the model, which may try again.
fn tool_error(text: &str) -> Outcome {
    ok(&json!({ "content": [{ "type": "text", "text": text }], "isError": true }))
}

/// Text made of raw JSON pieces, as one raw value.
fn raw_json(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).unwrap_or_else(|_| jsonrpc::raw_null())
}
