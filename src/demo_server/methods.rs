//! What each method answers, `tools/*` aside: `initialize`, the prompt,
//! the resources and completions.

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::State;
use super::tools::{call_tool, list_tools};
use super::wire::{Outbox, RpcError, invalid_params, parse};

const SUPPORTED_VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];
const LATEST_VERSION: &str = "2025-11-25";

const INSTRUCTIONS: &str = "Demo server built into sluice. Tools: echo, add, sleep_ms \
    (reports progress when given a progressToken), counter (per session with this server: \
    behind a gateway that shares it, one count for all the gateway's clients).";
const README_URI: &str = "demo://readme";
const README_TEXT: &str = "sluice demo server: tools echo, add, sleep_ms, counter; \
    prompt greeting; resources demo://readme and demo://echo/{text}.\n";
const ECHO_PREFIX: &str = "demo://echo/";

const METHOD_NOT_FOUND: i64 = -32601;

/// The legacy-era code for an unknown resource URI (`server/resources.mdx`).
const RESOURCE_NOT_FOUND: i64 = -32002;

pub(super) async fn route(
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
