//! `sluice demo-server`: a small MCP server over stdio, built into the binary
//! so `sluice serve` works with no config and the gateway has a test backend.
//!
//! Wire: newline-delimited JSON-RPC 2.0 (the MCP stdio transport), legacy
//! `initialize` era (2025-03-26 .. 2025-11-25).
//!
//! Invariants:
//! - stdout carries only protocol lines; diagnostics go to stderr.
//! - Every request runs on its own task, because the gateway multiplexes many
//!   clients over one child and a slow `sleep_ms` must not delay a `ping`.
//! - Only the writer loop writes output, one whole line at a time, so the
//!   output of concurrent tasks never interleaves.
//! - Request ids and progress tokens go back as the exact bytes received.
//! - State (the `counter`) lives for one `serve` call: one backend session.
//! - The lifecycle is not enforced (requests before `initialize` are served):
//!   a test backend should not be the strict party in a gateway test.

use std::collections::HashMap;
use std::io::{self, Read as _, Write as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::io::{BufReader, DuplexStream};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{AbortHandle, JoinSet};

#[cfg(test)]
mod tests;

const SUPPORTED_VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];
const LATEST_VERSION: &str = "2025-11-25";
const PAGE_SIZE_ENV: &str = "SLUICE_DEMO_PAGE_SIZE";
const INSTRUCTIONS: &str = "Demo server built into sluice. Tools: echo, add, sleep_ms \
    (reports progress when given a progressToken), counter (per session).";
const README_URI: &str = "demo://readme";
const README_TEXT: &str = "sluice demo server: tools echo, add, sleep_ms, counter; \
    prompt greeting; resources demo://readme and demo://echo/{text}.\n";
const ECHO_PREFIX: &str = "demo://echo/";
const CURSOR_PREFIX: &str = "demo-tools:";

/// Lines queued for output before request tasks wait: bounds memory when
/// whoever reads our stdout is slow.
const OUTBOX_CAPACITY: usize = 256;
/// Buffer of the pipes between the stdio threads and `serve`.
const PIPE_BUFFER: usize = 64 * 1024;
/// `sleep_ms` reports progress at the start and after each of these slices.
const PROGRESS_STEPS: u64 = 4;
/// Upper bound for `sleep_ms`, so deadline arithmetic cannot overflow.
const MAX_SLEEP_MS: u64 = 86_400_000;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
/// The legacy-era code for an unknown resource URI (`server/resources.mdx`).
const RESOURCE_NOT_FOUND: i64 = -32002;

/// Serves MCP on stdin/stdout until stdin reaches EOF.
pub async fn run() -> io::Result<()> {
    // The crate does not enable tokio's `io-std`, so plain threads bridge the
    // blocking std handles to in-memory pipes. Threads, not `spawn_blocking`:
    // a read parked on stdin must not hold up runtime shutdown.
    let (stdin_pipe, server_in) = tokio::io::duplex(PIPE_BUFFER);
    let (server_out, stdout_pipe) = tokio::io::duplex(PIPE_BUFFER);
    let (written_tx, written) = oneshot::channel();
    let (rt_in, rt_out) = (Handle::current(), Handle::current());
    let stdin = move || pump_stdin(&rt_in, stdin_pipe);
    let stdout = move || _ = written_tx.send(pump_stdout(&rt_out, stdout_pipe));
    thread::Builder::new()
        .name("demo-stdin".into())
        .spawn(stdin)?;
    thread::Builder::new()
        .name("demo-stdout".into())
        .spawn(stdout)?;
    let served = serve(server_in, server_out).await;
    // `serve` dropped its end of the pipe, so the stdout thread ends once all
    // is written; waiting for it means no answer is lost at exit.
    served.and(written.await.unwrap_or(Ok(())))
}

fn pump_stdin(runtime: &Handle, mut pipe: DuplexStream) {
    let mut buf = vec![0; PIPE_BUFFER];
    loop {
        match io::stdin().read(&mut buf) {
            // EOF, or `serve` is gone: dropping `pipe` passes the end along.
            Ok(0) => return,
            Ok(n) if runtime.block_on(pipe.write_all(&buf[..n])).is_err() => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return diag(format_args!("cannot read stdin: {e}")),
        }
    }
}

fn pump_stdout(runtime: &Handle, mut pipe: DuplexStream) -> io::Result<()> {
    let mut buf = vec![0; PIPE_BUFFER];
    let mut stdout = io::stdout();
    loop {
        let n = runtime.block_on(pipe.read(&mut buf))?;
        if n == 0 {
            return Ok(());
        }
        // Flush per chunk: progress is only useful while the work still runs.
        stdout.write_all(&buf[..n])?;
        stdout.flush()?;
    }
}

/// Serves one session over any byte streams, with settings from the environment.
pub(crate) async fn serve<R, W>(reader: R, writer: W) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    serve_with(reader, writer, Config::from_env()).await
}

/// Settings read once at startup, apart so tests need not touch the environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Config {
    /// `tools/list` page size; `None` returns every tool in one page.
    page_size: Option<usize>,
}

impl Config {
    fn from_env() -> Self {
        let raw = std::env::var(PAGE_SIZE_ENV).ok();
        let page_size = raw
            .as_deref()
            .and_then(|r| r.trim().parse().ok())
            .filter(|&n| n > 0);
        if let (Some(raw), None) = (&raw, page_size) {
            diag(format_args!(
                "ignoring {PAGE_SIZE_ENV}={raw:?}: not a positive integer"
            ));
        }
        Config { page_size }
    }
}

pub(crate) async fn serve_with<R, W>(reader: R, writer: W, config: Config) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (out, rx) = mpsc::channel(OUTBOX_CAPACITY);
    let state = Arc::new(State {
        config,
        counter: AtomicU64::new(0),
    });
    // Joined rather than spawned, so callers' streams need not be `Send + 'static`.
    let (read, write) = tokio::join!(read_loop(reader, out, state), write_loop(writer, rx));
    read.and(write)
}

/// Per-session state shared by request tasks.
#[derive(Debug)]
struct State {
    config: Config,
    counter: AtomicU64,
}

/// Complete JSON lines on their way to the writer loop.
type Outbox = mpsc::Sender<String>;

async fn read_loop(
    reader: impl AsyncRead + Unpin,
    out: Outbox,
    state: Arc<State>,
) -> io::Result<()> {
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    let mut inflight = InFlight::default();
    let result = loop {
        line.clear();
        // Bytes, not `lines()`: invalid UTF-8 earns a parse error, not the end of the session.
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) => break Ok(()),
            Ok(_) => {}
            Err(e) => break Err(e),
        }
        inflight.reap();
        dispatch(&line, &out, &state, &mut inflight).await;
    };
    // EOF: finish what was accepted, so one-shot piped use still gets its
    // answers; a client in a hurry cancels first or kills the process.
    inflight.by_id.clear();
    while inflight.tasks.join_next().await.is_some() {}
    result
}

/// Requests being handled, so `notifications/cancelled` can find them.
#[derive(Default)]
struct InFlight {
    tasks: JoinSet<()>,
    /// Canonical request id (see [`id_key`]) to its task.
    by_id: HashMap<String, AbortHandle>,
}

impl InFlight {
    /// Forgets finished tasks, so both collections stay as small as the work
    /// actually running. A panicking task was already reported by the panic hook.
    fn reap(&mut self) {
        while self.tasks.try_join_next().is_some() {}
        self.by_id.retain(|_, task| !task.is_finished());
    }

    fn cancel(&mut self, key: &str) {
        // Aborting drops the task before it answers: a cancelled request gets no response.
        if let Some(task) = self.by_id.remove(key) {
            task.abort();
        }
    }
}

/// One incoming line, before classification.
#[derive(Deserialize)]
struct Incoming {
    jsonrpc: String,
    // `some_raw` keeps `"id": null` visible; plain `Option` would read it as absent.
    #[serde(default, deserialize_with = "some_raw")]
    id: Option<Box<RawValue>>,
    method: Option<String>,
    params: Option<Box<RawValue>>,
}

fn some_raw<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

async fn dispatch(line: &[u8], out: &Outbox, state: &Arc<State>, inflight: &mut InFlight) {
    let line = line.trim_ascii();
    if line.is_empty() {
        return;
    }
    let invalid = || Err(RpcError::new(INVALID_REQUEST, "Invalid Request"));
    let msg = match serde_json::from_slice::<Incoming>(line) {
        // Derived structs also accept JSON arrays; only objects are messages.
        Ok(msg) if line.starts_with(b"{") && msg.jsonrpc == "2.0" => msg,
        Ok(_) => return reply(out, RawValue::NULL, invalid()).await,
        Err(e) => {
            diag(format_args!("bad input line: {e}"));
            let (code, what) = if e.is_data() {
                (INVALID_REQUEST, "Invalid Request")
            } else {
                (PARSE_ERROR, "Parse error")
            };
            let err = RpcError::new(code, format!("{what}: {e}"));
            return reply(out, RawValue::NULL, Err(err)).await;
        }
    };
    match (msg.method, msg.id) {
        (Some(method), Some(id)) if is_valid_id(&id) => {
            let key = id_key(&id);
            let (out, state) = (out.clone(), Arc::clone(state));
            let task = inflight.tasks.spawn(async move {
                let outcome = route(&method, msg.params.as_deref(), &out, &state).await;
                reply(&out, &id, outcome).await;
            });
            inflight.by_id.insert(key, task);
        }
        (Some(method), None) => notification(&method, msg.params.as_deref(), inflight),
        // A response to a server-to-client request; this server never sends any.
        (None, Some(_)) => {}
        // No method, or an id that is null, an object or an array.
        _ => reply(out, RawValue::NULL, invalid()).await,
    }
}

/// MCP ids are strings or numbers.
fn is_valid_id(id: &RawValue) -> bool {
    matches!(id.get().as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9'))
}

/// The id as `notifications/cancelled` will name it: re-serialized, so
/// spellings such as `"\u0041"` and `"A"` match.
fn id_key(id: &RawValue) -> String {
    serde_json::from_str::<Value>(id.get()).map_or_else(|_| id.get().to_owned(), |v| v.to_string())
}

fn notification(method: &str, params: Option<&RawValue>, inflight: &mut InFlight) {
    // `initialized`, `roots/list_changed`, ...: nothing here depends on them.
    if method == "notifications/cancelled" {
        match parse::<Value>(params) {
            Ok(p) => inflight.cancel(&p["requestId"].to_string()),
            Err(e) => diag(format_args!("ignoring bad cancellation: {}", e.message)),
        }
    }
}

async fn route(
    method: &str,
    params: Option<&RawValue>,
    out: &Outbox,
    state: &State,
) -> Result<Value, RpcError> {
    match method {
        "initialize" => Ok(initialize(&parse(params)?)),
        "ping" | "logging/setLevel" => Ok(json!({})),
        "tools/list" => list_tools(&parse(params)?, &state.config),
        "tools/call" => call_tool(parse(params)?, out, state).await,
        "prompts/list" => Ok(json!({ "prompts": [{
            "name": "greeting",
            "description": "Greets someone by name.",
            "arguments": [{ "name": "name", "description": "Who to greet.", "required": true }],
        }]})),
        "prompts/get" => get_prompt(&parse(params)?),
        "resources/list" => Ok(json!({ "resources": [{
            "uri": README_URI, "name": "readme", "mimeType": "text/plain",
            "description": "What this demo server offers.",
        }]})),
        "resources/templates/list" => Ok(json!({ "resourceTemplates": [{
            "uriTemplate": "demo://echo/{text}", "name": "echo", "mimeType": "text/plain",
            "description": "Reads back the text in the URI.",
        }]})),
        "resources/read" => read_resource(&parse(params)?),
        "completion/complete" => Ok(complete(&parse(params)?)),
        other => Err(RpcError::new(
            METHOD_NOT_FOUND,
            format!("Method not found: {other}"),
        )),
    }
}

/// Absent or `null` params read as `{}`, so a bare request works for methods
/// whose params are all optional.
fn parse<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, RpcError> {
    let text = params
        .map(RawValue::get)
        .filter(|p| *p != "null")
        .unwrap_or("{}");
    serde_json::from_str(text).map_err(|e| invalid_params(format!("Invalid params: {e}")))
}

fn str_param<'a>(params: &'a Value, key: &str) -> Result<&'a str, RpcError> {
    let found = params[key].as_str();
    found.ok_or_else(|| invalid_params(format!("Invalid params: `{key}` must be a string")))
}

fn initialize(params: &Value) -> Value {
    // Echo a version we speak, else offer our latest and let the client decide.
    let asked = params["protocolVersion"].as_str();
    let version = asked
        .filter(|v| SUPPORTED_VERSIONS.contains(v))
        .unwrap_or(LATEST_VERSION);
    json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": { "listChanged": true },
            "prompts": { "listChanged": false },
            "resources": { "subscribe": false, "listChanged": false },
            "completions": {},
            "logging": {},
        },
        "serverInfo": { "name": "sluice-demo", "version": env!("CARGO_PKG_VERSION") },
        "instructions": INSTRUCTIONS,
    })
}

fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": properties, "required": required })
}

fn tool_definitions() -> [Value; 4] {
    let text = json!({ "text": { "type": "string", "description": "Text to return." } });
    let ms = json!({ "ms": { "type": "integer", "minimum": 0, "maximum": MAX_SLEEP_MS } });
    let operands = json!({ "a": { "type": "number" }, "b": { "type": "number" } });
    [
        json!({ "name": "echo", "description": "Returns the given text.",
            "inputSchema": object_schema(text, &["text"]) }),
        json!({ "name": "add", "description": "Adds two numbers.",
            "inputSchema": object_schema(operands, &["a", "b"]),
            "outputSchema": object_schema(json!({ "sum": { "type": "number" } }), &["sum"]) }),
        json!({ "name": "sleep_ms", "description": "Sleeps ms milliseconds, reporting progress.",
            "inputSchema": object_schema(ms, &["ms"]) }),
        json!({ "name": "counter", "description": "Increments and returns a per-session counter.",
            "inputSchema": object_schema(json!({}), &[]) }),
    ]
}

/// Pages only when configured, so the gateway's cursor merging can be tested
/// against a real multi-page backend.
fn list_tools(params: &Value, config: &Config) -> Result<Value, RpcError> {
    let tools = tool_definitions();
    let start = match params.get("cursor").filter(|c| !c.is_null()) {
        None => 0,
        Some(cursor) => (cursor.as_str())
            .and_then(|c| c.strip_prefix(CURSOR_PREFIX)?.parse().ok())
            .filter(|&n| n <= tools.len())
            .ok_or_else(|| invalid_params("Invalid cursor"))?,
    };
    let end = start
        .saturating_add(config.page_size.unwrap_or(tools.len()))
        .min(tools.len());
    let mut result = json!({ "tools": tools[start..end] });
    if end < tools.len() {
        result["nextCursor"] = json!(format!("{CURSOR_PREFIX}{end}"));
    }
    Ok(result)
}

#[derive(Deserialize)]
struct CallParams {
    name: String,
    #[serde(default)]
    arguments: Map<String, Value>,
    #[serde(default, rename = "_meta")]
    meta: Option<RequestMeta>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestMeta {
    // Raw, so the token goes back exactly as sent (`1.0` stays `1.0`).
    progress_token: Option<Box<RawValue>>,
}

async fn call_tool(params: CallParams, out: &Outbox, state: &State) -> Result<Value, RpcError> {
    let args = &params.arguments;
    // Bad arguments are tool errors (`isError`), which the model sees and can
    // fix; only an unknown tool is a protocol error.
    Ok(match params.name.as_str() {
        "echo" => match args.get("text").and_then(Value::as_str) {
            Some(text) => text_result(text),
            None => tool_error("echo needs `text`: a string"),
        },
        "add" => add(args),
        "sleep_ms" => {
            let token = params.meta.and_then(|m| m.progress_token);
            sleep_ms(args, token.as_deref(), out).await
        }
        "counter" => text_result(&(state.counter.fetch_add(1, Ordering::Relaxed) + 1).to_string()),
        other => return Err(invalid_params(format!("Unknown tool: {other}"))),
    })
}

fn add(args: &Map<String, Value>) -> Value {
    let (Some(Value::Number(a)), Some(Value::Number(b))) = (args.get("a"), args.get("b")) else {
        return tool_error("add needs `a` and `b`: numbers");
    };
    let Some(sum) = sum_numbers(a, b) else {
        return tool_error("the sum is out of range");
    };
    let mut result = text_result(&sum.to_string());
    result["structuredContent"] = json!({ "sum": sum });
    result
}

/// Adds exactly where possible, and returns whole sums as integers so they
/// print as `3`, not `3.0`.
fn sum_numbers(a: &Number, b: &Number) -> Option<Number> {
    let exact = a
        .as_i64()
        .zip(b.as_i64())
        .and_then(|(x, y)| x.checked_add(y));
    if let Some(sum) = exact {
        return Some(sum.into());
    }
    let sum = a.as_f64()? + b.as_f64()?;
    // Below 2^53 every whole f64 is an exact integer, so the cast invents no digits.
    if sum.fract() == 0.0 && sum.abs() < 9_007_199_254_740_992.0 {
        return Some((sum as i64).into());
    }
    Number::from_f64(sum)
}

/// `notifications/progress`, with the token kept raw.
#[derive(Serialize)]
struct Progress<'a> {
    jsonrpc: &'static str,
    method: &'static str,
    params: ProgressParams<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProgressParams<'a> {
    progress_token: &'a RawValue,
    progress: u64,
    total: u64,
    message: String,
}

async fn sleep_ms(args: &Map<String, Value>, token: Option<&RawValue>, out: &Outbox) -> Value {
    let ms = args
        .get("ms")
        .and_then(Value::as_u64)
        .filter(|&ms| ms <= MAX_SLEEP_MS);
    let Some(ms) = ms else {
        return tool_error(&format!(
            "sleep_ms needs `ms`: an integer, 0 to {MAX_SLEEP_MS}"
        ));
    };
    let start = tokio::time::Instant::now();
    // Step 0 reports at once (so even ms=0 reports); each later step after a
    // slice, timed from `start` so slow sends do not stretch the total.
    for step in 0..=PROGRESS_STEPS {
        let done = ms * step / PROGRESS_STEPS;
        tokio::time::sleep_until(start + Duration::from_millis(done)).await;
        if let Some(progress_token) = token {
            let message = format!("slept {done} of {ms}ms");
            let params = ProgressParams {
                progress_token,
                progress: step,
                total: PROGRESS_STEPS,
                message,
            };
            send(
                out,
                &Progress {
                    jsonrpc: "2.0",
                    method: "notifications/progress",
                    params,
                },
            )
            .await;
        }
    }
    text_result(&format!("slept {ms}ms"))
}

fn get_prompt(params: &Value) -> Result<Value, RpcError> {
    let prompt = str_param(params, "name")?;
    if prompt != "greeting" {
        return Err(invalid_params(format!("Unknown prompt: {prompt}")));
    }
    let name = params["arguments"]["name"].as_str();
    let name = name.ok_or_else(|| invalid_params("Missing required argument: name"))?;
    let text = format!("Hello, {name}!");
    Ok(json!({
        "description": "Greets someone by name.",
        "messages": [{ "role": "user", "content": { "type": "text", "text": text } }],
    }))
}

fn read_resource(params: &Value) -> Result<Value, RpcError> {
    let uri = str_param(params, "uri")?;
    let text = if uri == README_URI {
        README_TEXT.to_owned()
    } else if let Some(text) = uri.strip_prefix(ECHO_PREFIX) {
        // Verbatim, still percent-encoded if the client encoded it.
        text.to_owned()
    } else {
        let data = Some(json!({ "uri": uri }));
        return Err(RpcError {
            code: RESOURCE_NOT_FOUND,
            message: "Resource not found".into(),
            data,
        });
    };
    Ok(json!({ "contents": [{ "uri": uri, "mimeType": "text/plain", "text": text }] }))
}

fn complete(params: &Value) -> Value {
    let greeting_name = params["ref"]["type"] == "ref/prompt"
        && params["ref"]["name"] == "greeting"
        && params["argument"]["name"] == "name";
    let prefix = params["argument"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    let values: Vec<&str> = ["Alice", "Bob"]
        .into_iter()
        .filter(|v| greeting_name && v.to_lowercase().starts_with(&prefix))
        .collect();
    json!({ "completion": { "values": values, "total": values.len(), "hasMore": false } })
}

fn text_result(text: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": text }] })
}

fn tool_error(text: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": text }], "isError": true })
}

/// A JSON-RPC error object as it goes on the wire.
#[derive(Debug, Serialize)]
struct RpcError {
    code: i64,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<Value>,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
}

fn invalid_params(message: impl Into<String>) -> RpcError {
    RpcError::new(INVALID_PARAMS, message)
}

#[derive(Serialize)]
struct Response<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<RpcError>,
}

/// Answers `id`; `RawValue::NULL` when the id is unknown, as JSON-RPC asks.
async fn reply(out: &Outbox, id: &RawValue, outcome: Result<Value, RpcError>) {
    let (result, error) = match outcome {
        Ok(result) => (Some(result), None),
        Err(error) => (None, Some(error)),
    };
    send(
        out,
        &Response {
            jsonrpc: "2.0",
            id,
            result,
            error,
        },
    )
    .await;
}

async fn send(out: &Outbox, msg: &impl Serialize) {
    // serde_json escapes control characters and raw values come from single
    // input lines, so a serialized message never contains a newline.
    match serde_json::to_string(msg) {
        // Fails only once the writer is gone, i.e. while shutting down.
        Ok(line) => _ = out.send(line).await,
        Err(e) => diag(format_args!("cannot serialize a message: {e}")),
    }
}

async fn write_loop(
    mut writer: impl AsyncWrite + Unpin,
    mut rx: mpsc::Receiver<String>,
) -> io::Result<()> {
    let mut result = Ok(());
    while let Some(mut line) = rx.recv().await {
        // After a failure keep draining, so request tasks never block on a dead stdout.
        if result.is_err() {
            continue;
        }
        line.push('\n');
        // Flush per line: progress is only useful while the work still runs.
        result = match writer.write_all(line.as_bytes()).await {
            Ok(()) => writer.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = &result {
            diag(format_args!("cannot write output: {e}"));
        }
    }
    result
}

/// Straight to stderr, not `tracing`: stdout is the protocol stream, and this
/// mode must stay clean whatever subscriber the binary installed.
fn diag(args: std::fmt::Arguments<'_>) {
    _ = writeln!(io::stderr(), "sluice demo-server: {args}");
}
