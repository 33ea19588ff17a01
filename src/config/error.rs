//! Config problems. Stages collect `Issue`s (a message plus where it points:
//! a key path, a line, or nowhere) and keep going, so one `sluice check`
//! run shows every problem; only at the end are key paths turned into line
//! numbers, through the lines of the document's keys ([`KeyLines`]), and
//! the problems put in line order.

use std::collections::{HashMap, HashSet};
use std::fmt;

use toml::de::{DeTable, DeValue};

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
    /// Reported by `sluice check` without refusing the config.
    warning: bool,
    message: String,
}

impl ConfigError {
    /// The file name (or other origin) problems are reported against.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// One rendered line per problem, in line order (those without a line
    /// last).
    pub fn lines(&self) -> impl Iterator<Item = String> + '_ {
        self.problems.iter().map(|p| {
            let warning = if p.warning { "warning: " } else { "" };
            match p.line {
                Some(line) => format!("{}:{line}: {warning}{}", self.origin, p.message),
                None => format!("{}: {warning}{}", self.origin, p.message),
            }
        })
    }

    /// How many of the problems are errors rather than warnings.
    pub fn errors(&self) -> usize {
        self.problems.iter().filter(|p| !p.warning).count()
    }

    pub(super) fn single(origin: &str, line: Option<usize>, message: String) -> Self {
        Self {
            origin: origin.to_owned(),
            problems: vec![Problem {
                line,
                warning: false,
                message,
            }],
        }
    }

    /// Ties every issue to its line, and puts them in line order (a stable
    /// sort: problems of one line stay in the order they were found),
    /// each once.
    pub(super) fn resolve(
        origin: &str,
        errors: Vec<Issue>,
        warnings: Vec<Issue>,
        lines: &KeyLines,
    ) -> Self {
        let tagged = errors
            .into_iter()
            .map(|i| (i, false))
            .chain(warnings.into_iter().map(|i| (i, true)));
        let mut problems: Vec<Problem> = tagged
            .map(|(issue, warning)| Problem {
                line: lines.line(&issue.at),
                warning,
                message: issue.message,
            })
            .collect();
        problems.sort_by_key(|p| (p.line.is_none(), p.line));
        let mut seen = HashSet::new();
        problems.retain(|p| seen.insert((p.line, p.message.clone())));
        Self {
            origin: origin.to_owned(),
            problems,
        }
    }
}

/// A TOML syntax error: its span gives the line. Such errors (say,
/// "duplicate key") do not name what they are about, so a short span is
/// quoted.
pub(super) fn syntax_issue(err: &toml::de::Error, text: &str) -> Issue {
    let mut message = err.message().to_owned();
    if let Some(span) = err.span() {
        let snippet = text.get(span).unwrap_or_default();
        if !snippet.is_empty() && snippet.len() <= 60 && !snippet.contains('\n') {
            message.push_str(&format!(" at `{snippet}`"));
        }
    }
    Issue {
        at: err
            .span()
            .map_or(At::Nowhere, |s| At::Line(line_of(text, s.start))),
        message,
    }
}

/// What serde refused in a parsed document: the span gives the line, and
/// `path` (what the span falls in, see [`locate`]) the key it names.
pub(super) fn serde_issue(err: &toml::de::Error, text: &str, path: Option<&[Seg]>) -> Issue {
    let rendered = path.map(render);
    Issue {
        at: err
            .span()
            .map_or(At::Nowhere, |s| At::Line(line_of(text, s.start))),
        message: describe_serde(err.message(), rendered.as_deref()),
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

/// The line of every key and array item of a document, by the path of
/// raw keys (an array item by its index) the build stage names it with.
#[derive(Debug, Default)]
pub(super) struct KeyLines(HashMap<Vec<String>, usize>);

impl KeyLines {
    /// Keeps the first line given for a path.
    pub(super) fn insert(&mut self, path: Vec<String>, line: usize) {
        self.0.entry(path).or_insert(line);
    }

    pub(super) fn toml(text: &str, table: &DeTable<'_>) -> Self {
        let mut lines = Self::default();
        lines.walk_table(text, table, &mut Vec::new());
        lines
    }

    fn walk_table(&mut self, text: &str, table: &DeTable<'_>, path: &mut Vec<String>) {
        for (k, v) in table {
            path.push(String::from(&**k.get_ref()));
            self.insert(path.clone(), line_of(text, k.span().start));
            self.walk_value(text, v.get_ref(), path);
            path.pop();
        }
    }

    fn walk_value(&mut self, text: &str, v: &DeValue<'_>, path: &mut Vec<String>) {
        match v {
            DeValue::Table(t) => self.walk_table(text, t, path),
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(i.to_string());
                    self.insert(path.clone(), line_of(text, item.span().start));
                    self.walk_value(text, item.get_ref(), path);
                    path.pop();
                }
            }
            _ => {}
        }
    }

    /// The paths of the keys and items on these lines.
    pub(super) fn paths_on(&self, lines: &[usize]) -> Vec<&[String]> {
        self.0
            .iter()
            .filter(|(_, line)| lines.contains(line))
            .map(|(path, _)| path.as_slice())
            .collect()
    }

    /// The line of the deepest part of `at`'s key path the document has.
    pub(super) fn line(&self, at: &At) -> Option<usize> {
        match at {
            At::Key(path) => (1..=path.len())
                .rev()
                .find_map(|n| self.0.get(&path[..n]).copied()),
            At::Line(line) => Some(*line),
            At::Nowhere => None,
        }
    }
}

/// The line `pos` (a byte offset into `text`) is on, from 1.
pub(super) fn line_of(text: &str, pos: usize) -> usize {
    let end = pos.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// One step of a path into a parsed TOML document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seg {
    Key(String),
    Item(usize),
}

/// The path to the key, or the innermost value, whose span covers `pos`.
pub(super) fn locate(table: &DeTable<'_>, pos: usize) -> Option<Vec<Seg>> {
    let mut path = Vec::new();
    find_path(table, pos, &mut path).then_some(path)
}

fn find_path(table: &DeTable<'_>, pos: usize, path: &mut Vec<Seg>) -> bool {
    for (k, v) in table {
        path.push(Seg::Key(String::from(&**k.get_ref())));
        if covers(k.span(), pos) || find_in_value(v, pos, path) {
            return true;
        }
        path.pop();
    }
    false
}

fn find_in_value(v: &toml::Spanned<DeValue<'_>>, pos: usize, path: &mut Vec<Seg>) -> bool {
    match v.get_ref() {
        DeValue::Table(t) if find_path(t, pos, path) => return true,
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(Seg::Item(i));
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

/// A path as messages spell it (see [`join`]).
fn render(path: &[Seg]) -> Vec<String> {
    path.iter()
        .map(|seg| match seg {
            Seg::Key(k) => key_segment(k),
            Seg::Item(i) => format!("[{i}]"),
        })
        .collect()
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
