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

use super::error::{At, Issue, describe_serde, dotted, key_segment};
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

pub(super) fn parse(text: &str) -> Result<File, Vec<Issue>> {
    let doc: Desktop<'_> = serde_json::from_str(text).map_err(|e| {
        vec![Issue {
            at: position(&e, 1),
            // The column too: a file written on one line is all line 1.
            message: format!(
                "invalid JSON at column {}: {}",
                e.column(),
                without_position(&e)
            ),
        }]
    })?;
    let Some(servers) = doc.mcp_servers else {
        return Err(vec![Issue {
            at: At::Nowhere,
            message: "missing the `mcpServers` object".to_owned(),
        }]);
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
        let server = match serde_json::from_str::<Server>(raw.get()) {
            Ok(server) => server,
            Err(e) => {
                let message = without_position(&e);
                let mut path = vec!["mcpServers".to_owned(), key_segment(&name)];
                if message.starts_with("unknown field") {
                    // `describe_serde` takes the key from the message and
                    // names the table from the rest of the path.
                    path.push(String::new());
                }
                issues.push(Issue {
                    at: position(&e, line_of(text, raw.get())),
                    message: describe_serde(&message, Some(&path)),
                });
                continue;
            }
        };
        let transport = match server.kind.as_deref() {
            None => None,
            Some("stdio") => Some(FileTransport::Stdio),
            Some("http" | "streamable-http" | "streamableHttp") => Some(FileTransport::Http),
            Some("sse") => Some(FileTransport::Sse),
            Some(other) => {
                issues.push(Issue {
                    at: At::Nowhere,
                    message: format!(
                        "`{}`: unknown value `{other}`, expected one of \
                         `stdio`, `http`, `streamable-http`, `sse`",
                        dotted(&["mcpServers", name.as_str(), "type"])
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
    if issues.is_empty() {
        Ok(file)
    } else {
        Err(issues)
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
fn line_of(text: &str, fragment: &str) -> usize {
    let offset = (fragment.as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
