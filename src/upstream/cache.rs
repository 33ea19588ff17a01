//! A backend's list pages (tools, prompts, resources, templates), kept
//! until the backend says they changed (or, for a 2026-07-28 backend, until
//! its `ttlMs` runs out). Filled over an existing backend session; clients
//! listing never cost the backend a session or a call.
//!
//! Keys are chosen by the backend, never by clients: a page is kept only
//! for the first page or a cursor the backend itself issued in a kept page
//! (a client can send any cursor; what it fetches passes through uncached).
//! The number of pages and hashes kept is bounded.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::value::RawValue;
use tokio::time::Instant;

/// (method, capability profile, cursor): a per-session backend may list
/// differently for clients that declared different capabilities.
type Key = (&'static str, u8, Option<String>);

/// Pages kept per backend (all kinds together); more are passed through.
const MAX_PAGES: usize = 256;
/// Page hashes remembered per backend, to tell a change from none.
const MAX_HASHES: usize = 4 * MAX_PAGES;

#[derive(Default)]
pub(super) struct ListCache {
    inner: Mutex<Inner>,
    /// Bumped (under `inner`'s lock) by every invalidation; a fetch that
    /// started before one must not store what it got. Read without the lock:
    /// every routed call looks at it.
    version: AtomicU64,
}

#[derive(Default)]
struct Inner {
    /// A page, and when it expires (None: at the next change).
    pages: HashMap<Key, (Box<RawValue>, Option<Instant>)>,
    /// What each page hashed to when last fetched, to tell changes apart.
    seen: HashMap<Key, u64>,
    /// Cursors the backend named (`nextCursor`) in kept pages.
    issued: HashSet<(&'static str, u8, String)>,
}

/// What a refresh found (the `result` label of `sluice_list_refresh_total`).
pub(super) type Refresh = &'static str;

impl ListCache {
    pub(super) fn get(
        &self,
        method: &'static str,
        profile: u8,
        cursor: Option<&str>,
    ) -> Option<Box<RawValue>> {
        let inner = self.inner.lock();
        let (page, expires) = inner
            .pages
            .get(&(method, profile, cursor.map(str::to_owned)))?;
        expires
            .is_none_or(|at| Instant::now() < at)
            .then(|| page.clone())
    }

    pub(super) fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Under `inner`'s lock: what was fetched before this is not stored.
    fn bump(&self, _locked: &Inner) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Stores a fetched page unless the lists changed meanwhile, or its
    /// cursor is not one the backend issued. `ttl`: None keeps it until a
    /// change; zero does not store it at all. Returns what the refresh
    /// found, or None for a page fetched under a client's own cursor.
    pub(super) fn put(
        &self,
        version: u64,
        method: &'static str,
        profile: u8,
        cursor: Option<&str>,
        page: &RawValue,
        ttl: Option<Duration>,
    ) -> Option<Refresh> {
        let mut inner = self.inner.lock();
        if let Some(c) = cursor
            && !inner.issued.contains(&(method, profile, c.to_owned()))
        {
            return None;
        }
        let key = (method, profile, cursor.map(str::to_owned));
        let mut h = DefaultHasher::new();
        page.get().hash(&mut h);
        let hash = h.finish();
        if inner.seen.len() >= MAX_HASHES && !inner.seen.contains_key(&key) {
            inner.seen.clear();
        }
        let result = match inner.seen.insert(key.clone(), hash) {
            Some(old) if old == hash => "unchanged",
            _ => "changed",
        };
        let room = inner.pages.len() < MAX_PAGES || inner.pages.contains_key(&key);
        if self.version() == version && ttl != Some(Duration::ZERO) && room {
            if let Some(next) = next_cursor(page) {
                inner.issued.insert((method, profile, next));
            }
            let expires = ttl.map(|t| Instant::now() + t);
            inner.pages.insert(key, (page.to_owned(), expires));
        }
        Some(result)
    }

    /// A `notifications/*/list_changed` from the backend.
    pub(super) fn invalidate(&self, notification: &str) {
        let methods: &[&str] = match notification {
            "notifications/tools/list_changed" => &["tools/list"],
            "notifications/prompts/list_changed" => &["prompts/list"],
            "notifications/resources/list_changed" => {
                &["resources/list", "resources/templates/list"]
            }
            _ => return,
        };
        let mut inner = self.inner.lock();
        self.bump(&inner);
        inner.pages.retain(|(m, _, _), _| !methods.contains(m));
        inner.issued.retain(|(m, _, _)| !methods.contains(m));
    }

    /// (pages kept, pages remembered by hash).
    pub(super) fn census(&self) -> (usize, usize) {
        let inner = self.inner.lock();
        (inner.pages.len(), inner.seen.len())
    }

    /// Everything, e.g. when the backend came back after being away.
    pub(super) fn clear(&self) {
        let mut inner = self.inner.lock();
        self.bump(&inner);
        inner.pages.clear();
        inner.issued.clear();
    }
}

/// The `nextCursor` a page names, if any.
fn next_cursor(page: &RawValue) -> Option<String> {
    if !page.get().contains("\"nextCursor\"") {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Next {
        #[serde(rename = "nextCursor")]
        next: Option<String>,
    }
    serde_json::from_str::<Next>(page.get()).ok()?.next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.into()).unwrap()
    }

    #[test]
    fn pages_live_until_their_kind_changes() {
        let c = ListCache::default();
        let v = c.version();
        assert_eq!(
            c.put(v, "tools/list", 0, None, &raw(r#"{"tools":[]}"#), None),
            Some("changed")
        );
        c.put(v, "prompts/list", 0, None, &raw(r#"{"prompts":[]}"#), None);
        assert!(c.get("tools/list", 0, None).is_some());
        c.invalidate("notifications/tools/list_changed");
        assert!(c.get("tools/list", 0, None).is_none());
        assert!(c.get("prompts/list", 0, None).is_some());
        let v = c.version();
        assert_eq!(
            c.put(v, "tools/list", 0, None, &raw(r#"{"tools":[]}"#), None),
            Some("unchanged")
        );
    }

    /// Issue 9 (7): only cursors the backend issued are keys; a client's
    /// made-up cursors cost nothing to keep.
    #[test]
    fn only_backend_issued_cursors_are_cached() {
        let c = ListCache::default();
        let v = c.version();
        for i in 0..10_000 {
            let fake = format!("made-up-{i}");
            assert_eq!(
                c.put(v, "tools/list", 0, Some(&fake), &raw("{}"), None),
                None
            );
        }
        assert_eq!(c.census(), (0, 0));
        c.put(
            v,
            "tools/list",
            0,
            None,
            &raw(r#"{"tools":[],"nextCursor":"p2"}"#),
            None,
        );
        assert_eq!(
            c.put(
                v,
                "tools/list",
                0,
                Some("p2"),
                &raw(r#"{"tools":[]}"#),
                None
            ),
            Some("changed")
        );
        assert!(c.get("tools/list", 0, Some("p2")).is_some());
        c.invalidate("notifications/tools/list_changed");
        let v = c.version();
        assert_eq!(
            c.put(v, "tools/list", 0, Some("p2"), &raw("{}"), None),
            None
        );
    }

    #[test]
    fn a_backend_that_issues_endless_cursors_is_bounded() {
        let c = ListCache::default();
        let v = c.version();
        let mut cursor: Option<String> = None;
        for i in 0..10_000 {
            let page = raw(&format!(r#"{{"tools":[],"nextCursor":"c{i}"}}"#));
            c.put(v, "tools/list", 0, cursor.as_deref(), &page, None);
            cursor = Some(format!("c{i}"));
        }
        let (pages, hashes) = c.census();
        assert!(
            pages <= MAX_PAGES && hashes <= MAX_HASHES,
            "{pages} {hashes}"
        );
    }

    #[test]
    fn a_fetch_overtaken_by_a_change_is_not_stored() {
        let c = ListCache::default();
        let before = c.version();
        c.invalidate("notifications/tools/list_changed");
        c.put(before, "tools/list", 0, None, &raw("{}"), None);
        assert!(c.get("tools/list", 0, None).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn modern_pages_live_for_their_ttl() {
        let c = ListCache::default();
        c.put(
            c.version(),
            "tools/list",
            0,
            None,
            &raw("{}"),
            Some(Duration::from_secs(2)),
        );
        c.put(
            c.version(),
            "prompts/list",
            0,
            None,
            &raw("{}"),
            Some(Duration::ZERO),
        );
        assert!(c.get("tools/list", 0, None).is_some());
        assert!(
            c.get("prompts/list", 0, None).is_none(),
            "ttlMs 0: not cached"
        );
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(c.get("tools/list", 0, None).is_none());
    }
}
