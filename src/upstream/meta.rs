//! The 2026-07-28 per-request metadata, as the gateway writes it to
//! backends: modern backends need it on every request; legacy backends get
//! none of it (a dual-era server would take it for a stateless request).

use std::borrow::Cow;

use indexmap::IndexMap;
use serde_json::json;
use serde_json::value::RawValue;

use crate::jsonrpc;
use crate::protocol::{self, ClientCaps, META_PROTOCOL_VERSION};

type Fields = IndexMap<String, Box<RawValue>>;

const MODERN_KEYS: [&str; 4] = [
    META_PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/logLevel",
];

fn fields(params: Option<&RawValue>) -> Option<Fields> {
    serde_json::from_str(params.map_or("{}", RawValue::get)).ok()
}

/// For a legacy backend: the modern `_meta` keys removed, the rest raw.
pub(super) fn strip_modern(params: Option<&RawValue>) -> Option<Cow<'_, RawValue>> {
    let raw = params?;
    if !protocol::may_name_modern_version(raw.get()) {
        return Some(Cow::Borrowed(raw));
    }
    let Some(mut f) = fields(Some(raw)) else {
        return Some(Cow::Borrowed(raw));
    };
    let Some(mut meta) = f.get("_meta").and_then(|m| fields(Some(m))) else {
        return Some(Cow::Borrowed(raw));
    };
    meta.retain(|k, _| !MODERN_KEYS.contains(&k.as_str()));
    if meta.is_empty() {
        f.shift_remove("_meta");
    } else {
        f.insert("_meta".into(), jsonrpc::raw(&meta));
    }
    Some(Cow::Owned(jsonrpc::raw(&f)))
}

/// The params with `_meta` naming the gateway's span (`traceparent`, and
/// `tracestate` when there is one): the client's own trace fields are
/// replaced, everything else stays as it was, raw.
pub(super) fn with_trace(
    params: Option<&RawValue>,
    trace: &[(&'static str, String)],
) -> Option<Box<RawValue>> {
    let mut f = fields(params)?;
    let mut meta = f
        .get("_meta")
        .and_then(|m| fields(Some(m)))
        .unwrap_or_default();
    meta.shift_remove(crate::traces::TRACESTATE);
    for (key, value) in trace {
        meta.insert((*key).to_owned(), jsonrpc::raw(value));
    }
    f.insert("_meta".into(), jsonrpc::raw(&meta));
    Some(jsonrpc::raw(&f))
}

/// For a modern backend, a legacy client's request: the metadata a
/// modern client would send, with what this client declared in its
/// `initialize` (`caps`), so that a backend that checks the declared
/// capabilities before asking for input asks, and the gateway bridges the
/// question to the client. Never more than the client declared.
pub(super) fn declared_by(params: Option<&RawValue>, caps: &ClientCaps) -> Option<Box<RawValue>> {
    let mut f = fields(params)?;
    let mut meta = f
        .get("_meta")
        .and_then(|m| fields(Some(m)))
        .unwrap_or_default();
    meta.insert(
        META_PROTOCOL_VERSION.into(),
        jsonrpc::raw(protocol::MODERN_FIRST),
    );
    meta.insert(MODERN_KEYS[1].into(), jsonrpc::raw(&caps.declared()));
    meta.insert(MODERN_KEYS[2].into(), jsonrpc::raw(&gateway_info()));
    f.insert("_meta".into(), jsonrpc::raw(&meta));
    Some(jsonrpc::raw(&f))
}

fn gateway_info() -> serde_json::Value {
    json!({ "name": "sluice", "version": env!("CARGO_PKG_VERSION") })
}

/// For a modern backend: the request's own modern `_meta` (a modern
/// client's, passed through), or the gateway's when the client is legacy.
/// Also returns the value for `Mcp-Name`, when the method has one.
pub(crate) fn ensure_modern(
    method: &str,
    params: Option<&RawValue>,
) -> (Box<RawValue>, Option<String>) {
    let mut f = fields(params).unwrap_or_default();
    let mut meta = f
        .get("_meta")
        .and_then(|m| fields(Some(m)))
        .unwrap_or_default();
    if !meta.contains_key(META_PROTOCOL_VERSION) {
        meta.insert(
            META_PROTOCOL_VERSION.into(),
            jsonrpc::raw(protocol::MODERN_FIRST),
        );
        // The gateway's own request (a list, a health check): nobody to
        // ask. A client's has its metadata already (`declared_by`).
        meta.insert(MODERN_KEYS[1].into(), jsonrpc::raw(&json!({})));
        meta.insert(MODERN_KEYS[2].into(), jsonrpc::raw(&gateway_info()));
    }
    f.insert("_meta".into(), jsonrpc::raw(&meta));
    let key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    };
    let name = key
        .and_then(|k| f.get(k))
        .and_then(|v| serde_json::from_str::<String>(v.get()).ok());
    (jsonrpc::raw(&f), name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.into()).unwrap()
    }

    #[test]
    fn legacy_backends_get_no_modern_meta() {
        let p = raw(
            r#"{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":7}}"#,
        );
        assert_eq!(
            strip_modern(Some(&p)).unwrap().get(),
            r#"{"name":"t","_meta":{"progressToken":7}}"#
        );
        let p = raw(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#);
        assert_eq!(strip_modern(Some(&p)).unwrap().get(), "{}");
        let untouched = r#"{"a": 1.50}"#;
        assert_eq!(
            strip_modern(Some(&raw(untouched))).unwrap().get(),
            untouched
        );
    }

    #[test]
    fn trace_fields_replace_the_clients() {
        let p = raw(
            r#"{"name":"t","arguments":{"x":1.50},"_meta":{"traceparent":"client","tracestate":"a=b","baggage":"k=v","progressToken":7}}"#,
        );
        let trace = [("traceparent", "00-ours-01".to_owned())];
        assert_eq!(
            with_trace(Some(&p), &trace).unwrap().get(),
            r#"{"name":"t","arguments":{"x":1.50},"_meta":{"traceparent":"00-ours-01","baggage":"k=v","progressToken":7}}"#
        );
        // No params: an object with the `_meta` alone.
        assert_eq!(
            with_trace(None, &trace).unwrap().get(),
            r#"{"_meta":{"traceparent":"00-ours-01"}}"#
        );
        // Params that are not an object are left to the backend to refuse.
        assert!(with_trace(Some(&raw("[1]")), &trace).is_none());
    }

    #[test]
    fn a_legacy_clients_declared_capabilities_and_nothing_more() {
        let caps = ClientCaps::parse(r#"{"elicitation":{},"roots":{"listChanged":true}}"#);
        let p = raw(r#"{"name":"t","arguments":{"x":1.50},"_meta":{"progressToken":7}}"#);
        let sent = declared_by(Some(&p), &caps).unwrap();
        let expected = format!(
            r#"{{"name":"t","arguments":{{"x":1.50}},"_meta":{{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{"form":{{}}}},"roots":{{"listChanged":true}}}},"io.modelcontextprotocol/clientInfo":{{"name":"sluice","version":"{}"}}}}}}"#,
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(sent.get(), expected);
        // What a client claims in its own `_meta` is replaced by what it
        // declared in its `initialize`.
        let claims =
            raw(r#"{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}}"#);
        let sent = declared_by(Some(&claims), &ClientCaps::default()).unwrap();
        let told = r#""io.modelcontextprotocol/clientCapabilities":{}"#;
        assert!(sent.get().contains(told), "{}", sent.get());
        // And the caps read back as declared.
        for bits in 0..32 {
            let caps = ClientCaps::from_bits(bits);
            if caps.roots_list_changed && !caps.roots {
                continue;
            }
            assert_eq!(
                ClientCaps::parse(&caps.declared().to_string()),
                caps,
                "{bits}"
            );
        }
    }

    #[test]
    fn modern_backends_get_meta_and_a_name() {
        let (p, name) = ensure_modern(
            "tools/call",
            Some(&raw(r#"{"name":"t","arguments":{"x":1.0}}"#)),
        );
        let v: serde_json::Value = serde_json::from_str(p.get()).unwrap();
        assert_eq!(v["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(name.as_deref(), Some("t"));
        assert!(p.get().contains(r#""arguments":{"x":1.0}"#));
        // A modern client's own metadata passes through.
        let own = r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}"#;
        let (p, _) = ensure_modern("tools/list", Some(&raw(own)));
        assert!(p.get().contains(r#""elicitation":{}"#));
    }
}
