//! A backend's plan: which mechanism holds each bound on this host, what
//! cannot be held, and each child's confinement made from it.

use std::io;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, Scope,
};
use rustix::process::Resource;
use rustix::thread::UnshareFlags;

use super::cgroup::Cgroup;
use super::confined::{Confined, PrivateTmp};
use super::host::{Host, Namespaces};
use super::in_child::{InChild, Maps};
use super::paths;
use crate::config::{NetworkAccess, Sandbox, format_bytes};

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
    pub(crate) fn confine(
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
        // Not found: the spawn itself fails, and says so.
        let command = crate::config::resolve_command(command, env("PATH").as_deref(), cwd)
            .unwrap_or_else(|| PathBuf::from(command));
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
                Some(extra) => paths::readable(command, args, cwd, env, tmp, extra),
            };
            // Writes left open give writing only: reading stays as `read`
            // says. Paths listed in `write` (and the child's own) are read
            // too.
            let (write, write_access) = match &c.write {
                None if self.uses_cgroup() => (
                    paths::all_but(Path::new(CGROUPS)),
                    AccessFs::from_write(abi),
                ),
                None => (vec![PathBuf::from("/")], AccessFs::from_write(abi)),
                Some(extra) => (
                    paths::writable(command, env, tmp, extra),
                    AccessFs::from_all(abi),
                ),
            };
            for (list, access) in [(read, AccessFs::from_read(abi)), (write, write_access)] {
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
