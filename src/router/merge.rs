//! A namespace's merged lists (tools, prompts, resources, templates).
//!
//! Clients rarely follow cursors, so a list is every backend's items in one
//! page: backend order in the namespace, then each backend's own order,
//! renamed. Only a list longer than the namespace's page size is split,
//! with gateway cursors that say where to resume (member, that backend's
//! cursor, items of that page already given), so paging stays stateless.
//!
//! Backends are untrusted here: a backend's pages are followed at most
//! `MAX_BACKEND_PAGES` times per request, and a cursor it repeats ends its
//! list, so a backend whose cursors loop cannot spin a worker.

use std::collections::HashSet;

use indexmap::IndexMap;
use serde_json::value::RawValue;

use super::cursor::Cursor;
use super::filter::NameFilter;
use super::index::Claim;
use super::kind::Kind;
use super::namespace::{Member, Namespace, error};
use crate::config::Prefix;
use crate::jsonrpc::{self, INVALID_PARAMS, Outcome, parse_fields, string_field};
use crate::upstream::Caller;

type Fields = IndexMap<String, Box<RawValue>>;

/// Backend pages followed per backend in one request.
const MAX_BACKEND_PAGES: usize = 64;

/// One backend page, renamed.
struct Page {
    /// Page-level fields other than the items and `nextCursor`.
    fields: Fields,
    items: Vec<Fields>,
    next: Option<String>,
}

impl Namespace {
    /// One page of a merged list: everything, unless it is longer than the
    /// page size.
    pub(super) async fn list(
        &self,
        caller: &Caller,
        kind: Kind,
        params: Option<&RawValue>,
    ) -> Outcome {
        let Some(fields) = parse_fields(params) else {
            return error(INVALID_PARAMS, "params must be an object");
        };
        let filter = match NameFilter::of(&fields) {
            Ok(filter) => filter,
            Err(refused) => return refused,
        };
        let start = match string_field(&fields, "cursor") {
            None => Cursor::start(),
            Some(s) => match Cursor::decode(&s) {
                Some(c) if c.member < self.members.len() => c,
                _ => return error(INVALID_PARAMS, "Invalid cursor"),
            },
        };
        let mut out = Merged::default();
        let mut cursor = start;
        while let Some(m) = self.members.get(cursor.member) {
            let shown = Shown {
                kind,
                filter: filter.as_ref(),
            };
            if let Some(next) = self.list_member(caller, shown, m, &cursor, &mut out).await {
                return out.finish(kind, Some(next));
            }
            cursor = Cursor {
                member: cursor.member + 1,
                backend_cursor: None,
                skip: 0,
            };
        }
        out.finish(kind, None)
    }

    /// Adds one member's items, from `from` on, to `out`. Returns where to
    /// resume when the page is full.
    async fn list_member(
        &self,
        caller: &Caller,
        Shown { kind, filter }: Shown<'_>,
        m: &Member,
        from: &Cursor,
        out: &mut Merged,
    ) -> Option<Cursor> {
        // A backend with per-principal credentials is not there for a
        // principal it hides: nothing of it is listed (its calls are
        // refused as unlisted by the same catalog check every call takes).
        m.backend.warm(caller).await;
        if m.backend.hides(caller) {
            return None;
        }
        m.backend.settle().await;
        // A principal who has just connected a backend nobody had yet.
        let _ = m.backend.learn_over(caller).await;
        if !m.backend.info().is_some_and(|i| i.has(kind.capability())) {
            return None;
        }
        let mut backend_cursor = from.backend_cursor.clone();
        let mut skip = from.skip;
        let mut followed = HashSet::new();
        for _ in 0..MAX_BACKEND_PAGES {
            let page = self
                .page(caller, kind, m, backend_cursor.as_deref())
                .await?;
            out.absorb(page.fields);
            for (i, item) in page.items.into_iter().enumerate().skip(skip) {
                if out.items.len() >= self.page_size {
                    return Some(Cursor {
                        member: m.index,
                        backend_cursor,
                        skip: i,
                    });
                }
                // Tools the caller's scopes do not reach, and items the
                // request's filter leaves out, are not listed (the cursor
                // still counts them: positions are the backend's).
                if kind == Kind::Tool
                    && string_field(&item, kind.id_key()).is_some_and(|n| !self.may_use(caller, &n))
                {
                    continue;
                }
                if filter.is_some_and(|f| !f.passes(kind, &item)) {
                    continue;
                }
                out.items.push(item);
            }
            skip = 0;
            // A cursor seen before (or none) ends this backend's list.
            let next = page.next?;
            if !followed.insert(next.clone()) || backend_cursor.as_deref() == Some(&next) {
                if m.backend.may_warn() {
                    tracing::warn!(backend = %m.backend.name, method = kind.list_method(), "list cursor repeats; list cut short");
                }
                return None;
            }
            backend_cursor = Some(next);
        }
        if m.backend.may_warn() {
            tracing::warn!(backend = %m.backend.name, method = kind.list_method(), "list longer than {MAX_BACKEND_PAGES} pages; cut short");
        }
        None
    }

    /// Every item of `kind` member `m` lists for `caller`, renamed (scopes
    /// not yet applied), for search's index and the catalogue's view:
    /// None when its list cannot be read whole now. Pages are followed as
    /// for a list, within the same bounds.
    pub(super) async fn member_items(
        &self,
        caller: &Caller,
        m: &Member,
        kind: Kind,
    ) -> Option<Vec<Fields>> {
        m.backend.settle().await;
        if !m.backend.info().is_some_and(|i| i.has(kind.capability())) {
            return Some(Vec::new());
        }
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        let mut followed = HashSet::new();
        for _ in 0..MAX_BACKEND_PAGES {
            let page = self.page(caller, kind, m, cursor.as_deref()).await?;
            items.extend(page.items);
            match page.next {
                Some(next) if followed.insert(next.clone()) => cursor = Some(next),
                _ => break,
            }
        }
        Some(items)
    }

    /// One backend page, renamed; None when the backend cannot give one
    /// (it is skipped, so the others are still listed).
    async fn page(
        &self,
        caller: &Caller,
        kind: Kind,
        m: &Member,
        cursor: Option<&str>,
    ) -> Option<Page> {
        let version = m.backend.list_version();
        match m.backend.list(caller, kind.list_method(), cursor).await {
            Ok(Outcome::Result(r)) => self.rename_page(m, kind, &r, version),
            // A client's own cursor may well be refused: that is its answer.
            Ok(Outcome::Error(e)) if cursor.is_some() => {
                tracing::debug!(backend = %m.backend.name, method = kind.list_method(), error = e.get(), "list page refused; skipped");
                None
            }
            Ok(Outcome::Error(e)) => {
                if m.backend.may_warn() {
                    tracing::warn!(backend = %m.backend.name, method = kind.list_method(), error = e.get(), "list refused; skipped");
                }
                None
            }
            Err(e) => {
                if m.backend.may_warn() {
                    tracing::warn!(error = %e, method = kind.list_method(), "list failed; skipped");
                }
                None
            }
        }
    }

    /// Renames the items of one backend page. Every other field of every
    /// item stays raw.
    fn rename_page(&self, m: &Member, kind: Kind, result: &RawValue, version: u64) -> Option<Page> {
        let mut fields: Fields = serde_json::from_str(result.get()).ok()?;
        let next = fields
            .shift_remove("nextCursor")
            .and_then(|c| serde_json::from_str::<String>(c.get()).ok());
        let items: Vec<Fields> = fields
            .shift_remove(kind.items_key())
            .and_then(|v| serde_json::from_str(v.get()).ok())
            .unwrap_or_default();
        let mut renamed = Vec::with_capacity(items.len());
        let mut index = self.index.lock();
        if self.prefix == Prefix::Never {
            index.begin(m.index, version);
        }
        for mut item in items {
            let Some(original) = string_field(&item, kind.id_key()) else {
                continue;
            };
            let Some(exposed) = self.expose(m, kind, &original) else {
                continue;
            };
            if self.prefix == Prefix::Never {
                let claim = index.claim(kind, &exposed, m.index, version, |i| {
                    self.members[i].backend.list_version()
                });
                if let Claim::Taken(owner) = claim {
                    tracing::warn!(backend = %m.backend.name, name = %exposed, owner = %self.members[owner].backend.name, "name collides with another backend's; dropped");
                    continue;
                }
            }
            item.insert(kind.id_key().into(), jsonrpc::raw(&exposed));
            renamed.push(item);
        }
        Some(Page {
            fields,
            items: renamed,
            next,
        })
    }
}

/// What one list request shows: items of `kind`, past its filter.
#[derive(Clone, Copy)]
struct Shown<'a> {
    kind: Kind,
    filter: Option<&'a NameFilter>,
}

/// A merged page being built.
#[derive(Default)]
struct Merged {
    fields: Fields,
    items: Vec<Fields>,
    /// The smallest `ttlMs` of the pages merged, if any named one.
    ttl_ms: Option<i64>,
    private: bool,
}

impl Merged {
    /// Page-level fields: the first backend to name one wins, except that
    /// a merged list may be cached only as long as its shortest-lived part,
    /// and only privately if any part is private.
    fn absorb(&mut self, fields: Fields) {
        for (k, v) in fields {
            match k.as_str() {
                "ttlMs" => {
                    let ttl = serde_json::from_str::<i64>(v.get()).unwrap_or(0).max(0);
                    self.ttl_ms = Some(self.ttl_ms.map_or(ttl, |t| t.min(ttl)));
                }
                "cacheScope" => self.private |= v.get() == "\"private\"",
                _ => {
                    self.fields.entry(k).or_insert(v);
                }
            }
        }
    }

    fn finish(self, kind: Kind, next: Option<Cursor>) -> Outcome {
        let mut page = Fields::with_capacity(self.fields.len() + 4);
        page.insert(kind.items_key().into(), jsonrpc::raw(&self.items));
        page.extend(self.fields);
        if let Some(ttl) = self.ttl_ms {
            page.insert("ttlMs".into(), jsonrpc::raw(&ttl));
        }
        if self.private {
            page.insert("cacheScope".into(), jsonrpc::raw("private"));
        }
        if let Some(n) = next {
            page.insert("nextCursor".into(), jsonrpc::raw(&n.encode()));
        }
        Outcome::Result(jsonrpc::raw(&page).into())
    }
}
