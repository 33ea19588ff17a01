//! A stdio child process: spawned in its own process group so that it and
//! its descendants end together, and reaped by its owner.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use super::sandbox::{Confined, Plan};
use crate::vocab::BackendName;

/// What to run: a backend's command, and the environment it is given.
#[derive(Clone)]
pub(super) struct StdioSpec {
    pub(super) command: String,
    pub(super) args: Vec<String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) inherit: crate::config::Inherit,
    pub(super) cwd: Option<std::path::PathBuf>,
    /// The kernel's bounds on the child, as this host enforces them.
    pub(super) sandbox: Option<Arc<Plan>>,
}

impl StdioSpec {
    /// The same command with `values` in its environment, each in place of
    /// a variable of the same name (a principal's own child).
    pub(super) fn with_env(&self, values: &[(String, crate::config::Secret)]) -> StdioSpec {
        let mut env: Vec<(String, String)> = self
            .env
            .iter()
            .filter(|(k, _)| !values.iter().any(|(name, _)| name == k))
            .cloned()
            .collect();
        env.extend(
            values
                .iter()
                .map(|(k, v)| (k.clone(), v.expose().to_owned())),
        );
        StdioSpec {
            command: self.command.clone(),
            args: self.args.clone(),
            env,
            inherit: self.inherit.clone(),
            cwd: self.cwd.clone(),
            sandbox: self.sandbox.clone(),
        }
    }
}

/// The environment's names only: its values may be credentials.
impl std::fmt::Debug for StdioSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioSpec")
            .field("command", &self.command)
            .field("args", &self.args.len())
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("sandbox", &self.sandbox.is_some())
            .finish()
    }
}

pub(super) struct Spawned {
    pub(super) child: Child,
    /// Ends the whole group when dropped: whoever holds the child last,
    /// on whatever path, leaves no descendant behind.
    pub(super) group: Group,
    pub(super) stdin: ChildStdin,
    pub(super) stdout: ChildStdout,
    pub(super) stderr: ChildStderr,
    /// Its cgroup and temporary directory, removed after the group ends.
    pub(super) confined: Option<Confined>,
}

/// Starts `spec`'s command with an environment of its own: the gateway's
/// variables that `spec.inherit` passes, then the backend's `env`.
pub(super) fn spawn(spec: &StdioSpec, backend: &BackendName) -> std::io::Result<Spawned> {
    let inherited: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os()
        .filter(|(name, _)| name.to_str().is_some_and(|n| spec.inherit.passes(n)))
        .collect();
    let mut confined = None;
    let mut in_child = None;
    if let Some(plan) = &spec.sandbox {
        // What the child will see: the backend's own variables win.
        let env = |name: &str| {
            let own = spec.env.iter().rev().find(|(k, _)| k == name);
            own.map(|(_, v)| v.clone()).or_else(|| {
                inherited
                    .iter()
                    .find(|(k, _)| k == name)
                    .and_then(|(_, v)| v.to_str().map(str::to_owned))
            })
        };
        let (c, i) = plan.confine(
            backend.as_str(),
            &spec.command,
            &spec.args,
            spec.cwd.as_deref(),
            &env,
        )?;
        confined = Some(c);
        in_child = Some(i);
    }
    let mut cmd = Command::new(&spec.command);
    cmd.args(&spec.args)
        .env_clear()
        .envs(inherited.iter().map(|(k, v)| (k, v)))
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    if let Some(c) = &confined {
        cmd.envs(c.env());
    }
    // SAFETY: prctl is async-signal-safe, and so is everything `InChild`
    // does (prepared before the fork). If the gateway dies without running
    // its shutdown (SIGKILL), the kernel kills the child.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            match &mut in_child {
                Some(sandbox) => sandbox.apply(),
                None => Ok(()),
            }
        });
    }
    let spawned = cmd.spawn();
    if let Some(c) = &mut confined {
        c.spawned();
    }
    let mut child = spawned?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("child pipes missing"));
    };
    let group = Group(child.id().and_then(|p| i32::try_from(p).ok()));
    Ok(Spawned {
        child,
        group,
        stdin,
        stdout,
        stderr,
        confined,
    })
}

/// Ends the child and everything in its process group, then reaps it.
/// Stdin is already closed by the caller; well-behaved servers exit on EOF.
/// Returns the child's status if it exited before it was signalled.
pub(super) async fn terminate(
    child: &mut Child,
    backend: &BackendName,
) -> Option<std::process::ExitStatus> {
    let pgid = child.id().and_then(|p| i32::try_from(p).ok());
    let mut own = None;
    if let Ok(Ok(status)) = tokio::time::timeout(Duration::from_millis(500), child.wait()).await {
        tracing::debug!(backend = %backend, %status, "child exited on stdin EOF");
        own = Some(status);
    } else {
        signal_group(pgid, libc::SIGTERM);
        if tokio::time::timeout(Duration::from_secs(2), child.wait())
            .await
            .is_err()
        {
            signal_group(pgid, libc::SIGKILL);
            let _ = child.wait().await;
        }
    }
    // Descendants may outlive the leader; the group id stays theirs.
    signal_group(pgid, libc::SIGKILL);
    own
}

/// A child's process group. `kill_on_drop` ends only the leader; this
/// ends the rest (an `npx` wrapper's node, a server's workers) when the
/// owner is done with it or was dropped before it could finish.
pub(super) struct Group(Option<i32>);

impl Drop for Group {
    fn drop(&mut self) {
        signal_group(self.0, libc::SIGKILL);
    }
}

fn signal_group(pgid: Option<i32>, signal: i32) {
    if let Some(pgid) = pgid.filter(|p| *p > 1) {
        // SAFETY: killpg only sends a signal; ESRCH (group gone) is fine.
        unsafe {
            libc::killpg(pgid, signal);
        }
    }
}
