//! The tools: `echo`, `add`, `sleep_ms` (with progress) and `counter`,
//! and their list, paged when configured.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value, json};

use super::wire::{Outbox, RpcError, invalid_params, send};
use super::{Config, State};

const CURSOR_PREFIX: &str = "demo-tools:";

/// `sleep_ms` reports progress at the start and after each of these slices.
const PROGRESS_STEPS: u64 = 4;
/// Upper bound for `sleep_ms`, so deadline arithmetic cannot overflow.
const MAX_SLEEP_MS: u64 = 86_400_000;

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
        json!({ "name": "counter", "description": "Increments and returns a counter kept per session with this server (behind a gateway that shares one backend session, a count across its clients).",
            "inputSchema": object_schema(json!({}), &[]) }),
    ]
}

/// Pages only when configured, so the gateway's cursor merging can be tested
/// against a real multi-page backend.
pub(super) fn list_tools(params: &Value, config: &Config) -> Result<Value, RpcError> {
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
pub(super) struct CallParams {
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

pub(super) async fn call_tool(
    params: CallParams,
    out: &Outbox,
    state: &State,
) -> Result<Value, RpcError> {
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

fn text_result(text: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": text }] })
}

fn tool_error(text: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": text }], "isError": true })
}
