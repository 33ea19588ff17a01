//! What comes in: newline-delimited JSON-RPC read one line at a time,
//! each request run on its own task (answered through `methods`) and
//! cancellable by its id.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::task::{AbortHandle, JoinSet};

use super::methods::route;
use super::wire::{INVALID_REQUEST, Outbox, PARSE_ERROR, RpcError, parse, reply};
use super::{State, diag};

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
