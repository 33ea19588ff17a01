//! Names the commit a binary was built from, for `sluice --version`: git
//! when the tree is a checkout, else `SLUICE_COMMIT` (a build from a
//! tarball: deploy/release/build sets it), else "unknown".

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=SLUICE_COMMIT");
    println!("cargo::rerun-if-env-changed=GIT_DIR");
    let commit = from_git().or_else(|| {
        std::env::var("SLUICE_COMMIT")
            .ok()
            .filter(|c| !c.trim().is_empty())
    });
    println!(
        "cargo::rustc-env=SLUICE_COMMIT={}",
        commit.as_deref().map_or("unknown", str::trim)
    );
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

/// The short commit id, and what a new commit changes (HEAD, the branch's
/// ref, packed-refs) watched so the next build reruns this script; a
/// worktree keeps HEAD in its own git dir and the refs in the common one.
fn from_git() -> Option<String> {
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let git_dir = PathBuf::from(git(&["rev-parse", "--git-dir"])?);
    let common = git(&["rev-parse", "--git-common-dir"]).map_or(git_dir.clone(), PathBuf::from);
    let mut watched = vec![git_dir.join("HEAD"), common.join("packed-refs")];
    if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(common.join(head_ref));
    }
    // A path that does not exist would rerun the script on every build.
    for path in watched.iter().filter(|p| Path::exists(p)) {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    Some(commit)
}
