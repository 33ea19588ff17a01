//! Router: namespaces, name mapping, list merging, and dispatch of a call to
//! exactly one backend. No HTTP and no sessions in here.

mod audit;
mod cursor;
mod filter;
mod index;
mod kind;
mod links;
mod listed;
mod merge;
mod names;
mod namespace;
mod observed;
mod rounds;
mod search;
mod tasks;

use crate::fast_map::FastMap;
use std::sync::Arc;

pub(crate) use namespace::{CONNECT_INPUT, CONNECT_STATE};
pub use namespace::{ClientNotice, Namespace};
pub(crate) use namespace::{Item, View};
pub use observed::Seen;

use crate::config::Config;
use crate::upstream::Backend;
use crate::vocab::NamespaceName;

pub struct Router {
    namespaces: FastMap<NamespaceName, Arc<Namespace>>,
    /// The tag the next new namespace gets.
    next_tag: u16,
}

/// Namespace tags that sessions are counted by: one per namespace ever
/// configured in this process; past this, they share the last.
pub const MAX_TAGS: usize = 256;

impl Router {
    pub fn new(config: &Config, backends: &[Arc<Backend>]) -> Router {
        Router::build(config, backends, None)
    }

    /// The router for a reloaded config. A namespace whose settings and
    /// backends are unchanged is kept as it is (its name index, tasks and
    /// pending questions with it); the others are built anew. A namespace
    /// keeps its tag; a new one takes the next.
    pub fn rebuild(&self, config: &Config, backends: &[Arc<Backend>]) -> Router {
        Router::build(config, backends, Some(self))
    }

    fn build(config: &Config, backends: &[Arc<Backend>], old: Option<&Router>) -> Router {
        let mut next_tag = old.map_or(0, |r| r.next_tag);
        let namespaces = config
            .namespaces
            .iter()
            .map(|ns| {
                let members: Vec<_> = ns
                    .backends
                    .iter()
                    .filter_map(|name| {
                        let backend = backends.iter().find(|b| &b.name == name)?;
                        let cfg = config.backends.iter().find(|b| &b.name == name)?;
                        Some((backend.clone(), cfg.tools.clone()))
                    })
                    .collect();
                let page_size = config.server.list_page_size;
                let before = old.and_then(|r| r.namespaces.get(&ns.name));
                if let Some(kept) = before
                    && kept.is_built_of(
                        &members,
                        ns.prefix,
                        page_size,
                        &ns.tool_scopes,
                        &ns.discovery,
                    )
                {
                    return (ns.name.clone(), kept.clone());
                }
                let tag = before.map_or_else(
                    || {
                        next_tag = next_tag.saturating_add(1);
                        next_tag - 1
                    },
                    |b| b.tag,
                );
                let built = Namespace::new(
                    ns.name.clone(),
                    tag,
                    members,
                    ns.prefix,
                    page_size,
                    ns.tool_scopes.clone(),
                    ns.discovery.clone(),
                );
                (ns.name.clone(), Arc::new(built))
            })
            .collect();
        Router {
            namespaces,
            next_tag,
        }
    }

    pub fn namespace(&self, name: &str) -> Option<&Arc<Namespace>> {
        self.namespaces.get(name)
    }

    /// Every namespace, in config order (by tag).
    pub fn namespaces(&self) -> Vec<&Arc<Namespace>> {
        let mut all: Vec<_> = self.namespaces.values().collect();
        all.sort_by_key(|ns| ns.tag);
        all
    }

    /// A client's answer relayed from another replica: to whichever
    /// namespace's backend asked.
    pub fn answer_any(
        &self,
        caller: &crate::upstream::Caller,
        id: &serde_json::value::RawValue,
        outcome: &crate::jsonrpc::Outcome,
    ) -> crate::upstream::Answered {
        use crate::upstream::Answered;
        let mut answered = Answered::Unknown;
        for ns in self.namespaces.values() {
            match ns.answer(caller, id, outcome) {
                Answered::Delivered => return Answered::Delivered,
                Answered::NotYours => answered = Answered::NotYours,
                Answered::Unknown => {}
            }
        }
        answered
    }

    /// Records how full each namespace's indexes are, for /metrics.
    pub fn census(&self, metrics: &crate::metrics::Metrics) {
        for (name, ns) in &self.namespaces {
            let (names, tasks, questions, searched) = ns.census();
            metrics.entries("name_index", name.as_str(), names);
            metrics.entries("task_index", name.as_str(), tasks);
            metrics.entries("questions_waiting", name.as_str(), questions);
            if ns.searches() {
                metrics.entries("search_index", name.as_str(), searched);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::Router;
    use crate::config::{Config, parse_toml};
    use crate::metrics::Metrics;
    use crate::upstream::Backend;

    fn config(text: &str) -> Config {
        parse_toml(text, "test", &HashMap::<String, String>::new())
            .unwrap()
            .config
    }

    fn start(config: &Config) -> Vec<Arc<Backend>> {
        let metrics = Arc::new(Metrics::new());
        let stop = tokio_util::sync::CancellationToken::new();
        stop.cancel();
        config
            .backends
            .iter()
            .map(|b| {
                let until = tokio::time::Instant::now();
                Backend::start(b, metrics.clone(), until, stop.clone())
                    .unwrap()
                    .0
            })
            .collect()
    }

    const A: &str = "[backends.a]\ntransport = \"stdio\"\ncommand = \"true\"\n";
    const B: &str = "[backends.b]\ntransport = \"stdio\"\ncommand = \"true\"\n";

    /// A reload keeps a namespace it does not change (the same object,
    /// its indexes with it) and every namespace's tag; a new one gets a
    /// tag of its own.
    #[tokio::test]
    async fn a_rebuild_keeps_what_did_not_change() {
        let first = config(&format!(
            "{A}{B}[namespaces.one]\nbackends = [\"a\"]\n[namespaces.two]\nbackends = [\"b\"]\n"
        ));
        let backends = start(&first);
        let old = Router::new(&first, &backends);
        let (one, two) = (old.namespace("one").unwrap(), old.namespace("two").unwrap());
        assert_ne!(one.tag, two.tag);

        // `two` gains `a`; `three` is new; `one` is as it was.
        let second = config(&format!(
            "{A}{B}[namespaces.one]\nbackends = [\"a\"]\n[namespaces.two]\nbackends = [\"a\", \"b\"]\n[namespaces.three]\nbackends = [\"b\"]\n"
        ));
        let new = old.rebuild(&second, &backends);
        assert!(Arc::ptr_eq(one, new.namespace("one").unwrap()));
        let two_now = new.namespace("two").unwrap();
        assert!(!Arc::ptr_eq(two, two_now));
        assert_eq!(two_now.tag, two.tag);
        let three = new.namespace("three").unwrap();
        assert!(three.tag != one.tag && three.tag != two.tag);

        // The same backend names, started anew (a changed backend): every
        // namespace of theirs is rebuilt.
        let restarted = start(&second);
        let again = new.rebuild(&second, &restarted);
        assert!(!Arc::ptr_eq(
            new.namespace("one").unwrap(),
            again.namespace("one").unwrap()
        ));
        assert_eq!(again.namespace("three").unwrap().tag, three.tag);
    }
}
