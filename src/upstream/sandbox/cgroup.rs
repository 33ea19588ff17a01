//! The cgroups a child is bounded by: a directory of its own under the
//! gateway's cgroup, with `memory` and `pids` limits, that the child joins
//! before it runs its command, and that is emptied and removed after it.
//!
//! cgroup v2 where the gateway's cgroup was delegated to it (systemd
//! `Delegate=yes`): the gateway moves itself into a `gateway` leaf, so its
//! own cgroup may enable the controllers for its children's. Else cgroup
//! v1's `memory` and `pids` hierarchies where they are mounted and
//! writable (root on a v1 or hybrid host).

use std::fs;
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Where children's cgroups go on this host.
#[derive(Debug)]
pub(crate) enum Cgroups {
    /// The gateway's own (delegated) cgroup.
    V2 { own: PathBuf },
    V1 {
        memory: Option<PathBuf>,
        pids: Option<PathBuf>,
    },
}

impl Cgroups {
    pub(super) fn find() -> Option<Cgroups> {
        let mounts = fs::read_to_string("/proc/self/mountinfo").ok()?;
        let own = fs::read_to_string("/proc/self/cgroup").ok()?;
        v2(&mounts, &own).or_else(|| v1(&mounts, &own))
    }

    pub(crate) fn memory(&self) -> bool {
        match self {
            Cgroups::V2 { .. } => true,
            Cgroups::V1 { memory, .. } => memory.is_some(),
        }
    }

    pub(crate) fn pids(&self) -> bool {
        match self {
            Cgroups::V2 { .. } => true,
            Cgroups::V1 { pids, .. } => pids.is_some(),
        }
    }

    pub(super) fn describe(&self) -> String {
        match self {
            Cgroups::V2 { own } => format!("cgroups: v2, delegated ({})", own.display()),
            Cgroups::V1 { memory, pids } => {
                let shown = |p: &Option<PathBuf>| {
                    p.as_ref()
                        .map_or("no".to_owned(), |p| p.display().to_string())
                };
                format!(
                    "cgroups: v1 (memory {}, pids {})",
                    shown(memory),
                    shown(pids)
                )
            }
        }
    }

    /// A new cgroup for one child, limits written.
    pub(super) fn create(
        &self,
        name: &str,
        memory: Option<u64>,
        pids: Option<u64>,
    ) -> io::Result<Cgroup> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| self.sweep());
        let leaf = format!(
            "sluice-{}-{name}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut group = Cgroup {
            dirs: Vec::new(),
            procs: Vec::new(),
            memory_events: None,
            pids_events: None,
        };
        match self {
            Cgroups::V2 { own } => {
                let base = delegated_base(own)?;
                let dir = base.join(&leaf);
                group.make(&dir)?;
                if let Some(bytes) = memory {
                    write(&dir.join("memory.max"), &bytes.to_string())?;
                    // Swapped pages would be memory past the bound.
                    let _ = write(&dir.join("memory.swap.max"), "0");
                    group.memory_events = Some((dir.join("memory.events"), "oom_kill"));
                }
                if let Some(n) = pids {
                    write(&dir.join("pids.max"), &n.to_string())?;
                    group.pids_events = Some(dir.join("pids.events"));
                }
            }
            Cgroups::V1 {
                memory: mem_root,
                pids: pids_root,
            } => {
                if let (Some(bytes), Some(root)) = (memory, mem_root) {
                    let dir = root.join(&leaf);
                    group.make(&dir)?;
                    write(&dir.join("memory.limit_in_bytes"), &bytes.to_string())?;
                    let memsw = dir.join("memory.memsw.limit_in_bytes");
                    if memsw.exists() {
                        write(&memsw, &bytes.to_string())?;
                    }
                    group.memory_events = Some((dir.join("memory.oom_control"), "oom_kill"));
                }
                if let (Some(n), Some(root)) = (pids, pids_root) {
                    let dir = root.join(&leaf);
                    group.make(&dir)?;
                    write(&dir.join("pids.max"), &n.to_string())?;
                    group.pids_events = Some(dir.join("pids.events"));
                }
            }
        }
        Ok(group)
    }
}

impl Cgroups {
    fn bases(&self) -> Vec<PathBuf> {
        match self {
            Cgroups::V2 { own } => vec![own.clone()],
            Cgroups::V1 { memory, pids } => memory.iter().chain(pids).cloned().collect(),
        }
    }

    /// Removes the cgroups a gateway that was killed (SIGKILL, a crash)
    /// left behind: `sluice-PID-...` whose process is gone.
    fn sweep(&self) {
        for base in self.bases() {
            let Ok(entries) = fs::read_dir(&base) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                let Some(pid) = name
                    .to_str()
                    .and_then(|n| n.strip_prefix("sluice-"))
                    .and_then(|n| n.split('-').next())
                    .and_then(|p| p.parse::<u32>().ok())
                else {
                    continue;
                };
                if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                    kill_all(&e.path());
                    match fs::remove_dir(e.path()) {
                        Ok(()) => {
                            tracing::info!(cgroup = %e.path().display(), "removed a cgroup a gateway that ended without its shutdown left")
                        }
                        Err(err) => {
                            tracing::warn!(cgroup = %e.path().display(), error = %err, "cannot remove a cgroup an earlier gateway left")
                        }
                    }
                }
            }
        }
    }
}

/// One child's cgroup (one directory in v2, one per hierarchy in v1).
pub(super) struct Cgroup {
    dirs: Vec<PathBuf>,
    /// Each directory's `cgroup.procs`, opened close-on-exec for the child
    /// to write itself into before it runs its command.
    procs: Vec<OwnedFd>,
    memory_events: Option<(PathBuf, &'static str)>,
    pids_events: Option<PathBuf>,
}

impl Cgroup {
    fn make(&mut self, dir: &Path) -> io::Result<()> {
        fs::create_dir(dir)?;
        self.dirs.push(dir.to_owned());
        let procs = fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))?;
        self.procs.push(procs.into());
        Ok(())
    }

    /// The file descriptors the child writes "0" (itself) to.
    pub(super) fn join_fds(&self) -> Vec<i32> {
        self.procs.iter().map(|f| f.as_raw_fd()).collect()
    }

    /// The child has joined (or never will): the parent's copies go.
    pub(super) fn close_fds(&mut self) {
        self.procs.clear();
    }

    /// Times the kernel's OOM killer ended a process of this cgroup.
    pub(super) fn oom_kills(&self) -> u64 {
        self.memory_events
            .as_ref()
            .map_or(0, |(file, key)| counter(file, key))
    }

    /// Times a fork was refused at `pids.max`.
    pub(super) fn forks_refused(&self) -> u64 {
        self.pids_events.as_ref().map_or(0, |f| counter(f, "max"))
    }
}

/// Kills what is left in the cgroup (a process that left the child's
/// process group is still here) and removes it.
impl Drop for Cgroup {
    fn drop(&mut self) {
        self.procs.clear();
        let dirs = std::mem::take(&mut self.dirs);
        for dir in &dirs {
            kill_all(dir);
        }
        if dirs.iter().all(|d| fs::remove_dir(d).is_ok()) {
            return;
        }
        // Killed processes leave their cgroup as the kernel finishes their
        // exit: a moment, waited for off the runtime, bounded.
        std::thread::spawn(move || {
            for _ in 0..100 {
                std::thread::sleep(std::time::Duration::from_millis(20));
                let mut left = false;
                for dir in &dirs {
                    if dir.exists() {
                        kill_all(dir);
                        left |= fs::remove_dir(dir).is_err();
                    }
                }
                if !left {
                    return;
                }
            }
            tracing::warn!(dirs = ?dirs, "a child's cgroup could not be removed");
        });
    }
}

fn kill_all(dir: &Path) {
    let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) else {
        return;
    };
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        // SAFETY: kill only sends a signal; these are our children's.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// `key N` in a flat keyed file (`memory.events`, `pids.events`,
/// `memory.oom_control`).
fn counter(file: &Path, key: &str) -> u64 {
    fs::read_to_string(file)
        .ok()
        .and_then(|text| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse().ok()).flatten()
            })
        })
        .unwrap_or(0)
}

fn write(file: &Path, value: &str) -> io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open(file)?
        .write_all(value.as_bytes())
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))
}

/// The mount point of the first `fstype` mount whose options name
/// `controller` (any, for v2).
fn mount_of(mounts: &str, fstype: &str, controller: Option<&str>) -> Option<PathBuf> {
    mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut r = right.split(' ');
        if r.next()? != fstype {
            return None;
        }
        let options = r.nth(1).unwrap_or("");
        if let Some(c) = controller
            && !options.split(',').any(|o| o == c)
        {
            return None;
        }
        left.split(' ').nth(4).map(PathBuf::from)
    })
}

/// The gateway's own path in a hierarchy, from /proc/self/cgroup.
fn own_path<'a>(own: &'a str, controller: Option<&str>) -> Option<&'a str> {
    own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        match controller {
            None => (id == "0" && controllers.is_empty()).then_some(path),
            Some(c) => controllers.split(',').any(|x| x == c).then_some(path),
        }
    })
}

fn writable(dir: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: access only reads the path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

fn v2(mounts: &str, own: &str) -> Option<Cgroups> {
    let root = mount_of(mounts, "cgroup2", None)?;
    let path = own_path(own, None)?;
    let mut dir = root.join(path.trim_start_matches('/'));
    // Already moved into its leaf by an earlier start of this process.
    if dir.ends_with("gateway") {
        dir.pop();
    }
    let controllers = fs::read_to_string(dir.join("cgroup.controllers")).ok()?;
    let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
    (has("memory") && has("pids") && writable(&dir) && path != "/")
        .then_some(Cgroups::V2 { own: dir })
}

fn v1(mounts: &str, own: &str) -> Option<Cgroups> {
    let find = |c: &str| {
        let root = mount_of(mounts, "cgroup", Some(c))?;
        let dir = root.join(own_path(own, Some(c))?.trim_start_matches('/'));
        writable(&dir).then_some(dir)
    };
    let (memory, pids) = (find("memory"), find("pids"));
    (memory.is_some() || pids.is_some()).then_some(Cgroups::V1 { memory, pids })
}

/// In v2 a cgroup with processes cannot give its children controllers:
/// the gateway moves itself into `own/gateway` once, then enables them.
fn delegated_base(own: &Path) -> io::Result<PathBuf> {
    static MOVED: Mutex<bool> = Mutex::new(false);
    let mut moved = MOVED.lock();
    if !*moved {
        let leaf = own.join("gateway");
        match fs::create_dir(&leaf) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        write(&leaf.join("cgroup.procs"), &std::process::id().to_string())?;
        write(&own.join("cgroup.subtree_control"), "+memory +pids")?;
        *moved = true;
    }
    Ok(own.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
44 31 0:41 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
48 31 0:45 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
";
    const OWN: &str = "8:pids:/\n4:memory:/a/b\n0::/\n";

    #[test]
    fn mounts_and_own_paths_are_read() {
        assert_eq!(
            mount_of(HYBRID, "cgroup", Some("memory")),
            Some(PathBuf::from("/sys/fs/cgroup/memory"))
        );
        assert_eq!(
            mount_of(HYBRID, "cgroup2", None),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(own_path(OWN, Some("memory")), Some("/a/b"));
        assert_eq!(own_path(OWN, None), Some("/"));
        assert_eq!(own_path(OWN, Some("cpu")), None);
    }
}
