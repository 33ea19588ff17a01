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
mod confined;
mod host;
mod in_child;
mod paths;
mod plan;

pub(crate) use confined::{Broke, Confined};
pub(crate) use host::Host;
pub(crate) use plan::Plan;
pub use plan::report;
