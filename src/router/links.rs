//! URIs inside results point at resources: a `resource_link` content block,
//! an embedded `resource`, the contents of `resources/read`. With prefixed
//! names a client can only follow them in the gateway's form
//! (`sluice://{backend}/{uri}`), so they are rewritten on the way out; every
//! other field stays raw. (On the way in, `resolve` strips the prefix.)

use indexmap::IndexMap;
use serde_json::value::RawValue;

use super::names;
use crate::jsonrpc;
use crate::vocab::BackendName;

type Fields = IndexMap<String, Box<RawValue>>;

fn fields(raw: &RawValue) -> Option<Fields> {
    serde_json::from_str(raw.get()).ok()
}

fn string(fields: &Fields, key: &str) -> Option<String> {
    serde_json::from_str(fields.get(key)?.get()).ok()
}

/// Replaces `key` (a URI) with its exposed form; true if it did.
fn expose_uri(fields: &mut Fields, key: &str, backend: &BackendName) -> bool {
    match string(fields, key) {
        Some(uri) => {
            fields.insert(
                key.into(),
                jsonrpc::raw(&names::prefixed_uri(backend, &uri)),
            );
            true
        }
        None => false,
    }
}

/// One content block; None when it names no resource.
fn content_block(block: &RawValue, backend: &BackendName) -> Option<Box<RawValue>> {
    let mut item = fields(block)?;
    match string(&item, "type")?.as_str() {
        "resource_link" => expose_uri(&mut item, "uri", backend).then(|| jsonrpc::raw(&item)),
        "resource" => {
            let mut resource = fields(item.get("resource")?)?;
            expose_uri(&mut resource, "uri", backend).then_some(())?;
            item.insert("resource".into(), jsonrpc::raw(&resource));
            Some(jsonrpc::raw(&item))
        }
        _ => None,
    }
}

/// Cheap test first: most results name no resource at all.
fn may_name_resources(result: &RawValue) -> bool {
    result.get().contains("\"uri\"")
}

/// A `tools/call` result's `content` blocks.
pub(super) fn tool_result(result: &RawValue, backend: &BackendName) -> Option<Box<RawValue>> {
    if !may_name_resources(result) {
        return None;
    }
    let mut fields = fields(result)?;
    let blocks: Vec<Box<RawValue>> = serde_json::from_str(fields.get("content")?.get()).ok()?;
    let mut changed = false;
    let blocks: Vec<Box<RawValue>> = blocks
        .into_iter()
        .map(|b| match content_block(&b, backend) {
            Some(exposed) => {
                changed = true;
                exposed
            }
            None => b,
        })
        .collect();
    changed.then_some(())?;
    fields.insert("content".into(), jsonrpc::raw(&blocks));
    Some(jsonrpc::raw(&fields))
}

/// A `prompts/get` result: each message's `content` block.
pub(super) fn prompt_result(result: &RawValue, backend: &BackendName) -> Option<Box<RawValue>> {
    if !may_name_resources(result) {
        return None;
    }
    let mut fields = fields(result)?;
    let messages: Vec<Fields> = serde_json::from_str(fields.get("messages")?.get()).ok()?;
    let mut changed = false;
    let messages: Vec<Fields> = messages
        .into_iter()
        .map(|mut m| {
            if let Some(exposed) = m.get("content").and_then(|c| content_block(c, backend)) {
                m.insert("content".into(), exposed);
                changed = true;
            }
            m
        })
        .collect();
    changed.then_some(())?;
    fields.insert("messages".into(), jsonrpc::raw(&messages));
    Some(jsonrpc::raw(&fields))
}

/// A `resources/read` result's `contents`.
pub(super) fn resource_contents(result: &RawValue, backend: &BackendName) -> Option<Box<RawValue>> {
    let mut fields = fields(result)?;
    let mut contents: Vec<Fields> = serde_json::from_str(fields.get("contents")?.get()).ok()?;
    for c in &mut contents {
        expose_uri(c, "uri", backend);
    }
    fields.insert("contents".into(), jsonrpc::raw(&contents));
    Some(jsonrpc::raw(&fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.into()).unwrap()
    }

    #[test]
    fn links_and_embedded_resources_get_the_gateway_form() {
        let b = BackendName::new("demo").unwrap();
        let r = raw(
            r#"{"content":[{"type":"text","text":"x","n":1.50},{"type":"resource_link","uri":"demo://a","name":"a"},{"type":"resource","resource":{"uri":"demo://b","text":"t"}}],"isError":false}"#,
        );
        let out = tool_result(&r, &b).unwrap();
        assert_eq!(
            out.get(),
            r#"{"content":[{"type":"text","text":"x","n":1.50},{"type":"resource_link","uri":"sluice://demo/demo://a","name":"a"},{"type":"resource","resource":{"uri":"sluice://demo/demo://b","text":"t"}}],"isError":false}"#
        );
        assert!(tool_result(&raw(r#"{"content":[{"type":"text","text":"x"}]}"#), &b).is_none());
        let p = raw(
            r#"{"messages":[{"role":"user","content":{"type":"resource","resource":{"uri":"demo://c","text":"t"}}}]}"#,
        );
        assert!(
            prompt_result(&p, &b)
                .unwrap()
                .get()
                .contains("sluice://demo/demo://c")
        );
    }
}
