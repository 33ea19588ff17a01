//! The wire: JSON-RPC errors and params as this server reads and writes
//! them, and every line out written whole by one writer loop (what comes
//! in is `read.rs`'s).

use std::io;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::diag;

pub(super) const PARSE_ERROR: i64 = -32700;
pub(super) const INVALID_REQUEST: i64 = -32600;

const INVALID_PARAMS: i64 = -32602;

/// Complete JSON lines on their way to the writer loop.
pub(super) type Outbox = mpsc::Sender<String>;

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
pub(super) async fn reply(out: &Outbox, id: &RawValue, outcome: Result<Value, RpcError>) {
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
