//! How backend names appear to clients: `{backend}__{name}` for tools and
//! prompts, `sluice://{backend}/{uri}` for resources (reversible: the
//! original URI is the rest of the string, templates keep their braces).

use crate::vocab::BackendName;

pub(super) const SEPARATOR: &str = "__";
const URI_SCHEME: &str = "sluice://";

pub(super) fn prefixed(backend: &BackendName, name: &str) -> String {
    format!("{backend}{SEPARATOR}{name}")
}

/// Splits `{backend}__{name}` when `backend` is the prefix.
pub(super) fn strip<'a>(backend: &BackendName, exposed: &'a str) -> Option<&'a str> {
    exposed
        .strip_prefix(backend.as_str())?
        .strip_prefix(SEPARATOR)
        .filter(|rest| !rest.is_empty())
}

pub(super) fn prefixed_uri(backend: &BackendName, uri: &str) -> String {
    format!("{URI_SCHEME}{backend}/{uri}")
}

pub(super) fn strip_uri<'a>(backend: &BackendName, exposed: &'a str) -> Option<&'a str> {
    exposed
        .strip_prefix(URI_SCHEME)?
        .strip_prefix(backend.as_str())?
        .strip_prefix('/')
}

/// Whether `uri` is an instance of an RFC 6570 template, comparing the
/// literal parts in order (each `{...}` matches any non-empty text).
pub(super) fn template_matches(template: &str, uri: &str) -> bool {
    let mut rest = uri;
    let mut parts = template.split('{');
    let Some(head) = parts.next() else {
        return false;
    };
    let Some(after) = rest.strip_prefix(head) else {
        return false;
    };
    rest = after;
    for part in parts {
        let Some((_, literal)) = part.split_once('}') else {
            return false;
        };
        if literal.is_empty() {
            // A trailing variable takes what is left.
            return !rest.is_empty();
        }
        match rest.get(1..).and_then(|r| r.find(literal)) {
            Some(pos) => rest = &rest[1 + pos + literal.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// The spec's tool-name rule: 1-128 chars of `A-Za-z0-9_-.`.
pub(super) fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> BackendName {
        BackendName::new(s).unwrap()
    }

    #[test]
    fn names_round_trip() {
        let be = b("web");
        assert_eq!(strip(&be, &prefixed(&be, "a__b")), Some("a__b"));
        assert_eq!(strip(&be, "webx__a"), None);
        assert_eq!(strip(&be, "web__"), None);
        assert_eq!(strip(&b("web-2"), "web__x"), None);
    }

    #[test]
    fn uris_round_trip_and_keep_templates() {
        let be = b("fs");
        for uri in [
            "file:///tmp/a b?x=1#f",
            "test://static/{id}",
            "demo://readme",
        ] {
            let exposed = prefixed_uri(&be, uri);
            assert_eq!(strip_uri(&be, &exposed), Some(uri));
        }
        assert_eq!(strip_uri(&be, "sluice://fsx/a"), None);
    }

    #[test]
    fn templates_match_their_instances() {
        assert!(template_matches(
            "test://template/{id}/data",
            "test://template/123/data"
        ));
        assert!(template_matches("demo://echo/{text}", "demo://echo/hi"));
        assert!(!template_matches("demo://echo/{text}", "demo://echo/"));
        assert!(!template_matches(
            "test://template/{id}/data",
            "test://template/123/other"
        ));
        assert!(!template_matches("test://a/{x}", "test://b/1"));
    }

    #[test]
    fn tool_name_rule() {
        assert!(valid_tool_name("demo__echo.v2-x"));
        assert!(!valid_tool_name("has space"));
        assert!(!valid_tool_name(&"a".repeat(129)));
        assert!(!valid_tool_name(""));
    }
}
