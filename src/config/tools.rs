//! Which of a backend's tools are exposed, and under which name (before the
//! namespace prefix is added). Patterns support `*` only: tool names are
//! identifiers, and anything richer would invite regex escaping mistakes.

use std::fmt;

const MAX_TOOL_NAME: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFilter {
    include: Vec<String>,
    exclude: Vec<String>,
    /// (original, exposed), in file order.
    rename: Vec<(String, String)>,
}

/// Every problem found in a tool filter, one message each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidToolFilter(pub Vec<String>);

impl fmt::Display for InvalidToolFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("; "))
    }
}

impl std::error::Error for InvalidToolFilter {}

impl Default for ToolFilter {
    fn default() -> Self {
        Self::all()
    }
}

impl ToolFilter {
    pub fn all() -> Self {
        Self {
            include: vec!["*".to_owned()],
            exclude: Vec::new(),
            rename: Vec::new(),
        }
    }

    pub fn new(
        include: Vec<String>,
        exclude: Vec<String>,
        rename: Vec<(String, String)>,
    ) -> Result<Self, InvalidToolFilter> {
        let mut problems = Vec::new();
        for (key, patterns) in [("include", &include), ("exclude", &exclude)] {
            if patterns.iter().any(String::is_empty) {
                problems.push(format!("`{key}` contains an empty pattern"));
            }
        }
        for (i, (original, exposed)) in rename.iter().enumerate() {
            if original.is_empty() {
                problems.push("`rename` has an empty tool name".to_owned());
            }
            if !is_tool_name(exposed) {
                problems.push(format!(
                    "`rename.{original}`: `{exposed}` is not a valid tool name \
                     (1-128 characters of A-Z, a-z, 0-9, `_`, `-`, `.`)"
                ));
            }
            // Two tools behind one exposed name would make calls ambiguous.
            if let Some((other, _)) = rename[..i].iter().find(|(_, e)| e == exposed) {
                problems.push(format!(
                    "`rename`: `{other}` and `{original}` are both renamed to `{exposed}`"
                ));
            }
        }
        if problems.is_empty() {
            Ok(Self {
                include,
                exclude,
                rename,
            })
        } else {
            Err(InvalidToolFilter(problems))
        }
    }

    /// The name under which the backend's tool `original` is exposed, or
    /// `None` when the filter hides it.
    pub fn expose(&self, original: &str) -> Option<String> {
        if !self.passes(original) {
            return None;
        }
        let exposed = self
            .rename
            .iter()
            .find(|(o, _)| o == original)
            .map_or(original, |(_, e)| e.as_str());
        Some(exposed.to_owned())
    }

    /// The backend's name for the exposed name `exposed`, or `None` when no
    /// tool is exposed under that name. Inverse of [`ToolFilter::expose`].
    pub fn original<'a>(&'a self, exposed: &'a str) -> Option<&'a str> {
        if let Some((original, _)) = self.rename.iter().find(|(_, e)| e == exposed) {
            return self.passes(original).then_some(original.as_str());
        }
        // A renamed tool is reachable only under its new name.
        if self.rename.iter().any(|(o, _)| o == exposed) {
            return None;
        }
        self.passes(exposed).then_some(exposed)
    }

    /// Patterns and renames, for `sluice check` output.
    pub(super) fn parts(&self) -> (&[String], &[String], &[(String, String)]) {
        (&self.include, &self.exclude, &self.rename)
    }

    fn passes(&self, name: &str) -> bool {
        self.include.iter().any(|p| glob(p, name)) && !self.exclude.iter().any(|p| glob(p, name))
    }
}

/// `[namespaces.NAME] tool_scopes`: the OAuth scopes a tool needs, by
/// patterns over the names clients see (a tool matching several patterns
/// needs all their scopes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolScopes(Vec<(String, Vec<String>)>);

impl ToolScopes {
    pub(super) fn new(patterns: Vec<(String, Vec<String>)>) -> ToolScopes {
        ToolScopes(patterns)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a caller holding `held` may see and call `exposed`.
    pub fn allows(&self, exposed: &str, held: &[String]) -> bool {
        self.0
            .iter()
            .filter(|(pattern, _)| glob(pattern, exposed))
            .flat_map(|(_, needed)| needed)
            .all(|s| held.contains(s))
    }

    /// Which patterns match `exposed` (bit i: pattern i), for a search
    /// index to decide at query time by `held_bits`; None past 64 patterns
    /// (then `allows` decides).
    pub fn needs_bits(&self, exposed: &str) -> Option<u64> {
        (self.0.len() <= 64).then(|| {
            self.0
                .iter()
                .enumerate()
                .filter(|(_, (pattern, _))| glob(pattern, exposed))
                .fold(0, |bits, (i, _)| bits | 1 << i)
        })
    }

    /// Which patterns' scopes `held` has every one of (bit i: pattern i):
    /// a tool whose `needs_bits` are all here is allowed.
    pub fn held_bits(&self, held: &[String]) -> u64 {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, (_, needed))| needed.iter().all(|s| held.contains(s)))
            .fold(0, |bits, (i, _)| bits | 1 << (i % 64))
    }

    /// (pattern, scopes), for `sluice check` output.
    pub(super) fn parts(&self) -> &[(String, Vec<String>)] {
        &self.0
    }
}

pub(super) fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// `*` matches any run of characters (including none); everything else
/// matches itself. The rule of `tool_scopes`, and of a list's
/// `params.filter.namePatterns`.
pub(crate) fn glob(pattern: &str, name: &str) -> bool {
    // The default filter's one pattern, on every call.
    if pattern == "*" {
        return true;
    }
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let mut parts: Vec<&str> = parts.collect();
    let Some(last) = parts.pop() else {
        // No `*` at all: exact match.
        return rest.is_empty();
    };
    for part in parts {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}
