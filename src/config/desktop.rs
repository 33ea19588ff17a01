//! The `mcpServers` JSON that desktop MCP clients use:
//! `{"mcpServers": {"name": {"command", "args", "env"} | {"url", "headers"}}}`.
//! Each server becomes a backend with default settings; the build stage then
//! applies the same validation and `${VAR}` interpolation as for TOML.
//! Top-level keys other than `mcpServers` are ignored, because desktop
//! clients keep their own settings in the same file; keys inside a server
//! entry are checked, since a misspelt one would change what runs.

use std::path::PathBuf;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::error::{At, Issue, KeyLines, describe_serde, dotted, key_segment};
use super::file::{File, FileBackend, FileTransport};

// Servers stay raw until each is parsed on its own: that keeps their
// position (for line numbers) and the order of their `env` and `headers`,
// which `serde_json::Value` would sort.
#[derive(Deserialize)]
struct Desktop<'a> {
    #[serde(rename = "mcpServers", borrow)]
    mcp_servers: Option<IndexMap<String, &'a RawValue>>,
}

#[derive(Deserialize)]
struct Probe {
    disabled: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Server {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<IndexMap<String, String>>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    headers: Option<IndexMap<String, String>>,
    // Entries with `true` are skipped before this; `false` is allowed.
    #[serde(rename = "disabled")]
    _disabled: Option<bool>,
}

/// The file types, as far as they could be read (None: not JSON, or no
/// `mcpServers`), every problem found, and the line of each key. Each
/// server is read on its own, and each of its keys too, so one refused
/// value hides neither another's nor any later check's.
pub(super) fn parse(text: &str) -> (Option<File>, Vec<Issue>, KeyLines) {
    let doc: Desktop<'_> = match serde_json::from_str(text) {
        Ok(doc) => doc,
        Err(e) => {
            let issue = Issue {
                at: position(&e, 1),
                // The column too: a file written on one line is all line 1.
                message: format!(
                    "invalid JSON at column {}: {}",
                    e.column(),
                    without_position(&e)
                ),
            };
            return (None, vec![issue], KeyLines::default());
        }
    };
    let mut lines = KeyLines::default();
    let mut path = vec!["mcpServers".to_owned()];
    for (name, raw) in doc.mcp_servers.iter().flatten() {
        path.push(name.clone());
        lines.insert(path.clone(), line_in(text, raw.get()));
        walk(text, raw, &mut path, &mut lines);
        path.pop();
    }
    let Some(servers) = doc.mcp_servers else {
        let issue = Issue {
            at: At::Nowhere,
            message: "missing the `mcpServers` object".to_owned(),
        };
        return (None, vec![issue], lines);
    };

    let mut issues = Vec::new();
    let mut file = File::default();
    for (name, raw) in servers {
        let disabled = serde_json::from_str::<Probe>(raw.get())
            .ok()
            .and_then(|p| p.disabled);
        if disabled == Some(Value::Bool(true)) {
            continue;
        }
        let Some(server) = server(text, &name, raw, &mut issues) else {
            continue;
        };
        let transport = match server.kind.as_deref() {
            None => None,
            Some("stdio") => Some(FileTransport::Stdio),
            Some("http" | "streamable-http" | "streamableHttp") => Some(FileTransport::Http),
            Some("sse") => Some(FileTransport::Sse),
            Some(other) => {
                let path = ["mcpServers", name.as_str(), "type"];
                issues.push(Issue {
                    at: At::Key(path.iter().map(|s| (*s).to_owned()).collect()),
                    message: format!(
                        "`{}`: unknown value `{other}`, expected one of \
                         `stdio`, `http`, `streamable-http`, `sse`",
                        dotted(&path)
                    ),
                });
                continue;
            }
        };
        let backend = FileBackend {
            transport,
            command: server.command,
            args: server.args,
            env: server.env,
            cwd: server.cwd,
            url: server.url,
            headers: server.headers,
            ..FileBackend::default()
        };
        file.backends.insert(name, backend);
    }
    (Some(file), issues, lines)
}

/// One server entry, each key read alone (as a one-key object, which
/// `Server`'s own `Deserialize` checks), so every refused key is named;
/// what is left is read together. None if the entry is not an object.
fn server(text: &str, name: &str, raw: &RawValue, issues: &mut Vec<Issue>) -> Option<Server> {
    let refused = |e: &serde_json::Error, first_line: usize, key: Option<&str>| {
        let mut path = vec!["mcpServers".to_owned(), key_segment(name)];
        path.extend(key.map(key_segment));
        Issue {
            at: position(e, first_line),
            message: describe_serde(&without_position(e), Some(&path)),
        }
    };
    let entries = match serde_json::from_str::<IndexMap<String, &RawValue>>(raw.get()) {
        Ok(entries) => entries,
        Err(_) => {
            let e = serde_json::from_str::<Server>(raw.get()).err()?;
            issues.push(refused(&e, line_in(text, raw.get()), None));
            return None;
        }
    };
    let mut kept = Vec::new();
    for (key, value) in entries {
        let key_json = serde_json::to_string(&key).unwrap_or_default();
        let one = format!("{{{key_json}:{}}}", value.get());
        match serde_json::from_str::<Server>(&one) {
            Ok(_) => kept.push(format!("{key_json}:{}", value.get())),
            Err(e) => issues.push(refused(&e, line_in(text, value.get()), Some(&key))),
        }
    }
    // Each key read alone, so together they read too.
    serde_json::from_str(&format!("{{{}}}", kept.join(","))).ok()
}

/// Records the line of every key and array item under `path`, as
/// [`KeyLines`] holds them for TOML, down to `mcpServers.NAME.env.KEY`
/// (deeper is nothing the build stage names, and the JSON parser, which
/// skips values without recursing, has let any depth through).
fn walk(text: &str, raw: &RawValue, path: &mut Vec<String>, lines: &mut KeyLines) {
    const DEEPEST: usize = 4;
    if path.len() >= DEEPEST {
        return;
    }
    let mut visit = |path: &mut Vec<String>, step: String, value: &RawValue| {
        path.push(step);
        lines.insert(path.clone(), line_in(text, value.get()));
        walk(text, value, path, lines);
        path.pop();
    };
    let s = raw.get();
    if s.starts_with('{') {
        if let Ok(map) = serde_json::from_str::<IndexMap<String, &RawValue>>(s) {
            for (key, value) in map {
                visit(path, key, value);
            }
        }
    } else if s.starts_with('[')
        && let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(s)
    {
        for (i, value) in items.into_iter().enumerate() {
            visit(path, i.to_string(), value);
        }
    }
}

/// Where `e` points, given the line its input's first line falls on.
fn position(e: &serde_json::Error, first_line: usize) -> At {
    if e.line() > 0 {
        At::Line(first_line + e.line() - 1)
    } else {
        At::Nowhere
    }
}

/// serde_json appends " at line L column C"; the line goes in the prefix.
fn without_position(e: &serde_json::Error) -> String {
    let full = e.to_string();
    match full.rsplit_once(" at line ") {
        Some((message, _)) => message.to_owned(),
        None => full,
    }
}

/// The line `fragment` (a slice of `text`) starts on.
fn line_in(text: &str, fragment: &str) -> usize {
    let offset = (fragment.as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
    super::error::line_of(text, offset)
}
