//! What this host lets the gateway enforce, probed once: Landlock's ABI,
//! network and user namespaces, cgroups it may create. `sluice check`
//! prints it; every backend's plan is made against it.
//!
//! `SLUICE_SANDBOX_WITHOUT` (a comma-separated list of `cgroup`,
//! `namespaces`, `landlock`, `landlock_net`) hides a mechanism, so the
//! paths taken where a host lacks it can be seen on a host that has it.

use std::sync::OnceLock;

use landlock::{ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr};

use super::cgroup::Cgroups;

const WITHOUT_ENV: &str = "SLUICE_SANDBOX_WITHOUT";

/// How a child gets a network of its own (no interface but a loopback
/// that is down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Namespaces {
    /// The gateway may make a network namespace directly (root).
    Network,
    /// Only inside a user namespace of the child's own.
    User,
    None,
}

#[derive(Debug)]
pub(crate) struct Host {
    /// The highest Landlock ABI the kernel has (0: none).
    pub(crate) landlock: i32,
    pub(crate) namespaces: Namespaces,
    pub(crate) cgroups: Option<Cgroups>,
    /// What `SLUICE_SANDBOX_WITHOUT` hid.
    pub(crate) hidden: Vec<String>,
}

impl Host {
    pub(crate) fn get() -> &'static Host {
        static HOST: OnceLock<Host> = OnceLock::new();
        HOST.get_or_init(Host::probe)
    }

    fn probe() -> Host {
        let hidden: Vec<String> = std::env::var(WITHOUT_ENV)
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        let hides = |what: &str| hidden.iter().any(|h| h == what);
        let mut landlock = if hides("landlock") { 0 } else { landlock_abi() };
        if hides("landlock_net") {
            landlock = landlock.min(3);
        }
        Host {
            landlock,
            namespaces: if hides("namespaces") {
                Namespaces::None
            } else {
                namespaces()
            },
            cgroups: if hides("cgroup") {
                None
            } else {
                Cgroups::find()
            },
            hidden,
        }
    }

    pub(crate) fn abi(&self) -> ABI {
        ABI::from(self.landlock)
    }

    /// Landlock rules on TCP bind and connect (ABI 4).
    pub(crate) fn landlock_net(&self) -> bool {
        self.landlock >= 4
    }

    /// One line per mechanism, for `sluice check`.
    pub(crate) fn describe(&self) -> Vec<String> {
        let mut lines = vec![match self.landlock {
            0 => "Landlock: not available (no filesystem rules)".to_owned(),
            n if n >= 4 => format!("Landlock: ABI {n} (filesystem and TCP rules)"),
            n => format!("Landlock: ABI {n} (filesystem rules; TCP rules need ABI 4)"),
        }];
        lines.push(
            match self.namespaces {
                Namespaces::Network => "network namespaces: yes",
                Namespaces::User => "network namespaces: inside an unprivileged user namespace",
                Namespaces::None => "network namespaces: no",
            }
            .to_owned(),
        );
        lines.push(match &self.cgroups {
            Some(c) => c.describe(),
            None if rustix::process::geteuid().is_root() => "cgroups: none the gateway may create (memory falls back to RLIMIT_DATA; processes cannot be bounded for a root gateway)".to_owned(),
            None => "cgroups: none the gateway may create (memory falls back to RLIMIT_DATA; processes to RLIMIT_NPROC in a user namespace)".to_owned(),
        });
        if !self.hidden.is_empty() {
            lines.push(format!(
                "hidden by {WITHOUT_ENV}: {}",
                self.hidden.join(", ")
            ));
        }
        lines
    }
}

/// The highest ABI whose every filesystem right (and, from 4, TCP right)
/// the kernel takes, asked as a hard requirement.
fn landlock_abi() -> i32 {
    for v in (1..=7).rev() {
        let abi = ABI::from(v);
        let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
        let handled = ruleset.handle_access(AccessFs::from_all(abi));
        let handled = match handled {
            Ok(r) if v >= 4 => r.handle_access(AccessNet::from_all(abi)),
            other => other,
        };
        ruleset = match handled {
            Ok(r) => r,
            Err(_) => continue,
        };
        if ruleset.create().is_ok() {
            return v;
        }
    }
    0
}

/// Tried in a forked child, which exits at once: a namespace made here
/// would be the gateway's own.
fn namespaces() -> Namespaces {
    use rustix::thread::UnshareFlags as F;
    if try_in_child(F::NEWNET) {
        Namespaces::Network
    } else if try_in_child(F::NEWUSER | F::NEWNET) {
        Namespaces::User
    } else {
        Namespaces::None
    }
}

fn try_in_child(flags: rustix::thread::UnshareFlags) -> bool {
    // SAFETY: the child makes one system call and leaves with `_exit`,
    // both async-signal-safe; nothing of the parent's state is touched.
    unsafe {
        match libc::fork() {
            -1 => false,
            0 => {
                let ok = rustix::thread::unshare_unsafe(flags).is_ok();
                libc::_exit(if ok { 0 } else { 1 })
            }
            pid => {
                let mut status = 0;
                while libc::waitpid(pid, &mut status, 0) == -1
                    && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                {
                }
                libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
            }
        }
    }
}
