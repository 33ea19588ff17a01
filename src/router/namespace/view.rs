//! What a namespace shows one caller, item by item, with the backend and
//! the backend's own name behind each: for `sluice tools` and the status
//! page. Read through the lists' own path (the backends' cached lists,
//! the namespace's filters, renames, prefixes and the caller's scopes),
//! so it cannot drift from what a client is shown.

use serde::Serialize;

use super::{Member, Namespace};
use crate::config::Discovery;
use crate::jsonrpc::string_field;
use crate::router::kind::Kind;
use crate::upstream::Caller;

/// One namespace as one caller sees it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct View {
    pub(crate) namespace: String,
    /// `list` or `search`.
    pub(crate) discovery: &'static str,
    pub(crate) tools: Vec<Item>,
    pub(crate) prompts: Vec<Item>,
    pub(crate) resources: Vec<Item>,
    #[serde(rename = "resourceTemplates")]
    pub(crate) resource_templates: Vec<Item>,
    /// Backends whose lists could not be read now (down, or refusing).
    pub(crate) unread: Vec<String>,
    /// Backends not there for this caller: per-principal credentials
    /// with `fallback = "hide"`, and none for its principal.
    pub(crate) hidden: Vec<String>,
}

/// One item: a tool, prompt, resource or template.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Item {
    /// As clients see it (a resource's or template's URI).
    pub(crate) name: String,
    /// None: the gateway's own (search mode's tools).
    pub(crate) backend: Option<String>,
    /// The backend's own name for it.
    pub(crate) original: Option<String>,
    /// Whether `tools/list` shows it: in search mode only the gateway's
    /// tools and the pins are; the others are found by `search_tools`.
    pub(crate) listed: bool,
}

impl View {
    /// The items of each kind, with the kind's name in a list result.
    pub(crate) fn kinds(&self) -> [(&'static str, &[Item]); 4] {
        [
            ("tools", &self.tools),
            ("prompts", &self.prompts),
            ("resources", &self.resources),
            ("resourceTemplates", &self.resource_templates),
        ]
    }
}

impl Namespace {
    /// Everything `caller` would be listed or could find by search.
    pub(crate) async fn view(&self, caller: &Caller) -> View {
        let pinned = self.search.as_ref().map(|s| &s.pinned[..]);
        let mut view = View {
            namespace: self.name.to_string(),
            discovery: match pinned {
                Some(_) => "search",
                None => "list",
            },
            tools: Vec::new(),
            prompts: Vec::new(),
            resources: Vec::new(),
            resource_templates: Vec::new(),
            unread: Vec::new(),
            hidden: Vec::new(),
        };
        if pinned.is_some() {
            view.tools.extend(
                [Discovery::SEARCH_TOOLS, Discovery::CALL_TOOL].map(|name| Item {
                    name: name.to_owned(),
                    backend: None,
                    original: None,
                    listed: true,
                }),
            );
        }
        for m in &self.members {
            if m.backend.hides(caller) {
                view.hidden.push(m.backend.name.to_string());
                continue;
            }
            for kind in [Kind::Tool, Kind::Prompt, Kind::Resource, Kind::Template] {
                let Some(items) = self.member_items(caller, m, kind).await else {
                    if !view.unread.iter().any(|b| b == m.backend.name.as_str()) {
                        view.unread.push(m.backend.name.to_string());
                    }
                    continue;
                };
                let shown = items
                    .iter()
                    .filter_map(|item| string_field(item, kind.id_key()))
                    .filter_map(|name| self.item(caller, m, kind, name, pinned));
                match kind {
                    Kind::Tool => view.tools.extend(shown),
                    Kind::Prompt => view.prompts.extend(shown),
                    Kind::Resource => view.resources.extend(shown),
                    Kind::Template => view.resource_templates.extend(shown),
                }
            }
        }
        view
    }

    /// The item member `m` lists as `name`, if `caller` is shown it.
    fn item(
        &self,
        caller: &Caller,
        m: &Member,
        kind: Kind,
        name: String,
        pinned: Option<&[String]>,
    ) -> Option<Item> {
        if kind == Kind::Tool {
            // Scopes, and search mode's own names, which a backend's tool
            // cannot take.
            let shadowed = pinned.is_some() && Discovery::is_gateway_tool(&name);
            if shadowed || !self.may_use(caller, &name) {
                return None;
            }
        }
        let original = self.original(m, kind, &name).map(str::to_owned);
        let listed = kind != Kind::Tool || pinned.is_none_or(|p| p.contains(&name));
        Some(Item {
            backend: Some(m.backend.name.to_string()),
            original,
            listed,
            name,
        })
    }
}
