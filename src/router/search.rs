//! Search mode's state in a namespace (`discovery = "search"`, issue 51):
//! its settings, each member's catalogue as indexed, and the query that
//! ranks them for a caller. The verbs (the list, `search_tools`,
//! `call_tool`) are `namespace/discovery.rs`'s; design notes in
//! `search/README.md`.
//!
//! A member's catalogue is indexed when its backend's list version moves
//! on (a `list_changed`, a restart), at the first search or list that
//! needs it after that, never per query; one is kept per member and list
//! profile (at most the 32 capability profiles of a per-session backend).
//! Scopes are applied at query time, by bits made when the tool was
//! indexed.

mod index;
mod words;

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::broadcast;

use crate::config::ToolScopes;
use crate::fast_map::FastMap;
use crate::vocab::ClientKey;
pub(super) use index::{Catalogue, Tool};

/// `search_tools`' `limit` when none is given, and its largest.
pub(super) const DEFAULT_LIMIT: usize = 8;
pub(super) const MAX_LIMIT: usize = 50;
/// The longest query taken, in bytes.
pub(super) const MAX_QUERY: usize = 1024;
/// Tools a session's searches add to its list (`expose_found`).
pub(super) const MAX_FOUND: usize = 64;

pub(super) struct Search {
    /// Names listed beside the gateway's own tools.
    pub(super) pinned: Vec<String>,
    pub(super) expose_found: bool,
    /// By (member, list profile).
    catalogues: Mutex<FastMap<(usize, u8), Arc<Catalogue>>>,
    /// One index build at a time: callers that find a catalogue stale
    /// wait for the build under way instead of each making one.
    pub(super) building: tokio::sync::Mutex<()>,
    /// Sessions whose found tools changed (`expose_found`): their GET
    /// streams are told their tools list changed.
    pub(super) found: broadcast::Sender<ClientKey>,
}

impl Search {
    pub(super) fn new(pinned: Vec<String>, expose_found: bool) -> Search {
        Search {
            pinned,
            expose_found,
            catalogues: Mutex::new(FastMap::default()),
            building: tokio::sync::Mutex::new(()),
            found: broadcast::channel(64).0,
        }
    }

    /// The catalogue of member `member` for `profile`, if indexed at
    /// `version`.
    pub(super) fn cached(
        &self,
        member: usize,
        profile: u8,
        version: u64,
    ) -> Option<Arc<Catalogue>> {
        let kept = self.catalogues.lock();
        kept.get(&(member, profile))
            .filter(|c| c.version == version)
            .cloned()
    }

    pub(super) fn keep(&self, member: usize, profile: u8, catalogue: Arc<Catalogue>) {
        self.catalogues.lock().insert((member, profile), catalogue);
    }

    /// Tools indexed, over every member and profile (for /metrics).
    pub(super) fn len(&self) -> usize {
        self.catalogues.lock().values().map(|c| c.tools.len()).sum()
    }
}

/// Who may see a tool: a caller holding `held` (None: not scoped).
pub(super) struct Viewer<'a> {
    pub(super) scopes: &'a ToolScopes,
    pub(super) held: Option<&'a [String]>,
    held_bits: u64,
}

impl<'a> Viewer<'a> {
    pub(super) fn new(scopes: &'a ToolScopes, held: Option<&'a [String]>) -> Viewer<'a> {
        let held_bits = held.map_or(u64::MAX, |h| scopes.held_bits(h));
        Viewer {
            scopes,
            held,
            held_bits,
        }
    }

    pub(super) fn sees(&self, tool: &Tool) -> bool {
        match (self.held, tool.needs) {
            (None, _) => true,
            (Some(_), Some(needs)) => needs & !self.held_bits == 0,
            (Some(held), None) => self.scopes.allows(&tool.name, held),
        }
    }
}

/// The best `limit` tools for `query` over `catalogues` that `viewer`
/// sees, best first, as (catalogue, tool): names equal to the query
/// first, then names that start with it, then by BM25F score (ties by
/// name, so an answer is stable).
pub(super) fn rank(
    catalogues: &[Arc<Catalogue>],
    query: &str,
    limit: usize,
    viewer: &Viewer<'_>,
) -> Vec<(usize, u32)> {
    let mut query_terms: Vec<String> = Vec::new();
    words::terms(query, |t| {
        if !query_terms.iter().any(|q| q == t) {
            query_terms.push(t.to_owned());
        }
    });
    let total: usize = catalogues.iter().map(|c| c.tools.len()).sum();
    let idfs: Vec<f32> = query_terms
        .iter()
        .map(|t| index::idf(catalogues.iter().map(|c| c.frequency(t)).sum(), total))
        .collect();
    let lowered = query.trim().to_lowercase();
    let by_name = lowered.len() >= 3 && !lowered.contains(char::is_whitespace);
    // (tier, score, catalogue, tool)
    let mut found: Vec<(u8, f32, usize, u32)> = Vec::new();
    for (ci, c) in catalogues.iter().enumerate() {
        let mut scores = vec![0f32; c.tools.len()];
        let mut touched = Vec::new();
        for (t, idf) in query_terms.iter().zip(&idfs) {
            c.score(t, *idf, &mut scores, &mut touched);
        }
        let mut tiers: FastMap<u32, u8> = FastMap::default();
        if by_name {
            c.name_matches(&lowered, &mut |i, tier| {
                let at = tiers.entry(i).or_default();
                *at = (*at).max(tier);
            });
        }
        for i in touched {
            if viewer.sees(&c.tools[i as usize]) {
                let tier = tiers.remove(&i).unwrap_or(0);
                found.push((tier, scores[i as usize], ci, i));
            }
        }
        for (i, tier) in tiers {
            if viewer.sees(&c.tools[i as usize]) {
                found.push((tier, scores[i as usize], ci, i));
            }
        }
    }
    let order = |a: &(u8, f32, usize, u32), b: &(u8, f32, usize, u32)| {
        b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)).then_with(|| {
            catalogues[a.2].tools[a.3 as usize]
                .name
                .cmp(&catalogues[b.2].tools[b.3 as usize].name)
        })
    };
    if found.len() > limit {
        found.select_nth_unstable_by(limit - 1, order);
        found.truncate(limit);
    }
    found.sort_unstable_by(order);
    found.into_iter().map(|(_, _, c, i)| (c, i)).collect()
}
