//! Resources, resource templates, prompts and completion: the static part of
//! the conformance surface.

use rmcp::{ErrorData, model::*};
use serde_json::json;

use crate::mrtr;

/// A 1x1 PNG, base64.
pub(crate) const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file, base64.
pub(crate) const WAV_BASE64: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

const STATIC_TEXT: &str = "test://static-text";
const STATIC_BINARY: &str = "test://static-binary";
const WATCHED: &str = "test://watched-resource";
const TEMPLATE: &str = "test://template/{id}/data";

pub(crate) fn resources() -> Vec<Resource> {
    vec![
        Resource::new(STATIC_TEXT, "static-text")
            .with_title("Static Text Resource")
            .with_description("A static text resource for testing")
            .with_mime_type("text/plain"),
        Resource::new(STATIC_BINARY, "static-binary")
            .with_title("Static Binary Resource")
            .with_description("A static binary resource (image) for testing")
            .with_mime_type("image/png"),
        Resource::new(WATCHED, "watched-resource")
            .with_title("Watched Resource")
            .with_description("A resource clients may subscribe to (legacy resources/subscribe)")
            .with_mime_type("text/plain"),
    ]
}

pub(crate) fn resource_templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(TEMPLATE, "template")
            .with_title("Resource Template")
            .with_description("A resource template with parameter substitution")
            .with_mime_type("application/json"),
    ]
}

fn text(uri: &str, mime: &str, text: impl Into<String>) -> ResourceContents {
    ResourceContents::TextResourceContents {
        uri: uri.into(),
        mime_type: Some(mime.into()),
        text: text.into(),
        meta: None,
    }
}

/// `resources/read`. Unknown URIs get -32602 with the URI in `data`
/// (SEP-2164), in both eras.
pub(crate) fn read(uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let contents = match uri {
        STATIC_TEXT => text(
            uri,
            "text/plain",
            "This is the content of the static text resource.",
        ),
        STATIC_BINARY => ResourceContents::BlobResourceContents {
            uri: uri.into(),
            mime_type: Some("image/png".into()),
            blob: PNG_BASE64.into(),
            meta: None,
        },
        WATCHED => text(uri, "text/plain", "Watched resource content"),
        _ => match template_id(uri) {
            Some(id) => text(
                uri,
                "application/json",
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                    .to_string(),
            ),
            None => {
                return Err(ErrorData::invalid_params(
                    format!("Resource not found: {uri}"),
                    Some(json!({ "uri": uri })),
                ));
            }
        },
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

/// `test://template/{id}/data` -> `id` (one non-empty path segment).
fn template_id(uri: &str) -> Option<&str> {
    let id = uri
        .strip_prefix("test://template/")?
        .strip_suffix("/data")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

pub(crate) fn prompts() -> Vec<Prompt> {
    let arg = |name: &str, description: &str| {
        PromptArgument::new(name)
            .with_description(description)
            .with_required(true)
    };
    vec![
        Prompt::new(
            "test_simple_prompt",
            Some("A simple prompt without arguments"),
            None,
        )
        .with_title("Simple Test Prompt"),
        Prompt::new(
            "test_prompt_with_arguments",
            Some("A prompt with required arguments"),
            Some(vec![
                arg("arg1", "First test argument"),
                arg("arg2", "Second test argument"),
            ]),
        )
        .with_title("Prompt With Arguments"),
        Prompt::new(
            "test_prompt_with_embedded_resource",
            Some("A prompt that includes an embedded resource"),
            Some(vec![arg("resourceUri", "URI of the resource to embed")]),
        )
        .with_title("Prompt With Embedded Resource"),
        Prompt::new(
            "test_prompt_with_image",
            Some("A prompt that includes image content"),
            None,
        )
        .with_title("Prompt With Image"),
        Prompt::new(
            mrtr::PROMPT,
            Some("MRTR (2026-07-28): a prompt that asks for elicitation input first"),
            None,
        ),
    ]
}

pub(crate) fn get_prompt(request: &GetPromptRequestParams) -> Result<GetPromptResult, ErrorData> {
    let arg = |name: &str| {
        request
            .arguments
            .as_ref()
            .and_then(|args| args.get(name))
            .and_then(|value| value.as_str())
            .unwrap_or("")
            .to_owned()
    };
    let messages = match request.name.as_str() {
        "test_simple_prompt" => vec![PromptMessage::new_text(
            Role::User,
            "This is a simple prompt for testing.",
        )],
        "test_prompt_with_arguments" => vec![PromptMessage::new_text(
            Role::User,
            format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1"),
                arg("arg2")
            ),
        )],
        "test_prompt_with_embedded_resource" => {
            let uri = match arg("resourceUri") {
                uri if uri.is_empty() => STATIC_TEXT.to_owned(),
                uri => uri,
            };
            vec![
                PromptMessage::new_resource(
                    Role::User,
                    uri,
                    Some("text/plain".into()),
                    Some("Embedded resource content for testing.".into()),
                    None,
                    None,
                    None,
                ),
                PromptMessage::new_text(Role::User, "Please process the embedded resource above."),
            ]
        }
        "test_prompt_with_image" => vec![
            PromptMessage::new(Role::User, ContentBlock::image(PNG_BASE64, "image/png")),
            PromptMessage::new_text(Role::User, "Please analyze the image above."),
        ],
        other => {
            return Err(ErrorData::invalid_params(
                format!("Unknown prompt: {other}"),
                Some(json!({ "name": other })),
            ));
        }
    };
    Ok(GetPromptResult::new(messages))
}

/// `completion/complete`: a few fixed suggestions filtered by the typed prefix.
pub(crate) fn complete(request: &CompleteRequestParams) -> Result<CompleteResult, ErrorData> {
    let candidates: &[&str] = match (&request.r#ref, request.argument.name.as_str()) {
        (Reference::Resource(_), "id") => &["1", "2", "3", "123"],
        (Reference::Prompt(_), "arg1" | "arg2") => &["alpha", "beta", "gamma"],
        _ => &[],
    };
    let prefix = request.argument.value.as_str();
    let values = candidates
        .iter()
        .filter(|value| value.starts_with(prefix))
        .map(|value| (*value).to_owned())
        .collect();
    let info = CompletionInfo::with_all_values(values)
        .map_err(|error| ErrorData::internal_error(error, None))?;
    Ok(CompleteResult::new(info))
}
