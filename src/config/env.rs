//! The environment as an input. Loading reads variables only through `Env`,
//! so tests pass a map and never depend on (or mutate) the process
//! environment.

use std::collections::HashMap;

use super::SecretVars;

pub trait Env {
    fn var(&self, name: &str) -> Option<String>;
    fn vars(&self) -> Vec<(String, String)>;

    /// Where `var(name)` came from, for a message about its value.
    fn origin(&self, name: &str) -> String {
        name.to_owned()
    }
}

/// The real process environment. Variables whose name or value is not valid
/// UTF-8 are treated as unset: config values are UTF-8 text. A variable
/// that is unset while `NAME_FILE` names a file takes that file's text (one
/// trailing newline dropped): a secret mounted as a file, which a reload
/// reads again where a signal cannot change the environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

/// A `NAME_FILE` file larger than this is taken as unset.
const MAX_FILE: u64 = 1024 * 1024;

impl Env for ProcessEnv {
    fn origin(&self, name: &str) -> String {
        match std::env::var_os(name) {
            None if std::env::var_os(format!("{name}_FILE")).is_some() => {
                format!("the file {name}_FILE names")
            }
            _ => name.to_owned(),
        }
    }

    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().or_else(|| {
            use std::io::Read as _;
            let path = std::env::var_os(format!("{name}_FILE"))?;
            let mut text = String::new();
            std::fs::File::open(path)
                .ok()?
                .take(MAX_FILE + 1)
                .read_to_string(&mut text)
                .ok()?;
            if text.len() as u64 > MAX_FILE {
                return None;
            }
            if text.ends_with('\n') {
                text.pop();
                if text.ends_with('\r') {
                    text.pop();
                }
            }
            Some(text)
        })
    }

    fn vars(&self) -> Vec<(String, String)> {
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect()
    }
}

impl Env for HashMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }

    fn vars(&self) -> Vec<(String, String)> {
        self.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

/// Why `${VAR}` interpolation failed; rendered after the key it occurred in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum InterpolateError {
    Unset(String),
    /// Why the variable may not leave the gateway.
    Secret(String),
    Unterminated,
    EmptyName,
}

impl std::fmt::Display for InterpolateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unset(var) => write!(f, "environment variable `{var}` is not set"),
            Self::Secret(why) => write!(f, "{why}, and never leaves it"),
            Self::Unterminated => f.write_str("unterminated `${` (write `$$` for a literal `$`)"),
            Self::EmptyName => f.write_str("empty variable name in `${}`"),
        }
    }
}

/// Replaces `${VAR}` with the variable's value and `$$` with `$`. A `$`
/// followed by anything else is kept as written, so values such as `$HOME`
/// or a trailing `$` pass through unchanged. A value goes to a backend (or
/// a child), so a variable among `secrets` is refused.
pub(super) fn interpolate(
    value: &str,
    env: &dyn Env,
    secrets: &SecretVars,
) -> Result<String, InterpolateError> {
    interpolate_for(value, env, secrets, None)
}

/// `interpolate` for principal `owner`'s credentials, which may name the
/// variables that hold them (and no other principal's).
pub(super) fn interpolate_for(
    value: &str,
    env: &dyn Env,
    secrets: &SecretVars,
    owner: Option<&str>,
) -> Result<String, InterpolateError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            let end = tail.find('}').ok_or(InterpolateError::Unterminated)?;
            let name = &tail[..end];
            if name.is_empty() {
                return Err(InterpolateError::EmptyName);
            }
            if let Some(why) = secrets.why_for(name, owner) {
                return Err(InterpolateError::Secret(why));
            }
            let v = env
                .var(name)
                .ok_or_else(|| InterpolateError::Unset(name.to_owned()))?;
            out.push_str(&v);
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The variables `${VAR}` names in `value` (as `interpolate` reads it; an
/// unterminated reference names none).
pub(super) fn referenced(value: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            let Some(end) = tail.find('}') else { break };
            names.extend(Some(&tail[..end]).filter(|n| !n.is_empty()));
            rest = &tail[end + 1..];
        } else {
            rest = after;
        }
    }
    names
}
