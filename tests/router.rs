//! Aggregation through the router: names, pagination, filters, resources,
//! prompts, completion, and JSON passed through byte for byte.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/raw_backend.py");

fn raw_backend(name: &str) -> String {
    format!(
        "[backends.{name}]\ntransport = \"stdio\"\ncommand = \"python3\"\nargs = [\"{FIXTURE}\"]\n"
    )
}

async fn list_all(http: &Http, sid: &str, method: &str, key: &str) -> (Vec<Value>, usize) {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let r = http.call(sid, 10 + pages as u64, method, params).await;
        let v = r.json();
        let result = &v["result"];
        items.extend(
            result[key]
                .as_array()
                .unwrap_or_else(|| panic!("{v}"))
                .iter()
                .cloned(),
        );
        pages += 1;
        assert!(pages < 50, "pagination does not end");
        match result["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return (items, pages),
        }
    }
}

fn names(items: &[Value], key: &str) -> Vec<String> {
    items
        .iter()
        .map(|t| t[key].as_str().unwrap().to_owned())
        .collect()
}

/// Two paginating backends: one `tools/list` returns the whole merged list
/// (clients rarely follow cursors), in backend order then each backend's
/// own order; past the page size the list is split, and the cursors resume
/// exactly, even in the middle of a backend's page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_is_merged_across_backends() {
    let paged = |name: &str| {
        format!(
            "{}env = {{ SLUICE_DEMO_PAGE_SIZE = \"2\" }}\n",
            demo_backend(name)
        )
    };
    let all = [
        "one__echo",
        "one__add",
        "one__sleep_ms",
        "one__counter",
        "two__echo",
        "two__add",
        "two__sleep_ms",
        "two__counter",
    ];
    let gw = Gateway::start(&format!("{}{}", paged("one"), paged("two")));
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let (tools, pages) = list_all(&http, &sid, "tools/list", "tools").await;
    assert_eq!(names(&tools, "name"), all);
    assert_eq!(pages, 1, "one call lists everything");
    let bad = http
        .call(&sid, 99, "tools/list", json!({"cursor":"not-ours"}))
        .await;
    assert_eq!(bad.json()["error"]["code"], -32602);

    let small = Gateway::start(&format!(
        "[server]\nlist_page_size = 3\n{}{}",
        paged("one"),
        paged("two")
    ));
    let http = Http::new(small.url("/mcp"));
    let sid = http.initialize().await;
    let (tools, pages) = list_all(&http, &sid, "tools/list", "tools").await;
    assert_eq!(names(&tools, "name"), all);
    assert_eq!(pages, 3);
}

/// Issue 9 (7): cursors a client makes up are passed to the backend but
/// never kept, and a backend whose cursors loop cannot spin the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_and_looping_cursors_cost_nothing() {
    let toml = format!(
        "{}{}",
        demo_backend("demo"),
        faulty_stdio("loop", "loop-cursor", "")
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    // The looping backend is cut short; the other's tools are all there.
    let r = http.call(&sid, 2, "tools/list", json!({})).await;
    let tools = names(r.json()["result"]["tools"].as_array().unwrap(), "name");
    assert_eq!(
        tools,
        ["demo__echo", "demo__add", "demo__sleep_ms", "demo__counter"]
    );
    for i in 0..500 {
        let cursor = format!("s2.0.0.made-up-{i}");
        let r = http
            .call(&sid, 10 + i, "tools/list", json!({ "cursor": cursor }))
            .await;
        assert!(r.json().get("result").is_some(), "{}", r.body);
    }
    let m = gw.metrics();
    let pages = m.get(r#"sluice_bounded_entries{map="list_pages",owner="demo"}"#);
    let hashes = m.get(r#"sluice_bounded_entries{map="list_hashes",owner="demo"}"#);
    assert!(
        pages <= 4.0 && hashes <= 4.0,
        "pages {pages}, hashes {hashes}"
    );
    // Listed 501 times and answered every time: the loop ended each time.
    let r = http.call(&sid, 9999, "tools/list", json!({})).await;
    assert_eq!(r.status, 200);
}

/// `prefix = "never"` keeps names; include/exclude/rename shape the list
/// and calls reach the original tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unprefixed_namespace_with_tool_filters() {
    let toml = format!(
        "{}tools = {{ include = [\"*\"], exclude = [\"sleep_ms\", \"count*\"], rename = {{ echo = \"say\" }} }}\n\
         [namespaces.plain]\nbackends = [\"demo\"]\nprefix = \"never\"\n",
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/ns/plain/mcp"));
    let sid = http.initialize().await;
    let (tools, _) = list_all(&http, &sid, "tools/list", "tools").await;
    assert_eq!(names(&tools, "name"), ["say", "add"]);
    let r = http
        .call(
            &sid,
            2,
            "tools/call",
            json!({"name":"say","arguments":{"text":"renamed"}}),
        )
        .await;
    assert_eq!(text_of(&r.json()), "renamed");
    for hidden in ["echo", "sleep_ms", "counter", "demo__add"] {
        let r = http
            .call(&sid, 3, "tools/call", json!({"name":hidden,"arguments":{}}))
            .await;
        assert_eq!(
            r.json()["error"]["code"],
            -32602,
            "{hidden} must not be callable"
        );
    }
    // The default namespace is not configured here, so /mcp is unknown.
    let r = Http::new(gw.url("/mcp")).post(None, &init_request(1)).await;
    assert_eq!(r.status, 404);
}

/// The backends' instructions, gathered at `initialize`, say how their
/// names are served here: a backend names its tools as it serves them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instructions_say_how_names_are_prefixed() {
    let toml = format!(
        "{}[namespaces.default]\nbackends = [\"demo\"]\n\
         [namespaces.plain]\nbackends = [\"demo\"]\nprefix = \"never\"\n",
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    let instructions = |path: &str| {
        let http = Http::new(gw.url(path));
        async move {
            let r = http.post(None, &init_request(1)).await;
            r.json()["result"]["instructions"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let prefixed = instructions("/mcp").await;
    assert!(
        prefixed.starts_with(
            "[demo: its names are served here as `demo__NAME`, its resources as `sluice://demo/URI`] Demo server"
        ),
        "{prefixed}"
    );
    let plain = instructions("/ns/plain/mcp").await;
    assert!(plain.starts_with("[demo] Demo server"), "{plain}");
}

/// A named namespace's POST is served alike by the gateway's own HTTP/1.1
/// (a body with its length) and by hyper (a chunked body): the same
/// answer to a call, and the same refusal for a namespace that is not
/// configured, one spelled with an escape included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_namespace_is_answered_alike_on_either_http_path() {
    let toml = format!(
        "{}[namespaces.plain]\nbackends = [\"demo\"]\nprefix = \"never\"\n",
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    let sid = Http::new(gw.url("/ns/plain/mcp")).initialize().await;
    let headers = format!(
        "Host: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {sid}\r\n"
    );
    let call = json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
        "params":{"name":"echo","arguments":{"text":"either way"}}})
    .to_string();
    let addr = gw.url("");
    tokio::task::spawn_blocking(move || {
        let plain = |path: &str| {
            format!(
                "POST {path} HTTP/1.1\r\n{headers}Content-Length: {}\r\n\r\n{call}",
                call.len()
            )
        };
        let chunked = |path: &str| {
            format!(
                "POST {path} HTTP/1.1\r\n{headers}Transfer-Encoding: chunked\r\n\r\n\
                 {:x}\r\n{call}\r\n0\r\n\r\n",
                call.len()
            )
        };
        // A connection is hyper's from its first chunked request on: one
        // connection per request.
        let answer = |raw: String| KeepAlive::connect(&addr).response_to(&raw);
        for (path, status) in [
            ("/ns/plain/mcp", 200),
            ("/ns/nope/mcp", 404),
            // Decoded by axum's router, as before this path existed.
            ("/ns/pl%61in/mcp", 200),
        ] {
            let own = answer(plain(path));
            let by_hyper = answer(chunked(path));
            assert_eq!(own.status, status, "{path}: {}", own.text());
            assert_eq!(by_hyper.status, status, "{path}: {}", by_hyper.text());
            assert_eq!(own.text(), by_hyper.text(), "{path}");
            assert_eq!(own.header("content-type"), by_hyper.header("content-type"));
        }
        let own = answer(plain("/ns/plain/mcp"));
        let v: Value = serde_json::from_str(&own.text()).unwrap();
        assert_eq!(text_of(&v), "either way");
    })
    .await
    .unwrap();
}

/// Prompts, resources (URIs mapped reversibly), templates and completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_resources_and_completion() {
    let gw = Gateway::start(&demo_backend("demo"));
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;

    let (prompts, _) = list_all(&http, &sid, "prompts/list", "prompts").await;
    assert_eq!(names(&prompts, "name"), ["demo__greeting"]);
    let r = http
        .call(
            &sid,
            2,
            "prompts/get",
            json!({"name":"demo__greeting","arguments":{"name":"Ada"}}),
        )
        .await;
    assert_eq!(
        r.json()["result"]["messages"][0]["content"]["text"],
        "Hello, Ada!"
    );

    let (resources, _) = list_all(&http, &sid, "resources/list", "resources").await;
    assert_eq!(names(&resources, "uri"), ["sluice://demo/demo://readme"]);
    let r = http
        .call(
            &sid,
            3,
            "resources/read",
            json!({"uri":"sluice://demo/demo://readme"}),
        )
        .await;
    let contents = &r.json()["result"]["contents"][0];
    assert_eq!(contents["uri"], "sluice://demo/demo://readme");
    assert!(contents["text"].as_str().unwrap().len() > 10);

    let (templates, _) =
        list_all(&http, &sid, "resources/templates/list", "resourceTemplates").await;
    assert_eq!(
        names(&templates, "uriTemplate"),
        ["sluice://demo/demo://echo/{text}"]
    );
    let r = http
        .call(
            &sid,
            4,
            "resources/read",
            json!({"uri":"sluice://demo/demo://echo/hi"}),
        )
        .await;
    assert_eq!(r.json()["result"]["contents"][0]["text"], "hi");

    let r = http
        .call(&sid, 5, "completion/complete", json!({"ref":{"type":"ref/prompt","name":"demo__greeting"},"argument":{"name":"name","value":"A"}}))
        .await;
    assert_eq!(r.json()["result"]["completion"]["values"], json!(["Alice"]));

    let r = http
        .call(&sid, 6, "resources/read", json!({"uri":"sluice://nope/x"}))
        .await;
    assert_eq!(r.json()["error"]["code"], -32602);
    let r = http.call(&sid, 7, "no/such/method", json!({})).await;
    assert_eq!(r.json()["error"]["code"], -32601);
}

/// Fields the gateway does not route on travel byte for byte, both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_passes_through_byte_for_byte() {
    let gw = Gateway::start(&raw_backend("raw"));
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;

    let r = http.call(&sid, 2, "tools/list", json!({})).await;
    assert!(
        r.body
            .contains(r#""x-vendor":{"n":1.50,"big":123456789012345678901234567890,"e":1E2}"#),
        "{}",
        r.body
    );
    assert!(
        r.body.contains(r#""annotations":{"title":"Shape \u00e9"}"#),
        "{}",
        r.body
    );
    assert!(
        r.body.contains(r#""x-page-extra":[true, false,  null]"#),
        "{}",
        r.body
    );
    assert!(r.body.contains(r#""name":"raw__shape""#));

    let args = r#"{"z": 1.50, "a":"\u00e9", "n":[1 ,2]}"#;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"raw__shape","arguments":{args},"x-client-extra":{{"k":1.0}}}}}}"#
    );
    let r = http.post_bytes(&sid, body).await;
    assert!(
        r.body.contains(r#""x-extra":{"z":0.10,"a":[ 1 ,2 ]}"#)
            && r.body.contains(r#""x-unknown":"\ud83d\ude00""#),
        "{}",
        r.body
    );
    assert!(
        r.body.contains(r#""structuredContent":{"b":2,"a":1}"#),
        "{}",
        r.body
    );
    // What the backend received: the original name, the arguments as sent.
    let seen = text_of(&r.json()).to_owned();
    assert!(seen.contains(&format!(r#""arguments":{args}"#)), "{seen}");
    assert!(seen.contains(r#""x-client-extra":{"k":1.0}"#), "{seen}");
    assert!(seen.contains(r#""name":"shape""#), "{seen}");
}

/// A backend's list_changed reaches clients on their GET streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_reaches_get_streams() {
    let gw = Gateway::start(&raw_backend("raw"));
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let mut stream = http.get_stream(&sid).await;
    assert_eq!(stream.status(), 200);
    // A second GET stream for the same session is refused.
    assert_eq!(http.get_stream(&sid).await.status(), 409);

    let r = http
        .call(
            &sid,
            2,
            "tools/call",
            json!({"name":"raw__change","arguments":{}}),
        )
        .await;
    assert_eq!(text_of(&r.json()), "changed");
    let mut seen = String::new();
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = stream.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("notifications/tools/list_changed") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(got, Ok(true), "stream so far: {seen}");
    // Deleting the session ends its stream.
    assert_eq!(http.delete(&sid).await, 200);
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        while stream.chunk().await.unwrap().is_some() {}
    })
    .await;
    assert!(end.is_ok(), "the GET stream outlived its session");
}

/// With names unchanged (`prefix = "never"`) a call's params reach the
/// backend exactly as the client wrote them, whitespace and key order too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_names_leave_params_untouched() {
    let toml = format!(
        "{}[namespaces.plain]\nbackends = [\"raw\"]\nprefix = \"never\"\n",
        raw_backend("raw")
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/ns/plain/mcp"));
    let sid = http.initialize().await;
    let params = r#"{ "z":1,  "name" : "shape", "arguments":{"b": 1.50,"a":[ ]} }"#;
    let body = format!(r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{params}}}"#);
    let r = http.post_bytes(&sid, body).await;
    let seen = text_of(&r.json()).to_owned();
    assert!(seen.contains(&format!(r#""params":{params}"#)), "{seen}");
}
