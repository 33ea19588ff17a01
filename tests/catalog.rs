//! Issue 37, item 2: a call reaches a backend only by a name the gateway
//! would list to the caller. The backend here matches names leniently (as
//! some do) and says what reached it, so a name the gateway let through is
//! seen, whatever the backend answered.

mod support;

use serde_json::{Value, json};
use support::*;

const LENIENT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/lenient_backend.py"
);

fn config() -> String {
    format!(
        "[backends.ci]\ncommand = \"python3\"\nargs = [\"{LENIENT}\"]\n\
         tools = {{ exclude = [\"envdump\"] }}\n"
    )
}

/// What reached the backend so far, in order.
async fn received(http: &Http, sid: &str) -> Vec<String> {
    let reply = http.tool(sid, 99, "ci__calls", json!({})).await;
    serde_json::from_str(text_of(&reply)).unwrap_or_else(|e| panic!("{reply}: {e}"))
}

fn refused(reply: &Value, message: &str) {
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert_eq!(reply["error"]["message"], message, "{reply}");
}

fn reached(list: &[String], what: &str) -> usize {
    list.iter().filter(|r| r.as_str() == what).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlisted_names_never_reach_the_backend() {
    let gw = Gateway::start(&config());
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;

    // The control: what is listed is served.
    let ok = http.tool(&sid, 1, "ci__echo", json!({})).await;
    assert_eq!(text_of(&ok), "ran echo", "{ok}");

    // Excluded, a case variant of an excluded name, of a listed one, and a
    // name never listed: each refused by the gateway itself.
    for (id, name) in [
        (2, "ci__envdump"),
        (3, "ci__ENVDUMP"),
        (4, "ci__Echo"),
        (5, "ci__never_listed"),
        (6, "ci__DELETE_ALL"),
    ] {
        let reply = http.tool(&sid, id, name, json!({})).await;
        refused(&reply, &format!("Unknown tool: {name}"));
    }
    let prompt = |id: u64, name: &str| {
        let http = &http;
        let sid = &sid;
        let params = json!({"name": name});
        async move { http.call(sid, id, "prompts/get", params).await.json() }
    };
    assert!(prompt(10, "ci__greet").await["result"]["messages"].is_array());
    refused(&prompt(11, "ci__GREET").await, "Unknown prompt: ci__GREET");
    refused(&prompt(12, "ci__other").await, "Unknown prompt: ci__other");

    let read = |id: u64, uri: &str| {
        let http = &http;
        let sid = &sid;
        let params = json!({"uri": uri});
        async move { http.call(sid, id, "resources/read", params).await.json() }
    };
    // Listed, and an instance of a listed template.
    assert!(read(20, "sluice://ci/file:///a.txt").await["result"].is_object());
    assert!(read(21, "sluice://ci/file:///logs/monday").await["result"].is_object());
    for (id, uri) in [
        (22, "sluice://ci/file:///etc/passwd"),
        (23, "sluice://ci/file:///A.txt"),
    ] {
        refused(&read(id, uri).await, &format!("Resource not found: {uri}"));
    }
    let subscribe = json!({"uri": "sluice://ci/file:///etc/shadow"});
    let reply = http
        .call(&sid, 24, "resources/subscribe", subscribe)
        .await
        .json();
    refused(&reply, "Resource not found: sluice://ci/file:///etc/shadow");

    let complete = |id: u64, reference: Value| {
        let http = &http;
        let sid = &sid;
        let params = json!({"ref": reference, "argument": {"name": "a", "value": ""}});
        async move {
            http.call(sid, id, "completion/complete", params)
                .await
                .json()
        }
    };
    let by_prompt = complete(30, json!({"type": "ref/prompt", "name": "ci__greet"})).await;
    assert!(by_prompt["result"]["completion"].is_object(), "{by_prompt}");
    let by_template = json!({"type": "ref/resource", "uri": "sluice://ci/file:///logs/{day}"});
    assert!(complete(31, by_template).await["result"]["completion"].is_object());
    refused(
        &complete(32, json!({"type": "ref/prompt", "name": "ci__Greet"})).await,
        "Unknown prompt: ci__Greet",
    );
    let elsewhere = json!({"type": "ref/resource", "uri": "sluice://ci/file:///etc/{x}"});
    refused(
        &complete(33, elsewhere).await,
        "Resource not found: sluice://ci/file:///etc/{x}",
    );

    // The 2026-07-28 form of a call is held to the same catalog.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "sluice-test", "version": "0"}
    });
    let modern = http
        .modern_call(
            40,
            "ci__ENVDUMP",
            json!({"name": "ci__ENVDUMP", "arguments": {}, "_meta": meta}),
            &[
                ("content-type", "application/json"),
                ("accept", ACCEPT_BOTH),
            ],
        )
        .await
        .json();
    refused(&modern, "Unknown tool: ci__ENVDUMP");

    let got = received(&http, &sid).await;
    let forwarded: Vec<&str> = got
        .iter()
        .map(String::as_str)
        .filter(|r| !r.ends_with("/list"))
        .collect();
    assert_eq!(
        forwarded,
        [
            "tools/call echo",
            "prompts/get greet",
            "resources/read file:///a.txt",
            "resources/read file:///logs/monday",
            "completion/complete greet",
            "completion/complete file:///logs/{day}",
        ]
    );
}

/// Checking calls against the catalog costs no list fetch per call: after
/// the lists are read once, twenty calls read none, and names the catalog
/// lacks read it again at most once a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_is_read_once_not_per_call() {
    let gw = Gateway::start(&config());
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let first = http.tool(&sid, 1, "ci__echo", json!({})).await;
    assert_eq!(text_of(&first), "ran echo");
    let before = reached(&received(&http, &sid).await, "tools/list");
    assert!(before >= 1, "the tools list was never read");

    for id in 2..22 {
        let reply = http.tool(&sid, id, "ci__echo", json!({})).await;
        assert_eq!(text_of(&reply), "ran echo");
    }
    assert_eq!(reached(&received(&http, &sid).await, "tools/list"), before);

    let started = std::time::Instant::now();
    for id in 30..40 {
        let reply = http.tool(&sid, id, "ci__nope", json!({})).await;
        refused(&reply, "Unknown tool: ci__nope");
    }
    // A count bound, not a time limit: one read per whole second the
    // misses took, and one for a second boundary crossed.
    let seconds = started.elapsed().as_secs() as usize;
    let after = reached(&received(&http, &sid).await, "tools/list");
    assert!(
        after - before <= seconds + 1,
        "{} list reads for 10 misses in {seconds} s",
        after - before
    );
}

/// `[auth] token_scopes` gives static tokens scopes, as OAuth tokens have:
/// `tool_scopes` then hides and refuses a tool to a token without them,
/// and a namespace's `require_scopes` keeps such a token out (403).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_tokens_with_scopes_see_only_their_tools() {
    let toml = format!(
        "[auth]\nbearer_tokens_env = \"TEST_TOKENS\"\n\
         token_scopes = {{ admin = [\"admin\"], reader = [\"read\"] }}\n{}\
         [namespaces.default]\nbackends = [\"demo\"]\ntool_scopes = {{ \"demo__add\" = [\"admin\"] }}\n\
         [namespaces.ops]\nbackends = [\"demo\"]\nrequire_scopes = [\"admin\"]\n",
        demo_backend("demo")
    );
    let gw = Gateway::start_with_env(
        &toml,
        &[("TEST_TOKENS", "admin=admin-token,reader=reader-token")],
    );
    let url = gw.url("/mcp");
    let open = |token: &'static str| {
        let url = url.clone();
        async move {
            let r = post_as(url, token, None, &init_request(1)).await;
            assert_eq!(r.status(), 200);
            r.headers()["mcp-session-id"].to_str().unwrap().to_owned()
        }
    };
    let ask = |token: &'static str, sid: String, method: &'static str, params: Value| {
        let url = url.clone();
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params});
            let r = post_as(url, token, Some(sid), &body).await;
            let text = r.text().await.unwrap();
            let line = text
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or(&text)
                .to_owned();
            serde_json::from_str::<Value>(&line).unwrap()
        }
    };
    let tools = |v: &Value| -> Vec<String> {
        v["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let add = json!({"name": "demo__add", "arguments": {"a": 2, "b": 3}});

    let admin = open("admin-token").await;
    let listed = ask("admin-token", admin.clone(), "tools/list", json!({})).await;
    assert!(tools(&listed).contains(&"demo__add".to_owned()), "{listed}");
    let r = ask("admin-token", admin, "tools/call", add.clone()).await;
    assert_eq!(r["result"]["content"][0]["text"], "5", "{r}");

    let reader = open("reader-token").await;
    let listed = ask("reader-token", reader.clone(), "tools/list", json!({})).await;
    assert!(
        !tools(&listed).contains(&"demo__add".to_owned()),
        "{listed}"
    );
    assert!(
        tools(&listed).contains(&"demo__echo".to_owned()),
        "{listed}"
    );
    let r = ask("reader-token", reader, "tools/call", add).await;
    refused(&r, "Unknown tool: demo__add");

    // The namespace that requires `admin` lets in only the token that has it.
    let ops = gw.url("/ns/ops/mcp");
    assert_eq!(
        post_as(ops.clone(), "admin-token", None, &init_request(1))
            .await
            .status(),
        200
    );
    assert_eq!(
        post_as(ops, "reader-token", None, &init_request(1))
            .await
            .status(),
        403
    );
}
