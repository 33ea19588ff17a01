//! What a backend lists, by name: the catalog a call is checked against
//! before it is forwarded, and where a tool's input schema is read.
//!
//! A catalog is read once (every page of one list) and kept until the
//! backend says its lists changed (the list cache's version moves on), not
//! for the `ttlMs` its pages carry: `ttlMs` is about serving lists, and a
//! call must not cost a list fetch. A name the catalog lacks reads it again
//! at most once per `REFETCH` per list and profile, so a backend that added
//! a tool without saying so is caught up with, and a client that calls
//! names at random costs the backend at most one list a second.
//!
//! Bounded: one catalog per list method and profile (at most 4 × 256), each
//! of at most `MAX_PAGES` pages the backend sent.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::{Backend, Caller, UpstreamError};
use crate::fast_map::FastMap;
use crate::jsonrpc::Outcome;
use crate::metrics::Series;

/// A name a catalog lacks reads it again after this long at the earliest.
pub(crate) const REFETCH: Duration = Duration::from_secs(1);
/// Pages of one list read at most: a backend whose cursors never end is
/// not followed forever.
const MAX_PAGES: usize = 100;

/// The four lists, by method.
const METHODS: [&str; 4] = [
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
];

/// One list of a backend as it was read.
pub struct Listing {
    /// The list cache's version when the read began.
    version: u64,
    read_at: Instant,
    /// Each item's name (`name`; `uri` for resources, `uriTemplate` for templates) and, for tools,
    /// its input schema.
    items: FastMap<Box<str>, Kept>,
}

/// What a listing keeps of one item.
struct Kept {
    schema: Option<Box<RawValue>>,
    /// The operation series a tool's calls through one namespace member
    /// (by its id) are observed in, made at its first call: found with
    /// the name's look-up every call makes here, for no look-up of its own.
    series: OnceLock<(u64, Series)>,
}

impl Listing {
    pub fn has(&self, name: &str) -> bool {
        self.items.contains_key(name)
    }

    /// Whether it has `name`, and the series member `member`'s calls of it
    /// are observed in (made by `make` at the first): None when the
    /// item's series is another member's (its caller finds its own).
    pub fn series_of(
        &self,
        name: &str,
        member: u64,
        make: impl FnOnce() -> Series,
    ) -> Option<Option<Series>> {
        let item = self.items.get(name)?;
        let (owner, series) = item.series.get_or_init(|| (member, make()));
        Some((*owner == member).then(|| series.clone()))
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.items.keys().map(|k| &**k)
    }

    fn schema(&self, name: &str) -> Option<&RawValue> {
        self.items.get(name)?.schema.as_deref()
    }
}

#[derive(Default)]
pub(super) struct Catalogs {
    /// By (list, profile): see `Backend::profile`.
    read: Mutex<FastMap<(u8, u8), Arc<Listing>>>,
    /// One read at a time: calls that find a catalog missing or stale
    /// wait for the read under way instead of each starting one.
    reading: tokio::sync::Mutex<()>,
}

impl Catalogs {
    pub(super) fn census(&self) -> usize {
        self.read.lock().len()
    }
}

#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    tools: Vec<Item>,
    #[serde(default)]
    prompts: Vec<Item>,
    #[serde(default)]
    resources: Vec<Item>,
    #[serde(default, rename = "resourceTemplates")]
    templates: Vec<Item>,
    #[serde(rename = "nextCursor")]
    next: Option<String>,
}

#[derive(Deserialize)]
struct Item {
    name: Option<String>,
    uri: Option<String>,
    #[serde(rename = "uriTemplate")]
    template: Option<String>,
    #[serde(rename = "inputSchema")]
    schema: Option<Box<RawValue>>,
}

impl Backend {
    /// Never probed (the authorization code flow): what it offers is
    /// known once a principal's link has opened, so `caller`'s own opens
    /// first when none has (a principal without a grant: refused, as it
    /// would be anyway).
    pub async fn learn_over(&self, caller: &Caller) -> Result<(), UpstreamError> {
        if self.info().is_none() && self.code_flow().is_some() {
            Box::pin(self.link_for(caller)).await?;
        }
        Ok(())
    }

    /// Whether `found` holds of what the backend lists by `method` for
    /// `caller`: the catalog as read, or read again when the backend's lists
    /// changed since, or (with `again`) when `found` fails on a read older
    /// than `REFETCH`.
    pub async fn listed(
        &self,
        caller: &Caller,
        method: &'static str,
        again: bool,
        found: impl Fn(&Listing) -> bool,
    ) -> Result<bool, UpstreamError> {
        self.warm(caller).await;
        if self.hides(caller) {
            return Ok(false);
        }
        let key = self.catalog_key(caller, method);
        let version = self.cache.version();
        // Decided under the lock: the common call takes no reference.
        let seen = self.catalogs.read.lock().get(&key).and_then(|l| {
            if l.version != version {
                None
            } else if found(l) {
                Some(true)
            } else {
                (!again || l.read_at.elapsed() < REFETCH).then_some(false)
            }
        });
        if let Some(seen) = seen {
            return Ok(seen);
        }
        // Boxed: reading a list is rare, and its future would make every
        // call's large.
        let listing = Box::pin(self.read_catalog(caller, method, key, again)).await?;
        Ok(found(&listing))
    }

    /// What `found` finds in the catalog as read, without waiting for
    /// anything: the common call's whole check. None also when it must be
    /// read first (then ask `listed`).
    pub fn listed_now<T>(
        &self,
        caller: &Caller,
        method: &'static str,
        found: impl FnOnce(&Listing) -> Option<T>,
    ) -> Option<T> {
        // Not there for this principal: nothing of it is listed to it
        // (one branch on a backend without per-principal credentials).
        if self.principals.is_some() && self.hides(caller) {
            return None;
        }
        let key = self.catalog_key(caller, method);
        let version = self.cache.version();
        let read = self.catalogs.read.lock();
        read.get(&key)
            .filter(|l| l.version == version)
            .and_then(|l| found(l))
    }

    /// A tool's input schema, from the catalog.
    pub async fn tool_schema(&self, caller: &Caller, tool: &str) -> Option<serde_json::Value> {
        let key = self.catalog_key(caller, "tools/list");
        let listing = match self.current(key) {
            Some(l) if l.has(tool) || l.read_at.elapsed() < REFETCH => l,
            // Read again past the page cache only for a name it lacks.
            current => {
                let fresh = current.is_some();
                Box::pin(self.read_catalog(caller, "tools/list", key, fresh))
                    .await
                    .ok()?
            }
        };
        serde_json::from_str(listing.schema(tool)?.get()).ok()
    }

    fn catalog_key(&self, caller: &Caller, method: &'static str) -> (u8, u8) {
        let list = METHODS.iter().position(|m| *m == method).unwrap_or(0);
        (list as u8, self.profile(caller.caps))
    }

    /// The catalog under `key`, unless the backend's lists changed since.
    fn current(&self, key: (u8, u8)) -> Option<Arc<Listing>> {
        let version = self.cache.version();
        let read = self.catalogs.read.lock();
        read.get(&key).filter(|l| l.version == version).cloned()
    }

    /// Reads the list whole, unless a read that began while this one
    /// waited has already done so. `fresh`: past the page cache, which a
    /// backend that never announces changes would keep as it was.
    async fn read_catalog(
        &self,
        caller: &Caller,
        method: &'static str,
        key: (u8, u8),
        fresh: bool,
    ) -> Result<Arc<Listing>, UpstreamError> {
        let asked = Instant::now();
        let _one = self.catalogs.reading.lock().await;
        if let Some(listing) = self.current(key).filter(|l| l.read_at >= asked) {
            return Ok(listing);
        }
        let version = self.cache.version();
        let walk = self.walk(caller, method, key.0, fresh);
        let items = match tokio::time::timeout(self.ctx.timeout, walk).await {
            Ok(items) => items?,
            Err(_) => {
                return Err(UpstreamError::unavailable(
                    &self.name,
                    format!("{method} took longer than {:?}", self.ctx.timeout),
                ));
            }
        };
        let listing = Arc::new(Listing {
            version,
            read_at: Instant::now(),
            items,
        });
        self.catalogs.read.lock().insert(key, listing.clone());
        Ok(listing)
    }

    /// Every page of one list: its items' names (and tools' schemas). A
    /// backend without the capability lists nothing.
    async fn walk(
        &self,
        caller: &Caller,
        method: &'static str,
        list: u8,
        fresh: bool,
    ) -> Result<FastMap<Box<str>, Kept>, UpstreamError> {
        let mut items = FastMap::default();
        let capability = method.split('/').next().unwrap_or(method);
        self.check_health().await?;
        self.learn_over(caller).await?;
        if !self.info().is_some_and(|i| i.has(capability)) {
            return Ok(items);
        }
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let page = match fresh {
                true => self.fetch_list(caller, method, cursor.as_deref()).await?,
                false => self.list(caller, method, cursor.as_deref()).await?,
            };
            let page = match page {
                Outcome::Result(page) => page,
                Outcome::Error(e) => {
                    let why = format!("{method} refused: {}", e.get());
                    return Err(UpstreamError::unavailable(&self.name, why));
                }
            };
            let page: Page = serde_json::from_str(page.get())
                .map_err(|e| UpstreamError::unavailable(&self.name, format!("{method}: {e}")))?;
            let listed = match list {
                0 => page.tools.into_iter().map(|i| (i.name, i.schema)).collect(),
                1 => page.prompts.into_iter().map(|i| (i.name, None)).collect(),
                2 => page.resources.into_iter().map(|i| (i.uri, None)).collect(),
                _ => page
                    .templates
                    .into_iter()
                    .map(|i| (i.template, None))
                    .collect::<Vec<_>>(),
            };
            for (name, schema) in listed {
                if let Some(name) = name {
                    let series = OnceLock::new();
                    items.insert(name.into_boxed_str(), Kept { schema, series });
                }
            }
            match page.next {
                Some(next) if cursor.as_deref() != Some(next.as_str()) => cursor = Some(next),
                _ => break,
            }
        }
        Ok(items)
    }
}
