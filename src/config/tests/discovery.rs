//! A namespace's `discovery`, `pinned` and `expose_found` (issue 51).

use super::*;

const TWO: &str = "[backends.web]\ntransport = \"http\"\nurl = \"http://127.0.0.1:8931/mcp\"\ntools = { exclude = [\"drop_*\"], rename = { old = \"new\" } }\n[backends.fs]\ntransport = \"http\"\nurl = \"http://127.0.0.1:8932/mcp\"\n";

fn ns(extra: &str) -> String {
    format!("{TWO}[namespaces.default]\nbackends = [\"web\", \"fs\"]\n{extra}")
}

#[test]
fn list_is_the_default_and_search_takes_pins_and_expose_found() {
    let loaded = ok(&ns(""), &[]);
    assert_eq!(loaded.config.namespaces[0].discovery, Discovery::List);
    let loaded = ok(
        &ns("discovery = \"search\"\npinned = [\"web__new\", \"fs__read\"]\nexpose_found = true\n"),
        &[],
    );
    assert_eq!(
        loaded.config.namespaces[0].discovery,
        Discovery::Search {
            pinned: vec!["web__new".into(), "fs__read".into()],
            expose_found: true
        }
    );
    assert!(describe(&loaded).contains(
        "discovery search: search_tools, call_tool, pinned [web__new, fs__read], expose_found true"
    ));
}

#[test]
fn a_pin_must_name_a_tool_the_namespace_can_serve() {
    let lines = err(
        &ns(
            "discovery = \"search\"\npinned = [\"other__x\", \"web__drop_all\", \"web__old\", \"fs__a\", \"fs__a\", \"call_tool\", \"bad name\"]\n",
        ),
        &[],
    );
    let all = lines.join("\n");
    for expected in [
        "`namespaces.default.pinned[0]`: `other__x` names no tool of this namespace",
        "`namespaces.default.pinned[1]`: `web__drop_all` names no tool",
        // A renamed tool is served only under its new name.
        "`namespaces.default.pinned[2]`: `web__old` names no tool",
        "`namespaces.default.pinned[4]`: `fs__a` is pinned twice",
        "`namespaces.default.pinned[5]`: `call_tool` is the gateway's own tool",
        "`namespaces.default.pinned[6]`: `bad name` is not a valid tool name",
    ] {
        assert!(all.contains(expected), "missing {expected:?} in:\n{all}");
    }
    assert_eq!(lines.len(), 6, "{all}");
}

#[test]
fn pins_and_expose_found_need_search_mode() {
    let all = err(&ns("pinned = [\"web__new\"]\nexpose_found = true\n"), &[]).join("\n");
    assert!(
        all.contains("`namespaces.default.pinned`: applies only with discovery = \"search\""),
        "{all}"
    );
    assert!(
        all.contains("`namespaces.default.expose_found`: applies only with discovery = \"search\""),
        "{all}"
    );
    let all = err(&ns("discovery = \"find\"\n"), &[]).join("\n");
    assert!(all.contains("discovery"), "{all}");
}

#[test]
fn a_rename_to_a_gateway_tool_in_an_unprefixed_search_namespace_is_refused() {
    let renamed = "[backends.web]\ntransport = \"http\"\nurl = \"http://127.0.0.1:8931/mcp\"\ntools = { rename = { run = \"call_tool\" } }\n";
    let text = format!(
        "{renamed}[namespaces.default]\nbackends = [\"web\"]\nprefix = \"never\"\ndiscovery = \"search\"\n"
    );
    let all = err(&text, &[]).join("\n");
    assert!(
        all.contains(
            "backend `web` renames `run` to `call_tool`, the gateway's own tool in search mode"
        ),
        "{all}"
    );
    // Prefixed, or listing everything, the name is the backend's alone.
    ok(
        &format!("{renamed}[namespaces.default]\nbackends = [\"web\"]\ndiscovery = \"search\"\n"),
        &[],
    );
    ok(
        &format!("{renamed}[namespaces.default]\nbackends = [\"web\"]\nprefix = \"never\"\n"),
        &[],
    );
    // Unprefixed pins name the backend's own tools.
    let pinned = format!(
        "{TWO}[namespaces.default]\nbackends = [\"web\", \"fs\"]\nprefix = \"never\"\ndiscovery = \"search\"\npinned = [\"new\", \"read\"]\n"
    );
    ok(&pinned, &[]);
}
