//! The deprecated HTTP+SSE transport (2024-11-05) served on `GET /sse` and
//! `/ns/{namespace}/sse` (issue 41, part 2): the endpoint event, messages
//! POSTed there and answered on the stream, and the stream as a client
//! session like any other (auth, Host and Origin, idle TTL, caps, its end
//! ending the session and its backend session).

mod support;

use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};
use support::{Gateway, demo_backend, reload, wait_until};

/// What a read of the stream waits at most.
const READ: Duration = Duration::from_secs(20);

/// One SSE stream as a client reads it.
struct SseStream {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: String,
}

#[derive(Debug, PartialEq)]
enum Ev {
    Event { event: String, data: String },
    Comment,
}

impl SseStream {
    async fn open(url: &str, headers: &[(&str, &str)]) -> SseStream {
        let mut req = reqwest::Client::new()
            .get(url)
            .header("accept", "text/event-stream");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        SseStream {
            status: resp.status().as_u16(),
            headers: resp.headers().clone(),
            body: Box::pin(resp.bytes_stream()),
            buf: String::new(),
        }
    }

    /// The next event or comment; None when the stream has ended.
    async fn next(&mut self) -> Option<Ev> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut event, mut data, mut comment) = (String::new(), Vec::new(), false);
                for line in block.lines() {
                    if line.starts_with(':') {
                        comment = true;
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim_start().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
                    }
                }
                if data.is_empty() && event.is_empty() && comment {
                    return Some(Ev::Comment);
                }
                let data = data.join("\n");
                return Some(Ev::Event { event, data });
            }
            match tokio::time::timeout(READ, self.body.next()).await {
                Err(_) => panic!("nothing on the stream within {READ:?}"),
                Ok(Some(Ok(chunk))) => self.buf.push_str(&String::from_utf8_lossy(&chunk)),
                Ok(Some(Err(_)) | None) => return None,
            }
        }
    }

    /// The first event: the message endpoint.
    async fn endpoint(&mut self) -> String {
        match self.next().await {
            Some(Ev::Event { event, data }) if event == "endpoint" => data,
            other => panic!("expected the endpoint event first, got {other:?}"),
        }
    }

    /// The next JSON-RPC message within `READ`, keep-alives skipped.
    async fn message(&mut self) -> Value {
        let next = async {
            loop {
                match self.next().await {
                    Some(Ev::Comment) => continue,
                    Some(Ev::Event { event, data }) => {
                        assert_eq!(event, "message", "{data}");
                        return serde_json::from_str(&data).unwrap();
                    }
                    None => panic!("the stream ended"),
                }
            }
        };
        tokio::time::timeout(READ, next)
            .await
            .unwrap_or_else(|_| panic!("no message within {READ:?}"))
    }

    /// Reads until the stream ends (keep-alives and messages skipped),
    /// within `READ`.
    async fn until_end(&mut self) {
        let ended = async { while self.next().await.is_some() {} };
        tokio::time::timeout(READ, ended)
            .await
            .unwrap_or_else(|_| panic!("the stream did not end within {READ:?}"));
    }
}

/// A client of one stream: its endpoint and a way to POST there.
struct SseClient {
    stream: SseStream,
    endpoint: String,
    http: reqwest::Client,
    token: Option<String>,
}

impl SseClient {
    async fn connect(gw: &Gateway, path: &str) -> SseClient {
        Self::connect_as(gw, path, None).await
    }

    async fn connect_as(gw: &Gateway, path: &str, token: Option<&str>) -> SseClient {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = bearer
            .iter()
            .map(|b| ("authorization", b.as_str()))
            .collect();
        let mut stream = SseStream::open(&gw.url(path), &headers).await;
        assert_eq!(stream.status, 200);
        let endpoint = gw.url(&stream.endpoint().await);
        SseClient {
            stream,
            endpoint,
            http: reqwest::Client::new(),
            token: token.map(str::to_owned),
        }
    }

    async fn post(&self, msg: &Value) -> (u16, String) {
        self.post_raw(&self.endpoint, msg.to_string()).await
    }

    async fn post_raw(&self, url: &str, body: String) -> (u16, String) {
        let mut req = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .body(body);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    }

    /// `initialize` (2024-11-05) and `notifications/initialized`: the result.
    async fn initialize(&mut self) -> Value {
        let (status, body) = self.post(&init(1)).await;
        assert_eq!(status, 202, "{body}");
        let answer = self.stream.message().await;
        assert_eq!(answer["id"], 1, "{answer}");
        let (status, _) = self
            .post(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .await;
        assert_eq!(status, 202);
        answer["result"].clone()
    }

    /// A request, and its answer from the stream.
    async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        let (status, body) = self
            .post(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
            .await;
        assert_eq!(status, 202, "{body}");
        // Notifications may come first (a reload's list changes, say).
        loop {
            let answer = self.stream.message().await;
            if answer.get("id").is_some() {
                assert_eq!(answer["id"], id, "{answer}");
                return answer;
            }
        }
    }
}

impl SseClient {
    /// `tools/list`'s names.
    async fn tool_names(&mut self, id: u64) -> Vec<String> {
        let tools = self.request(id, "tools/list", json!({})).await;
        let tools = tools["result"]["tools"].as_array().unwrap();
        tools
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// `demo__echo` of `text`, which must come back.
    async fn echo(&mut self, id: u64, text: &str) {
        let args = json!({"name":"demo__echo","arguments":{"text":text}});
        let called = self.request(id, "tools/call", args).await;
        assert_eq!(called["result"]["content"][0]["text"], text, "{called}");
    }
}

/// A request that has no params.
fn bare(id: u64, method: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":method})
}

/// `demo__sleep_ms` for `ms`, reporting progress.
fn slow_call(id: u64, ms: u64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
        "name":"demo__sleep_ms","arguments":{"ms":ms},"_meta":{"progressToken":"p"}}})
}

fn init(id: u64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{
        "protocolVersion":"2024-11-05","capabilities":{},
        "clientInfo":{"name":"sse-test","version":"1"}}})
}

/// The endpoint event names the message endpoint with an unguessable id;
/// `initialize`, `tools/list` and `tools/call` are POSTed there (202) and
/// answered on the stream, as the demo backend answers them on `/mcp`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_list_and_call_over_the_stream() {
    let gw = Gateway::start(&demo_backend("demo"));
    let mut client = SseClient::connect(&gw, "/sse").await;
    let headers = &client.stream.headers;
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert_eq!(headers["x-accel-buffering"], "no");
    let id = client
        .endpoint
        .strip_prefix(&gw.url("/messages?sessionId="))
        .unwrap_or_else(|| panic!("endpoint {}", client.endpoint))
        .to_owned();
    assert!(
        id.len() >= 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    let other = SseClient::connect(&gw, "/sse").await;
    assert_ne!(other.endpoint, client.endpoint);

    let result = client.initialize().await;
    assert_eq!(result["protocolVersion"], "2024-11-05");
    assert_eq!(result["serverInfo"]["name"], "sluice");
    // One session per stream: a second `initialize` is refused.
    let (status, body) = client.post(&init(5)).await;
    assert_eq!(status, 400, "{body}");
    let names = client.tool_names(2).await;
    assert!(names.iter().any(|n| n == "demo__echo"), "{names:?}");
    client.echo(3, "over sse").await;
    // Progress, then the result, on the one stream.
    let (status, _) = client.post(&slow_call(4, 50)).await;
    assert_eq!(status, 202);
    let progress = client.stream.message().await;
    assert_eq!(progress["method"], "notifications/progress", "{progress}");
    assert_eq!(progress["params"]["progressToken"], "p");
    loop {
        let m = client.stream.message().await;
        if m["id"] == 4 {
            assert!(m["result"].is_object(), "{m}");
            break;
        }
        assert_eq!(m["method"], "notifications/progress", "{m}");
    }
    assert_eq!(gw.metrics().get("sluice_client_sessions_live"), 1.0);
}

/// `/ns/{namespace}/sse` names its own message endpoint and serves that
/// namespace only; its id is unknown at another namespace's endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_has_its_own_stream_and_endpoint() {
    let toml = format!(
        "{}{}[namespaces.default]\nbackends = [\"demo\"]\n[namespaces.other]\nbackends = [\"solo\"]\n",
        demo_backend("demo"),
        demo_backend("solo"),
    );
    let gw = Gateway::start(&toml);
    let mut client = SseClient::connect(&gw, "/ns/other/sse").await;
    assert!(
        client
            .endpoint
            .starts_with(&gw.url("/ns/other/messages?sessionId=")),
        "{}",
        client.endpoint
    );
    client.initialize().await;
    let names = client.tool_names(2).await;
    assert!(names.iter().any(|n| n == "solo__echo"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("demo__")), "{names:?}");
    let query = client.endpoint.split_once('?').unwrap().1.to_owned();
    let elsewhere = gw.url(&format!("/messages?{query}"));
    let (status, _) = client.post_raw(&elsewhere, init(9).to_string()).await;
    assert_eq!(status, 404);
    let unknown = SseStream::open(&gw.url("/ns/nope/sse"), &[]).await;
    assert_eq!(unknown.status, 404);
}

/// The message endpoint refuses as `/mcp` does: no `sessionId` 400, an
/// unknown one 404, bad JSON the same parse error, a body past
/// `max_body_bytes` 413, a body that is not JSON by its type 415.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_message_endpoint_refuses_as_mcp_does() {
    let toml = format!("[server]\nmax_body_bytes = 4096\n{}", demo_backend("demo"));
    let gw = Gateway::start(&toml);
    let client = SseClient::connect(&gw, "/sse").await;
    let (status, body) = client
        .post_raw(&gw.url("/messages"), init(1).to_string())
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("sessionId"), "{body}");
    let (status, body) = client
        .post_raw(
            &gw.url("/messages?sessionId=0123456789abcdef0123456789abcdef"),
            init(1).to_string(),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["code"],
        -32001
    );

    let bad = r#"{"jsonrpc":"2.0","id":1,"method":"#.to_owned();
    let (status, body) = client.post_raw(&client.endpoint, bad.clone()).await;
    let mcp = support::Http::new(gw.url("/mcp"));
    let on_mcp = mcp
        .post_raw(
            &[
                ("content-type", "application/json"),
                ("accept", support::ACCEPT_BOTH),
            ],
            bad,
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!((status, body), (on_mcp.status, on_mcp.body));

    let big = json!({"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"x".repeat(5000)}});
    let (status, _) = client.post(&big).await;
    assert_eq!(status, 413);
    let resp = reqwest::Client::new()
        .post(&client.endpoint)
        .header("content-type", "text/plain")
        .body(init(1).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 415);
}

/// With `[auth]`: the stream needs a token, so does each POST, and a POST
/// with another principal's token does not find the stream (404).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_post_must_be_the_streams_principal() {
    let toml = format!(
        "[auth]\nbearer_tokens_env = \"T\"\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start_with_env(&toml, &[("T", "alice-token,bob-token")]);
    let anonymous = SseStream::open(&gw.url("/sse"), &[]).await;
    assert_eq!(anonymous.status, 401);
    let mut alice = SseClient::connect_as(&gw, "/sse", Some("alice-token")).await;
    let mut bob = SseClient {
        stream: SseStream::open(&gw.url("/sse"), &[("authorization", "Bearer bob-token")]).await,
        endpoint: alice.endpoint.clone(),
        http: reqwest::Client::new(),
        token: Some("bob-token".into()),
    };
    bob.stream.endpoint().await;
    let (status, _) = bob.post(&init(1)).await;
    assert_eq!(status, 404, "bob found alice's stream");
    bob.token = None;
    let (status, _) = bob.post(&init(1)).await;
    assert_eq!(status, 401);
    alice.initialize().await;
    alice.echo(2, "mine").await;
    // Bob's POST after initialize is refused too, and alice's session is untouched.
    let (status, _) = bob.post(&bare(3, "tools/list")).await;
    assert_eq!(status, 401);
    bob.token = Some("bob-token".into());
    let (status, _) = bob.post(&bare(3, "tools/list")).await;
    assert_eq!(status, 404);
    alice.tool_names(4).await;
}

/// The stream's end ends its session as a DELETE would, with the
/// per-session backend session it opened; its id is then unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_streams_end_ends_its_session_and_backend_session() {
    let toml = format!("{}isolation = \"per-session\"\n", demo_backend("demo"));
    let gw = Gateway::start(&toml);
    let mut client = SseClient::connect(&gw, "/sse").await;
    client.initialize().await;
    client
        .request(
            2,
            "tools/call",
            json!({"name":"demo__counter","arguments":{}}),
        )
        .await;
    let backend = r#"sluice_backend_sessions_live{backend="demo"}"#;
    let m = gw.metrics();
    assert_eq!(m.get("sluice_client_sessions_live"), 1.0);
    assert_eq!(m.get(backend), 1.0);
    let SseClient {
        stream,
        endpoint,
        http,
        token,
    } = client;
    drop(stream);
    wait_until(READ, || {
        let m = gw.metrics();
        m.get("sluice_client_sessions_live") == 0.0 && m.get(backend) == 0.0
    });
    let m = gw.metrics();
    assert_eq!(
        m.get_or_untouched(r#"sluice_client_sessions_closed_total{reason="delete"}"#),
        1.0
    );
    let gone = SseClient {
        stream: SseStream::open(&gw.url("/sse"), &[]).await,
        endpoint,
        http,
        token,
    };
    let (status, _) = gone.post(&bare(3, "tools/list")).await;
    assert_eq!(status, 404);
}

/// The rebinding guard covers the stream and its endpoint: a foreign Origin
/// or Host is refused (403) on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_and_origin_are_checked() {
    let gw = Gateway::start(&demo_backend("demo"));
    let origin = SseStream::open(&gw.url("/sse"), &[("origin", "http://evil.example")]).await;
    assert_eq!(origin.status, 403);
    let host = SseStream::open(&gw.url("/sse"), &[("host", "evil.example")]).await;
    assert_eq!(host.status, 403);
    let client = SseClient::connect(&gw, "/sse").await;
    for (name, value) in [("origin", "http://evil.example"), ("host", "evil.example")] {
        let resp = reqwest::Client::new()
            .post(&client.endpoint)
            .header("content-type", "application/json")
            .header(name, value)
            .body(init(1).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 403, "{name}");
    }
    let local = SseStream::open(&gw.url("/sse"), &[("origin", "http://localhost:1")]).await;
    assert_eq!(local.status, 200);
}

/// A stream never initialized ends at the idle TTL; one initialized lives
/// on while it is read (its keep-alives refresh its session) and serves
/// after more than the TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_idle_ttl_ends_an_unused_stream_and_keep_alives_hold_a_read_one() {
    let toml = format!(
        "[server]\nsession_idle_ttl = \"1s\"\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    let mut idle = SseClient::connect(&gw, "/sse").await;
    let mut used = SseClient::connect(&gw, "/sse").await;
    used.initialize().await;
    idle.stream.until_end().await;
    let (status, _) = idle.post(&init(1)).await;
    assert_eq!(status, 404);
    // Keep-alives come every third of the TTL: six span two TTLs.
    let mut beats = 0;
    while beats < 6 {
        match used.stream.next().await {
            Some(Ev::Comment) => beats += 1,
            other => panic!("expected keep-alives, got {other:?}"),
        }
    }
    used.tool_names(2).await;
}

/// The per-principal cap as on `/mcp`: a new session past it evicts the
/// principal's least recently used idle one (its stream ends, its id is
/// unknown), and with every one of them busy the new `initialize` is
/// refused with the status `/mcp` gives (503, Retry-After).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_principal_cap_holds_as_on_mcp() {
    let toml = format!(
        "[server]\nmax_sessions_per_principal = 1\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    let mut first = SseClient::connect(&gw, "/sse").await;
    first.initialize().await;
    let mut second = SseClient::connect(&gw, "/sse").await;
    second.initialize().await;
    first.stream.until_end().await;
    let (status, _) = first.post(&bare(2, "tools/list")).await;
    assert_eq!(status, 404);
    assert_eq!(
        gw.metrics()
            .get_or_untouched(r#"sluice_client_sessions_closed_total{reason="principal_cap"}"#),
        1.0
    );
    // `second` busy with a call in flight (its first progress seen).
    let (status, _) = second.post(&slow_call(3, 60_000)).await;
    assert_eq!(status, 202);
    assert_eq!(
        second.stream.message().await["method"],
        "notifications/progress"
    );
    let third = SseClient::connect(&gw, "/sse").await;
    let resp = third
        .http
        .post(&third.endpoint)
        .header("content-type", "application/json")
        .body(init(1).to_string())
        .send()
        .await
        .unwrap();
    let mcp = support::Http::new(gw.url("/mcp"));
    let on_mcp = mcp.post(None, &support::init_request(1)).await;
    assert_eq!(on_mcp.status, 503, "{}", on_mcp.body);
    assert_eq!(resp.status().as_u16(), on_mcp.status);
    assert!(resp.headers().contains_key("retry-after"));
    // A refused `initialize` may be tried again once there is room.
    drop(second);
    wait_until(READ, || {
        gw.metrics().get("sluice_client_sessions_live") == 0.0
    });
    let mut third = third;
    third.initialize().await;
}

/// A client that stops reading is dropped at `write_timeout`: its queued
/// answers stall the stream, the connection is closed, and its session
/// ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_dropped() {
    let toml = format!("[server]\nwrite_timeout = \"1s\"\n{}", demo_backend("demo"));
    let gw = Gateway::start(&toml);
    let mut client = SseClient::connect(&gw, "/sse").await;
    client.initialize().await;
    assert_eq!(gw.metrics().get("sluice_client_sessions_live"), 1.0);
    // Up to 48 answers of 512 KiB, far past what the sockets' buffers
    // hold: the stream stalls and is dropped before they are all asked.
    let text = "x".repeat(512 * 1024);
    for id in 0..48 {
        let (status, body) = client
            .post(
                &json!({"jsonrpc":"2.0","id":id + 10,"method":"tools/call","params":{
                "name":"demo__echo","arguments":{"text":text}}}),
            )
            .await;
        if status == 404 {
            break;
        }
        assert_eq!(status, 202, "{body}");
    }
    wait_until(Duration::from_secs(30), || {
        gw.metrics().get("sluice_client_sessions_live") == 0.0
    });
    let (status, _) = client.post(&bare(1, "tools/list")).await;
    assert_eq!(status, 404);
    drop(client);
}

/// Shutdown closes an open stream (the gateway exits 0 without waiting out
/// its grace for it), and ends its session as shutdown ends every session.
/// The grace is an hour: a stream that held the shutdown would outlast
/// `stop`'s wait, and `stop` would kill the gateway (no exit code).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_the_stream() {
    let toml = format!(
        "[server]\nshutdown_grace = \"1h\"\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    let mut client = SseClient::connect(&gw, "/sse").await;
    client.initialize().await;
    let code = tokio::task::spawn_blocking(move || gw.stop())
        .await
        .unwrap();
    assert_eq!(code, Some(0));
    client.stream.until_end().await;
}

/// What the session's GET stream carries reaches the client's one stream
/// (a reload's list change), and that stream holds the principal's one
/// stream slot for both: a second stream past `max_streams_per_principal`
/// is refused as a second GET stream would be (429).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_stream_comes_on_the_one_slot() {
    let head = "[auth]\nbearer_tokens_env = \"T\"\n[limits]\nmax_streams_per_principal = 1\n";
    let toml = format!("{head}{}", demo_backend("demo"));
    let gw = Gateway::start_with_env(&toml, &[("T", "alice-token")]);
    let mut client = SseClient::connect_as(&gw, "/sse", Some("alice-token")).await;
    client.initialize().await;
    let second = SseStream::open(&gw.url("/sse"), &[("authorization", "Bearer alice-token")]).await;
    assert_eq!(second.status, 429);
    let names = client.tool_names(2).await;
    assert!(!names.iter().any(|n| n.starts_with("more__")), "{names:?}");
    reload(&gw, &format!("{toml}{}", demo_backend("more")), "ok");
    let change = client.stream.message().await;
    assert_eq!(
        change["method"], "notifications/tools/list_changed",
        "{change}"
    );
    let names = client.tool_names(3).await;
    assert!(names.iter().any(|n| n == "more__echo"), "{names:?}");
}

/// Streams nobody initializes hold at most a quarter of `max_connections`
/// (their connections are never displaced): past that the one that has
/// waited longest is closed, and an initialized stream is never among them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_never_initialized_give_way() {
    let toml = format!(
        "[server]\nmax_connections = 12\nmax_connections_per_peer = 12\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    let mut used = SseClient::connect(&gw, "/sse").await;
    used.initialize().await;
    let mut first = SseClient::connect(&gw, "/sse").await;
    let mut second = SseClient::connect(&gw, "/sse").await;
    let mut third = SseClient::connect(&gw, "/sse").await;
    // A fourth waiting stream is one past 12 / 4: the first gives way.
    let fourth = SseClient::connect(&gw, "/sse").await;
    first.stream.until_end().await;
    let (status, _) = first.post(&init(1)).await;
    assert_eq!(status, 404);
    for late in [&mut second, &mut third] {
        late.initialize().await;
    }
    used.tool_names(2).await;
    drop(fourth);
}
