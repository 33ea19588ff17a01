//! Request values mirrored into headers (2026-07-28, SEP-2243), so that
//! intermediaries can route without reading bodies: `Mcp-Name`, and
//! `Mcp-Param-{Name}` for tool arguments whose schema property carries
//! `"x-mcp-header": "Name"`. The gateway both checks them (it reads the
//! body) and writes them to modern backends (it rewrote the body).

use base64::Engine as _;
use http::HeaderMap;
use serde_json::Value;

const PARAM_PREFIX: &str = "mcp-param-";
const SENTINEL: (&str, &str) = ("=?base64?", "?=");

/// A header value as written: plain when safe, else `=?base64?...?=`.
pub fn encode(value: &str) -> String {
    let safe = !value.is_empty()
        && value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && !value.starts_with(SENTINEL.0);
    if safe {
        value.to_owned()
    } else {
        let b64 = base64::engine::general_purpose::STANDARD.encode(value.as_bytes());
        format!("{}{b64}{}", SENTINEL.0, SENTINEL.1)
    }
}

/// A header value as read; None when its base64 form is broken.
pub fn decode(value: &str) -> Option<String> {
    match value
        .strip_prefix(SENTINEL.0)
        .and_then(|v| v.strip_suffix(SENTINEL.1))
    {
        Some(b64) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_owned()),
    }
}

/// The `x-mcp-header` annotations of a tool's input schema: the property
/// path (through `properties` keys only) and the header name.
pub fn annotations(input_schema: &Value) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    collect(input_schema.get("properties"), &mut Vec::new(), &mut out);
    out
}

fn collect(
    properties: Option<&Value>,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, String)>,
) {
    let Some(Value::Object(props)) = properties else {
        return;
    };
    for (name, schema) in props {
        path.push(name.clone());
        if let Some(Value::String(header)) = schema.get("x-mcp-header") {
            // The name comes from a backend: one that cannot be a header
            // name is skipped here, so no request is ever built with it.
            if valid_name(header) {
                out.push((path.clone(), header.clone()));
            } else {
                tracing::debug!("x-mcp-header name is not an HTTP token; not mirrored");
            }
        }
        collect(schema.get("properties"), path, out);
        path.pop();
    }
}

/// The longest `x-mcp-header` name mirrored (header limits are tight).
const MAX_NAME: usize = 64;

/// An HTTP token (RFC 9110 `tchar`), short enough to send.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The value a header mirrors: strings as they are, booleans and integers
/// in their plain decimal form; anything else is not mirrored.
fn primitive(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

fn value_at<'a>(arguments: Option<&'a Value>, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(arguments?, |v, key| v.get(key))
        .filter(|v| !v.is_null())
}

/// The `Mcp-Param-*` headers a tools/call with these arguments carries.
pub fn params(
    annotations: &[(Vec<String>, String)],
    arguments: Option<&Value>,
) -> Vec<(String, String)> {
    annotations
        .iter()
        .filter_map(|(path, header)| {
            let value = primitive(value_at(arguments, path)?)?;
            Some((format!("Mcp-Param-{header}"), encode(&value)))
        })
        .collect()
}

/// Checks a client's `Mcp-Param-*` headers against its arguments.
pub fn check_params(
    headers: &HeaderMap,
    annotations: &[(Vec<String>, String)],
    arguments: Option<&Value>,
) -> Result<(), String> {
    for (path, header) in annotations {
        let name = format!("{PARAM_PREFIX}{}", header.to_ascii_lowercase());
        if headers.get_all(&name).iter().nth(1).is_some() {
            return Err(format!("Mcp-Param-{header} was sent more than once"));
        }
        let sent = headers
            .get(&name)
            .map(|v| {
                v.to_str()
                    .map_err(|_| format!("Mcp-Param-{header} has invalid characters"))
            })
            .transpose()?;
        let body = value_at(arguments, path).and_then(primitive);
        match (sent, body) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(format!("Mcp-Param-{header} sent for an absent argument"));
            }
            (None, Some(_)) => return Err(format!("Mcp-Param-{header} is required")),
            (Some(raw), Some(expected)) => {
                let decoded =
                    decode(raw).ok_or_else(|| format!("Mcp-Param-{header} is not valid base64"))?;
                if !same(&decoded, &expected) {
                    return Err(format!("Mcp-Param-{header} disagrees with the body"));
                }
            }
        }
    }
    Ok(())
}

/// Integers compare numerically (`007` is 7); everything else exactly.
fn same(header: &str, body: &str) -> bool {
    header == body
        || matches!((header.parse::<i128>(), body.parse::<i128>()), (Ok(a), Ok(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_encode_and_decode() {
        assert_eq!(encode("demo__echo"), "demo__echo");
        assert_eq!(encode("é"), "=?base64?w6k=?=");
        assert_eq!(encode(" lead"), "=?base64?IGxlYWQ=?=");
        assert_eq!(decode("=?base64?w6k=?=").as_deref(), Some("é"));
        assert_eq!(decode("plain").as_deref(), Some("plain"));
        assert_eq!(decode("=?base64?***?="), None);
    }

    #[test]
    fn params_mirror_annotated_arguments() {
        let schema = json!({"type":"object","properties":{
            "region":{"type":"string","x-mcp-header":"Region"},
            "n":{"type":"integer","x-mcp-header":"Count"},
            "deep":{"type":"object","properties":{"flag":{"type":"boolean","x-mcp-header":"Flag"}}},
            "plain":{"type":"string"}}});
        let ann = annotations(&schema);
        assert_eq!(ann.len(), 3);
        let args = json!({"region":"eu-west","n":7,"deep":{"flag":true},"plain":"x"});
        let mut got = params(&ann, Some(&args));
        got.sort();
        assert_eq!(
            got,
            [
                ("Mcp-Param-Count".into(), "7".into()),
                ("Mcp-Param-Flag".into(), "true".into()),
                ("Mcp-Param-Region".into(), "eu-west".into())
            ]
        );
        let mut h = HeaderMap::new();
        h.insert("mcp-param-region", "eu-west".parse().unwrap());
        h.insert("mcp-param-count", "007".parse().unwrap());
        h.insert("mcp-param-flag", "true".parse().unwrap());
        assert!(check_params(&h, &ann, Some(&args)).is_ok());
        h.insert("mcp-param-region", "us".parse().unwrap());
        assert!(check_params(&h, &ann, Some(&args)).is_err());
        h.remove("mcp-param-region");
        assert!(
            check_params(&h, &ann, Some(&args)).is_err(),
            "missing header"
        );
        assert!(check_params(&HeaderMap::new(), &ann, Some(&json!({}))).is_ok());
    }

    /// Issue 9 (15): names a backend supplies are validated where collected.
    #[test]
    fn header_names_that_are_not_tokens_are_skipped() {
        let long = "x".repeat(65);
        let schema = json!({"type":"object","properties":{
            "a":{"type":"string","x-mcp-header":"Bad Name"},
            "b":{"type":"string","x-mcp-header":"Bad\nName"},
            "c":{"type":"string","x-mcp-header":""},
            "d":{"type":"string","x-mcp-header":long},
            "e":{"type":"string","x-mcp-header":"Good-Name_1"}}});
        let ann = annotations(&schema);
        assert_eq!(ann, [(vec!["e".to_owned()], "Good-Name_1".to_owned())]);
        let headers = params(&ann, Some(&json!({"e":"v"})));
        for (k, v) in headers {
            assert!(http::HeaderName::from_bytes(k.as_bytes()).is_ok());
            assert!(http::HeaderValue::from_str(&v).is_ok());
        }
    }
}
