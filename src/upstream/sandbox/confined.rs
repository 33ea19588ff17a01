//! What the gateway makes for one confined child (its cgroup, its private
//! temporary directory), owned until the child and its descendants are
//! gone, and what its cgroup says of how it ended.

use std::io;
use std::path::{Path, PathBuf};

use super::cgroup::Cgroup;

/// What the gateway made for one child; removed when dropped, after the
/// child and its descendants are gone.
pub(crate) struct Confined {
    pub(super) cgroup: Option<Cgroup>,
    pub(super) tmp: PrivateTmp,
}

/// Why a confined child ended, where its bounds say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Broke {
    /// The kernel's OOM killer ended a process over `memory`.
    Memory,
    /// A fork was refused at `processes`.
    Processes,
}

impl Confined {
    /// Variables the child gets: its temporary directory.
    pub(crate) fn env(&self) -> [(&'static str, &Path); 3] {
        let p = self.tmp.path.as_path();
        [("TMPDIR", p), ("TMP", p), ("TEMP", p)]
    }

    /// The child is running (or never will): the parent's copies of the
    /// cgroup's files go.
    pub(crate) fn spawned(&mut self) {
        if let Some(c) = &mut self.cgroup {
            c.close_fds();
        }
    }

    pub(crate) fn broke(&self) -> Option<Broke> {
        let c = self.cgroup.as_ref()?;
        if c.oom_kills() > 0 {
            Some(Broke::Memory)
        } else if c.forks_refused() > 0 {
            Some(Broke::Processes)
        } else {
            None
        }
    }
}

/// `TMPDIR` of one child, made 0700 and removed with everything in it.
pub(super) struct PrivateTmp {
    pub(super) path: PathBuf,
}

impl PrivateTmp {
    pub(super) fn new(name: &str) -> io::Result<PrivateTmp> {
        use std::os::unix::fs::DirBuilderExt as _;
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(sweep);
        let suffix = crate::vocab::random::hex(8);
        let pid = std::process::id();
        let path = std::env::temp_dir().join(format!("sluice-{pid}-{name}-{suffix}"));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(PrivateTmp { path })
    }
}

/// Removes the temporary directories a gateway that was killed outright
/// left: `sluice-PID-NAME-HEX16` whose process is gone, 0700 and ours.
fn sweep() {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(left_by) else {
            continue;
        };
        let ours = entry
            .metadata()
            .is_ok_and(|m| m.is_dir() && m.uid() == me && m.mode() & 0o777 == 0o700);
        if ours && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            match std::fs::remove_dir_all(entry.path()) {
                Ok(()) => {
                    tracing::info!(path = %entry.path().display(), "removed a child's temporary directory a gateway that ended without its shutdown left")
                }
                Err(e) => {
                    tracing::warn!(path = %entry.path().display(), error = %e, "cannot remove a temporary directory an earlier gateway left")
                }
            }
        }
    }
}

/// The gateway pid in a private directory's name, if it is one.
fn left_by(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("sluice-")?;
    let (pid, rest) = rest.split_once('-')?;
    let (backend, hex) = rest.rsplit_once('-')?;
    let hex_ok = hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit());
    (hex_ok && !backend.is_empty())
        .then(|| pid.parse().ok())
        .flatten()
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot remove a child's temporary directory");
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_childs_own_directory_names_a_gateway() {
        assert_eq!(
            super::left_by("sluice-123-files-0123456789abcdef"),
            Some(123)
        );
        assert_eq!(
            super::left_by("sluice-123-my-files-0123456789abcdef"),
            Some(123)
        );
        assert_eq!(super::left_by("sluice-test-0123456789abcdef"), None);
        assert_eq!(super::left_by("sluice-bench-k540r_18"), None);
        assert_eq!(super::left_by("sluice-unit-77"), None);
    }
}
