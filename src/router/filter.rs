//! A list request's `params.filter` (SEP-2564, experimental): with
//! `namePatterns`, only items whose name matches one of the patterns are
//! listed, by the glob rule of `tool_scopes` (`*` only, whole name, case
//! kept). Tools and prompts are matched by the name clients see; resources
//! and templates by their exposed URI (template) or their `name`. Other
//! members of `filter` are ignored, as the proposal asks of a server that
//! does not know them.
//!
//! Bounded: at most `MAX_PATTERNS` patterns of at most `MAX_PATTERN` bytes;
//! anything else malformed is refused, never guessed at.

use super::kind::Kind;
use super::namespace::error;
use crate::jsonrpc::{Fields, INVALID_PARAMS, Outcome, parse_fields, string_field};

const MAX_PATTERNS: usize = 64;
const MAX_PATTERN: usize = 256;

pub(super) struct NameFilter(Vec<String>);

impl NameFilter {
    /// The filter a list request's params carry: None when they carry none
    /// (or a filter without `namePatterns`).
    pub(super) fn of(params: &Fields) -> Result<Option<NameFilter>, Outcome> {
        let Some(filter) = params.get("filter") else {
            return Ok(None);
        };
        let Some(filter) = parse_fields(Some(filter)) else {
            return Err(error(INVALID_PARAMS, "params.filter must be an object"));
        };
        let Some(patterns) = filter.get("namePatterns") else {
            return Ok(None);
        };
        let malformed = || {
            error(
                INVALID_PARAMS,
                &format!(
                    "params.filter.namePatterns must be an array of at most {MAX_PATTERNS} strings of at most {MAX_PATTERN} bytes"
                ),
            )
        };
        let patterns: Vec<String> =
            serde_json::from_str(patterns.get()).map_err(|_| malformed())?;
        if patterns.len() > MAX_PATTERNS || patterns.iter().any(|p| p.len() > MAX_PATTERN) {
            return Err(malformed());
        }
        Ok(Some(NameFilter(patterns)))
    }

    /// Whether a list item (as clients see it) passes.
    pub(super) fn passes(&self, kind: Kind, item: &Fields) -> bool {
        let matches = |key: &str| string_field(item, key).is_some_and(|n| self.matches(&n));
        match kind {
            Kind::Tool | Kind::Prompt => matches("name"),
            Kind::Resource | Kind::Template => matches(kind.id_key()) || matches("name"),
        }
    }

    /// Whether a name passes.
    pub(super) fn matches(&self, name: &str) -> bool {
        self.0.iter().any(|p| crate::config::glob(p, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(json: &str) -> Fields {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn patterns_select_by_the_names_clients_see() {
        let f = NameFilter::of(&fields(
            r#"{"filter":{"namePatterns":["github__*","*__echo"],"future":1}}"#,
        ))
        .unwrap()
        .unwrap();
        assert!(f.passes(Kind::Tool, &fields(r#"{"name":"github__create_issue"}"#)));
        assert!(f.passes(Kind::Tool, &fields(r#"{"name":"demo__echo"}"#)));
        assert!(!f.passes(Kind::Tool, &fields(r#"{"name":"demo__add"}"#)));
        // Resources: by exposed URI or by name.
        let r = NameFilter::of(&fields(r#"{"filter":{"namePatterns":["sluice://fs/*"]}}"#))
            .unwrap()
            .unwrap();
        assert!(r.passes(
            Kind::Resource,
            &fields(r#"{"uri":"sluice://fs/a","name":"a"}"#)
        ));
        assert!(!r.passes(
            Kind::Resource,
            &fields(r#"{"uri":"sluice://web/a","name":"a"}"#)
        ));
    }

    #[test]
    fn no_patterns_is_no_filter_and_bad_ones_are_refused() {
        assert!(NameFilter::of(&fields("{}")).unwrap().is_none());
        assert!(
            NameFilter::of(&fields(r#"{"filter":{"other":1}}"#))
                .unwrap()
                .is_none()
        );
        for bad in [
            r#"{"filter":3}"#,
            r#"{"filter":{"namePatterns":"x*"}}"#,
            r#"{"filter":{"namePatterns":[1]}}"#,
        ] {
            assert!(NameFilter::of(&fields(bad)).is_err(), "{bad}");
        }
        let many: Vec<String> = (0..=MAX_PATTERNS).map(|i| format!("p{i}")).collect();
        let json = serde_json::json!({"filter": {"namePatterns": many}}).to_string();
        assert!(NameFilter::of(&fields(&json)).is_err());
        let long = serde_json::json!({"filter": {"namePatterns": ["x".repeat(MAX_PATTERN + 1)]}});
        assert!(NameFilter::of(&fields(&long.to_string())).is_err());
    }
}
