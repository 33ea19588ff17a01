//! Router: namespaces, name mapping, list merging, and dispatch of a call to
//! exactly one backend. No HTTP and no sessions in here.

mod cursor;
mod index;
mod kind;
mod links;
mod merge;
mod names;
mod namespace;
mod rounds;
mod tasks;

use crate::fast_map::FastMap;
use std::sync::Arc;

pub use namespace::{ClientNotice, Namespace};

use crate::config::{Config, NamespaceName};
use crate::upstream::Backend;

pub struct Router {
    namespaces: FastMap<NamespaceName, Arc<Namespace>>,
}

impl Router {
    pub fn new(config: &Config, backends: &[Arc<Backend>]) -> Router {
        let namespaces = config
            .namespaces
            .iter()
            .enumerate()
            .map(|(tag, ns)| {
                let members = ns
                    .backends
                    .iter()
                    .filter_map(|name| {
                        let backend = backends.iter().find(|b| &b.name == name)?;
                        let cfg = config.backends.iter().find(|b| &b.name == name)?;
                        Some((backend.clone(), cfg.tools.clone()))
                    })
                    .collect();
                (
                    ns.name.clone(),
                    Arc::new(Namespace::new(
                        ns.name.clone(),
                        u16::try_from(tag).unwrap_or(u16::MAX),
                        members,
                        ns.prefix,
                        config.server.list_page_size,
                    )),
                )
            })
            .collect();
        Router { namespaces }
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
            let (names, tasks, questions) = ns.census();
            metrics.entries("name_index", name.as_str(), names);
            metrics.entries("task_index", name.as_str(), tasks);
            metrics.entries("questions_waiting", name.as_str(), questions);
        }
    }
}
