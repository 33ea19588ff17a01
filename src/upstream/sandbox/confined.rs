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
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|e| io::Error::other(e.to_string()))?;
        let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let path = std::env::temp_dir().join(format!("sluice-{name}-{suffix}"));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(PrivateTmp { path })
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot remove a child's temporary directory");
        }
    }
}
