//! A stdio MCP server with a generated catalogue: `--tools N` tools (1,000
//! by default) with realistic names, descriptions and parameters (a
//! service, a verb and an object each, `jira_create_ticket`), the test
//! backend of search mode (issue 51) and the catalogue of its benchmarks.
//! Its tool `grow {word}` adds a tool named `fresh_N_{word}` whose
//! description carries the word, then announces
//! `notifications/tools/list_changed`, so tests can watch a list change
//! reach the gateway's index. `--also NAME` adds a tool of that name.
//! Every other call answers with the tool's
//! name and arguments. It ends when stdin closes.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

const SERVICES: [(&str, &str); 40] = [
    ("github", "GitHub repositories"),
    ("gitlab", "GitLab projects"),
    ("jira", "Jira issue tracking"),
    ("linear", "Linear product planning"),
    ("slack", "Slack workspaces"),
    ("teams", "Microsoft Teams chats"),
    ("gmail", "the Gmail mailbox"),
    ("outlook", "the Outlook mailbox"),
    ("calendar", "Google Calendar"),
    ("drive", "Google Drive storage"),
    ("dropbox", "Dropbox storage"),
    ("s3", "Amazon S3 buckets"),
    ("postgres", "a PostgreSQL database"),
    ("mysql", "a MySQL database"),
    ("redis", "a Redis cache"),
    ("stripe", "Stripe payments"),
    ("shopify", "a Shopify store"),
    ("salesforce", "the Salesforce CRM"),
    ("hubspot", "the HubSpot CRM"),
    ("zendesk", "Zendesk customer support"),
    ("notion", "Notion workspaces"),
    ("confluence", "Confluence wiki spaces"),
    ("figma", "Figma design files"),
    ("sentry", "Sentry error monitoring"),
    ("datadog", "Datadog observability"),
    ("pagerduty", "PagerDuty on-call"),
    ("kubernetes", "a Kubernetes cluster"),
    ("docker", "the Docker engine"),
    ("terraform", "Terraform infrastructure state"),
    ("aws_ec2", "Amazon EC2 compute"),
    ("cloudflare", "Cloudflare zones"),
    ("vercel", "Vercel deployments"),
    ("twilio", "Twilio messaging"),
    ("zoom", "Zoom meetings"),
    ("asana", "Asana projects"),
    ("trello", "Trello boards"),
    ("airtable", "Airtable bases"),
    ("snowflake", "the Snowflake warehouse"),
    ("bigquery", "Google BigQuery datasets"),
    ("okta", "the Okta directory"),
];

const VERBS: [(&str, &str); 20] = [
    ("create", "Create a new"),
    ("get", "Get the details of one"),
    ("list", "List every"),
    ("update", "Update the fields of an existing"),
    ("delete", "Permanently delete a"),
    ("search", "Search by keyword for a"),
    ("archive", "Archive a"),
    ("restore", "Restore an archived"),
    ("export", "Export as CSV each"),
    ("import", "Import from a file a"),
    ("assign", "Assign to a person a"),
    ("comment_on", "Add a comment to a"),
    ("share", "Share with other people a"),
    ("copy", "Make a copy of a"),
    ("move", "Move to another place a"),
    ("tag", "Add labels to a"),
    ("watch", "Subscribe to changes of a"),
    ("lock", "Lock against edits a"),
    ("count", "Count how many exist of each"),
    ("summarize", "Write a short summary of a"),
];

const OBJECTS: [(&str, &str); 25] = [
    ("issue", "issue or bug report"),
    ("comment", "comment in a discussion"),
    ("file", "file with its contents"),
    ("folder", "folder of files"),
    ("user", "user account"),
    ("team", "team of people"),
    ("project", "project"),
    ("invoice", "invoice for a customer"),
    ("customer", "customer record"),
    ("order", "purchase order"),
    ("message", "chat message"),
    ("channel", "channel for conversations"),
    ("event", "calendar event or meeting"),
    ("ticket", "support ticket"),
    ("table", "database table"),
    ("record", "row or record"),
    ("report", "analytics report"),
    ("alert", "monitoring alert"),
    ("deployment", "deployment of a service"),
    ("secret", "stored secret or credential"),
    ("webhook", "webhook subscription"),
    ("dashboard", "dashboard of charts"),
    ("label", "label or tag"),
    ("branch", "branch of a repository"),
    ("document", "text document or page"),
];

/// Service, verb and object combinations.
const COMBINATIONS: usize = SERVICES.len() * VERBS.len() * OBJECTS.len();

/// The `i`th generated tool, as listed. The combinations are taken in a
/// scattered order (a stride prime to their count), so the first thousand
/// mix services, verbs and objects as a real catalogue would.
fn tool(i: usize) -> Value {
    let k = (i % COMBINATIONS) * 7919 % COMBINATIONS;
    let (service, where_) = SERVICES[k % SERVICES.len()];
    let (verb, doing) = VERBS[(k / SERVICES.len()) % VERBS.len()];
    let (object, what) = OBJECTS[(k / (SERVICES.len() * VERBS.len())) % OBJECTS.len()];
    let round = i / COMBINATIONS;
    let mut name = format!("{service}_{verb}_{object}");
    if round > 0 {
        name.push_str(&format!("_v{}", round + 1));
    }
    let mut properties = serde_json::Map::new();
    properties.insert(
        format!("{object}_id"),
        json!({"type": "string", "description": format!("The id of the {what}")}),
    );
    if matches!(verb, "create" | "update" | "comment_on") {
        properties.insert(
            "body".into(),
            json!({"type": "string", "description": format!("The text of the {what}")}),
        );
    }
    if matches!(verb, "list" | "search" | "export" | "count") {
        properties.insert(
            "query".into(),
            json!({"type": "string", "description": "Words to match, or empty for all"}),
        );
        properties.insert(
            "limit".into(),
            json!({"type": "integer", "description": "At most this many results"}),
        );
    }
    json!({
        "name": name,
        "title": format!("{} {}", title_case(verb), title_case(object)),
        "description": format!("{doing} {what} in {where_}."),
        "inputSchema": {"type": "object", "properties": properties},
        "annotations": {"readOnlyHint": matches!(verb, "get" | "list" | "search" | "export" | "count" | "summarize")},
    })
}

fn title_case(word: &str) -> String {
    word.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let mut count = 1000;
    let mut also = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--tools" => count = args.next().and_then(|n| n.parse().ok()).unwrap_or(count),
            "--also" => also.extend(args.next()),
            _ => {}
        }
    }
    let mut tools: Vec<Value> = (0..count).map(tool).collect();
    // Tools of a name a test chooses (a gateway tool's, say).
    tools.extend(also.iter().map(|name| {
        json!({
            "name": name,
            "description": "Echo the text back, as the backend's own tool.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        })
    }));
    tools.push(json!({
        "name": "grow",
        "description": "Test hook: add a tool whose description carries `word`, and announce the change.",
        "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    }));
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut grown = 0;
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").cloned() else {
            continue; // a notification
        };
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let mut notify = false;
        let answer = match msg["method"].as_str().unwrap_or_default() {
            "initialize" => Ok(json!({
                "protocolVersion": params["protocolVersion"].as_str().unwrap_or("2025-06-18"),
                "capabilities": {"tools": {"listChanged": true}},
                "serverInfo": {"name": "many-tools", "version": "0"},
            })),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({ "tools": tools })),
            "tools/call" if params["name"] == "grow" => {
                grown += 1;
                let word = params["arguments"]["word"].as_str().unwrap_or("new");
                let name = format!("fresh_{grown}_{word}");
                tools.push(json!({
                    "name": name,
                    "description": format!("A tool added while running: {word}."),
                    "inputSchema": {"type": "object"},
                }));
                notify = true;
                Ok(json!({"content": [{"type": "text", "text": name}]}))
            }
            "tools/call" => {
                let text = format!("{} {}", params["name"], params["arguments"]);
                Ok(json!({"content": [{"type": "text", "text": text}]}))
            }
            other => Err(json!({"code": -32601, "message": format!("Method not found: {other}")})),
        };
        let reply = match answer {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        if writeln!(out, "{reply}").is_err() {
            return;
        }
        if notify {
            let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
            if writeln!(out, "{changed}").is_err() {
                return;
            }
        }
        if out.flush().is_err() {
            return;
        }
    }
}
