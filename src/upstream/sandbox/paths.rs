//! The paths a sandboxed child may read and write beyond what its backend
//! lists: what its command needs to run (the system's libraries and
//! certificates, the command's own installation), and the caches of the
//! launchers that fetch servers (`npx`, `uvx`, `bunx`, `pipx`).

use std::path::{Path, PathBuf};

/// Read by every dynamically linked program, TLS client or runtime.
const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/bin",
    "/sbin",
    "/opt",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/alternatives",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
    // glibc's locale aliases (Debian: /usr/share/locale/locale.alias is a
    // link to it, and Landlock checks the file the link names).
    "/etc/locale.alias",
    "/etc/mime.types",
    "/etc/npmrc",
    "/proc",
    "/sys/fs/cgroup",
    "/sys/devices/system/cpu",
    "/dev/urandom",
    "/dev/random",
];

/// Devices every program may write (output thrown away).
const SYSTEM_WRITE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Read: the system's paths, the command's installation, script
/// arguments' directories, the working directory, the private temporary
/// directory and the launcher's caches (read back whether or not writes
/// are restricted), then `extra`.
pub(super) fn readable(
    command: &Path,
    args: &[String],
    cwd: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    tmp: &Path,
    extra: &[PathBuf],
) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
    paths.extend(installation(command));
    paths.push(tmp.to_owned());
    paths.extend(launcher_caches(command, env));
    // `python /srv/app/server.py`: the script and the modules beside it.
    for arg in args {
        let p = Path::new(arg);
        if p.is_absolute() && p.is_file() {
            paths.extend(p.parent().map(Path::to_owned));
        }
    }
    paths.extend(cwd.map(Path::to_owned));
    paths.extend(extra.iter().cloned());
    existing(paths)
}

/// Write: the devices, the private temporary directory, the launcher's
/// caches, then `extra`.
pub(super) fn writable(
    command: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    tmp: &Path,
    extra: &[PathBuf],
) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = SYSTEM_WRITE.iter().map(PathBuf::from).collect();
    paths.push(tmp.to_owned());
    paths.extend(launcher_caches(command, env));
    paths.extend(extra.iter().cloned());
    existing(paths)
}

/// The directory a command is installed in: `<prefix>` for
/// `<prefix>/bin/<name>` (a virtualenv, a Node or Python install), else
/// its own directory; both as found and as its symbolic links resolve.
fn installation(command: &Path) -> Vec<PathBuf> {
    let mut found = vec![command.to_owned()];
    if let Ok(real) = command.canonicalize() {
        found.push(real);
    }
    found
        .iter()
        .filter_map(|c| {
            let dir = c.parent()?;
            Some(
                if dir.file_name().is_some_and(|n| n == "bin" || n == ".bin") {
                    dir.parent().unwrap_or(dir).to_owned()
                } else {
                    dir.to_owned()
                },
            )
        })
        .collect()
}

/// A launcher writes what it fetches to its cache and runs it from there.
fn launcher_caches(command: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let name = command.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let home = env("HOME").map(PathBuf::from);
    let under = |dir: Option<String>, fallback: &str| -> Option<PathBuf> {
        dir.map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(fallback)))
    };
    let xdg_cache = env("XDG_CACHE_HOME");
    let xdg_data = env("XDG_DATA_HOME");
    match name {
        "npx" | "npm" | "pnpm" | "pnpx" => vec![
            under(env("npm_config_cache"), ".npm"),
            under(None, ".local/share/pnpm"),
            under(None, ".cache/pnpm"),
        ],
        "uvx" | "uv" => vec![
            under(env("UV_CACHE_DIR"), ".cache/uv")
                .or_else(|| xdg_cache.as_ref().map(|c| Path::new(c).join("uv"))),
            under(env("UV_TOOL_DIR"), ".local/share/uv")
                .or_else(|| xdg_data.as_ref().map(|d| Path::new(d).join("uv"))),
            under(env("UV_PYTHON_INSTALL_DIR"), ".local/share/uv/python"),
        ],
        "bunx" | "bun" => vec![
            under(env("BUN_INSTALL_CACHE_DIR"), ".bun/install/cache"),
            under(env("BUN_INSTALL"), ".bun"),
        ],
        "pipx" => vec![
            under(env("PIPX_HOME"), ".local/pipx"),
            under(None, ".local/share/pipx"),
            under(None, ".cache/pipx"),
        ],
        _ => Vec::new(),
    }
    .into_iter()
    .flatten()
    .collect()
}

/// Everything but `hidden`: the entries beside each of its ancestors
/// (a Landlock rule gives a directory and all beneath it, so "all but"
/// is said as every sibling on the way down).
pub(super) fn all_but(hidden: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dir = PathBuf::from("/");
    for part in hidden.components().skip(1) {
        let next = dir.join(part);
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.path() != next {
                out.push(entry.path());
            }
        }
        dir = next;
    }
    out
}

/// Landlock opens each path: one that does not exist is left out.
fn existing(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.retain(|p| p.exists());
    paths.dedup();
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_installation_is_its_prefix() {
        assert_eq!(
            installation(Path::new("/opt/venv/bin/python"))[0],
            PathBuf::from("/opt/venv")
        );
        assert_eq!(
            installation(Path::new("/srv/tool/run"))[0],
            PathBuf::from("/srv/tool")
        );
    }

    #[test]
    fn launchers_get_their_caches() {
        let env = |k: &str| (k == "HOME").then(|| "/home/u".to_owned());
        let caches = launcher_caches(Path::new("/usr/bin/npx"), &env);
        assert!(caches.contains(&PathBuf::from("/home/u/.npm")));
        assert!(launcher_caches(Path::new("/usr/bin/node"), &env).is_empty());
    }
}
