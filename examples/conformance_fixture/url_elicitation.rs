//! SEP-1036 URL mode elicitation (the suite's unpublished scenario
//! `elicitation-sep1036-url-mode`, checked by our own
//! `tests/conformance/url-elicitation.mjs`).
//!
//! Legacy sessions (2025-11-25): `test_elicitation_sep1036_url` sends
//! `elicitation/create` in URL mode on the call's stream and reports the
//! action; `test_elicitation_sep1036_error` answers JSON-RPC error -32042
//! with `data.elicitations`; `test_elicitation_sep1036_complete` asks the
//! same way and, once the client accepts, sends
//! `notifications/elicitation/complete` with the elicitation's id (rmcp
//! puts a notification that names no request on the session's GET stream,
//! where an out-of-band completion would arrive).
//!
//! 2026-07-28 has no server-to-client requests, no -32042 (retired) and no
//! completion notification: all three tools ask through the era's input
//! request (`input_required` with an `elicitation/create` in URL mode; the
//! era has no `elicitationId`, though rmcp's typed request writes it empty)
//! and report the action of the retry's answer.
#![allow(deprecated)] // elicitation is deprecated by SEP-2577

use rmcp::{
    ErrorData, RoleServer,
    model::*,
    service::{ElicitationMode, RequestContext},
};
use serde_json::{Value, json};

use crate::tools;

const URL: &str = "test_elicitation_sep1036_url";
const ERROR: &str = "test_elicitation_sep1036_error";
const COMPLETE: &str = "test_elicitation_sep1036_complete";

/// JSON-RPC error code: URL elicitation required (2025-11-25).
const URL_ELICITATION_REQUIRED: i32 = -32042;
/// The input request's key in the 2026-07-28 era.
const INPUT_KEY: &str = "consent";

const TOOLS: &[(&str, &str)] = &[
    (
        URL,
        "SEP-1036: asks the client to open a URL (elicitation/create, mode url); reports the action",
    ),
    (
        ERROR,
        "SEP-1036: answers JSON-RPC error -32042 whose data lists URL elicitations",
    ),
    (
        COMPLETE,
        "SEP-1036: asks for a URL elicitation, then sends notifications/elicitation/complete",
    ),
];

pub(crate) fn is_url_tool(name: &str) -> bool {
    TOOLS.iter().any(|(tool, _)| *tool == name)
}

pub(crate) fn tools() -> impl Iterator<Item = Tool> {
    TOOLS
        .iter()
        .map(|(name, description)| tools::tool(name, description))
}

/// A fresh elicitation id: unguessable, so a completion names one request.
fn new_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("OS randomness");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sep1036-{hex}")
}

/// Where the user would go (nothing is served there: the client only shows it).
fn consent_url(id: &str) -> String {
    format!("https://mcp.example.com/sep1036/consent?elicitation={id}")
}

const MESSAGE: &str = "Please open the link to authorize this request";

fn text(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text)]).into()
}

fn action_name(action: &ElicitationAction) -> String {
    serde_json::to_value(action)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}

pub(crate) async fn call(
    request: CallToolRequestParams,
    cx: &RequestContext<RoleServer>,
    modern: bool,
) -> Result<CallToolResponse, ErrorData> {
    if modern {
        let declared = cx
            .meta
            .client_capabilities()
            .and_then(|caps| caps.elicitation)
            .is_some_and(|elicitation| elicitation.url.is_some());
        if !declared {
            let url_mode: ClientCapabilities =
                serde_json::from_value(json!({ "elicitation": { "url": {} } }))
                    .expect("capabilities are well-formed");
            return Err(ErrorData::missing_required_client_capability(url_mode));
        }
        return Ok(input_request_round(&request));
    }
    let name = request.name.as_ref();
    if name == ERROR {
        let id = new_id();
        let data = json!({ "elicitations": [{
            "mode": "url",
            "elicitationId": id,
            "url": consent_url(&id),
            "message": MESSAGE,
        }]});
        return Err(ErrorData::new(
            ErrorCode(URL_ELICITATION_REQUIRED),
            "This request requires the user to open a URL first",
            Some(data),
        ));
    }
    if !cx
        .peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Url)
    {
        return Ok(text("The client did not declare elicitation.url"));
    }
    let id = new_id();
    let params = ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message: MESSAGE.into(),
        url: consent_url(&id),
        elicitation_id: id.clone(),
    };
    let action = match cx.peer.create_elicitation(params).await {
        Ok(result) => result.action,
        Err(error) => return Ok(text(format!("URL elicitation failed: {error}"))),
    };
    if name == COMPLETE && action == ElicitationAction::Accept {
        // The out-of-band step (here: none) is done: say so.
        let done = CustomNotification::new(
            "notifications/elicitation/complete",
            Some(json!({ "elicitationId": id })),
        );
        if let Err(error) = cx
            .peer
            .send_notification(ServerNotification::CustomNotification(done))
            .await
        {
            return Ok(text(format!("completion notification not sent: {error}")));
        }
    }
    Ok(text(format!(
        "URL elicitation completed: action={}",
        action_name(&action)
    )))
}

/// 2026-07-28: the URL elicitation as an input request, until the retry
/// brings its answer.
fn input_request_round(request: &CallToolRequestParams) -> CallToolResponse {
    let answer = request
        .input_responses
        .as_ref()
        .and_then(|responses| responses.get(INPUT_KEY))
        .and_then(Value::as_object);
    if let Some(answer) = answer {
        let action = answer
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        return text(format!("URL elicitation completed: action={action}"));
    }
    let ask: InputRequest = serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {
            "mode": "url",
            "message": MESSAGE,
            "url": consent_url(&new_id()),
        }
    }))
    .expect("fixture input request is well-formed");
    let requests: InputRequests = [(INPUT_KEY.to_owned(), ask)].into_iter().collect();
    InputRequiredResult::new(Some(requests), None).into()
}
