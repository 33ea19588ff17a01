//! A namespace's names: the one a client sees for each backend's tool,
//! prompt or resource, and the backend and original name behind one a
//! client sends (prefixed, or looked up in the index the lists filled).

use serde_json::json;

use super::{Member, Namespace};
use crate::config::Prefix;
use crate::jsonrpc::{self, Outcome, parse_fields, string_field};
use crate::router::cursor::Cursor;
use crate::router::kind::Kind;
use crate::router::names;
use crate::upstream::Caller;

/// Gateway pages of a merged list followed to learn the names in it.
const MAX_LIST_PAGES: usize = 64;

impl Namespace {
    /// The input schema of an exposed tool, for checking `Mcp-Param-*`.
    pub async fn tool_schema(&self, caller: &Caller, exposed: &str) -> Option<serde_json::Value> {
        // Search mode's own tools mirror no argument into a header.
        if self.searches() && crate::config::Discovery::is_gateway_tool(exposed) {
            return None;
        }
        let (i, original) = self.resolve(caller, Kind::Tool, exposed).await?;
        self.members[i].backend.tool_schema(caller, original).await
    }

    /// Whether `caller` may see and call the tool clients know as `exposed`.
    pub(in crate::router) fn may_use(&self, caller: &Caller, exposed: &str) -> bool {
        match caller.scopes() {
            None => true,
            Some(held) => self.tool_scopes.allows(exposed, held),
        }
    }

    /// The name a client sees for `original` of member `m`, if exposed.
    pub(in crate::router) fn expose(
        &self,
        m: &Member,
        kind: Kind,
        original: &str,
    ) -> Option<String> {
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

    /// Member `m`'s own name behind `exposed`, if `exposed` is one of its
    /// names (`expose` undone).
    pub(super) fn original<'a>(
        &self,
        m: &'a Member,
        kind: Kind,
        exposed: &'a str,
    ) -> Option<&'a str> {
        let rest = match (self.prefix, kind.is_uri()) {
            (Prefix::Never, _) => exposed,
            (Prefix::Always, false) => names::strip(&m.backend.name, exposed)?,
            (Prefix::Always, true) => names::strip_uri(&m.backend.name, exposed)?,
        };
        match kind {
            Kind::Tool => m.tools.original(rest),
            _ => Some(rest),
        }
    }

    /// The member and original name behind an exposed name.
    pub(super) async fn resolve<'a>(
        &'a self,
        caller: &Caller,
        kind: Kind,
        exposed: &'a str,
    ) -> Option<(usize, &'a str)> {
        if self.prefix == Prefix::Always {
            return self
                .members
                .iter()
                .enumerate()
                .find_map(|(i, m)| Some((i, self.original(m, kind, exposed)?)));
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
            .filter(|(_, m)| !m.backend.hides(caller))
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
}
