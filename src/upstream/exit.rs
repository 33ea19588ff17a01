//! Why a backend session ended without the gateway asking: said in words
//! in the log ("exited with 3", "killed by signal 9 (SIGKILL)"), counted
//! by reason (`sluice_backend_restarts_total`), and kept, the last one of
//! each backend, for the status page.

use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::time::SystemTime;

use parking_lot::Mutex;

use super::sandbox::Broke;
use crate::metrics::RestartReason;

/// How a backend session ended on its own (or failed its checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exit {
    /// The process exited with this status code.
    Exited(i32),
    /// The process was killed by this signal.
    Signal { signal: i32, core_dumped: bool },
    /// It closed its output (stdout, its connection or event stream)
    /// while it still ran.
    Closed,
    /// It failed its handshake or a health check, so the gateway ended it.
    Unhealthy,
    /// Its cgroup's OOM killer ended it (or one of its processes) over its
    /// sandbox's `memory`; with its raw wait status.
    OverMemory(i32),
    /// It ended after a fork was refused at its sandbox's `processes`.
    OverProcesses(i32),
}

impl Exit {
    /// A process's end, from its wait status.
    pub(super) fn of(status: ExitStatus) -> Exit {
        match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Exited(code),
            (None, Some(signal)) => Exit::Signal {
                signal,
                core_dumped: status.core_dumped(),
            },
            // Neither: stopped or continued, which `wait` does not report.
            (None, None) => Exit::Closed,
        }
    }

    /// An end its sandbox's cgroup accounts for.
    pub(super) fn bound(broke: Option<Broke>, status: ExitStatus) -> Exit {
        match broke {
            Some(Broke::Memory) => Exit::OverMemory(status.into_raw()),
            Some(Broke::Processes) => Exit::OverProcesses(status.into_raw()),
            None => Exit::of(status),
        }
    }

    pub(super) fn reason(self) -> RestartReason {
        match self {
            Exit::Exited(_) => RestartReason::exited,
            Exit::Signal { .. } => RestartReason::signal,
            Exit::Closed => RestartReason::closed,
            Exit::Unhealthy => RestartReason::unhealthy,
            Exit::OverMemory(_) => RestartReason::memory,
            Exit::OverProcesses(_) => RestartReason::pids,
        }
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Exit::Exited(code) => write!(f, "exited with {code}"),
            Exit::Signal {
                signal,
                core_dumped,
            } => {
                write!(f, "killed by signal {signal}")?;
                if let Some(name) = signal_name(signal) {
                    write!(f, " ({name})")?;
                }
                if core_dumped {
                    f.write_str(", core dumped")?;
                }
                Ok(())
            }
            Exit::Closed => f.write_str("closed its output"),
            Exit::Unhealthy => f.write_str("failed its handshake or health check and was ended"),
            Exit::OverMemory(raw) => write!(
                f,
                "went over its sandbox's memory and was killed by the kernel ({})",
                Exit::of(ExitStatus::from_raw(raw))
            ),
            Exit::OverProcesses(raw) => write!(
                f,
                "was refused a process over its sandbox's bound ({})",
                Exit::of(ExitStatus::from_raw(raw))
            ),
        }
    }
}

/// The usual name of a signal a process may die of.
fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => return None,
    })
}

/// The last unexpected end of any of a backend's sessions, and when.
#[derive(Default)]
pub(super) struct LastExit(Mutex<Option<(Exit, SystemTime)>>);

impl LastExit {
    pub(super) fn record(&self, exit: Exit) {
        *self.0.lock() = Some((exit, SystemTime::now()));
    }

    pub(super) fn get(&self) -> Option<(Exit, SystemTime)> {
        *self.0.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_status_is_told_in_words() {
        // Wait statuses as the kernel encodes them: code << 8, or the signal.
        assert_eq!(
            Exit::of(ExitStatus::from_raw(3 << 8)).to_string(),
            "exited with 3"
        );
        assert_eq!(
            Exit::of(ExitStatus::from_raw(libc::SIGKILL)).to_string(),
            "killed by signal 9 (SIGKILL)"
        );
        assert_eq!(
            Exit::of(ExitStatus::from_raw(libc::SIGSEGV | 0x80)).to_string(),
            "killed by signal 11 (SIGSEGV), core dumped"
        );
        assert_eq!(
            Exit::of(ExitStatus::from_raw(3 << 8)).reason(),
            RestartReason::exited
        );
        assert_eq!(
            Exit::of(ExitStatus::from_raw(libc::SIGTERM)).reason(),
            RestartReason::signal
        );
    }
}
