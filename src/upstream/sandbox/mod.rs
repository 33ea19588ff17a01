//! The kernel's bounds on a stdio child (`sandbox = { ... }`): memory and
//! processes by a cgroup of its own (memory by `RLIMIT_DATA` where there
//! is none), open files and core dumps by rlimits, the network by a
//! namespace of its own (or Landlock's TCP rules), files by Landlock.
//!
//! A backend's [`Plan`] is made once, against what the [`Host`] supports;
//! each child is then [`Plan::confine`]d: what the gateway makes for it
//! (its cgroup, its private temporary directory) is owned by the returned
//! [`Confined`] and removed when that is dropped, and what the child does
//! to itself before it runs its command is an [`InChild`].

mod cgroup;
mod host;
mod paths;

use std::io;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, RulesetStatus, Scope,
};
use rustix::process::{Resource, Rlimit};
use rustix::thread::UnshareFlags;

use crate::config::{NetworkAccess, Sandbox, format_bytes};
use cgroup::Cgroup;
pub(crate) use host::{Host, Namespaces};

/// Where cgroup hierarchies are mounted: never writable by a child in one.
const CGROUPS: &str = "/sys/fs/cgroup";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemoryBy {
    Cgroup,
    Rlimit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProcessesBy {
    Cgroup,
    /// `RLIMIT_NPROC` counted inside a user namespace of the child's own,
    /// so the gateway's user's other processes do not count.
    UserNamespace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NetworkBy {
    Namespace,
    UserNamespace,
    Landlock,
}

/// What one backend's children get on this host.
#[derive(Debug)]
pub(crate) struct Plan {
    config: Sandbox,
    memory: Option<MemoryBy>,
    processes: Option<ProcessesBy>,
    network: Option<NetworkBy>,
    /// Landlock filesystem rules (`read` or `write` given).
    files: bool,
    abi: ABI,
    landlock: i32,
    /// Each bound the host cannot enforce, with the mechanism it lacks.
    missing: Vec<String>,
}

impl Plan {
    pub(crate) fn new(config: &Sandbox, host: &Host) -> Plan {
        let cgroups = host.cgroups.as_ref();
        let root = rustix::process::geteuid().is_root();
        let mut missing = Vec::new();
        let memory = config.memory.map(|_| {
            if cgroups.is_some_and(|c| c.memory()) {
                MemoryBy::Cgroup
            } else {
                MemoryBy::Rlimit
            }
        });
        let processes = config.processes.and_then(|_| {
            if cgroups.is_some_and(|c| c.pids()) {
                Some(ProcessesBy::Cgroup)
            } else if !root && host.namespaces != Namespaces::None {
                Some(ProcessesBy::UserNamespace)
            } else {
                missing.push(if root {
                    "processes: no pids cgroup the gateway may create (RLIMIT_NPROC does not bind root)".to_owned()
                } else {
                    "processes: no pids cgroup the gateway may create and no user namespaces".to_owned()
                });
                None
            }
        });
        let network = match config.network {
            NetworkAccess::All => None,
            NetworkAccess::None => match host.namespaces {
                Namespaces::Network => Some(NetworkBy::Namespace),
                Namespaces::User => Some(NetworkBy::UserNamespace),
                Namespaces::None if host.landlock_net() => Some(NetworkBy::Landlock),
                Namespaces::None => {
                    missing.push(
                        "network = \"none\": no network namespaces and no Landlock TCP rules (ABI 4)"
                            .to_owned(),
                    );
                    None
                }
            },
        };
        let wants_files = config.read.is_some() || config.write.is_some();
        // A child that may write its cgroup hierarchy may move itself out
        // of its cgroup: the Landlock rules keep it from that, always.
        let in_cgroup = memory == Some(MemoryBy::Cgroup) || processes == Some(ProcessesBy::Cgroup);
        let files = (wants_files || in_cgroup) && host.landlock > 0;
        if wants_files && host.landlock == 0 {
            missing.push("read/write: Landlock is not available".to_owned());
        }
        if in_cgroup && host.landlock == 0 {
            missing.push(
                "memory/processes: no Landlock to keep the child from moving itself out of its cgroup"
                    .to_owned(),
            );
        }
        Plan {
            config: config.clone(),
            memory,
            processes,
            network,
            files,
            abi: host.abi(),
            landlock: host.landlock,
            missing,
        }
    }

    /// Err naming every bound the host cannot enforce, unless the backend
    /// said `require = false`.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.missing.is_empty() || !self.config.require {
            return Ok(());
        }
        Err(format!(
            "sandbox cannot be enforced on this host: {} (set `require = false` to run with what can be)",
            self.missing.join("; ")
        ))
    }

    /// The bounds this host cannot enforce (logged where not required).
    pub(crate) fn missing(&self) -> &[String] {
        &self.missing
    }
}

impl Plan {
    /// What a child gets, for `sluice check`.
    pub(crate) fn describe(&self) -> String {
        let c = &self.config;
        let mut parts = Vec::new();
        if let (Some(m), Some(by)) = (c.memory, self.memory) {
            let how = match by {
                MemoryBy::Cgroup => "cgroup",
                MemoryBy::Rlimit => "RLIMIT_DATA",
            };
            parts.push(format!("memory {} by {how}", format_bytes(m)));
        }
        if let (Some(n), Some(by)) = (c.processes, self.processes) {
            let how = match by {
                ProcessesBy::Cgroup => "cgroup pids.max",
                ProcessesBy::UserNamespace => "RLIMIT_NPROC in a user namespace",
            };
            parts.push(format!("processes {n} by {how}"));
        }
        if let Some(n) = c.open_files {
            parts.push(format!("open files {n} by RLIMIT_NOFILE"));
        }
        parts.push(match self.network {
            None if c.network == NetworkAccess::All => "network all".to_owned(),
            None => "network NOT bounded".to_owned(),
            Some(NetworkBy::Namespace) => "network none by a network namespace".to_owned(),
            Some(NetworkBy::UserNamespace) => {
                "network none by a network namespace in a user namespace".to_owned()
            }
            Some(NetworkBy::Landlock) => "network none by Landlock TCP rules".to_owned(),
        });
        if self.files {
            let shown = |p: &Option<Vec<PathBuf>>| match p {
                None => "anything".to_owned(),
                Some(v) if v.is_empty() => "what it needs to run".to_owned(),
                Some(v) => format!(
                    "what it needs to run and {}",
                    v.iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            parts.push(format!(
                "reads {} / writes {} (Landlock ABI {})",
                shown(&c.read),
                match &c.write {
                    None if self.uses_cgroup() => format!("anything but {CGROUPS}"),
                    w =>
                        shown(w).replace("what it needs to run", "its private temporary directory"),
                },
                self.landlock
            ));
        }
        parts.push("no core dumps, no_new_privs".to_owned());
        for m in &self.missing {
            parts.push(format!("NOT ENFORCED: {m}"));
        }
        parts.join("; ")
    }

    /// Makes what one child needs (its cgroup, its temporary directory,
    /// its Landlock ruleset) before it is spawned.
    pub(super) fn confine(
        &self,
        name: &str,
        command: &str,
        args: &[String],
        cwd: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> io::Result<(Confined, InChild)> {
        let host = Host::get();
        let c = &self.config;
        let cgroup = match (&host.cgroups, self.uses_cgroup()) {
            (Some(groups), true) => Some(
                groups.create(
                    name,
                    c.memory.filter(|_| self.memory == Some(MemoryBy::Cgroup)),
                    c.processes
                        .filter(|_| self.processes == Some(ProcessesBy::Cgroup)),
                )?,
            ),
            _ => None,
        };
        let tmp = PrivateTmp::new(name)?;
        let mut limits = vec![(Resource::Core, 0)];
        if let Some(n) = c.open_files {
            limits.push((Resource::Nofile, n));
        }
        if let (Some(m), Some(MemoryBy::Rlimit)) = (c.memory, self.memory) {
            limits.push((Resource::Data, m));
        }
        let user = self.network == Some(NetworkBy::UserNamespace)
            || self.processes == Some(ProcessesBy::UserNamespace);
        let unshare = match (user, self.network) {
            (true, Some(NetworkBy::Namespace | NetworkBy::UserNamespace)) => {
                Some(UnshareFlags::NEWUSER | UnshareFlags::NEWNET)
            }
            (true, _) => Some(UnshareFlags::NEWUSER),
            (false, Some(NetworkBy::Namespace)) => Some(UnshareFlags::NEWNET),
            _ => None,
        };
        let command = paths::resolve(command, env("PATH").as_deref(), cwd);
        let ruleset = self
            .ruleset(&command, args, cwd, env, &tmp.path)
            .map_err(|e| io::Error::other(format!("Landlock: {e}")))?;
        let mut in_child = InChild {
            join: cgroup.as_ref().map(Cgroup::join_fds).unwrap_or_default(),
            limits,
            unshare,
            maps: user.then(Maps::own),
            nproc: c
                .processes
                .filter(|_| self.processes == Some(ProcessesBy::UserNamespace)),
            ruleset,
            enforce_all: c.require,
        };
        in_child.join.shrink_to_fit();
        Ok((Confined { cgroup, tmp }, in_child))
    }

    fn uses_cgroup(&self) -> bool {
        self.memory == Some(MemoryBy::Cgroup) || self.processes == Some(ProcessesBy::Cgroup)
    }

    /// The Landlock ruleset, made in the parent (it allocates and opens
    /// paths, which a forked child of a threaded process must not).
    fn ruleset(
        &self,
        command: &Path,
        args: &[String],
        cwd: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
        tmp: &Path,
    ) -> Result<Option<RulesetCreated>, landlock::RulesetError> {
        let abi = self.abi;
        let net = self.network == Some(NetworkBy::Landlock);
        let scopes = Scope::from_all(abi);
        if !self.files && !net && scopes.is_empty() {
            return Ok(None);
        }
        let mut ruleset = Ruleset::default();
        if self.files {
            ruleset = ruleset.handle_access(AccessFs::from_all(abi))?;
        }
        if net {
            ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
        }
        // A child may not signal, or reach by abstract socket, anything
        // outside its own sandbox: the gateway and other backends.
        if !scopes.is_empty() {
            ruleset = ruleset.scope(scopes)?;
        }
        let mut created = ruleset.create()?;
        if self.files {
            let c = &self.config;
            let read = match &c.read {
                None => vec![PathBuf::from("/")],
                Some(extra) => paths::readable(command, args, cwd, extra),
            };
            let write = match &c.write {
                None if self.uses_cgroup() => paths::all_but(Path::new(CGROUPS)),
                None => vec![PathBuf::from("/")],
                Some(extra) => paths::writable(command, env, tmp, extra),
            };
            for (list, access) in [
                (read, AccessFs::from_read(abi)),
                (write, AccessFs::from_all(abi)),
            ] {
                for path in list {
                    let access = if path.is_dir() {
                        access
                    } else {
                        access & AccessFs::from_file(abi)
                    };
                    // A path that went away since it was listed is left out.
                    if let Ok(fd) = PathFd::new(&path) {
                        created = created.add_rule(PathBeneath::new(fd, access))?;
                    }
                }
            }
        }
        Ok(Some(created))
    }
}

/// What the gateway made for one child; removed when dropped, after the
/// child and its descendants are gone.
pub(super) struct Confined {
    cgroup: Option<Cgroup>,
    tmp: PrivateTmp,
}

/// Why a confined child ended, where its bounds say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Broke {
    /// The kernel's OOM killer ended a process over `memory`.
    Memory,
    /// A fork was refused at `processes`.
    Processes,
}

impl Confined {
    /// Variables the child gets: its temporary directory.
    pub(super) fn env(&self) -> [(&'static str, &Path); 3] {
        let p = self.tmp.path.as_path();
        [("TMPDIR", p), ("TMP", p), ("TEMP", p)]
    }

    /// The child is running (or never will): the parent's copies of the
    /// cgroup's files go.
    pub(super) fn spawned(&mut self) {
        if let Some(c) = &mut self.cgroup {
            c.close_fds();
        }
    }

    pub(super) fn broke(&self) -> Option<Broke> {
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
struct PrivateTmp {
    path: PathBuf,
}

impl PrivateTmp {
    fn new(name: &str) -> io::Result<PrivateTmp> {
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

/// The uid and gid maps of a user namespace that maps the gateway's own
/// user to itself, formatted before the fork.
struct Maps {
    uid: Vec<u8>,
    gid: Vec<u8>,
}

impl Maps {
    fn own() -> Maps {
        let uid = rustix::process::getuid().as_raw();
        let gid = rustix::process::getgid().as_raw();
        Maps {
            uid: format!("{uid} {uid} 1\n").into_bytes(),
            gid: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }
}

/// What the child does to itself between fork and exec. Everything here
/// was prepared by the parent: after a threaded process forks, the child
/// may only make system calls (no allocation, no locks).
pub(super) struct InChild {
    join: Vec<i32>,
    limits: Vec<(Resource, u64)>,
    unshare: Option<UnshareFlags>,
    maps: Option<Maps>,
    nproc: Option<u64>,
    ruleset: Option<RulesetCreated>,
    /// Landlock must enforce all it was asked (`require`).
    enforce_all: bool,
}

impl InChild {
    pub(super) fn apply(&mut self) -> io::Result<()> {
        for &fd in &self.join {
            // "0": the writer itself. Before any namespace is made, as the
            // gateway's own user.
            write_all(fd, b"0")?;
        }
        for &(resource, n) in &self.limits {
            set_limit(resource, n)?;
        }
        if let Some(flags) = self.unshare {
            // SAFETY: the child is single-threaded after fork.
            unsafe { rustix::thread::unshare_unsafe(flags) }.map_err(io::Error::from)?;
        }
        if let Some(maps) = &self.maps {
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", &maps.uid)?;
            write_file(c"/proc/self/gid_map", &maps.gid)?;
        }
        // Inside the user namespace: counts only the child's own.
        if let Some(n) = self.nproc {
            set_limit(Resource::Nproc, n)?;
        }
        match self.ruleset.take() {
            Some(ruleset) => match ruleset.restrict_self() {
                Ok(status)
                    if status.ruleset == RulesetStatus::FullyEnforced || !self.enforce_all => {}
                _ => return Err(io::Error::from_raw_os_error(libc::ENOTSUP)),
            },
            None => rustix::thread::set_no_new_privs(true).map_err(io::Error::from)?,
        }
        drop_capabilities()
    }
}

/// A child of a root gateway would run with every capability: enough to
/// ptrace the gateway (its secrets in memory), join the host's network
/// namespace again or leave its cgroup. It keeps none, and (its bounding
/// and inheritable sets emptied) gains none when it runs its command as
/// uid 0. For any other user this changes nothing.
fn drop_capabilities() -> io::Result<()> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    if !rustix::process::geteuid().is_root() {
        return Ok(());
    }
    for cap in CapabilitySet::all().iter() {
        match rustix::thread::remove_capability_from_bounding_set(cap) {
            // One this kernel does not have.
            Ok(()) | Err(rustix::io::Errno::INVAL) => {}
            Err(e) => return Err(e.into()),
        }
    }
    rustix::thread::clear_ambient_capability_set().map_err(io::Error::from)?;
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    rustix::thread::set_capabilities(None, none).map_err(io::Error::from)
}

fn set_limit(resource: Resource, n: u64) -> io::Result<()> {
    let limit = Rlimit {
        current: Some(n),
        maximum: Some(n),
    };
    rustix::process::setrlimit(resource, limit).map_err(io::Error::from)
}

fn write_all(fd: i32, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: `fd` is open (the parent holds it until spawn returns);
    // write is async-signal-safe.
    let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    if n == bytes.len() as isize {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: open/write/close are async-signal-safe; the path is static.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = write_all(fd, bytes);
        libc::close(fd);
        written
    }
}

/// `sluice check`'s section: what this host supports, then what each
/// sandboxed stdio backend's children get; and the backends whose
/// sandbox cannot be enforced (`require = true`), each with why.
pub fn report(backends: &[crate::config::BackendConfig]) -> (Vec<String>, Vec<String>) {
    let host = Host::get();
    let mut lines: Vec<String> = host.describe();
    let mut errors = Vec::new();
    for b in backends {
        if let crate::config::Transport::Stdio {
            sandbox: Some(s), ..
        } = &b.transport
        {
            let plan = Plan::new(s, host);
            lines.push(format!("backend {}: {}", b.name, plan.describe()));
            if let Err(why) = plan.check() {
                errors.push(format!("backend `{}`: {why}", b.name));
            }
        }
    }
    (lines, errors)
}
