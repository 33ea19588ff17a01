//! Reading a config whatever is wrong with it. Every stage runs whatever
//! the one before it found: the TOML parser recovers past syntax errors,
//! serde's refusals are taken out one at a time (below), and the build
//! stage, then `sluice check`'s later problems, run on what is left with
//! defaults in place of what was refused. So one run lists every
//! problem, each with its line, however many stages they belong to.

use serde::Deserialize;
use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue};

use super::build::{self, Syntax};
use super::env::Env;
use super::error::{
    At, ConfigError, Issue, KeyLines, Seg, line_of, locate, serde_issue, syntax_issue,
};
use super::file::File;
use super::lint::{Severity, lint};
use super::{Loaded, desktop, overrides};

/// Past this many values serde refuses, reading stops: each costs a pass
/// over the document, and a file that far off is fixed a screen at a time.
const MAX_REFUSED: usize = 100;

/// One config, read as far as it could be.
pub(super) struct Reading {
    /// As built, with defaults standing in for what was refused; None
    /// only when the file could not be read into the file types at all.
    loaded: Option<Loaded>,
    issues: Vec<Issue>,
    lines: KeyLines,
    syntax: Syntax,
}

impl Reading {
    pub(super) fn toml(text: &str, env: &dyn Env) -> Self {
        let (mut table, syntax) = DeTable::parse_recoverable(text);
        let lines = KeyLines::toml(text, table.get_ref());
        let mut issues = Vec::new();
        let loaded = file_types(text, &mut table, &mut issues).map(|mut file| {
            file.restore_order(table.get_ref());
            finish(file, Syntax::Toml, env, &mut issues)
        });
        // What the parser made of a line it could not read (`url = = 1`
        // reads as 0) is a guess: what else is said of that line, or of the
        // tables around it (a `url` missing), would be about the guess.
        let broken: Vec<usize> = syntax
            .iter()
            .filter_map(|e| e.span().map(|s| line_of(text, s.start)))
            .collect();
        let guessed = lines.paths_on(&broken);
        issues.retain(|i| match &i.at {
            At::Key(path) if guessed.iter().any(|g| g.starts_with(path)) => false,
            at => lines.line(at).is_none_or(|l| !broken.contains(&l)),
        });
        let mut all: Vec<Issue> = syntax.iter().map(|e| syntax_issue(e, text)).collect();
        all.append(&mut issues);
        Self {
            loaded,
            issues: all,
            lines,
            syntax: Syntax::Toml,
        }
    }

    pub(super) fn desktop(text: &str, env: &dyn Env) -> Self {
        let (file, mut issues, lines) = desktop::parse(text);
        let loaded = file.map(|file| finish(file, Syntax::Desktop, env, &mut issues));
        Self {
            loaded,
            issues,
            lines,
            syntax: Syntax::Desktop,
        }
    }

    /// The config, if nothing was wrong with it.
    pub(super) fn into_result(self, origin: &str) -> Result<Loaded, ConfigError> {
        match self.loaded {
            Some(loaded) if self.issues.is_empty() => Ok(loaded),
            _ => Err(ConfigError::resolve(
                origin,
                self.issues,
                Vec::new(),
                &self.lines,
            )),
        }
    }

    /// `sluice check`: beside what loading finds, what a start would meet
    /// only later (`lint`). The config and its warnings, rendered, when
    /// nothing is an error; else every problem, warnings too.
    pub(super) fn check(
        self,
        origin: &str,
        env: &dyn Env,
    ) -> Result<(Loaded, Vec<String>), ConfigError> {
        let (mut errors, mut warnings) = (self.issues, Vec::new());
        if let Some(loaded) = &self.loaded {
            for (severity, issue) in lint(&loaded.config, env, self.syntax) {
                match severity {
                    Severity::Error => errors.push(issue),
                    Severity::Warning => warnings.push(issue),
                }
            }
        }
        let found = ConfigError::resolve(origin, errors, warnings, &self.lines);
        match self.loaded {
            Some(loaded) if found.errors() == 0 => Ok((loaded, found.lines().collect())),
            _ => Err(found),
        }
    }
}

/// The second stage, on file types that may have lost refused values.
fn finish(mut file: File, syntax: Syntax, env: &dyn Env, issues: &mut Vec<Issue>) -> Loaded {
    let provenance = overrides::apply(&mut file, env, issues);
    let config = build::build(file, syntax, env, &provenance, issues);
    Loaded { config, provenance }
}

/// Reads `table` into the file types. serde stops at the first value it
/// refuses, so each refused key (or array item) is recorded with its line
/// and taken out, and the rest read again: the serde types stay the one
/// schema of what is accepted. None when a refusal points at nothing
/// that can be taken out, or after `MAX_REFUSED`.
fn file_types(
    text: &str,
    table: &mut Spanned<DeTable<'_>>,
    issues: &mut Vec<Issue>,
) -> Option<File> {
    for _ in 0..MAX_REFUSED {
        let err = match File::deserialize(toml::Deserializer::from(table.clone())) {
            Ok(file) => return Some(file),
            Err(e) => e,
        };
        let path = err.span().and_then(|s| locate(table.get_ref(), s.start));
        issues.push(serde_issue(&err, text, path.as_deref()));
        if !path.is_some_and(|path| remove(table.get_mut(), &path)) {
            return None;
        }
    }
    issues.push(Issue {
        at: At::Nowhere,
        message: format!(
            "more than {MAX_REFUSED} values refused; the rest of the file was not read"
        ),
    });
    None
}

/// Takes the entry at `path` out of `table`; false if there is none.
fn remove(table: &mut DeTable<'_>, path: &[Seg]) -> bool {
    match path {
        [Seg::Key(key)] => table.remove(key.as_str()).is_some(),
        [Seg::Key(key), rest @ ..] => match table.get_mut(key.as_str()).map(Spanned::get_mut) {
            Some(value) => remove_in(value, rest),
            None => false,
        },
        _ => false,
    }
}

fn remove_in(value: &mut DeValue<'_>, path: &[Seg]) -> bool {
    match (value, path) {
        (DeValue::Table(table), _) => remove(table, path),
        (DeValue::Array(items), [Seg::Item(i)]) if *i < items.len() => {
            let kept = std::mem::replace(items, DeArray::new());
            for (j, item) in kept.into_iter().enumerate() {
                if j != *i {
                    items.push(item);
                }
            }
            true
        }
        (DeValue::Array(items), [Seg::Item(i), rest @ ..]) => match items.get_mut(*i) {
            Some(item) => remove_in(item.get_mut(), rest),
            None => false,
        },
        _ => false,
    }
}
