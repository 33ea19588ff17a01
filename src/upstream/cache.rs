//! A backend's list pages (tools, prompts, resources, templates), kept
//! until the backend says they changed. Filled over an existing backend
//! session; clients listing never cost the backend a session or a call.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use parking_lot::Mutex;
use serde_json::value::RawValue;

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
    pages: HashMap<Key, Box<RawValue>>,
    /// What each page hashed to when last fetched, to tell changes apart.
    seen: HashMap<Key, u64>,
}

/// What a refresh found (the `result` label of `sluice_list_refresh_total`).
pub(super) type Refresh = &'static str;

impl ListCache {
    pub(super) fn get(&self, method: &'static str, cursor: Option<&str>) -> Option<Box<RawValue>> {
        let inner = self.inner.lock();
        inner
            .pages
            .get(&(method, cursor.map(str::to_owned)))
            .cloned()
    }

    pub(super) fn version(&self) -> u64 {
        self.inner.lock().version
    }

    /// Stores a fetched page unless the lists changed meanwhile.
    pub(super) fn put(
        &self,
        version: u64,
        method: &'static str,
        cursor: Option<&str>,
        page: &RawValue,
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
        if inner.version == version {
            inner.pages.insert(key, page.to_owned());
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
            c.put(v, "tools/list", None, &raw(r#"{"tools":[]}"#)),
            "changed"
        );
        c.put(v, "prompts/list", None, &raw(r#"{"prompts":[]}"#));
        assert!(c.get("tools/list", None).is_some());
        c.invalidate("notifications/tools/list_changed");
        assert!(c.get("tools/list", None).is_none());
        assert!(c.get("prompts/list", None).is_some());
        let v = c.version();
        assert_eq!(
            c.put(v, "tools/list", None, &raw(r#"{"tools":[]}"#)),
            "unchanged"
        );
    }

    #[test]
    fn a_fetch_overtaken_by_a_change_is_not_stored() {
        let c = ListCache::default();
        let before = c.version();
        c.invalidate("notifications/tools/list_changed");
        c.put(before, "tools/list", None, &raw("{}"));
        assert!(c.get("tools/list", None).is_none());
    }
}
