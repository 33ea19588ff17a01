//! Config problems. Stages collect `Issue`s (a message plus where it points:
//! a key path, a line, or nowhere) and keep going, so one `sluice check`
//! run shows every problem; only at the end are key paths turned into line
//! numbers against the parsed TOML document.

use std::fmt;

use toml::Spanned;
use toml::de::{DeString, DeTable, DeValue};

/// Every problem found in one config, each rendered as
/// `origin[:line]: message` on its own line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    origin: String,
    problems: Vec<Problem>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Problem {
    line: Option<usize>,
    message: String,
}

impl ConfigError {
    /// The file name (or other origin) problems are reported against.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// One rendered line per problem, in the order they were found.
    pub fn lines(&self) -> impl Iterator<Item = String> + '_ {
        self.problems.iter().map(|p| match p.line {
            Some(line) => format!("{}:{line}: {}", self.origin, p.message),
            None => format!("{}: {}", self.origin, p.message),
        })
    }

    /// Every problem of `errors`, in line order (those without a line
    /// last), each once.
    pub(super) fn merged(origin: &str, errors: impl IntoIterator<Item = ConfigError>) -> Self {
        let mut problems: Vec<Problem> = errors.into_iter().flat_map(|e| e.problems).collect();
        problems.sort_by_key(|p| (p.line.is_none(), p.line));
        problems.dedup();
        Self {
            origin: origin.to_owned(),
            problems,
        }
    }

    /// Every problem serde finds in `table`, not only the first: each
    /// top-level table, and each backend and namespace, read alone (every
    /// key of `File` is optional, so a part reads as a whole file would).
    /// `first` is what reading it whole said, kept if no part fails alone.
    pub(super) fn each_of<'i, T: serde::Deserialize<'i>>(
        origin: &str,
        text: &str,
        table: &Spanned<DeTable<'i>>,
        first: &toml::de::Error,
    ) -> Self {
        fn one<'i>(key: &Spanned<DeString<'i>>, value: Spanned<DeValue<'i>>) -> DeTable<'i> {
            let mut t = DeTable::new();
            t.insert(key.clone(), value);
            t
        }
        let whole = table.get_ref();
        let mut parts: Vec<DeTable<'i>> = Vec::new();
        for (key, value) in whole.iter() {
            match (&**key.get_ref(), value.get_ref()) {
                ("backends" | "namespaces", DeValue::Table(entries)) => {
                    for (name, entry) in entries.iter() {
                        let inner = one(name, entry.clone());
                        parts.push(one(key, Spanned::new(value.span(), DeValue::Table(inner))));
                    }
                }
                _ => parts.push(one(key, value.clone())),
            }
        }
        let found: Vec<ConfigError> = parts
            .into_iter()
            .filter_map(|part| {
                let part = Spanned::new(table.span(), part);
                T::deserialize(toml::Deserializer::from(part)).err()
            })
            .map(|e| Self::from_toml(origin, &e, text, Some(whole)))
            .collect();
        match found.is_empty() {
            true => Self::from_toml(origin, first, text, Some(whole)),
            false => Self::merged(origin, found),
        }
    }

    pub(super) fn single(origin: &str, line: Option<usize>, message: String) -> Self {
        Self {
            origin: origin.to_owned(),
            problems: vec![Problem { line, message }],
        }
    }

    pub(super) fn resolve(origin: &str, issues: Vec<Issue>, doc: Option<Document<'_>>) -> Self {
        let problems = issues
            .into_iter()
            .map(|issue| Problem {
                line: match issue.at {
                    At::Key(path) => doc.and_then(|d| d.line_of_key(&path)),
                    At::Line(line) => Some(line),
                    At::Nowhere => None,
                },
                message: issue.message,
            })
            .collect();
        Self {
            origin: origin.to_owned(),
            problems,
        }
    }

    /// Converts a TOML syntax or deserialization error: the span gives the
    /// line, and the parsed table (absent for syntax errors) the key path.
    pub(super) fn from_toml(
        origin: &str,
        err: &toml::de::Error,
        text: &str,
        table: Option<&DeTable<'_>>,
    ) -> Self {
        let pos = err.span().map(|s| s.start);
        let line = pos.map(|pos| line_of(text, pos));
        let path = match (pos, table) {
            (Some(pos), Some(table)) => {
                let mut path = Vec::new();
                find_path(table, pos, &mut path).then_some(path)
            }
            _ => None,
        };
        let mut message = describe_serde(err.message(), path.as_deref());
        // Syntax errors such as "duplicate key" do not say which key.
        if let (None, Some(span)) = (table, err.span()) {
            let snippet = text.get(span).unwrap_or_default();
            if !snippet.is_empty() && snippet.len() <= 60 && !snippet.contains('\n') {
                message.push_str(&format!(" at `{snippet}`"));
            }
        }
        Self::single(origin, line, message)
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, line) in self.lines().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            f.write_str(&line)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// A problem found by a stage, before it is tied to a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Issue {
    pub(super) at: At,
    pub(super) message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum At {
    /// The line of the deepest part of this key path present in the file.
    Key(Vec<String>),
    Line(usize),
    Nowhere,
}

/// The source text and its parsed table, for turning spans into lines.
#[derive(Clone, Copy)]
pub(super) struct Document<'a> {
    pub(super) text: &'a str,
    pub(super) table: &'a DeTable<'a>,
}

impl Document<'_> {
    fn line_of_key(&self, path: &[String]) -> Option<usize> {
        let mut best = None;
        let mut table = self.table;
        let mut array = None;
        for seg in path {
            let value: &Spanned<DeValue<'_>> = if let Some(items) = array.take() {
                let items: &[Spanned<DeValue<'_>>] = items;
                let Some(item) = seg.parse::<usize>().ok().and_then(|i| items.get(i)) else {
                    break;
                };
                best = Some(item.span().start);
                item
            } else {
                let Some((k, v)) = table.iter().find(|(k, _)| k.get_ref() == seg) else {
                    break;
                };
                best = Some(k.span().start);
                v
            };
            match value.get_ref() {
                DeValue::Table(t) => table = t,
                DeValue::Array(a) => array = Some(&**a),
                _ => break,
            }
        }
        best.map(|pos| line_of(self.text, pos))
    }
}

fn line_of(text: &str, pos: usize) -> usize {
    let end = pos.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Finds the key path whose key or (scalar) value covers `pos`, as rendered
/// segments (see [`join`]).
fn find_path(table: &DeTable<'_>, pos: usize, path: &mut Vec<String>) -> bool {
    for (k, v) in table {
        path.push(key_segment(k.get_ref()));
        if covers(k.span(), pos) || find_in_value(v, pos, path) {
            return true;
        }
        path.pop();
    }
    false
}

fn find_in_value(v: &Spanned<DeValue<'_>>, pos: usize, path: &mut Vec<String>) -> bool {
    match v.get_ref() {
        DeValue::Table(t) if find_path(t, pos, path) => return true,
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(format!("[{i}]"));
                if find_in_value(item, pos, path) {
                    return true;
                }
                path.pop();
            }
        }
        _ => {}
    }
    covers(v.span(), pos)
}

fn covers(span: std::ops::Range<usize>, pos: usize) -> bool {
    span.start <= pos && pos < span.end.max(span.start + 1)
}

/// One key as TOML would spell it: bare when possible, quoted otherwise.
pub(super) fn key_segment(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        key.to_owned()
    } else {
        format!("{key:?}")
    }
}

/// Renders a path of raw keys, e.g. `backends."my.web".url`.
pub(super) fn dotted<S: AsRef<str>>(path: &[S]) -> String {
    let segs: Vec<String> = path.iter().map(|s| key_segment(s.as_ref())).collect();
    join(&segs)
}

/// Joins rendered segments: keys (from [`key_segment`]) with dots, array
/// indices (`[0]`) attached to what precedes them.
fn join(segs: &[String]) -> String {
    let mut out = String::new();
    for seg in segs {
        if !out.is_empty() && !seg.starts_with('[') {
            out.push('.');
        }
        out.push_str(seg);
    }
    out
}

/// Rewrites serde's wording into the config's: "field" becomes "key",
/// "variant" becomes "value", internal type names disappear, and the
/// message names the key it is about. `path` holds rendered segments.
pub(super) fn describe_serde(message: &str, path: Option<&[String]>) -> String {
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let key = rest.split('`').next().unwrap_or_default();
        let table = match path {
            Some([parent @ .., _]) if !parent.is_empty() => format!("in [{}]", join(parent)),
            _ => "at the top level".to_owned(),
        };
        let hint = suggest(key, rest)
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        return format!("unknown key `{key}` {table}{hint}");
    }
    let mut message = message.replace("unknown variant", "unknown value");
    if let Some(i) = message.find("expected struct ") {
        message.truncate(i);
        message.push_str("expected a table");
    }
    match path {
        Some(path) if !path.is_empty() => format!("`{}`: {message}", join(path)),
        _ => message,
    }
}

/// Picks the closest expected key from serde's "expected one of `a`, `b`"
/// list, if one is a plausible typo of `key`.
fn suggest<'a>(key: &str, rest: &'a str) -> Option<&'a str> {
    let (_, expected) = rest.split_once("expected")?;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|cand| (edit_distance(key, cand), cand))
        .filter(|&(d, _)| d <= 2)
        .min_by_key(|&(d, _)| d)
        .map(|(_, cand)| cand)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
