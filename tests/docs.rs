//! The documentation ships with the code and stays true to it (issue 12,
//! part 3): every key the config parser accepts is in
//! docs/configuration.md, under its table, and every metric the gateway
//! exports is in docs/operations.md.

use std::path::Path;

fn doc(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `## ` section whose heading names `[table]`.
fn section<'a>(text: &'a str, table: &str) -> Option<&'a str> {
    let heading = format!("`[{table}]`");
    text.split("\n## ")
        .find(|s| s.lines().next().is_some_and(|h| h.contains(&heading)))
}

#[test]
fn every_config_key_is_documented_under_its_table() {
    let text = doc("configuration.md");
    let mut missing = Vec::new();
    for (table, keys) in sluice::config::keys::accepted() {
        for key in keys {
            // Top-level keys are tables: each has a section of its own.
            let found = match table {
                "" => [format!("`[{key}]`"), format!("`[{key}.NAME]`")]
                    .iter()
                    .any(|h| text.contains(h.as_str())),
                _ => {
                    // Inline tables are documented in their parent's section.
                    let home = table
                        .strip_suffix(".tools")
                        .or_else(|| table.strip_suffix(".oauth.exchange"))
                        .or_else(|| table.strip_suffix(".oauth"))
                        .or_else(|| table.strip_suffix(".tls"))
                        .or_else(|| table.strip_suffix(".sandbox"))
                        .unwrap_or(table);
                    section(&text, home).is_some_and(|s| s.contains(&format!("`{key}`")))
                }
            };
            if !found {
                missing.push(if table.is_empty() {
                    format!("[{key}]")
                } else {
                    format!("{table}.{key}")
                });
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/configuration.md does not document: {missing:?}"
    );
}

#[test]
fn every_metric_is_documented() {
    let text = doc("operations.md");
    // With cluster mode's metric, which only a gateway with Redis exports.
    let metrics = sluice::metrics::Metrics::new().with_cluster();
    let names = metrics.names();
    // The contract's metrics are among them (DESIGN.md).
    for contract in [
        "sluice_client_sessions_live",
        "sluice_requests_total",
        "sluice_backend_up",
    ] {
        assert!(
            names.iter().any(|n| n == contract),
            "{contract} not exported: {names:?}"
        );
    }
    assert!(names.len() >= 15, "too few metrics found: {names:?}");
    let missing: Vec<_> = names
        .iter()
        .filter(|n| !text.contains(&format!("`{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/operations.md does not document: {missing:?}"
    );
}

/// contrib/sluice.service is a unit `systemd-analyze verify` accepts
/// without a warning (with the binary where the unit expects it; the test
/// points it at the one just built). scripts/test installs systemd.
#[test]
fn the_systemd_unit_verifies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let unit = std::fs::read_to_string(root.join("contrib/sluice.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/local/bin/sluice serve"),
        "{unit}"
    );
    let dir = std::env::temp_dir().join(format!("sluice-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sluice.service");
    std::fs::write(
        &path,
        unit.replace("/usr/local/bin/sluice", env!("CARGO_BIN_EXE_sluice")),
    )
    .unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect("systemd-analyze not found (Debian's systemd package; scripts/test installs it)");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("sluice.service"), "warnings: {stderr}");
}

/// docs/architecture.md names every source file: `src/x.rs` (or `x.rs`)
/// for a file at the top, and a file of a module on the line that names
/// the module's folder (`src/front/` ... `conn/feed.rs`), so that moving
/// code without moving its line fails here.
#[test]
fn every_source_file_is_in_the_architecture() {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                out.push(path);
            }
        }
    }
    let text = doc("architecture.md");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let mut missing = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let named = match rel.split_once('/') {
            None => text.contains(&format!("`src/{rel}`")) || text.contains(&format!("`{rel}`")),
            Some((dir, inner)) => {
                let folder = format!("`src/{dir}/`");
                text.contains(&format!("`src/{rel}`"))
                    || text
                        .lines()
                        .any(|line| line.contains(&folder) && line.contains(&format!("`{inner}`")))
            }
        };
        if !named {
            missing.push(rel);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not name: {missing:?}"
    );
}

/// docs/search.toml, the example of search mode (issue 51), loads: `sluice
/// check` accepts it and shows its namespace searching.
#[test]
fn the_search_mode_example_loads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["check", "--config"])
        .arg(root.join("docs/search.toml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains(
            "discovery search: search_tools, call_tool, pinned [filesystem__read_text_file], expose_found true"
        ),
        "{stdout}"
    );
}

/// docs/deploy.md describes what deploy/ ships: each Kubernetes directory
/// and every kind of object in it, and every file the image's root gets
/// from deploy/container/root (issue 52), so a manifest or an image file
/// added without a word for operators fails here.
#[test]
fn deploy_md_names_every_manifest_and_image_file() {
    let text = doc("deploy.md");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let mut missing = Vec::new();
    for dir in std::fs::read_dir(root.join("kubernetes")).unwrap() {
        let dir = dir.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if !text.contains(&format!("`{name}/`")) {
            missing.push(format!("kubernetes/{name}/"));
        }
        for file in std::fs::read_dir(&dir).unwrap() {
            let manifest = std::fs::read_to_string(file.unwrap().path()).unwrap();
            for kind in manifest.lines().filter_map(|l| l.strip_prefix("kind: ")) {
                if !text.contains(&format!("`{kind}`")) {
                    missing.push(format!("kind {kind} ({name}/)"));
                }
            }
        }
    }
    let mut stack = vec![root.join("container/root")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let inside = path.strip_prefix(root.join("container/root")).unwrap();
            if !text.contains(&format!("`/{}`", inside.display())) {
                missing.push(format!("/{}", inside.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/deploy.md does not name: {missing:?}"
    );
}
