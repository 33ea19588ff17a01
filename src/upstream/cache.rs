//! A backend's list pages (tools, prompts, resources, templates), kept
//! until the backend says they changed (or, for a 2026-07-28 backend, until
//! its `ttlMs` runs out). Filled over an existing backend session; clients
//! listing never cost the backend a session or a call.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::value::RawValue;
use tokio::time::Instant;

type Key = (&'static str, Option<String>);

#[derive(Default)]
pub(super) struct ListCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Bumped by every invalidation; a fetch that started before one must
    /// not store what it got.
    version: u64,
    /// A page, and when it expires (None: at the next change).
    pages: HashMap<Key, (Box<RawValue>, Option<Instant>)>,
    /// What each page hashed to when last fetched, to tell changes apart.
    seen: HashMap<Key, u64>,
}

/// What a refresh found (the `result` label of `sluice_list_refresh_total`).
pub(super) type Refresh = &'static str;

impl ListCache {
    pub(super) fn get(&self, method: &'static str, cursor: Option<&str>) -> Option<Box<RawValue>> {
        let inner = self.inner.lock();
        let (page, expires) = inner.pages.get(&(method, cursor.map(str::to_owned)))?;
        expires
            .is_none_or(|at| Instant::now() < at)
            .then(|| page.clone())
    }

    pub(super) fn version(&self) -> u64 {
        self.inner.lock().version
    }

    /// Stores a fetched page unless the lists changed meanwhile. `ttl`:
    /// None keeps it until a change; zero does not store it at all.
    pub(super) fn put(
        &self,
        version: u64,
        method: &'static str,
        cursor: Option<&str>,
        page: &RawValue,
        ttl: Option<Duration>,
    ) -> Refresh {
        let mut inner = self.inner.lock();
        let key = (method, cursor.map(str::to_owned));
        let mut h = DefaultHasher::new();
        page.get().hash(&mut h);
        let hash = h.finish();
        let result = match inner.seen.insert(key.clone(), hash) {
            Some(old) if old == hash => "unchanged",
            _ => "changed",
        };
        if inner.version == version && ttl != Some(Duration::ZERO) {
            let expires = ttl.map(|t| Instant::now() + t);
            inner.pages.insert(key, (page.to_owned(), expires));
        }
        result
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
        inner.version += 1;
        inner.pages.retain(|(m, _), _| !methods.contains(m));
    }

    /// Everything, e.g. when the backend came back after being away.
    pub(super) fn clear(&self) {
        let mut inner = self.inner.lock();
        inner.version += 1;
        inner.pages.clear();
    }
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
            c.put(v, "tools/list", None, &raw(r#"{"tools":[]}"#), None),
            "changed"
        );
        c.put(v, "prompts/list", None, &raw(r#"{"prompts":[]}"#), None);
        assert!(c.get("tools/list", None).is_some());
        c.invalidate("notifications/tools/list_changed");
        assert!(c.get("tools/list", None).is_none());
        assert!(c.get("prompts/list", None).is_some());
        let v = c.version();
        assert_eq!(
            c.put(v, "tools/list", None, &raw(r#"{"tools":[]}"#), None),
            "unchanged"
        );
    }

    #[test]
    fn a_fetch_overtaken_by_a_change_is_not_stored() {
        let c = ListCache::default();
        let before = c.version();
        c.invalidate("notifications/tools/list_changed");
        c.put(before, "tools/list", None, &raw("{}"), None);
        assert!(c.get("tools/list", None).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn modern_pages_live_for_their_ttl() {
        let c = ListCache::default();
        c.put(
            c.version(),
            "tools/list",
            None,
            &raw("{}"),
            Some(Duration::from_secs(2)),
        );
        c.put(
            c.version(),
            "prompts/list",
            None,
            &raw("{}"),
            Some(Duration::ZERO),
        );
        assert!(c.get("tools/list", None).is_some());
        assert!(c.get("prompts/list", None).is_none(), "ttlMs 0: not cached");
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(c.get("tools/list", None).is_none());
    }
}
