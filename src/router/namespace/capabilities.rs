//! What a namespace offers its clients at `initialize`: its backends'
//! capabilities merged, and their instructions.

use serde_json::{Value, json};

use super::Namespace;
use crate::config::Prefix;
use crate::router::names;

impl Namespace {
    /// Capabilities advertised to clients: the union of the healthy
    /// backends'. Tools are always offered: a gateway exists to aggregate them.
    pub fn capabilities(&self) -> Value {
        let infos: Vec<_> = self
            .members
            .iter()
            .filter_map(|m| m.backend.info())
            .collect();
        let has = |c: &str| infos.iter().any(|i| i.has(c));
        let mut caps = serde_json::Map::new();
        caps.insert("tools".into(), json!({ "listChanged": true }));
        if has("prompts") {
            caps.insert("prompts".into(), json!({ "listChanged": true }));
        }
        if has("resources") {
            let subscribe = infos.iter().any(|i| {
                i.capabilities
                    .get("resources")
                    .and_then(|r| r.get("subscribe"))
                    == Some(&json!(true))
            });
            caps.insert(
                "resources".into(),
                json!({ "listChanged": true, "subscribe": subscribe }),
            );
        }
        if has("completions") {
            caps.insert("completions".into(), json!({}));
        }
        // Extensions (tasks, ...) that any backend offers, first one wins.
        let mut extensions = serde_json::Map::new();
        for info in &infos {
            if let Some(Value::Object(ext)) = info.capabilities.get("extensions") {
                for (k, v) in ext {
                    extensions.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
        if !extensions.is_empty() {
            caps.insert("extensions".into(), Value::Object(extensions));
        }
        // 2025-11-25 tasks: what the first backend that has them offers
        // (task ids are routed back to the backend that made them).
        if let Some(tasks) = infos.iter().find_map(|i| i.capabilities.get("tasks")) {
            caps.insert("tasks".into(), tasks.clone());
        }
        caps.insert("logging".into(), json!({}));
        Value::Object(caps)
    }

    pub fn instructions(&self) -> Option<String> {
        let parts: Vec<String> = self
            .members
            .iter()
            .filter_map(|m| {
                let text = m.backend.info()?.instructions.clone()?;
                // The backend names its tools, prompts and resources as it
                // serves them; here they carry its prefix.
                Some(match self.prefix {
                    Prefix::Always => format!(
                        "[{0}: its names are served here as `{1}`, its resources as `{2}`] {text}",
                        m.backend.name,
                        names::prefixed(&m.backend.name, "NAME"),
                        names::prefixed_uri(&m.backend.name, "URI"),
                    ),
                    Prefix::Never => format!("[{}] {text}", m.backend.name),
                })
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }
}
