//! SEP-2663 tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28):
//! fixture tools that run as tasks when the request declares the extension
//! in its client capabilities, driven by rmcp's `TaskManager`.
//!
//! `greet` is synchronous only; `slow_compute` and `protocol_error_job` run
//! as a task when they may and synchronously otherwise; `failing_job`,
//! `confirm_delete`, `multi_input` and `test_tool_with_task` require the
//! extension (-32021 without it).

use std::time::Duration;

use rmcp::{
    ErrorData, RoleServer,
    model::*,
    service::RequestContext,
    task_manager::{TaskContext, TaskExit, TaskFuture, TaskOptions},
};
use serde_json::{Value, json};

use crate::{handler::Fixture, tools::object};

const TOOLS: &[(&str, &str, Mode)] = &[
    (
        "greet",
        "Greets `name` synchronously (never a task)",
        Mode::Never,
    ),
    (
        "slow_compute",
        "Sleeps `seconds` (default 1), then reports; a task when the client allows",
        Mode::Optional,
    ),
    (
        "failing_job",
        "Task-only: completes with a tool execution error (isError)",
        Mode::Required,
    ),
    (
        "protocol_error_job",
        "Fails with a protocol error; a task (status failed) when the client allows",
        Mode::Optional,
    ),
    (
        "confirm_delete",
        "Task-only: waits for one elicitation input (`confirm`) via tasks/update",
        Mode::Required,
    ),
    (
        "multi_input",
        "Task-only: waits for two elicitation inputs (`input-a`, `input-b`) at once",
        Mode::Required,
    ),
    (
        "test_tool_with_task",
        "MRTR round for `user_name`, then continues as a task",
        Mode::Required,
    ),
];

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Never,
    Optional,
    Required,
}

pub(crate) fn is_task_tool(name: &str) -> bool {
    TOOLS.iter().any(|(tool, ..)| *tool == name)
}

pub(crate) fn tools() -> impl Iterator<Item = Tool> {
    TOOLS.iter().map(|(name, description, _)| {
        let schema = match *name {
            "greet" => json!({
                "type": "object",
                "properties": { "name": { "type": "string" } },
                "required": ["name"]
            }),
            "slow_compute" => json!({
                "type": "object",
                "properties": { "seconds": { "type": "number" }, "label": { "type": "string" } }
            }),
            "confirm_delete" => json!({
                "type": "object",
                "properties": { "filename": { "type": "string" } }
            }),
            _ => json!({ "type": "object", "properties": {} }),
        };
        Tool::new(*name, *description, object(schema))
    })
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn confirm_request(message: String, field: &str, kind: &str) -> InputRequest {
    serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": { field: { "type": kind } },
                "required": [field]
            }
        }
    }))
    .expect("fixture input request is well-formed")
}

pub(crate) async fn call_tool(
    fixture: &Fixture,
    request: CallToolRequestParams,
    cx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let name = request.name.to_string();
    let mode = TOOLS
        .iter()
        .find(|(tool, ..)| *tool == name)
        .map_or(Mode::Never, |(_, _, mode)| *mode);
    let client_tasks = cx
        .client_capabilities()
        .is_some_and(|caps| caps.supports_tasks());
    if mode == Mode::Required && !client_tasks {
        return Err(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        ));
    }
    let as_task = client_tasks && mode != Mode::Never;
    let args = request.arguments.clone().unwrap_or_default();

    // `test_tool_with_task`: an MRTR round first, then a task.
    if name == "test_tool_with_task" {
        let user = request
            .input_responses
            .as_ref()
            .and_then(|responses| responses.get("user_name"))
            .and_then(Value::as_object)
            .and_then(|answer| {
                answer
                    .get("content")?
                    .get("name")?
                    .as_str()
                    .map(str::to_owned)
            });
        let Some(user) = user else {
            let requests: InputRequests = [(
                "user_name".to_owned(),
                confirm_request("What is your name?".into(), "name", "string"),
            )]
            .into_iter()
            .collect();
            return Ok(InputRequiredResult::from_input_requests(requests).into());
        };
        return Ok(spawn(fixture, move |_| {
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Ok(text(format!("Hello, {user}! (async)")))
            })
        }));
    }

    let work: Box<dyn FnOnce(TaskContext) -> TaskFuture + Send> = match name.as_str() {
        "greet" => {
            let who = args.get("name").and_then(Value::as_str).unwrap_or("friend");
            return Ok(text(format!("Hello, {who}!")).into());
        }
        "slow_compute" => {
            let seconds = args
                .get("seconds")
                .and_then(Value::as_f64)
                .unwrap_or(1.0)
                .clamp(0.0, 60.0);
            let label = args
                .get("label")
                .and_then(Value::as_str)
                .unwrap_or("compute")
                .to_owned();
            Box::new(move |ctx: TaskContext| -> TaskFuture {
                Box::pin(async move {
                    tokio::select! {
                        () = ctx.cancelled() => Err(TaskExit::Cancelled),
                        () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {
                            Ok(text(format!("slow_compute({label}) done after {seconds}s")))
                        }
                    }
                })
            })
        }
        "failing_job" => Box::new(|_: TaskContext| -> TaskFuture {
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(500)).await;
                Ok(CallToolResult::error(vec![ContentBlock::text(
                    "failing_job: intentional tool execution error",
                )]))
            })
        }),
        "protocol_error_job" => Box::new(|_: TaskContext| -> TaskFuture {
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Err(TaskExit::Error(ErrorData::internal_error(
                    "protocol_error_job: intentional protocol-level failure",
                    None,
                )))
            })
        }),
        "confirm_delete" => {
            let file = args
                .get("filename")
                .and_then(Value::as_str)
                .unwrap_or("file.txt")
                .to_owned();
            Box::new(move |ctx: TaskContext| -> TaskFuture {
                Box::pin(async move {
                    let answer = ctx
                        .request_input(
                            "confirm",
                            confirm_request(format!("Delete {file}?"), "confirm", "boolean"),
                        )
                        .await?;
                    let confirmed = answer
                        .pointer("/content/confirm")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    Ok(text(format!(
                        "confirm_delete({file}): confirmed = {confirmed}"
                    )))
                })
            })
        }
        "multi_input" => Box::new(|ctx: TaskContext| -> TaskFuture {
            Box::pin(async move {
                let (a, b) = tokio::join!(
                    ctx.request_input(
                        "input-a",
                        confirm_request("Provide value A".into(), "value", "string")
                    ),
                    ctx.request_input(
                        "input-b",
                        confirm_request("Provide value B".into(), "value", "string")
                    ),
                );
                let value = |answer: &Value| {
                    answer
                        .pointer("/content/value")
                        .and_then(Value::as_str)
                        .unwrap_or("(none)")
                        .to_owned()
                };
                Ok(text(format!(
                    "multi_input: a = {}, b = {}",
                    value(&a?),
                    value(&b?)
                )))
            })
        }),
        other => {
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {other}"),
                None,
            ));
        }
    };

    if as_task {
        Ok(spawn(fixture, work))
    } else {
        // Synchronous fallback (only tools that may run without a task get here).
        run_inline(fixture, work).await
    }
}

fn spawn(fixture: &Fixture, work: impl FnOnce(TaskContext) -> TaskFuture) -> CallToolResponse {
    let task = fixture.tasks.spawn(TaskOptions::default(), work);
    CreateTaskResult::new(task).into()
}

/// Runs a task body in the request itself (the client did not declare the
/// extension): spawn it in the manager, wait for the outcome, report it.
async fn run_inline(
    fixture: &Fixture,
    work: Box<dyn FnOnce(TaskContext) -> TaskFuture + Send>,
) -> Result<CallToolResponse, ErrorData> {
    let task = fixture.tasks.spawn(TaskOptions::default(), work);
    loop {
        let detailed = fixture.tasks.get_task(&task.task_id)?;
        let value = serde_json::to_value(&detailed)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        match value.get("status").and_then(Value::as_str) {
            Some("completed") => {
                let result = value.get("result").cloned().unwrap_or(Value::Null);
                let result: CallToolResult = serde_json::from_value(result)
                    .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
                return Ok(result.into());
            }
            Some("failed") => {
                let error = value.get("error").cloned().unwrap_or(Value::Null);
                return Err(serde_json::from_value(error)
                    .unwrap_or_else(|_| ErrorData::internal_error("task failed", None)));
            }
            Some("cancelled") => return Err(ErrorData::internal_error("task cancelled", None)),
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}
