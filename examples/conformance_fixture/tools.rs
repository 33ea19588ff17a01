//! The tool list, and the tools that are neither MRTR nor task fixtures: the
//! content tools both eras share, the legacy server-to-client request tools
//! (sampling, elicitation, logging, SSE polling) and the 2026-07-28
//! diagnostic tools (capability check, logLevel, listen triggers, headers).
#![allow(deprecated)] // sampling, elicitation and logging are deprecated by SEP-2577

use std::time::Duration;

use rmcp::{ErrorData, RoleServer, model::*, service::RequestContext};
use serde_json::{Value, json};

use crate::{
    catalog::{PNG_BASE64, WAV_BASE64},
    handler::Fixture,
    mrtr, tasks, url_elicitation,
};

pub(crate) fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("tool schema must be an object, got {other}"),
    }
}

fn no_args() -> JsonObject {
    object(json!({ "type": "object", "properties": {} }))
}

/// A tool without arguments.
pub(crate) fn tool(name: &'static str, description: &'static str) -> Tool {
    Tool::new(name, description, no_args())
}

/// SEP-1613 / SEP-2106: a 2020-12 schema whose keywords must survive
/// `tools/list` unchanged (`$schema`, `$defs`, `$anchor`, composition,
/// conditionals, `additionalProperties`).
fn json_schema_2020_12() -> JsonObject {
    object(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {
                    "street": { "type": "string" },
                    "city": { "type": "string" }
                }
            }
        },
        "properties": {
            "name": { "type": "string" },
            "address": { "$ref": "#/$defs/address" },
            "contactMethod": { "type": "string", "enum": ["phone", "email"] },
            "phone": { "type": "string" },
            "email": { "type": "string" }
        },
        "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
        "if": {
            "properties": { "contactMethod": { "const": "phone" } },
            "required": ["contactMethod"]
        },
        "then": { "required": ["phone"] },
        "else": { "required": ["email"] },
        "additionalProperties": false
    }))
}

/// Every tool, in a fixed order (the list is the same for both eras and
/// never varies per request, so it is cacheable as `public`).
pub(crate) fn all() -> Vec<Tool> {
    let mut tools = vec![
        tool("test_simple_text", "Tests simple text content response"),
        tool("test_image_content", "Tests image content response"),
        tool("test_audio_content", "Tests audio content response"),
        tool(
            "test_embedded_resource",
            "Tests embedded resource content response",
        ),
        tool(
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
        ),
        tool(
            "test_tool_with_logging",
            "Tests tool that emits log messages during execution",
        ),
        tool(
            "test_tool_with_progress",
            "Tests tool that reports progress notifications",
        ),
        tool("test_error_handling", "Tests error response handling"),
        tool(
            "test_reconnection",
            "Closes the SSE stream mid-call; the result arrives after the client reconnects (SEP-1699)",
        ),
        Tool::new(
            "test_sampling",
            "Tests server-initiated sampling (LLM completion request)",
            object(json!({
                "type": "object",
                "properties": {
                    "prompt": { "type": "string", "description": "The prompt to send to the LLM" }
                },
                "required": ["prompt"]
            })),
        ),
        Tool::new(
            "test_elicitation",
            "Tests server-initiated elicitation (user input request)",
            object(json!({
                "type": "object",
                "properties": {
                    "message": { "type": "string", "description": "The message to show the user" }
                },
                "required": ["message"]
            })),
        ),
        tool(
            "test_elicitation_sep1034_defaults",
            "Tests elicitation with default values per SEP-1034",
        ),
        tool(
            "test_elicitation_sep1330_enums",
            "Tests elicitation with enum schema improvements per SEP-1330",
        ),
        Tool::new(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
            json_schema_2020_12(),
        ),
        Tool::new(
            "test_custom_header",
            "Mirrors its `value` argument into the Mcp-Param-Value header (SEP-2243)",
            object(json!({
                "type": "object",
                "properties": {
                    "value": { "type": "string", "x-mcp-header": "Value" }
                },
                "required": ["value"]
            })),
        ),
        tool(
            "test_missing_capability",
            "Requires the sampling client capability; without it answers -32021",
        ),
        tool(
            "test_logging_tool",
            "Emits notifications/message only when the request set _meta logLevel",
        ),
        tool(
            "test_streaming_elicitation",
            "Answers over an SSE stream carrying only notifications before the result",
        ),
        tool(
            "test_trigger_tool_change",
            "Sends notifications/tools/list_changed to open subscriptions/listen streams",
        ),
        tool(
            "test_trigger_prompt_change",
            "Sends notifications/prompts/list_changed to open subscriptions/listen streams",
        ),
    ];
    tools.extend(url_elicitation::tools());
    tools.extend(mrtr::tools());
    tools.extend(tasks::tools());
    tools
}

fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// Whether this request was made in the 2026-07-28 (stateless) era.
fn is_modern(cx: &RequestContext<RoleServer>) -> bool {
    cx.meta
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

pub(crate) async fn call(
    fixture: &Fixture,
    request: CallToolRequestParams,
    cx: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    if url_elicitation::is_url_tool(&request.name) {
        return url_elicitation::call(request, &cx, is_modern(&cx)).await;
    }
    let args = request.arguments.clone().unwrap_or_default();
    let arg = |name: &str| args.get(name).and_then(Value::as_str).map(str::to_owned);
    let result = match request.name.as_ref() {
        "test_simple_text" => text_result("This is a simple text response for testing."),
        "test_image_content" => {
            CallToolResult::success(vec![ContentBlock::image(PNG_BASE64, "image/png")])
        }
        "test_audio_content" => {
            CallToolResult::success(vec![ContentBlock::audio(WAV_BASE64, "audio/wav")])
        }
        "test_embedded_resource" => CallToolResult::success(vec![ContentBlock::resource(
            ResourceContents::TextResourceContents {
                uri: "test://embedded-resource".into(),
                mime_type: Some("text/plain".into()),
                text: "This is an embedded resource content.".into(),
                meta: None,
            },
        )]),
        "test_multiple_content_types" => CallToolResult::success(vec![
            ContentBlock::text("Multiple content types test:"),
            ContentBlock::image(PNG_BASE64, "image/png"),
            ContentBlock::resource(ResourceContents::TextResourceContents {
                uri: "test://mixed-content-resource".into(),
                mime_type: Some("application/json".into()),
                text: json!({"test": "data", "value": 123}).to_string(),
                meta: None,
            }),
        ]),
        "test_tool_with_logging" => {
            // 2026-07-28: log only when the request asked for a level.
            if !is_modern(&cx) || cx.meta.log_level().is_some() {
                for message in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ] {
                    let _ = cx
                        .peer
                        .notify_logging_message(
                            LoggingMessageNotificationParam::new(
                                LoggingLevel::Info,
                                json!(message),
                            )
                            .with_logger("conformance-fixture"),
                        )
                        .await;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            text_result("Tool with logging executed successfully")
        }
        "test_tool_with_progress" => {
            let token = cx.meta.get_progress_token();
            for step in [0.0, 50.0, 100.0] {
                if let Some(token) = &token {
                    let _ = cx
                        .peer
                        .notify_progress(
                            ProgressNotificationParam::new(token.clone(), step)
                                .with_total(100.0)
                                .with_message(format!("Completed step {step} of 100")),
                        )
                        .await;
                }
                if step < 100.0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            let token = token.map_or_else(
                || "none".to_owned(),
                |token| match token.0 {
                    NumberOrString::String(s) => s.to_string(),
                    NumberOrString::Number(n) => n.to_string(),
                },
            );
            text_result(token)
        }
        "test_error_handling" => CallToolResult::error(vec![ContentBlock::text(
            "This tool intentionally returns an error for testing",
        )]),
        "test_reconnection" => {
            tokio::time::sleep(Duration::from_millis(100)).await;
            text_result(
                "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.",
            )
        }
        "test_sampling" => sampling(&cx, arg("prompt").unwrap_or_default()).await,
        "test_elicitation" => {
            let message = arg("message").unwrap_or_else(|| "Please provide a response".into());
            let schema = json!({
                "type": "object",
                "properties": {
                    "response": { "type": "string", "description": "User's response" }
                },
                "required": ["response"]
            });
            elicit(&cx, message, schema, "User response").await
        }
        "test_elicitation_sep1034_defaults" => {
            let schema = json!({
                "type": "object",
                "properties": {
                    "name": { "type": "string", "description": "User name", "default": "John Doe" },
                    "age": { "type": "integer", "description": "User age", "default": 30 },
                    "score": { "type": "number", "description": "User score", "default": 95.5 },
                    "status": {
                        "type": "string",
                        "description": "User status",
                        "enum": ["active", "inactive", "pending"],
                        "default": "active"
                    },
                    "verified": { "type": "boolean", "description": "Verification status", "default": true }
                },
                "required": []
            });
            elicit(
                &cx,
                "Please review and update the form fields with defaults".into(),
                schema,
                "Elicitation completed",
            )
            .await
        }
        "test_elicitation_sep1330_enums" => {
            let titled = |prefix: &str, titles: [&str; 3]| {
                titles
                    .iter()
                    .enumerate()
                    .map(|(i, title)| json!({ "const": format!("{prefix}{}", i + 1), "title": title }))
                    .collect::<Vec<_>>()
            };
            let schema = json!({
                "type": "object",
                "properties": {
                    "untitledSingle": {
                        "type": "string",
                        "description": "Select one option",
                        "enum": ["option1", "option2", "option3"]
                    },
                    "titledSingle": {
                        "type": "string",
                        "description": "Select one option with titles",
                        "oneOf": titled("value", ["First Option", "Second Option", "Third Option"])
                    },
                    "legacyEnum": {
                        "type": "string",
                        "description": "Select one option (legacy)",
                        "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"]
                    },
                    "untitledMulti": {
                        "type": "array",
                        "description": "Select multiple options",
                        "minItems": 1,
                        "maxItems": 3,
                        "items": { "type": "string", "enum": ["option1", "option2", "option3"] }
                    },
                    "titledMulti": {
                        "type": "array",
                        "description": "Select multiple options with titles",
                        "minItems": 1,
                        "maxItems": 3,
                        "items": { "anyOf": titled("value", ["First Choice", "Second Choice", "Third Choice"]) }
                    }
                },
                "required": []
            });
            elicit(
                &cx,
                "Please select options from the enum fields".into(),
                schema,
                "Elicitation completed",
            )
            .await
        }
        "json_schema_2020_12_tool" => text_result(format!(
            "JSON Schema 2020-12 tool called with: {}",
            Value::Object(args.clone())
        )),
        "test_custom_header" => {
            let value = arg("value")
                .ok_or_else(|| ErrorData::invalid_params("`value` must be a string", None))?;
            text_result(value)
        }
        "test_missing_capability" => {
            let declared = cx
                .meta
                .client_capabilities()
                .is_some_and(|caps| caps.sampling.is_some());
            if !declared {
                return Err(ErrorData::missing_required_client_capability(
                    ClientCapabilities::builder().enable_sampling().build(),
                ));
            }
            text_result("Success")
        }
        "test_logging_tool" => {
            if let Some(level) = cx.meta.log_level() {
                let _ = cx
                    .peer
                    .notify_logging_message(
                        LoggingMessageNotificationParam::new(
                            level,
                            json!("Diagnostic trace logging activated"),
                        )
                        .with_logger("conformance-fixture"),
                    )
                    .await;
            }
            text_result("Logging evaluated")
        }
        "test_streaming_elicitation" => {
            // The response stream may carry notifications before the result,
            // never a server-to-client request.
            if let Some(token) = cx.meta.get_progress_token() {
                let _ = cx
                    .peer
                    .notify_progress(ProgressNotificationParam::new(token, 50.0).with_total(100.0))
                    .await;
            }
            text_result("Streaming complete")
        }
        "test_trigger_tool_change" => {
            fixture.notify_listeners(true).await;
            text_result("Mutation triggered")
        }
        "test_trigger_prompt_change" => {
            fixture.notify_listeners(false).await;
            text_result("Mutation triggered")
        }
        other => {
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {other}"),
                Some(json!({ "name": other })),
            ));
        }
    };
    Ok(result.into())
}

/// Legacy sampling: a `sampling/createMessage` request on the call's stream.
async fn sampling(cx: &RequestContext<RoleServer>, prompt: String) -> CallToolResult {
    let params = CreateMessageRequestParams::new(vec![SamplingMessage::user_text(prompt)], 100);
    match cx.peer.create_message(params).await {
        Ok(result) => {
            let text = result
                .message
                .content
                .first()
                .and_then(|content| content.as_text())
                .map(|text| text.text.clone())
                .unwrap_or_else(|| "No response".into());
            text_result(format!("LLM response: {text}"))
        }
        Err(error) => text_result(format!("Sampling not supported or error: {error}")),
    }
}

/// Legacy elicitation: an `elicitation/create` form request on the call's stream.
async fn elicit(
    cx: &RequestContext<RoleServer>,
    message: String,
    schema: Value,
    label: &str,
) -> CallToolResult {
    let requested_schema: ElicitationSchema = match serde_json::from_value(schema) {
        Ok(schema) => schema,
        Err(error) => {
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "fixture bug: elicitation schema rejected by rmcp: {error}"
            ))]);
        }
    };
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    };
    match cx.peer.create_elicitation(params).await {
        Ok(result) => {
            let action = serde_json::to_value(&result.action).unwrap_or(Value::Null);
            let content = result.content.unwrap_or_else(|| json!({}));
            text_result(format!(
                "{label}: action={}, content={content}",
                action.as_str().unwrap_or("unknown")
            ))
        }
        Err(error) => text_result(format!("Elicitation not supported or error: {error}")),
    }
}
