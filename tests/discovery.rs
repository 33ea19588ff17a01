//! Issue 51: how clients find tools. Every namespace's lists take
//! `params.filter.namePatterns`; a namespace in search mode lists the
//! gateway's `search_tools` and `call_tool` (and its pins) instead of
//! every tool, and `call_tool` is a direct call by another name.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

/// The names of a list result's items (`key`: name or uri).
fn names(reply: &Value, items: &str, key: &str) -> Vec<String> {
    reply["result"][items]
        .as_array()
        .unwrap_or_else(|| panic!("no {items} in {reply}"))
        .iter()
        .map(|t| t[key].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_take_a_name_filter_in_every_namespace() {
    let toml = format!("{}{}", demo_backend("demo"), demo_backend("other"));
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let list = async |id, method: &str, filter: Value| {
        http.call(&sid, id, method, json!({ "filter": filter }))
            .await
            .json()
    };

    let all = list(1, "tools/list", json!({})).await;
    assert_eq!(names(&all, "tools", "name").len(), 8, "{all}");
    let one = list(2, "tools/list", json!({"namePatterns": ["demo__*"]})).await;
    assert_eq!(
        names(&one, "tools", "name"),
        ["demo__echo", "demo__add", "demo__sleep_ms", "demo__counter"]
    );
    // Any pattern may match; fields the gateway does not know are ignored.
    let echoes = list(
        3,
        "tools/list",
        json!({"namePatterns": ["*__echo", "other__add"], "annotations": {"readOnlyHint": true}}),
    )
    .await;
    assert_eq!(
        names(&echoes, "tools", "name"),
        ["demo__echo", "other__echo", "other__add"]
    );
    let none = list(4, "tools/list", json!({"namePatterns": []})).await;
    assert!(names(&none, "tools", "name").is_empty(), "{none}");

    // Prompts by name; resources by their URI as clients see it.
    let prompts = list(5, "prompts/list", json!({"namePatterns": ["other__*"]})).await;
    assert_eq!(names(&prompts, "prompts", "name"), ["other__greeting"]);
    let resources = list(
        6,
        "resources/list",
        json!({"namePatterns": ["sluice://demo/*"]}),
    )
    .await;
    assert_eq!(
        names(&resources, "resources", "uri"),
        ["sluice://demo/demo://readme"]
    );

    // A malformed filter is refused, and the session carries on.
    for (id, bad) in [(7, json!({"namePatterns": "demo__*"})), (8, json!(3))] {
        let refused = list(id, "tools/list", bad).await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
    }
    let again = list(9, "tools/list", json!({"namePatterns": ["demo__add"]})).await;
    assert_eq!(names(&again, "tools", "name"), ["demo__add"]);
}

/// The generated backend (examples/many_tools.rs) with `n` tools.
fn generated(name: &str, n: usize) -> String {
    let bin = Fixture::bin("many_tools");
    format!(
        "[backends.{name}]\ntransport = \"stdio\"\ncommand = \"{}\"\nargs = [\"--tools\", \"{n}\"]\n",
        bin.display()
    )
}

/// `search_tools` of `query` (and `limit`): the structured tools, checked
/// equal to the JSON text beside them.
async fn search(http: &Http, sid: &str, id: u64, query: &str, limit: Option<u64>) -> Vec<Value> {
    let mut arguments = json!({ "query": query });
    if let Some(limit) = limit {
        arguments["limit"] = json!(limit);
    }
    let r = http.tool(sid, id, "search_tools", arguments).await;
    let result = &r["result"];
    assert_ne!(result["isError"], true, "{r}");
    let text: Value = serde_json::from_str(text_of(&r)).unwrap();
    assert_eq!(
        text, result["structuredContent"],
        "text and structure differ"
    );
    result["structuredContent"]["tools"]
        .as_array()
        .unwrap()
        .clone()
}

fn tool_names(tools: &[Value]) -> Vec<&str> {
    tools.iter().map(|t| t["name"].as_str().unwrap()).collect()
}

const SEARCH: &str = "[namespaces.default]\nbackends = [\"demo\", \"gen\"]\ndiscovery = \"search\"\npinned = [\"demo__echo\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_mode_lists_its_own_tools_and_calls_through_the_direct_path() {
    let toml = format!("{}{}{SEARCH}", demo_backend("demo"), generated("gen", 1000));
    let gw = Gateway::start_logged(
        &toml,
        &[
            ("SLUICE_LOG", "warn,sluice::audit=info"),
            ("SLUICE_LOG_FORMAT", "json"),
        ],
    );
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;

    // The list: the gateway's two tools and the pin, whole definitions.
    let list = http.call(&sid, 1, "tools/list", json!({})).await.json();
    assert_eq!(
        names(&list, "tools", "name"),
        ["search_tools", "call_tool", "demo__echo"]
    );
    let search_def = &list["result"]["tools"][0];
    assert_eq!(search_def["inputSchema"]["required"], json!(["query"]));
    assert!(
        list["result"]["tools"][2]["inputSchema"]["properties"]["text"].is_object(),
        "{list}"
    );

    // A search answers with whole definitions, best first.
    let found = search(&http, &sid, 2, "create a new jira customer", None).await;
    assert_eq!(found.len(), 8, "the default limit");
    assert_eq!(found[0]["name"], "gen__jira_create_customer", "{found:?}");
    assert!(found[0]["inputSchema"]["properties"]["customer_id"].is_object());
    assert!(found[0]["description"].as_str().unwrap().contains("Jira"));
    // An exact name first, whatever its words weigh; limits are kept.
    let exact = search(&http, &sid, 3, "demo__add", Some(3)).await;
    assert_eq!(exact[0]["name"], "demo__add");
    assert_eq!(exact.len(), 3);
    let many = search(&http, &sid, 4, "comment", Some(500)).await;
    assert_eq!(many.len(), 50, "at most 50");

    // call_tool reaches the right backend, through the direct call's path.
    let key = r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="demo__add",error_type=""}"#;
    let r = http
        .tool(
            &sid,
            5,
            "call_tool",
            json!({"name": "demo__add", "arguments": {"a": 2, "b": 3}}),
        )
        .await;
    assert_eq!(text_of(&r), "5", "{r}");
    let r = http
        .tool(
            &sid,
            6,
            "call_tool",
            json!({"name": "gen__slack_list_channel", "arguments": {"limit": 2}}),
        )
        .await;
    assert_eq!(text_of(&r), r#""slack_list_channel" {"limit":2}"#, "{r}");
    assert_eq!(gw.metrics().get(key), 1.0, "observed under the real tool");
    // The tool's own name works too: the list is short, the catalogue whole.
    let r = http
        .tool(&sid, 7, "demo__add", json!({"a": 1, "b": 1}))
        .await;
    assert_eq!(text_of(&r), "2", "{r}");

    // A name no list holds is refused as unlisted, as a direct call is.
    let r = http
        .tool(
            &sid,
            8,
            "call_tool",
            json!({"name": "demo__nope", "arguments": {}}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["message"], "Unknown tool: demo__nope");
    // Bad arguments are the tool's own errors, for the model to correct.
    for (id, tool, arguments) in [
        (9, "search_tools", json!({})),
        (10, "search_tools", json!({"query": "  "})),
        (11, "search_tools", json!({"query": "x", "limit": 0})),
        (12, "call_tool", json!({"arguments": {}})),
        (
            13,
            "call_tool",
            json!({"name": "demo__add", "arguments": [1]}),
        ),
    ] {
        let r = http.tool(&sid, id, tool, arguments).await;
        assert_eq!(r["result"]["isError"], true, "{tool}: {r}");
    }

    // The audit trail names the real tool and its backend.
    let audit = || -> Vec<Value> {
        gw.log()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["target"] == "sluice::audit")
            .collect()
    };
    let has = |name: &str, backend: &str, outcome: &str| {
        audit()
            .iter()
            .any(|l| l["name"] == name && l["backend"] == backend && l["outcome"] == outcome)
    };
    wait_until(Duration::from_secs(10), || {
        has("demo__nope", "demo", "unlisted")
    });
    assert!(has("demo__add", "demo", "ok"), "{:?}", audit());
    assert!(has("gen__slack_list_channel", "gen", "ok"), "{:?}", audit());
}

/// Scopes hide tools from search exactly as from lists; a renamed tool is
/// found only under its gateway name, an excluded one not at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_sees_what_the_caller_may_list_by_the_names_it_lists() {
    let toml = format!(
        "[auth]\nbearer_tokens_env = \"TEST_TOKENS\"\n\
         token_scopes = {{ admin = [\"admin\"], reader = [\"read\"] }}\n{}\
         tools = {{ exclude = [\"counter\"], rename = {{ echo = \"say\" }} }}\n\
         [namespaces.default]\nbackends = [\"demo\"]\ndiscovery = \"search\"\npinned = [\"demo__add\"]\n\
         tool_scopes = {{ \"demo__add\" = [\"admin\"] }}\n",
        demo_backend("demo")
    );
    let gw = Gateway::start_with_env(
        &toml,
        &[("TEST_TOKENS", "admin=admin-token,reader=reader-token")],
    );
    let url = gw.url("/mcp");
    let ask = async |token: &str, sid: Option<String>, method: &str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params});
        let r = post_as(url.clone(), token, sid, &body).await;
        let sid = r
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = r.text().await.unwrap();
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or(&text);
        (serde_json::from_str::<Value>(line).unwrap(), sid)
    };
    let open = async |token: &str| {
        ask(token, None, "initialize", init_request(1)["params"].clone())
            .await
            .1
            .unwrap()
    };
    let found = async |token: &str, sid: &str, query: &str| -> Vec<String> {
        let params = json!({"name": "search_tools", "arguments": {"query": query, "limit": 50}});
        let (r, _) = ask(token, Some(sid.to_owned()), "tools/call", params).await;
        r["result"]["structuredContent"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };

    let admin = open("admin-token").await;
    let reader = open("reader-token").await;
    assert!(
        found("admin-token", &admin, "add numbers")
            .await
            .contains(&"demo__add".to_owned())
    );
    assert!(
        !found("reader-token", &reader, "add numbers")
            .await
            .contains(&"demo__add".to_owned())
    );
    assert!(
        !found("reader-token", &reader, "demo__add")
            .await
            .contains(&"demo__add".to_owned())
    );
    // The pin too is the admin's alone.
    let (list, _) = ask(
        "reader-token",
        Some(reader.clone()),
        "tools/list",
        json!({}),
    )
    .await;
    assert_eq!(names(&list, "tools", "name"), ["search_tools", "call_tool"]);
    let (list, _) = ask("admin-token", Some(admin.clone()), "tools/list", json!({})).await;
    assert_eq!(
        names(&list, "tools", "name"),
        ["search_tools", "call_tool", "demo__add"]
    );
    // call_tool refuses what the caller cannot see, as a direct call does.
    let add = json!({"name": "call_tool", "arguments": {"name": "demo__add", "arguments": {"a": 1, "b": 2}}});
    let (r, _) = ask(
        "reader-token",
        Some(reader.clone()),
        "tools/call",
        add.clone(),
    )
    .await;
    assert_eq!(r["error"]["message"], "Unknown tool: demo__add", "{r}");
    let (r, _) = ask("admin-token", Some(admin.clone()), "tools/call", add).await;
    assert_eq!(r["result"]["content"][0]["text"], "3", "{r}");

    // Renamed: found as `demo__say`, never as `demo__echo`; excluded: never.
    let echo = found("reader-token", &reader, "echo the text back").await;
    assert!(echo.contains(&"demo__say".to_owned()), "{echo:?}");
    assert!(!echo.iter().any(|n| n == "demo__echo"), "{echo:?}");
    let counter = found("reader-token", &reader, "counter increment").await;
    assert!(!counter.iter().any(|n| n == "demo__counter"), "{counter:?}");
    let say = json!({"name": "call_tool", "arguments": {"name": "demo__echo", "arguments": {"text": "x"}}});
    let (r, _) = ask("reader-token", Some(reader.clone()), "tools/call", say).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

/// Reads an SSE response until `needle` appears (bounded): whether it did.
async fn stream_until(stream: &mut ::reqwest::Response, needle: &str) -> bool {
    let mut seen = String::new();
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(chunk)) = stream.chunk().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains(needle) {
                return true;
            }
        }
        false
    })
    .await;
    got == Ok(true)
}

/// A backend's list change reaches the index: the tool it added is found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_change_reaches_the_index() {
    let toml = format!(
        "{}[namespaces.default]\nbackends = [\"gen\"]\ndiscovery = \"search\"\n",
        generated("gen", 1000)
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let mut stream = http.get_stream(&sid).await;
    assert_eq!(stream.status(), 200);
    assert!(search(&http, &sid, 1, "zebrafish", None).await.is_empty());
    let r = http
        .tool(
            &sid,
            2,
            "call_tool",
            json!({"name": "gen__grow", "arguments": {"word": "zebrafish"}}),
        )
        .await;
    assert_eq!(text_of(&r), "fresh_1_zebrafish", "{r}");
    assert!(stream_until(&mut stream, "notifications/tools/list_changed").await);
    let found = search(&http, &sid, 3, "zebrafish", None).await;
    assert_eq!(tool_names(&found), ["gen__fresh_1_zebrafish"]);
}

/// A gateway in search mode with `expose_found`, and a client of it.
fn exposing() -> (Gateway, Http) {
    let toml = format!(
        "{}{}{SEARCH}expose_found = true\n",
        demo_backend("demo"),
        generated("gen", 1000)
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    (gw, http)
}

/// `expose_found`: what a session's searches found joins its own list,
/// and its GET stream hears of it; bounded at 64, the oldest dropped; not
/// another session's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expose_found_adds_found_tools_to_the_sessions_list() {
    let (_gw, http) = exposing();
    let sid = http.initialize().await;
    let other = http.initialize().await;
    let mut stream = http.get_stream(&sid).await;
    let mut other_stream = http.get_stream(&other).await;
    assert_eq!(stream.status(), 200);

    let found = search(&http, &sid, 1, "jira ticket", Some(3)).await;
    assert!(stream_until(&mut stream, "notifications/tools/list_changed").await);
    let list = http.call(&sid, 2, "tools/list", json!({})).await.json();
    let mut want = vec!["search_tools", "call_tool", "demo__echo"];
    want.extend(tool_names(&found));
    assert_eq!(names(&list, "tools", "name"), want);
    // The other session's list is its own.
    let list = http.call(&other, 3, "tools/list", json!({})).await.json();
    assert_eq!(names(&list, "tools", "name").len(), 3, "{list}");

    // Past 64 found, the least recently found go.
    for (id, query) in [(4, "github"), (5, "slack"), (6, "stripe"), (60, "zoom")] {
        assert_eq!(search(&http, &sid, id, query, Some(20)).await.len(), 20);
    }
    let list = http.call(&sid, 7, "tools/list", json!({})).await.json();
    let listed = names(&list, "tools", "name");
    assert_eq!(listed.len(), 3 + 64, "{listed:?}");
    assert!(
        !listed.iter().any(|n| n.starts_with("gen__jira")),
        "{listed:?}"
    );
    // The other session's own search is its own to hear of.
    search(&http, &other, 8, "zoom meeting", Some(1)).await;
    let list = http.call(&other, 9, "tools/list", json!({})).await.json();
    assert_eq!(names(&list, "tools", "name").len(), 4, "{list}");
    // And only that: its stream, read to its end (the session's end ends
    // it), heard one change. The first session's five were sent before
    // the other's one, so had they reached this stream, it would have
    // had them first.
    assert_eq!(http.delete(&other).await, 200);
    let heard = tokio::time::timeout(Duration::from_secs(10), async {
        let mut heard = String::new();
        while let Ok(Some(chunk)) = other_stream.chunk().await {
            heard.push_str(&String::from_utf8_lossy(&chunk));
        }
        heard
    })
    .await
    .expect("the other session's stream ends with the session");
    assert_eq!(
        heard.matches("notifications/tools/list_changed").count(),
        1,
        "{heard}"
    );
}

/// Unprefixed, a backend's tool can carry a gateway tool's name: the name
/// stays the gateway's, listed once and called as the gateway's, and the
/// backend's tool is not searched under it. (A rename to such a name is
/// refused by the config; a backend's own names are known only once it
/// lists them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_tool_named_like_a_gateway_tool_does_not_take_its_name() {
    let bin = Fixture::bin("many_tools");
    let toml = format!(
        "[backends.gen]\ntransport = \"stdio\"\ncommand = \"{}\"\n\
         args = [\"--tools\", \"10\", \"--also\", \"call_tool\", \"--also\", \"echo_back\"]\n\
         [namespaces.default]\nbackends = [\"gen\"]\nprefix = \"never\"\ndiscovery = \"search\"\n",
        bin.display()
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let list = http.call(&sid, 1, "tools/list", json!({})).await.json();
    assert_eq!(names(&list, "tools", "name"), ["search_tools", "call_tool"]);
    assert_eq!(
        list["result"]["tools"][1]["title"], "Call a tool",
        "the gateway's definition: {list}"
    );
    // Both of the backend's echo tools match; only the one with a name
    // of its own is found.
    let found = search(&http, &sid, 2, "echo the text back", Some(50)).await;
    assert!(tool_names(&found).contains(&"echo_back"), "{found:?}");
    assert!(!tool_names(&found).contains(&"call_tool"), "{found:?}");
    // A call of `call_tool` is the gateway's: it calls the tool it names.
    let r = http
        .tool(
            &sid,
            3,
            "call_tool",
            json!({"name": "echo_back", "arguments": {"text": "x"}}),
        )
        .await;
    assert_eq!(text_of(&r), r#""echo_back" {"text":"x"}"#, "{r}");
    let r = http
        .tool(
            &sid,
            4,
            "call_tool",
            json!({"name": "call_tool", "arguments": {"text": "x"}}),
        )
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
}

/// 2026-07-28 requests: both tools work without a session, and nothing
/// is exposed (there is no session to expose it to).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_mode_serves_the_2026_era_without_a_session() {
    let (_gw, http) = exposing();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "discovery-test", "version": "0"}
    });
    let call = async |id: u64, tool: &str, arguments: Value| {
        let params = json!({"name": tool, "arguments": arguments, "_meta": meta});
        let r = http.modern_call(id, tool, params, &[]).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.messages().pop().unwrap()
    };
    let r = call(
        1,
        "search_tools",
        json!({"query": "delete a github message", "limit": 2}),
    )
    .await;
    assert_eq!(
        r["result"]["structuredContent"]["tools"][0]["name"], "gen__github_delete_message",
        "{r}"
    );
    assert_eq!(r["result"]["resultType"], "complete");
    let r = call(
        2,
        "call_tool",
        json!({"name": "demo__echo", "arguments": {"text": "hi"}}),
    )
    .await;
    assert_eq!(r["result"]["content"][0]["text"], "hi", "{r}");
    let body = json!({"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta": meta}});
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
    ];
    let r = http.post_with(None, &headers, &body).await;
    let list = r.messages().pop().unwrap();
    assert_eq!(
        names(&list, "tools", "name"),
        ["search_tools", "call_tool", "demo__echo"]
    );
}
