//! OAuth 2.0 Protected Resource Metadata (RFC 9728): the document that
//! tells a client which authorization server issues tokens for an
//! endpoint, and where that document is.

use serde_json::json;

use crate::config::DEFAULT_NAMESPACE;

pub(crate) const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// `scheme://authority` of a validated absolute URL.
pub(super) fn origin(url: &str) -> String {
    match url.parse::<http::Uri>() {
        Ok(uri) => format!(
            "{}://{}",
            uri.scheme_str().unwrap_or("https"),
            uri.authority().map_or("", |a| a.as_str())
        ),
        Err(_) => String::new(),
    }
}

/// The path of a namespace endpoint's metadata: the well-known prefix
/// before the endpoint's own path (RFC 9728 section 3.1).
pub(crate) fn metadata_path(audience: &str, namespace: &str) -> String {
    if namespace == DEFAULT_NAMESPACE {
        let path = audience
            .parse::<http::Uri>()
            .map(|u| u.path().trim_end_matches('/').to_owned())
            .unwrap_or_default();
        format!("{WELL_KNOWN}{path}")
    } else {
        format!("{WELL_KNOWN}/ns/{namespace}/mcp")
    }
}

/// Which namespace's endpoint a metadata path suffix (what follows the
/// well-known prefix) names: the audience's path or `/mcp` (and nothing)
/// for the default endpoint, `/ns/NAME/mcp` for a configured namespace.
pub(super) fn namespace_of<'a>(
    audience: &str,
    suffix: &'a str,
    namespaces: &[&'a str],
) -> Option<&'a str> {
    let own = metadata_path(audience, DEFAULT_NAMESPACE);
    let own = &own[WELL_KNOWN.len()..];
    if suffix.is_empty() || suffix == "/mcp" || suffix == own {
        return Some(DEFAULT_NAMESPACE);
    }
    let name = suffix.strip_prefix("/ns/")?.strip_suffix("/mcp")?;
    namespaces.iter().copied().find(|n| *n == name)
}

pub(super) fn document(issuer: &str, resource: &str, scopes: &[&str]) -> String {
    let mut doc = json!({
        "resource": resource,
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "sluice",
    });
    if !scopes.is_empty() {
        doc["scopes_supported"] = json!(scopes);
    }
    doc.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_lives_before_the_endpoint_path() {
        let aud = "https://mcp.example.com/mcp";
        assert_eq!(origin(aud), "https://mcp.example.com");
        assert_eq!(
            metadata_path(aud, "default"),
            "/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_path("https://gw.example:8443", "default"),
            "/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            metadata_path(aud, "web"),
            "/.well-known/oauth-protected-resource/ns/web/mcp"
        );
        let ns = ["default", "web"];
        assert_eq!(namespace_of(aud, "", &ns), Some("default"));
        assert_eq!(namespace_of(aud, "/mcp", &ns), Some("default"));
        assert_eq!(namespace_of(aud, "/ns/web/mcp", &ns), Some("web"));
        assert_eq!(namespace_of(aud, "/ns/other/mcp", &ns), None);
        assert_eq!(namespace_of(aud, "/elsewhere", &ns), None);
    }
}
