//! `sandbox` on a stdio backend, else `[defaults] sandbox`: checked for
//! what can be told without the host (absolute paths, non-zero bounds).

use super::super::file::FileSandbox;
use super::super::{NetworkAccess, Sandbox};
use super::Builder;

impl Builder<'_> {
    /// `Some(None)`: no sandbox; `None`: a problem was recorded.
    pub(super) fn sandbox(
        &mut self,
        name: &str,
        own: Option<&FileSandbox>,
    ) -> Option<Option<Sandbox>> {
        let section = self.syntax.backends();
        let (s, at): (FileSandbox, Vec<&str>) = match (own, &self.default_sandbox) {
            (Some(s), _) => (s.clone(), vec![section, name, "sandbox"]),
            (None, Some(d)) => (d.clone(), vec!["defaults", "sandbox"]),
            (None, None) => return Some(None),
        };
        let mut ok = true;
        for (key, value) in [("processes", s.processes), ("open_files", s.open_files)] {
            if value == Some(0) {
                self.at_key(&[&at[..], &[key]].concat(), "must be greater than zero");
                ok = false;
            }
        }
        // Below this no runtime starts, and a typo (`512` for `512MiB`)
        // would read as a backend that never comes up.
        if let Some(m) = s.memory.filter(|m| m.0 < 1 << 20) {
            self.at_key(
                &[&at[..], &["memory"]].concat(),
                format!("{} bytes is under 1MiB: write a unit (\"512MiB\")", m.0),
            );
            ok = false;
        }
        let network = match s.network.as_deref() {
            None | Some("all") => NetworkAccess::All,
            Some("none") => NetworkAccess::None,
            Some(other) => {
                self.at_key(
                    &[&at[..], &["network"]].concat(),
                    format!("`{other}`: use \"none\" or \"all\""),
                );
                ok = false;
                NetworkAccess::All
            }
        };
        for (key, paths) in [("read", &s.read), ("write", &s.write)] {
            for (i, path) in paths.iter().flatten().enumerate() {
                if !path.is_absolute() {
                    let whole = [&at[..], &[key]].concat();
                    let shown = format!("{}.{key}[{i}]", at.join("."));
                    self.at_item(
                        &whole,
                        i,
                        shown,
                        format!("`{}` is not an absolute path", path.display()),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(Some(Sandbox {
            memory: s.memory.map(|m| m.0),
            processes: s.processes,
            open_files: s.open_files,
            network,
            read: s.read,
            write: s.write,
            require: s.require.unwrap_or(true),
        }))
    }
}
