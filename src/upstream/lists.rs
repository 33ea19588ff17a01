//! A backend's lists (tools, prompts, resources, templates) as clients read
//! them: from the cache, or fetched over a session that already exists and
//! kept as the backend's answer allows (`ttlMs`, `cacheScope`).

use std::time::Duration;

use serde_json::value::RawValue;

use super::link::{self, EndReason};
use super::principals::Route;
use super::{Backend, Caller, Pool, UpstreamError};
use crate::jsonrpc::{self, Outcome};
use crate::protocol::ClientCaps;

impl Backend {
    /// The list cache's profile for a caller: a per-session backend is told
    /// each client's own capabilities, and may list by them; every other
    /// backend lists the same for all.
    pub(super) fn profile(&self, caps: ClientCaps) -> u8 {
        match &self.pool {
            Pool::PerSession(_) if self.modern_link().is_none() => caps.bits(),
            _ => 0,
        }
    }

    /// The profile its lists are kept under for `caller`: callers of one
    /// profile are listed the same.
    pub fn list_profile(&self, caller: &Caller) -> u8 {
        self.profile(caller.caps)
    }

    /// Bumped whenever the backend's lists may have changed.
    pub fn list_version(&self) -> u64 {
        self.cache.version()
    }

    /// One page of a list, from the cache or fetched over a backend session
    /// that already exists (a per-session backend borrows any client's; only
    /// with none at all is one opened, and closed again, for the fetch).
    pub async fn list(
        &self,
        caller: &Caller,
        method: &'static str,
        cursor: Option<&str>,
    ) -> Result<Outcome, UpstreamError> {
        self.check_health().await?;
        let profile = self.profile(caller.caps);
        if let Some(page) = self.cache.get(method, profile, cursor) {
            return Ok(Outcome::Result(page.into()));
        }
        self.fetch_list(caller, method, cursor).await
    }

    /// One page of a list, fetched (and kept, as the page cache decides)
    /// whatever the cache holds.
    pub(super) async fn fetch_list(
        &self,
        caller: &Caller,
        method: &'static str,
        cursor: Option<&str>,
    ) -> Result<Outcome, UpstreamError> {
        let profile = self.profile(caller.caps);
        let version = self.cache.version();
        // A principal with its own credentials lists over its own link.
        let own = self.principals.as_ref().map(|p| p.route(caller));
        let (link, _transient) = match (&self.pool, self.modern_link()) {
            _ if matches!(own, Some(Route::Own(_) | Route::Hidden)) => {
                (Box::pin(self.own_link(caller)).await?, None)
            }
            (_, Some(modern)) => (modern, None),
            (Pool::Shared(_), None) => (self.link_for(caller).await?, None),
            (Pool::PerSession(p), None) => match p.any_for(caller) {
                Some(l) => (l, None),
                None => {
                    // Told this caller's capabilities, as its own would be.
                    let l = self.open(Some((caller.key.clone(), caller.caps))).await?;
                    (l.clone(), Some(link::CloseOnDrop::new(l, EndReason::Probe)))
                }
            },
        };
        let params = cursor.map(|c| jsonrpc::raw(&serde_json::json!({ "cursor": c })));
        let result = link.conn.call(method, params, None, self.ctx.timeout).await;
        let refresh = match &result {
            Ok(Outcome::Result(page)) => {
                let ttl = match link.info.is_modern() {
                    false => None,
                    // Another principal must never be served it from here.
                    true if is_private(page) => Some(Duration::ZERO),
                    true if self.ctx.watched.covers(method) => None,
                    true => Some(ttl_of(page)),
                };
                self.cache.put(version, method, profile, cursor, page, ttl)
            }
            _ => Some("error"),
        };
        if let Some(refresh) = refresh {
            self.ctx.metrics.list_refresh(&self.name, refresh);
        }
        result
    }
}

impl Backend {
    /// A principal's own link, its grant refreshed first when due (the
    /// authorization code flow).
    async fn own_link(&self, caller: &Caller) -> Result<std::sync::Arc<link::Link>, UpstreamError> {
        if let Some(code) = self.code_entries()
            && let Some(p) = caller.who()
        {
            code.prepare(p).await;
        }
        self.link_for(caller).await
    }
}

/// Whether a modern result is `cacheScope: "private"`: its authorization
/// context's only.
fn is_private(page: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Scope {
        #[serde(rename = "cacheScope")]
        scope: Option<String>,
    }
    page.get().contains("\"private\"")
        && serde_json::from_str::<Scope>(page.get())
            .is_ok_and(|s| s.scope.as_deref() == Some("private"))
}

/// A modern result's `ttlMs` (missing or negative: 0, per the spec).
pub(super) fn ttl_of(page: &RawValue) -> Duration {
    #[derive(serde::Deserialize)]
    struct Ttl {
        #[serde(rename = "ttlMs", default)]
        ttl_ms: Option<i64>,
    }
    let ms = serde_json::from_str::<Ttl>(page.get())
        .ok()
        .and_then(|t| t.ttl_ms)
        .unwrap_or(0);
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}
