//! `sandbox` on stdio backends and `[defaults] sandbox`.

use super::*;
use crate::config::{NetworkAccess, Sandbox};

fn sandbox_of(loaded: &Loaded, backend: usize) -> Option<Sandbox> {
    match &loaded.config.backends[backend].transport {
        Transport::Stdio { sandbox, .. } => sandbox.as_deref().cloned(),
        _ => panic!("not stdio"),
    }
}

#[test]
fn a_backends_sandbox_is_read_whole_and_replaces_the_default() {
    let loaded = ok(
        r#"
[defaults]
sandbox = { memory = "256MiB", network = "none" }

[backends.files]
command = "npx"
sandbox = { memory = "1GiB", processes = 64, open_files = 1024, read = ["/srv/share"], write = [], require = false }

[backends.plain]
command = "npx"

[backends.open]
command = "npx"
sandbox = {}
"#,
        &[],
    );
    assert_eq!(
        sandbox_of(&loaded, 0),
        Some(Sandbox {
            memory: Some(1 << 30),
            processes: Some(64),
            open_files: Some(1024),
            network: NetworkAccess::All,
            read: Some(vec!["/srv/share".into()]),
            write: Some(vec![]),
            require: false,
        })
    );
    let default = sandbox_of(&loaded, 1).expect("the default applies");
    assert_eq!(default.memory, Some(256 << 20));
    assert_eq!(default.network, NetworkAccess::None);
    assert!(default.require, "require defaults to true");
    let open = sandbox_of(&loaded, 2).expect("an empty table is a sandbox of its own");
    assert_eq!(
        (open.memory, open.read, open.network),
        (None, None, NetworkAccess::All)
    );
}

#[test]
fn bad_sandboxes_are_refused_with_their_key() {
    let errors = err(
        r#"
[backends.a]
command = "x"
sandbox = { memory = "512MB", network = "some" }

[backends.b]
command = "x"
sandbox = { processes = 0, read = ["relative/path"] }

[backends.c]
transport = "http"
url = "http://127.0.0.1:1/mcp"
sandbox = { memory = "1GiB" }

[backends.d]
command = "x"
sandbox = { memory = 512 }
"#,
        &[],
    )
    .join("\n");
    for expected in [
        "unknown unit `MB`",
        "backends.b.sandbox.processes",
        "`relative/path` is not an absolute path",
        "backends.c.sandbox",
        "not allowed with transport = \"http\"",
        "under 1MiB",
    ] {
        assert!(errors.contains(expected), "{expected:?} not in:\n{errors}");
    }
}

#[test]
fn a_bad_network_value_is_named() {
    let errors = err(
        "[backends.a]\ncommand = \"x\"\nsandbox = { network = \"some\" }\n",
        &[],
    )
    .join("\n");
    assert!(
        errors.contains("`some`: use \"none\" or \"all\""),
        "{errors}"
    );
}
