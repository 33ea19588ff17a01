//! What each principal sees (issue 52, part 3): `sluice tools` lists every
//! namespace's tools, prompts and resources as one principal is shown
//! them, with the backend and original name behind each, and `/status`
//! shows each namespace's catalogue. Real backends: the demo server and a
//! generated catalogue, behind tool filters, renames, scopes and search
//! mode.

mod support;

use std::process::Command;

use serde_json::Value;
use support::*;

const TOKENS: &str = "admin=admin-token,reader=reader-token";

/// Two namespaces over the demo server: `default` prefixed, `echo`
/// renamed to `say`, `counter` left out, `add` for admins only; `found`
/// in search mode over 20 generated tools and the demo, one pin; `ops`
/// for admins only.
fn config() -> String {
    let generated = Fixture::bin("many_tools");
    format!(
        "[auth]\nbearer_tokens_env = \"TEST_TOKENS\"\n\
         token_scopes = {{ admin = [\"admin\"], reader = [\"read\"] }}\n\
         {}tools = {{ exclude = [\"counter\"], rename = {{ echo = \"say\" }} }}\n\
         [backends.gen]\ntransport = \"stdio\"\ncommand = \"{}\"\nargs = [\"--tools\", \"20\"]\n\
         [namespaces.default]\nbackends = [\"demo\"]\n\
         tool_scopes = {{ \"demo__add\" = [\"admin\"] }}\n\
         [namespaces.found]\nbackends = [\"gen\", \"demo\"]\ndiscovery = \"search\"\n\
         pinned = [\"demo__say\"]\n\
         [namespaces.ops]\nbackends = [\"demo\"]\nrequire_scopes = [\"admin\"]\n",
        demo_backend("demo"),
        generated.display(),
    )
}

/// `sluice tools` with `args`: exit code, stdout, stderr.
fn tools(args: &[&str]) -> (i32, String, String) {
    let dir = tempdir::Dir::new();
    let path = tempdir::write(&dir, "sluice.toml", &config());
    let out = Command::new(BIN)
        .args(["tools", "--config", path.to_str().unwrap()])
        .args(args)
        .env("TEST_TOKENS", TOKENS)
        .env("SLUICE_LOG", "warn")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn namespace<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["namespace"] == name)
        .unwrap_or_else(|| panic!("no namespace {name} in {doc}"))
}

/// (name, backend, original, listed) of a view's items of `kind`.
fn items(view: &Value, kind: &str) -> Vec<(String, String, String, bool)> {
    view[kind]
        .as_array()
        .unwrap_or_else(|| panic!("no {kind} in {view}"))
        .iter()
        .map(|i| {
            let text = |k: &str| i[k].as_str().unwrap_or("-").to_owned();
            (
                text("name"),
                text("backend"),
                text("original"),
                i["listed"] == true,
            )
        })
        .collect()
}

fn names(view: &Value, kind: &str) -> Vec<String> {
    items(view, kind).into_iter().map(|i| i.0).collect()
}

#[test]
fn tools_shows_each_principal_what_it_is_shown() {
    let (code, out, err) = tools(&["--principal", "reader", "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["principal"], "reader");
    assert_eq!(doc["scopes"], serde_json::json!(["read"]));

    // Filters and renames, with the backend's own name beside each; the
    // reader's scopes hide `add`.
    let default = namespace(&doc, "default");
    assert_eq!(default["discovery"], "list");
    let listed = items(default, "tools");
    assert!(
        listed.contains(&("demo__say".into(), "demo".into(), "echo".into(), true)),
        "{listed:?}"
    );
    assert_eq!(names(default, "tools"), ["demo__say", "demo__sleep_ms"]);
    assert_eq!(names(default, "prompts"), ["demo__greeting"]);
    assert_eq!(
        items(default, "resources"),
        [(
            "sluice://demo/demo://readme".to_owned(),
            "demo".to_owned(),
            "demo://readme".to_owned(),
            true
        )]
    );
    assert_eq!(names(default, "resourceTemplates").len(), 1);

    // Search mode: the gateway's tools and the pin listed, the rest found
    // by search, each under its backend.
    let found = namespace(&doc, "found");
    assert_eq!(found["discovery"], "search");
    let all = items(found, "tools");
    let listed: Vec<&str> = all.iter().filter(|t| t.3).map(|t| t.0.as_str()).collect();
    assert_eq!(listed, ["search_tools", "call_tool", "demo__say"]);
    assert_eq!(all[0].1, "-", "the gateway's own: {all:?}");
    // 20 generated, `grow`, and the demo's three (no scopes here).
    assert_eq!(all.len(), 2 + 21 + 3, "{all:?}");
    assert!(all.iter().filter(|t| t.1 == "gen").all(|t| !t.3));

    // The admins' namespace refuses the reader, naming the scope.
    let ops = namespace(&doc, "ops");
    assert_eq!(
        ops["refused"]["missing_scopes"],
        serde_json::json!(["admin"])
    );

    // The admin sees `add`, and `ops`.
    let (code, out, err) = tools(&["--principal", "admin", "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert!(names(namespace(&doc, "default"), "tools").contains(&"demo__add".to_owned()));
    assert!(names(namespace(&doc, "ops"), "tools").contains(&"demo__add".to_owned()));
}

#[test]
fn tools_prints_columns_for_one_namespace() {
    let (code, out, err) = tools(&["--namespace", "default", "--principal", "admin"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.starts_with("as principal admin (scopes: admin)\n"),
        "{out}"
    );
    assert!(out.contains("\nnamespace default (list mode)\n"), "{out}");
    assert!(!out.contains("namespace found"), "{out}");
    let say = out
        .lines()
        .find(|l| l.trim_start().starts_with("demo__say"))
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(
        say.split_whitespace().collect::<Vec<_>>(),
        ["demo__say", "demo", "echo"]
    );
    assert!(out.contains("  tools (3)\n"), "{out}");
}

#[test]
fn tools_refuses_an_unknown_namespace_or_principal() {
    let (code, _, err) = tools(&["--namespace", "nope"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("namespace `nope`"), "{err}");
    let (code, _, err) = tools(&["--principal", "mallory"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("principal `mallory`"), "{err}");
}

/// The status page lists each namespace's catalogue with the backend and
/// original name behind each item.
#[test]
fn status_shows_each_namespaces_catalogue() {
    let gw = Gateway::start_with_env(&config(), &[("TEST_TOKENS", TOKENS)]);
    let (status, page) = http_get(&gw.base, "/status").unwrap();
    assert_eq!(status, 200, "{page}");
    let catalogue = &page[page.find("<h2>Catalogue</h2>").expect(&page)..];
    assert!(
        catalogue.contains("<h3>default <small>list mode · 3 tools · 1 prompts · 1 resources · 1 resourceTemplates</small></h3>"),
        "{catalogue}"
    );
    assert!(
        catalogue.contains("<tr><td>demo__say</td><td>demo</td><td>echo</td></tr>"),
        "{catalogue}"
    );
    assert!(
        catalogue.contains("<h3>found <small>search mode · 26 tools"),
        "{catalogue}"
    );
    assert!(
        catalogue
            .contains("<tr><td>gen__grow</td><td>gen</td><td>grow</td><td>by search</td></tr>"),
        "{catalogue}"
    );
    assert!(
        catalogue.contains("<tr><td>demo__say</td><td>demo</td><td>echo</td><td>listed</td></tr>"),
        "{catalogue}"
    );
}

/// A backend with per-principal credentials (`fallback = "hide"`) is not
/// there for a principal without them: `sluice tools` names it hidden,
/// and search mode neither finds nor pins its tools for that principal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hidden_backend_is_named_and_never_found() {
    let toml = format!(
        "[auth]\nbearer_tokens_env = \"TEST_TOKENS\"\n{}{}\
         [backends.private.principals.admin]\nenv = {{ PRIVATE_TOKEN = \"${{ADMIN_PRIVATE}}\" }}\n\
         [namespaces.default]\nbackends = [\"demo\", \"private\"]\ndiscovery = \"search\"\n\
         pinned = [\"private__add\"]\n",
        demo_backend("demo"),
        demo_backend("private"),
    );
    let env = [("TEST_TOKENS", TOKENS), ("ADMIN_PRIVATE", "s3cret-admin")];
    let dir = tempdir::Dir::new();
    let path = tempdir::write(&dir, "sluice.toml", &toml);
    let list = |principal: &str| {
        let out = Command::new(BIN)
            .args(["tools", "--json", "--config", path.to_str().unwrap()])
            .args(["--principal", principal])
            .envs(env)
            .env("SLUICE_LOG", "warn")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        namespace(&doc, "default").clone()
    };
    let reader = list("reader");
    assert_eq!(reader["hidden"], serde_json::json!(["private"]), "{reader}");
    assert!(
        !names(&reader, "tools")
            .iter()
            .any(|n| n.starts_with("private__"))
    );
    let admin = list("admin");
    assert_eq!(admin["hidden"], serde_json::json!([]), "{admin}");
    assert!(names(&admin, "tools").contains(&"private__add".to_owned()));

    let gw = Gateway::start_with_env(&toml, &env);
    let http = Http::new(gw.url("/mcp"));
    for (token, sees) in [("reader-token", false), ("admin-token", true)] {
        let bearer = format!("Bearer {token}");
        let auth = [("authorization", bearer.as_str())];
        let r = http.post_with(None, &auth, &init_request(1)).await;
        let sid = r.headers["mcp-session-id"].to_str().unwrap().to_owned();
        let ask = async |id: u64, method: &str, params: Value| {
            let body =
                serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            http.post_with(Some(&sid), &auth, &body).await.json()
        };
        let listed = ask(2, "tools/list", serde_json::json!({})).await;
        let pinned = listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{listed}"))
            .iter()
            .any(|t| t["name"] == "private__add");
        assert_eq!(pinned, sees, "{token}: {listed}");
        let arguments = serde_json::json!({"query": "adds two numbers", "limit": 50});
        let r = ask(
            3,
            "tools/call",
            serde_json::json!({"name": "search_tools", "arguments": arguments}),
        )
        .await;
        let found: Vec<&str> = r["result"]["structuredContent"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(found.contains(&"demo__add"), "{token}: {found:?}");
        assert_eq!(found.contains(&"private__add"), sees, "{token}: {found:?}");
    }
}
