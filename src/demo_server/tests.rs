//! Drives `serve_with` over in-memory pipes, the way the gateway drives the child.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio::task::JoinHandle;

use super::{Config, serve_with};

/// Generous: only reached when the server under test is broken.
const PATIENCE: Duration = Duration::from_secs(5);

struct Client {
    input: Option<DuplexStream>,
    output: Lines<BufReader<DuplexStream>>,
    server: JoinHandle<std::io::Result<()>>,
}

impl Client {
    fn start(config: Config) -> Self {
        let (input, server_in) = tokio::io::duplex(64 * 1024);
        let (server_out, output) = tokio::io::duplex(64 * 1024);
        let server = tokio::spawn(serve_with(server_in, server_out, config));
        Client {
            input: Some(input),
            output: BufReader::new(output).lines(),
            server,
        }
    }

    async fn send_raw(&mut self, line: &str) {
        let input = self.input.as_mut().expect("input still open");
        input.write_all(line.as_bytes()).await.expect("write");
        input.write_all(b"\n").await.expect("write");
    }

    async fn send(&mut self, msg: Value) {
        self.send_raw(&msg.to_string()).await;
    }

    async fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        self.recv().await
    }

    async fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        let params = json!({ "name": tool, "arguments": arguments });
        self.request(json!(id), "tools/call", params).await
    }

    async fn recv_line(&mut self) -> String {
        tokio::time::timeout(PATIENCE, self.output.next_line())
            .await
            .expect("server answered in time")
            .expect("read")
            .expect("server output still open")
    }

    async fn recv(&mut self) -> Value {
        serde_json::from_str(&self.recv_line().await).expect("server wrote JSON")
    }

    /// Closes stdin and waits for the server to exit.
    async fn finish(mut self) -> std::io::Result<()> {
        self.input = None;
        tokio::time::timeout(PATIENCE, self.server)
            .await
            .expect("server exited in time")
            .expect("server task")
    }
}

fn paged(size: usize) -> Config {
    Config {
        page_size: Some(size),
    }
}

fn text_of(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .expect("text content")
}

#[tokio::test]
async fn initialize_negotiates_version() {
    let mut c = Client::start(Config::default());
    let r = c
        .request(
            json!(1),
            "initialize",
            json!({ "protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": { "name": "t", "version": "0" } }),
        )
        .await;
    assert_eq!(r["jsonrpc"], "2.0");
    assert_eq!(r["id"], 1);
    let result = &r["result"];
    assert_eq!(result["protocolVersion"], "2025-06-18");
    assert_eq!(
        result["capabilities"]["tools"],
        json!({ "listChanged": true })
    );
    assert_eq!(
        result["capabilities"]["resources"],
        json!({ "subscribe": false, "listChanged": false })
    );
    assert_eq!(result["capabilities"]["completions"], json!({}));
    assert_eq!(result["serverInfo"]["name"], "sluice-demo");
    assert!(result["instructions"].is_string());

    let r = c
        .request(
            json!(2),
            "initialize",
            json!({ "protocolVersion": "2024-11-05" }),
        )
        .await;
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");

    c.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
        .await;
    assert_eq!(
        c.request(json!(3), "ping", json!({})).await["result"],
        json!({})
    );
    assert_eq!(
        c.request(json!(4), "logging/setLevel", json!({ "level": "debug" }))
            .await["result"],
        json!({})
    );
    c.finish().await.expect("clean exit");
}

#[tokio::test]
async fn tools_list_is_one_page_by_default() {
    let mut c = Client::start(Config::default());
    let r = c.request(json!(1), "tools/list", json!({})).await;
    let tools = r["result"]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["echo", "add", "sleep_ms", "counter"]);
    for tool in tools {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert!(tool["inputSchema"]["properties"].is_object(), "{tool}");
        assert!(tool["inputSchema"]["required"].is_array(), "{tool}");
        assert!(tool["description"].is_string(), "{tool}");
    }
    assert_eq!(
        tools[1]["outputSchema"]["properties"]["sum"]["type"],
        "number"
    );
    assert!(r["result"].get("nextCursor").is_none());
}

#[tokio::test]
async fn tools_list_pages_with_opaque_cursor() {
    let mut c = Client::start(paged(2));
    let first = c.request(json!(1), "tools/list", json!({})).await;
    assert_eq!(first["result"]["tools"].as_array().map(Vec::len), Some(2));
    assert_eq!(first["result"]["tools"][0]["name"], "echo");
    let cursor = first["result"]["nextCursor"].clone();
    assert!(cursor.is_string());

    let second = c
        .request(json!(2), "tools/list", json!({ "cursor": cursor }))
        .await;
    let names: Vec<&str> = second["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["sleep_ms", "counter"]);
    assert!(second["result"].get("nextCursor").is_none());

    let bad = c
        .request(json!(3), "tools/list", json!({ "cursor": "nonsense" }))
        .await;
    assert_eq!(bad["error"]["code"], -32602);
}

#[tokio::test]
async fn add_returns_text_and_structured_sum() {
    let mut c = Client::start(Config::default());
    let r = c.call(1, "add", json!({ "a": 2, "b": 3 })).await;
    assert_eq!(text_of(&r), "5");
    assert_eq!(r["result"]["structuredContent"], json!({ "sum": 5 }));
    assert!(r["result"].get("isError").is_none());

    assert_eq!(
        text_of(&c.call(2, "add", json!({ "a": 1.5, "b": 1.5 })).await),
        "3"
    );
    assert_eq!(
        text_of(&c.call(3, "add", json!({ "a": 1.5, "b": 2 })).await),
        "3.5"
    );
    assert_eq!(
        text_of(&c.call(4, "add", json!({ "a": -7, "b": 2 })).await),
        "-5"
    );

    let bad = c.call(5, "add", json!({ "a": "1", "b": 2 })).await;
    assert_eq!(bad["result"]["isError"], true);
    assert!(text_of(&bad).contains("numbers"));
}

#[tokio::test]
async fn echo_and_unknown_tool() {
    let mut c = Client::start(Config::default());
    assert_eq!(
        text_of(&c.call(1, "echo", json!({ "text": "hi\nthere" })).await),
        "hi\nthere"
    );
    assert_eq!(
        c.call(2, "echo", json!({})).await["result"]["isError"],
        true
    );

    let r = c.call(3, "nope", json!({})).await;
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(r["error"]["message"], "Unknown tool: nope");
}

#[tokio::test]
async fn counter_counts_per_session() {
    let mut c = Client::start(Config::default());
    for expected in ["1", "2", "3"] {
        assert_eq!(text_of(&c.call(1, "counter", json!({})).await), expected);
    }
    let mut other = Client::start(Config::default());
    assert_eq!(text_of(&other.call(1, "counter", json!({})).await), "1");
}

#[tokio::test]
async fn concurrent_sleeps_keep_ids_and_progress_apart() {
    let mut c = Client::start(Config::default());
    let sleep = |id: Value, ms: u64, token: Value| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": "sleep_ms", "arguments": { "ms": ms }, "_meta": { "progressToken": token } } })
    };
    c.send(sleep(json!("slow"), 300, json!("tok-slow"))).await;
    c.send(sleep(json!(7), 30, json!(99))).await;

    let owner = |token: &Value| {
        if *token == 99 {
            json!(7)
        } else {
            json!("slow")
        }
    };
    let mut responses: Vec<Value> = Vec::new();
    let mut progress: Vec<(Value, u64)> = Vec::new();
    while responses.len() < 2 {
        let msg = c.recv().await;
        if msg["method"] != "notifications/progress" {
            responses.push(msg);
            continue;
        }
        let token = msg["params"]["progressToken"].clone();
        let answered = responses.iter().any(|r| r["id"] == owner(&token));
        assert!(!answered, "progress for {token} after its response");
        assert_eq!(msg["params"]["total"], 4);
        progress.push((token, msg["params"]["progress"].as_u64().expect("progress")));
    }
    // The short sleep is not queued behind the long one.
    assert_eq!(responses[0]["id"], 7);
    assert_eq!(text_of(&responses[0]), "slept 30ms");
    assert_eq!(responses[1]["id"], "slow");
    assert_eq!(text_of(&responses[1]), "slept 300ms");
    for token in [json!(99), json!("tok-slow")] {
        let steps: Vec<u64> = progress
            .iter()
            .filter(|(t, _)| *t == token)
            .map(|(_, p)| *p)
            .collect();
        assert_eq!(steps, [0, 1, 2, 3, 4], "{token}");
    }
}

#[tokio::test]
async fn sleep_zero_still_reports_and_ids_echo_raw() {
    let mut c = Client::start(Config::default());
    c.send_raw(r#"{"jsonrpc":"2.0","id":1.50,"method":"tools/call","params":{"name":"sleep_ms","arguments":{"ms":0},"_meta":{"progressToken":1.0}}}"#).await;
    let mut lines = Vec::new();
    loop {
        let line = c.recv_line().await;
        let done = !line.contains("notifications/progress");
        lines.push(line);
        if done {
            break;
        }
    }
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert!(
        lines[..5]
            .iter()
            .all(|l| l.contains(r#""progressToken":1.0"#)),
        "{lines:?}"
    );
    assert!(lines[5].contains(r#""id":1.50"#), "{}", lines[5]);

    c.send_raw(r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}"#)
        .await;
    assert!(
        c.recv_line()
            .await
            .contains(r#""id":123456789012345678901234567890"#)
    );
    c.send_raw(r#"{"jsonrpc":"2.0","id":"a\"b","method":"ping"}"#)
        .await;
    assert!(c.recv_line().await.contains(r#""id":"a\"b""#));
    c.send_raw(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sleep_ms","arguments":{"ms":-1}}}"#).await;
    assert_eq!(c.recv().await["result"]["isError"], true);
}

#[tokio::test]
async fn cancellation_aborts_without_response() {
    let mut c = Client::start(Config::default());
    c.send(
        json!({ "jsonrpc": "2.0", "id": "long", "method": "tools/call",
        "params": { "name": "sleep_ms", "arguments": { "ms": 60_000 } } }),
    )
    .await;
    c.send(
        json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": "long", "reason": "test" } }),
    )
    .await;
    // The next line is the ping's answer: nothing was sent for "long".
    let r = c.request(json!(2), "ping", json!({})).await;
    assert_eq!(r["id"], 2);
    // Exiting promptly proves the sleep was aborted, not merely left unanswered.
    c.finish().await.expect("clean exit");
}

#[tokio::test]
async fn eof_finishes_accepted_requests() {
    let mut c = Client::start(Config::default());
    c.send(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "sleep_ms", "arguments": { "ms": 20 } } }))
        .await;
    c.input = None;
    assert_eq!(text_of(&c.recv().await), "slept 20ms");
    c.finish().await.expect("clean exit");
}

#[tokio::test]
async fn malformed_and_unknown_messages() {
    let mut c = Client::start(Config::default());
    c.send_raw("{not json").await;
    let r = c.recv().await;
    assert_eq!(r["error"]["code"], -32700);
    assert!(r["id"].is_null());
    assert!(r.as_object().is_some_and(|o| o.contains_key("id")));

    c.send_raw(&String::from_utf8_lossy(b"\xff\xfe")).await;
    assert_eq!(c.recv().await["error"]["code"], -32700);
    c.send_raw("[1, 2]").await;
    assert_eq!(c.recv().await["error"]["code"], -32600);
    c.send_raw(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#)
        .await;
    assert_eq!(c.recv().await["error"]["code"], -32600);

    // Blank lines and client responses get no answer; the ping after them does.
    c.send_raw("").await;
    c.send_raw(r#"{"jsonrpc":"2.0","id":"s1","result":{}}"#)
        .await;
    c.send(json!({ "jsonrpc": "2.0", "method": "notifications/whatever" }))
        .await;
    let r = c.request(json!(9), "no/such/method", json!({})).await;
    assert_eq!(r["id"], 9);
    assert_eq!(r["error"]["code"], -32601);
    c.finish().await.expect("clean exit");
}

#[tokio::test]
async fn prompts_resources_and_completion() {
    let mut c = Client::start(Config::default());
    let r = c.request(json!(1), "prompts/list", json!({})).await;
    assert_eq!(r["result"]["prompts"][0]["name"], "greeting");
    assert_eq!(r["result"]["prompts"][0]["arguments"][0]["required"], true);
    let r = c
        .request(
            json!(2),
            "prompts/get",
            json!({ "name": "greeting", "arguments": { "name": "Ada" } }),
        )
        .await;
    assert_eq!(
        r["result"]["messages"],
        json!([{ "role": "user", "content": { "type": "text", "text": "Hello, Ada!" } }])
    );
    assert_eq!(
        c.request(json!(3), "prompts/get", json!({ "name": "x" }))
            .await["error"]["code"],
        -32602
    );
    assert_eq!(
        c.request(json!(4), "prompts/get", json!({ "name": "greeting" }))
            .await["error"]["code"],
        -32602
    );

    let r = c.request(json!(5), "resources/list", json!({})).await;
    assert_eq!(
        r["result"]["resources"][0],
        json!({ "uri": "demo://readme", "name": "readme",
        "mimeType": "text/plain", "description": "What this demo server offers." })
    );
    let r = c
        .request(json!(6), "resources/templates/list", json!({}))
        .await;
    assert_eq!(
        r["result"]["resourceTemplates"][0]["uriTemplate"],
        "demo://echo/{text}"
    );
    let r = c
        .request(
            json!(7),
            "resources/read",
            json!({ "uri": "demo://readme" }),
        )
        .await;
    assert!(
        r["result"]["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("demo"))
    );
    let r = c
        .request(
            json!(8),
            "resources/read",
            json!({ "uri": "demo://echo/hello" }),
        )
        .await;
    assert_eq!(
        r["result"]["contents"][0],
        json!({ "uri": "demo://echo/hello", "mimeType": "text/plain", "text": "hello" })
    );
    let r = c
        .request(
            json!(9),
            "resources/read",
            json!({ "uri": "demo://missing" }),
        )
        .await;
    assert_eq!(r["error"]["code"], -32002);
    assert_eq!(r["error"]["message"], "Resource not found");

    let complete = |value: &str| {
        json!({ "ref": { "type": "ref/prompt", "name": "greeting" },
        "argument": { "name": "name", "value": value } })
    };
    let r = c
        .request(json!(10), "completion/complete", complete("a"))
        .await;
    assert_eq!(r["result"]["completion"]["values"], json!(["Alice"]));
    let r = c
        .request(json!(11), "completion/complete", complete(""))
        .await;
    assert_eq!(r["result"]["completion"]["values"], json!(["Alice", "Bob"]));
    let other = json!({ "ref": { "type": "ref/resource", "uri": "demo://echo/{text}" },
        "argument": { "name": "text", "value": "" } });
    let r = c.request(json!(12), "completion/complete", other).await;
    assert_eq!(r["result"]["completion"]["values"], json!([]));
}
