//! The wire: newline-delimited JSON-RPC read one line at a time, each
//! request run on its own task and cancellable by its id, every line out
//! written whole by one writer loop.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

use super::methods::route;
use super::{State, diag};

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

const INVALID_PARAMS: i64 = -32602;

/// Complete JSON lines on their way to the writer loop.
pub(super) type Outbox = mpsc::Sender<String>;

pub(super) async fn read_loop(
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

/// Absent or `null` params read as `{}`, so a bare request works for methods
/// whose params are all optional.
pub(super) fn parse<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, RpcError> {
    let text = params
        .map(RawValue::get)
        .filter(|p| *p != "null")
        .unwrap_or("{}");
    serde_json::from_str(text).map_err(|e| invalid_params(format!("Invalid params: {e}")))
}

/// A JSON-RPC error object as it goes on the wire.
#[derive(Debug, Serialize)]
pub(super) struct RpcError {
    pub(super) code: i64,
    pub(super) message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) data: Option<Value>,
}

impl RpcError {
    pub(super) fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
}

pub(super) fn invalid_params(message: impl Into<String>) -> RpcError {
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

pub(super) async fn send(out: &Outbox, msg: &impl Serialize) {
    // serde_json escapes control characters and raw values come from single
    // input lines, so a serialized message never contains a newline.
    match serde_json::to_string(msg) {
        // Fails only once the writer is gone, i.e. while shutting down.
        Ok(line) => _ = out.send(line).await,
        Err(e) => diag(format_args!("cannot serialize a message: {e}")),
    }
}

pub(super) async fn write_loop(
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
