//! A namespace's `discovery`, `pinned` and `expose_found`: how its clients
//! find tools. A pin must be able to name a tool of the namespace (its
//! backend's prefix, past that backend's tool filter); whether the backend
//! really lists it is known only once it runs, so a pin it does not list
//! is logged then and left out. A backend tool that would be listed as
//! one of the gateway's own names (`prefix = "never"`, renamed to it) is
//! an error here; one the backend lists under that name itself is dropped
//! from search at run time, with a warning.

use super::super::file::{FileDiscovery, FileNamespace};
use super::super::tools::is_tool_name;
use super::super::{BackendConfig, Discovery, Prefix};
use super::Builder;

impl Builder<'_> {
    pub(super) fn discovery(
        &mut self,
        ns: &str,
        n: &FileNamespace,
        prefix: Prefix,
        members: &[&BackendConfig],
    ) -> Discovery {
        let search = n.discovery == Some(FileDiscovery::Search);
        if !search {
            for (key, set) in [
                ("pinned", n.pinned.is_some()),
                ("expose_found", n.expose_found.is_some()),
            ] {
                if set {
                    self.at_key(
                        &["namespaces", ns, key],
                        "applies only with discovery = \"search\"",
                    );
                }
            }
            return Discovery::List;
        }
        let pinned = n.pinned.clone().unwrap_or_default();
        for (i, pin) in pinned.iter().enumerate() {
            let path = ["namespaces", ns, "pinned"];
            let shown = format!("namespaces.{ns}.pinned[{i}]");
            if let Some(problem) = pin_problem(pin, prefix, members) {
                self.at_item(&path, i, &shown, problem);
            } else if pinned[..i].contains(pin) {
                self.at_item(&path, i, &shown, format!("`{pin}` is pinned twice"));
            }
        }
        if prefix == Prefix::Never {
            for m in members {
                let (_, _, renames) = m.tools.parts();
                for (original, exposed) in renames {
                    if Discovery::is_gateway_tool(exposed) {
                        self.at_key(
                            &["namespaces", ns, "discovery"],
                            format!(
                                "backend `{}` renames `{original}` to `{exposed}`, the gateway's own tool in search mode (prefix = \"never\"); rename it to another name",
                                m.name
                            ),
                        );
                    }
                }
            }
        }
        Discovery::Search {
            pinned,
            expose_found: n.expose_found.unwrap_or(false),
        }
    }
}

/// Why `pin` cannot name a tool of a namespace of `members`, if it cannot.
fn pin_problem(pin: &str, prefix: Prefix, members: &[&BackendConfig]) -> Option<String> {
    if !is_tool_name(pin) {
        return Some(format!("`{pin}` is not a valid tool name"));
    }
    if Discovery::is_gateway_tool(pin) {
        return Some(format!("`{pin}` is the gateway's own tool, always listed"));
    }
    let passes = |m: &&BackendConfig, tool: &str| m.tools.original(tool).is_some();
    let found = match prefix {
        Prefix::Always => members.iter().any(|m| {
            pin.strip_prefix(m.name.as_str())
                .and_then(|rest| rest.strip_prefix("__"))
                .is_some_and(|tool| !tool.is_empty() && passes(m, tool))
        }),
        Prefix::Never => members.iter().any(|m| passes(m, pin)),
    };
    (!found).then(|| {
        let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        match prefix {
            Prefix::Always => format!(
                "`{pin}` names no tool of this namespace: a pin is a name as clients see it, `BACKEND__TOOL` with BACKEND one of [{}], past that backend's `tools` filter",
                names.join(", ")
            ),
            Prefix::Never => format!(
                "`{pin}` is hidden by the `tools` filter of every backend of this namespace ([{}])",
                names.join(", ")
            ),
        }
    })
}
