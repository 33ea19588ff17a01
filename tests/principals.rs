//! Static principals by name (issue 49, part 1): `bearer_tokens_env`
//! entries `NAME=TOKEN`, `token_scopes` keyed by NAME. A token's position
//! is no principal: retiring the first token made the second `token#0`,
//! with the first one's scopes, sessions and audit name.

mod support;

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

/// A gateway over the demo backend whose `demo__add` needs `admin`, with
/// these `token_scopes`.
fn scoped_config(token_scopes: &str) -> String {
    format!(
        "[auth]\nbearer_tokens_env = \"TEST_TOKENS\"\ntoken_scopes = {{ {token_scopes} }}\n{}\
         [namespaces.default]\nbackends = [\"demo\"]\ntool_scopes = {{ \"demo__add\" = [\"admin\"] }}\n",
        demo_backend("demo")
    )
}

/// A new session of this token's principal.
async fn open(url: &str, token: &str) -> String {
    let r = post_as(url.to_owned(), token, None, &init_request(1)).await;
    assert_eq!(r.status(), 200, "initialize as {token}");
    r.headers()["mcp-session-id"].to_str().unwrap().to_owned()
}

/// A request on a session as this token: (status, the JSON-RPC answer or
/// Null when there is none).
async fn ask(url: &str, token: &str, sid: &str, method: &str, params: Value) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params});
    let r = post_as(url.to_owned(), token, Some(sid.to_owned()), &body).await;
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or(&text);
    (status, serde_json::from_str(line).unwrap_or(Value::Null))
}

/// Whether `demo__add` is in this session's tools/list, and what calling
/// it answers.
async fn add_as(url: &str, token: &str, sid: &str) -> (bool, Value) {
    let (status, listed) = ask(url, token, sid, "tools/list", json!({})).await;
    assert_eq!(status, 200, "{listed}");
    let tools = listed["result"]["tools"].as_array().unwrap();
    let listed = tools.iter().any(|t| t["name"] == "demo__add");
    let add = json!({"name": "demo__add", "arguments": {"a": 2, "b": 3}});
    let (status, called) = ask(url, token, sid, "tools/call", add).await;
    assert_eq!(status, 200, "{called}");
    (listed, called)
}

fn is_unknown_add(reply: &Value) -> bool {
    reply["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("Unknown tool: demo__add"))
}

/// The audit trail's (principal, outcome) for each `demo__add` call.
fn audited_adds(gw: &Gateway) -> Vec<(String, String)> {
    gw.log()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "sluice::audit" && v["name"] == "demo__add")
        .map(|v| {
            let field = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            (field("principal"), field("outcome"))
        })
        .collect()
}

/// Retiring the first token (the tokens file rewritten, SIGHUP) leaves the
/// reader a reader: it neither sees nor calls the admin tool, the trail
/// names it, and no session changes hands, though the reader now stands
/// where the admin stood and a new admin where the reader did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retiring_the_first_token_leaves_the_reader_a_reader() {
    let dir = tempdir::Dir::new();
    let tokens = tempdir::write(&dir, "tokens", "admin=admin-tok,reader=reader-tok\n");
    let gw = Gateway::start_logged(
        &scoped_config("admin = [\"admin\"], reader = [\"read\"]"),
        &[
            ("TEST_TOKENS_FILE", tokens.to_str().unwrap()),
            ("SLUICE_LOG", "warn,sluice::audit=info"),
            ("SLUICE_LOG_FORMAT", "json"),
        ],
    );
    let url = gw.url("/mcp");
    let admin = open(&url, "admin-tok").await;
    let reader = open(&url, "reader-tok").await;
    let (listed, called) = add_as(&url, "admin-tok", &admin).await;
    assert!(listed, "the admin sees demo__add");
    assert_eq!(called["result"]["content"][0]["text"], "5", "{called}");
    let (listed, called) = add_as(&url, "reader-tok", &reader).await;
    assert!(!listed && is_unknown_add(&called), "{called}");

    tempdir::write(&dir, "tokens", "reader=reader-tok,ops=ops-tok\n");
    reload(
        &gw,
        &scoped_config("reader = [\"read\"], ops = [\"admin\"]"),
        "ok",
    );
    let retired = post_as(url.clone(), "admin-tok", None, &init_request(1)).await;
    assert_eq!(retired.status(), 401);

    let (listed, called) = add_as(&url, "reader-tok", &reader).await;
    assert!(!listed, "the reader sees the admin tool after the reload");
    assert!(is_unknown_add(&called), "the reader called it: {called}");
    // Neither the retired admin's session nor the reader's serves anyone
    // else; the reader's still serves the reader.
    for (token, sid) in [
        ("reader-tok", &admin),
        ("ops-tok", &admin),
        ("ops-tok", &reader),
    ] {
        let (status, reply) = ask(&url, token, sid, "tools/list", json!({})).await;
        assert_eq!(status, 404, "{token} used another's session: {reply}");
    }
    let (status, _) = ask(&url, "reader-tok", &reader, "tools/list", json!({})).await;
    assert_eq!(status, 200);

    let want = [
        ("admin", "ok"),
        ("reader", "unlisted"),
        ("reader", "unlisted"),
    ]
    .map(|(p, o)| (p.to_owned(), o.to_owned()));
    wait_until(Duration::from_secs(10), || audited_adds(&gw).len() >= 3);
    assert_eq!(audited_adds(&gw), want);
}

/// A bare token is known by the token itself, not by its place: after a
/// reload that retires the first of two, the second keeps its session and
/// takes none of the first's (its `token#0` now), and the token added
/// after it (now `token#1`) takes none of its.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_token_keeps_its_sessions_and_takes_none_across_a_reload() {
    let dir = tempdir::Dir::new();
    let tokens = tempdir::write(&dir, "tokens", "tok-a,tok-b\n");
    let config = format!(
        "[auth]\nbearer_tokens_env = \"TEST_TOKENS\"\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start_with_env(&config, &[("TEST_TOKENS_FILE", tokens.to_str().unwrap())]);
    let url = gw.url("/mcp");
    let a = open(&url, "tok-a").await;
    let b = open(&url, "tok-b").await;

    tempdir::write(&dir, "tokens", "tok-b,tok-c\n");
    reload(&gw, &config, "ok");
    for (token, sid, want) in [
        ("tok-b", &b, 200),
        ("tok-b", &a, 404),
        ("tok-c", &b, 404),
        ("tok-a", &a, 401),
    ] {
        let (status, reply) = ask(&url, token, sid, "tools/list", json!({})).await;
        assert_eq!(status, want, "{token}: {reply}");
    }
}

/// A static token short of a namespace's `require_scopes` gets the 403 an
/// OAuth token would: the challenge names the scopes the endpoint needs,
/// the message those the token lacks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_token_short_of_scopes_is_told_which() {
    let config = format!(
        "{}[namespaces.ops]\nbackends = [\"demo\"]\nrequire_scopes = [\"admin\", \"audit\"]\n",
        scoped_config("reader = [\"read\", \"audit\"], admin = [\"admin\", \"audit\"]")
    );
    let gw = Gateway::start_with_env(
        &config,
        &[("TEST_TOKENS", "reader=reader-tok,admin=admin-tok")],
    );
    let ops = gw.url("/ns/ops/mcp");
    let r = post_as(ops.clone(), "reader-tok", None, &init_request(1)).await;
    assert_eq!(r.status(), 403);
    assert_eq!(
        r.headers()["www-authenticate"],
        "Bearer error=\"insufficient_scope\", scope=\"admin audit\""
    );
    let body: Value = r.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.ends_with("requires: admin"), "{message}");
    let r = post_as(ops, "admin-tok", None, &init_request(1)).await;
    assert_eq!(r.status(), 200);
}

/// `sluice` with this config and environment, nothing else of the test's.
fn sluice(args: &[&str], toml: &str, env: &[(&str, &str)]) -> Output {
    let dir = tempdir::Dir::new();
    let path = tempdir::write(&dir, "sluice.toml", toml);
    Command::new(BIN)
        .args(args)
        .args(["--config", path.to_str().unwrap()])
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Keys by position are refused by `check` and by `serve` (exit 2), with
/// how to name the tokens instead.
#[test]
fn positional_keys_are_refused_with_how_to_migrate() {
    let toml = scoped_config("\"token#0\" = [\"admin\"], \"token#1\" = [\"read\"]");
    let env = [("TEST_TOKENS", "admin-tok,reader-tok")];
    for args in [&["check"][..], &["serve", "--listen", "127.0.0.1:0"]] {
        let out = sluice(args, &toml, &env);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        for key in ["token#0", "token#1"] {
            assert!(
                err.contains(&format!(
                    "`auth.token_scopes.\"{key}\"`: a token's position is no principal"
                )),
                "{args:?}: {err}"
            );
        }
        assert!(
            err.contains("Name the tokens, TEST_TOKENS=alice=tok-a,bob=tok-b, then key token_scopes by those names"),
            "{args:?}: {err}"
        );
        // And that every entry needs its name.
        assert!(
            err.contains("token#0, token#1 have none"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("admin-tok"), "a token shown: {err}");
    }
}

/// `check` lists each principal with its scopes, never a token.
#[test]
fn check_lists_principals_with_their_scopes() {
    let toml = scoped_config("admin = [\"admin\", \"read\"], reader = [\"read\"]");
    let out = sluice(
        &["check"],
        &toml,
        &[(
            "TEST_TOKENS",
            "admin=admin-tok, reader=reader-tok,quiet=quiet-tok",
        )],
    );
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        shown.contains(
            "principals:\n  admin: scopes [admin, read]\n  reader: scopes [read]\n  quiet: scopes [] (no scoped tool)\n"
        ),
        "{shown}"
    );
    assert!(!shown.contains("-tok"), "a token shown: {shown}");

    // Unscoped, bare tokens are listed by position.
    let toml = format!(
        "[auth]\nbearer_tokens_env = \"TEST_TOKENS\"\n{}",
        demo_backend("demo")
    );
    let out = sluice(
        &["check"],
        &toml,
        &[("TEST_TOKENS", "alice=a-tok,bare-tok")],
    );
    let shown = text(&out.stdout);
    assert!(
        shown.contains(
            "principals:\n  alice: unscoped (sees every tool)\n  token#1: unscoped (sees every tool)\n"
        ),
        "{shown}"
    );
    assert!(!shown.contains("-tok"), "a token shown: {shown}");
}

/// With the token variable unset, `check` says that and nothing else: the
/// scopes that need tokens are not blamed for their absence.
#[test]
fn check_with_the_token_variable_unset_says_only_that() {
    let toml = format!(
        "{}[namespaces.ops]\nbackends = [\"demo\"]\nrequire_scopes = [\"admin\"]\n",
        scoped_config("admin = [\"admin\"]")
    );
    let out = sluice(&["check"], &toml, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let problems: Vec<&str> = err.lines().filter(|l| l.contains("sluice.toml:")).collect();
    assert_eq!(problems.len(), 1, "{err}");
    assert!(
        problems[0].ends_with(
            "/sluice.toml:2: `auth.bearer_tokens_env`: environment variable `TEST_TOKENS` is not set"
        ),
        "{err}"
    );
}
