//! What `sluice check` finds in a config beyond loading it: problems a
//! start would meet only later, at a backend's first start or at
//! `/readyz`. A stdio command that cannot be found is an error, whatever
//! it is: a launcher (`npx`, `uvx`, `bunx`, `pipx`) fetches what it runs,
//! but must itself be there, or the backend never starts. A backend no
//! namespace serves is a warning (it still starts, and holds `/readyz`).

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use super::build::Syntax;
use super::env::Env;
use super::error::{At, Issue, dotted};
use super::{Config, Transport};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Severity {
    Error,
    Warning,
}

/// Every problem `config` has that loading could not see, in the order of
/// its backends. `env` is the gateway's environment (its `PATH`, which a
/// child gets unless its `env` sets one); `syntax` names the keys.
pub(super) fn lint(config: &Config, env: &dyn Env, syntax: Syntax) -> Vec<(Severity, Issue)> {
    let mut found = Vec::new();
    let mut at = |severity, path: &[&str], message: String| {
        let issue = Issue {
            at: At::Key(path.iter().map(|s| (*s).to_owned()).collect()),
            message: format!("`{}`: {message}", dotted(path)),
        };
        found.push((severity, issue));
    };
    let section = syntax.backends();
    for b in &config.backends {
        if let Transport::Stdio {
            command,
            env: child_env,
            cwd,
            ..
        } = &b.transport
        {
            let path = child_env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.clone())
                .or_else(|| env.var("PATH"));
            if resolve(command, path.as_deref(), cwd.as_deref()).is_none() {
                let key = [section, b.name.as_str(), "command"];
                at(Severity::Error, &key, not_found(command));
            }
        }
        if !config
            .namespaces
            .iter()
            .any(|n| n.backends.contains(&b.name))
        {
            at(
                Severity::Warning,
                &[section, b.name.as_str()],
                "no namespace serves it: it still starts, and /readyz waits for it".to_owned(),
            );
        }
    }
    let listen = config.server.listen;
    if config.auth.is_some() && !listen.ip().is_loopback() && config.server.tls.is_none() {
        at(
            Severity::Warning,
            &["server", "tls"],
            format!(
                "listening on {listen}, beyond loopback, in plain TCP: bearer tokens cross the network in clear unless a TLS proxy in front terminates it (or set [server] tls)"
            ),
        );
    }
    found
}

fn not_found(command: &str) -> String {
    format!("command not found: `{command}`")
}

/// Where `command` is, found as `execvp` finds it: a name with a `/` as a
/// path (from `cwd` when relative), any other in `PATH`'s directories.
pub(crate) fn resolve(command: &str, path: Option<&str>, cwd: Option<&Path>) -> Option<PathBuf> {
    if command.is_empty() {
        return None;
    }
    if command.contains('/') {
        let p = Path::new(command);
        let p = match (p.is_relative(), cwd) {
            (true, Some(dir)) => dir.join(p),
            _ => p.to_path_buf(),
        };
        return executable(&p).then_some(p);
    }
    let path: OsString = path.unwrap_or("/usr/bin:/bin").into();
    std::env::split_paths(&path)
        .map(|dir| match (dir.is_relative(), cwd) {
            (true, Some(c)) => c.join(dir).join(command),
            _ => dir.join(command),
        })
        .find(|p| executable(p))
}

fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_found_as_exec_finds_them() {
        assert!(resolve("sh", Some("/nonexistent:/bin:/usr/bin"), None).is_some());
        assert!(resolve("nosuchcmd-sluice", Some("/bin:/usr/bin"), None).is_none());
        assert!(resolve("/bin/sh", None, None).is_some());
        assert!(resolve("/nonexistent/sh", None, None).is_none());
        // A directory is not a command.
        assert!(resolve("/bin", None, None).is_none());
        assert!(resolve("", Some("/bin"), None).is_none());
        // Relative to the child's directory.
        assert!(resolve("./sh", None, Some(Path::new("/bin"))).is_some());
        assert!(resolve("./sh", None, Some(Path::new("/nonexistent"))).is_none());
    }
}
