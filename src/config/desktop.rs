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

use super::error::{At, Issue, describe_serde};
use super::file::{File, FileBackend, FileTransport};

#[derive(Deserialize)]
struct Desktop {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<IndexMap<String, Value>>,
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
    let doc: Desktop = serde_json::from_str(text).map_err(|e| {
        let full = e.to_string();
        // serde_json appends the position; the line goes in the prefix instead.
        let message = full
            .rsplit_once(" at line ")
            .map_or(full.as_str(), |(m, _)| m);
        vec![Issue {
            at: if e.line() > 0 {
                At::Line(e.line())
            } else {
                At::Nowhere
            },
            message: format!("invalid JSON: {message}"),
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
    for (name, value) in servers {
        if value.get("disabled").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let path = vec!["mcpServers".to_owned(), name.clone()];
        let server = match Server::deserialize(&value) {
            Ok(server) => server,
            Err(e) => {
                let message = e.to_string();
                let path = if message.starts_with("unknown field") {
                    with(&path, "?")
                } else {
                    path
                };
                issues.push(Issue {
                    at: At::Nowhere,
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
                        "`mcpServers.{name}.type`: unknown value `{other}`, expected one of \
                         `stdio`, `http`, `streamable-http`, `sse`"
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

/// `describe_serde` names the table from the path minus its last segment,
/// which for an unknown key is the key itself.
fn with(path: &[String], last: &str) -> Vec<String> {
    let mut p = path.to_vec();
    p.push(last.to_owned());
    p
}
