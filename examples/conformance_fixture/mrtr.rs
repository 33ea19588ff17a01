//! SEP-2322 multi-round-trip requests (2026-07-28): tools and a prompt that
//! answer `resultType: "input_required"` with `inputRequests` (and a sealed
//! `requestState`) until the client retries with matching `inputResponses`.
//!
//! Every `requestState` this fixture issues is sealed with an HMAC by rmcp's
//! `RequestStateCodec`; a retry whose state fails verification gets -32602.

use rmcp::{ErrorData, RoleServer, model::*, service::RequestContext};
use serde_json::{Map, Value, json};

use crate::{handler::Fixture, tools};

pub(crate) const PROMPT: &str = "test_input_required_result_prompt";

const TOOLS: &[(&str, &str)] = &[
    (
        "test_input_required_result_elicitation",
        "MRTR: asks for `user_name` by elicitation, then greets",
    ),
    (
        "test_input_required_result_sampling",
        "MRTR: asks for `capital_question` by sampling",
    ),
    (
        "test_input_required_result_list_roots",
        "MRTR: asks for `client_roots` by roots/list",
    ),
    (
        "test_input_required_result_request_state",
        "MRTR: round-trips a sealed requestState; the result says state-ok",
    ),
    (
        "test_input_required_result_multiple_inputs",
        "MRTR: asks for elicitation, sampling and roots in one round",
    ),
    (
        "test_input_required_result_multi_round",
        "MRTR: two input rounds (step1, step2) with evolving requestState",
    ),
    (
        "test_input_required_result_tampered_state",
        "MRTR: rejects a requestState that fails HMAC verification with -32602",
    ),
    (
        "test_input_required_result_capabilities",
        "MRTR: requests only inputs the request's clientCapabilities declare",
    ),
];

pub(crate) fn is_mrtr_tool(name: &str) -> bool {
    TOOLS.iter().any(|(tool, _)| *tool == name)
}

pub(crate) fn tools() -> impl Iterator<Item = Tool> {
    TOOLS
        .iter()
        .map(|(name, description)| tools::tool(name, description))
}

fn input_request(value: Value) -> InputRequest {
    serde_json::from_value(value).expect("fixture input request is well-formed")
}

fn elicitation(message: &str, field: &str, kind: &str) -> InputRequest {
    input_request(json!({
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
}

fn sampling(prompt: &str) -> InputRequest {
    input_request(json!({
        "method": "sampling/createMessage",
        "params": {
            "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
            "maxTokens": 100
        }
    }))
}

fn list_roots() -> InputRequest {
    input_request(json!({ "method": "roots/list" }))
}

fn ask(requests: Vec<(&str, InputRequest)>, state: Option<String>) -> InputRequiredResult {
    let requests: InputRequests = requests
        .into_iter()
        .map(|(key, request)| (key.to_owned(), request))
        .collect();
    InputRequiredResult::new(Some(requests), state)
}

/// A usable input response: a JSON object. Anything else (a number, null)
/// counts as missing, so the input is requested again.
fn response<'a>(
    request_responses: Option<&'a InputResponses>,
    key: &str,
) -> Option<&'a Map<String, Value>> {
    request_responses?.get(key)?.as_object()
}

/// `response.content.<field>` of an elicitation result, as text.
fn elicited(response: &Map<String, Value>, field: &str) -> Option<String> {
    match response.get("content")?.get(field)? {
        Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    }
}

fn done(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text)]).into()
}

fn seal(fixture: &Fixture, state: Value) -> Result<String, ErrorData> {
    fixture
        .request_state
        .seal_json(&state)
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))
}

fn open(fixture: &Fixture, sealed: &str) -> Result<Value, ErrorData> {
    fixture
        .request_state
        .open_json(sealed)
        .map_err(|_| ErrorData::invalid_params("requestState failed integrity verification", None))
}

pub(crate) fn call_tool(
    fixture: &Fixture,
    request: CallToolRequestParams,
    cx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let responses = request.input_responses.as_ref();
    // A present requestState is untrusted input: verify it before anything.
    let state = request
        .request_state
        .as_deref()
        .map(|sealed| open(fixture, sealed))
        .transpose()?;
    let stage = state
        .as_ref()
        .and_then(|state| state.get("stage"))
        .and_then(Value::as_str)
        .unwrap_or("");

    let ask_name = || elicitation("What is your name?", "name", "string");
    Ok(match request.name.as_ref() {
        "test_input_required_result_elicitation" => match response(responses, "user_name") {
            Some(answer) => done(format!(
                "Hello, {}!",
                elicited(answer, "name").unwrap_or_else(|| "friend".into())
            )),
            None => ask(vec![("user_name", ask_name())], None).into(),
        },
        "test_input_required_result_sampling" => match response(responses, "capital_question") {
            Some(answer) => done(format!(
                "Sampling result: {}",
                answer
                    .get("content")
                    .and_then(|content| content.get("text"))
                    .and_then(Value::as_str)
                    .unwrap_or("no response")
            )),
            None => ask(
                vec![(
                    "capital_question",
                    sampling("What is the capital of France?"),
                )],
                None,
            )
            .into(),
        },
        "test_input_required_result_list_roots" => match response(responses, "client_roots") {
            Some(answer) => {
                let roots = answer
                    .get("roots")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                done(format!("Found {roots} root(s)"))
            }
            None => ask(vec![("client_roots", list_roots())], None).into(),
        },
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => {
            match (stage, response(responses, "confirm")) {
                ("confirm", Some(_)) => done(
                    if request.name == "test_input_required_result_request_state" {
                        "state-ok: requestState validated"
                    } else {
                        "integrity-ok: state verified"
                    },
                ),
                _ => ask(
                    vec![("confirm", elicitation("Please confirm", "ok", "boolean"))],
                    Some(seal(fixture, json!({ "stage": "confirm" }))?),
                )
                .into(),
            }
        }
        "test_input_required_result_multiple_inputs" => {
            let keys = ["user_name", "greeting", "client_roots"];
            let all = keys.iter().all(|key| response(responses, key).is_some());
            if stage == "gather" && all {
                let name = response(responses, "user_name")
                    .and_then(|answer| elicited(answer, "name"))
                    .unwrap_or_else(|| "friend".into());
                done(format!("All inputs received for {name}"))
            } else {
                ask(
                    vec![
                        ("user_name", ask_name()),
                        ("greeting", sampling("Generate a greeting")),
                        ("client_roots", list_roots()),
                    ],
                    Some(seal(fixture, json!({ "stage": "gather" }))?),
                )
                .into()
            }
        }
        "test_input_required_result_multi_round" => {
            let step1 = || {
                Ok::<_, ErrorData>(
                    ask(
                        vec![(
                            "step1",
                            elicitation("Step 1: What is your name?", "name", "string"),
                        )],
                        Some(seal(fixture, json!({ "stage": "step1" }))?),
                    )
                    .into(),
                )
            };
            match stage {
                "step1" => match response(responses, "step1") {
                    Some(answer) => {
                        let name = elicited(answer, "name").unwrap_or_else(|| "friend".into());
                        ask(
                            vec![(
                                "step2",
                                elicitation(
                                    "Step 2: What is your favorite color?",
                                    "color",
                                    "string",
                                ),
                            )],
                            Some(seal(fixture, json!({ "stage": "step2", "name": name }))?),
                        )
                        .into()
                    }
                    None => step1()?,
                },
                "step2" => match response(responses, "step2") {
                    Some(answer) => {
                        let name = state
                            .as_ref()
                            .and_then(|state| state.get("name"))
                            .and_then(Value::as_str)
                            .unwrap_or("friend");
                        let color = elicited(answer, "color").unwrap_or_else(|| "unknown".into());
                        done(format!("Multi-round complete for {name} who likes {color}"))
                    }
                    None => step1()?,
                },
                _ => step1()?,
            }
        }
        "test_input_required_result_capabilities" => {
            if responses.is_some_and(|responses| !responses.is_empty()) {
                let keys: Vec<&str> = responses
                    .into_iter()
                    .flat_map(|responses| responses.keys().map(String::as_str))
                    .collect();
                return Ok(done(format!(
                    "capabilities-ok: received {}",
                    keys.join(",")
                )));
            }
            let caps = cx.meta.client_capabilities().unwrap_or_default();
            let mut requests = Vec::new();
            if caps.elicitation.is_some() {
                requests.push((
                    "elicit_input",
                    elicitation("Elicitation input", "value", "string"),
                ));
            }
            if caps.sampling.is_some() {
                requests.push(("sample_input", sampling("Sample request")));
            }
            if caps.roots.is_some() {
                requests.push(("client_roots", list_roots()));
            }
            if requests.is_empty() {
                done("No supported capabilities declared")
            } else {
                ask(requests, None).into()
            }
        }
        other => {
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {other}"),
                None,
            ));
        }
    })
}

/// `prompts/get` for [`PROMPT`]: asks for `user_context` first.
pub(crate) fn get_prompt(request: &GetPromptRequestParams) -> GetPromptResponse {
    match response(request.input_responses.as_ref(), "user_context") {
        Some(answer) => {
            let context = elicited(answer, "context").unwrap_or_else(|| "unknown".into());
            GetPromptResult::new(vec![PromptMessage::new_text(
                Role::User,
                format!("Prompt with context: {context}"),
            )])
            .into()
        }
        None => ask(
            vec![(
                "user_context",
                elicitation("What context should the prompt use?", "context", "string"),
            )],
            None,
        )
        .into(),
    }
}
