//! What a confined child does to itself between fork and exec: join its
//! cgroup, set its rlimits, enter its namespaces, restrict itself with
//! Landlock, drop every capability. Prepared by the parent; the child only
//! makes system calls.

use std::io;

use landlock::{RulesetCreated, RulesetStatus};
use rustix::process::{Resource, Rlimit};
use rustix::thread::UnshareFlags;

/// The uid and gid maps of a user namespace that maps the gateway's own
/// user to itself, formatted before the fork.
pub(super) struct Maps {
    uid: Vec<u8>,
    gid: Vec<u8>,
}

impl Maps {
    pub(super) fn own() -> Maps {
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
pub(crate) struct InChild {
    pub(super) join: Vec<i32>,
    pub(super) limits: Vec<(Resource, u64)>,
    pub(super) unshare: Option<UnshareFlags>,
    pub(super) maps: Option<Maps>,
    pub(super) nproc: Option<u64>,
    pub(super) ruleset: Option<RulesetCreated>,
    /// Landlock must enforce all it was asked (`require`).
    pub(super) enforce_all: bool,
}

impl InChild {
    pub(crate) fn apply(&mut self) -> io::Result<()> {
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
