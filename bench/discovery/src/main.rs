//! Issue 51's figures, printed as the markdown of bench/RESULTS.md's
//! "Search mode" section:
//!
//! 1. what `tools/list` costs a model in bytes and o200k_base tokens, list
//!    mode against search mode, for the real servers (server-everything,
//!    server-filesystem, server-memory) and for generated catalogues of
//!    1,000 and 20,000 tools; and one typical search result;
//! 2. search latency (p50/p99, client side) and the gateway's CPU per
//!    search at 20,000 tools, beside a forwarded `tools/call` and a `ping`;
//! 3. the gateway's memory grown by indexing 20,000 tools, per 1,000;
//! 4. the retrieval check: recall@1 and @5 of `queries::QUERIES` over the
//!    real servers' tools.
//!
//! Every server runs on loopback and is ended when the tool ends.
//!
//! Usage: discovery --sluice BIN --many-tools BIN --node-modules DIR
//!        [--searches N]

mod http;
mod queries;

use std::path::PathBuf;
use std::time::Instant;

use serde_json::{Value, json};

use http::{Gateway, Session};

struct Args {
    sluice: PathBuf,
    many_tools: PathBuf,
    node_modules: PathBuf,
    searches: usize,
}

fn args() -> Args {
    let mut a = Args {
        sluice: "target/release/sluice".into(),
        many_tools: "target/release/examples/many_tools".into(),
        node_modules: "tests/interop/node_modules".into(),
        searches: 2000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_default();
        match k.as_str() {
            "--sluice" => a.sluice = v.into(),
            "--many-tools" => a.many_tools = v.into(),
            "--node-modules" => a.node_modules = v.into(),
            "--searches" => a.searches = v.parse().unwrap_or(a.searches),
            _ => panic!("unknown argument {k}"),
        }
    }
    a
}

/// Backend tables for the three real servers.
fn real_backends(a: &Args, dir: &std::path::Path) -> String {
    let js = |p: &str| {
        a.node_modules
            .join("@modelcontextprotocol")
            .join(p)
            .join("dist/index.js")
            .canonicalize()
            .unwrap_or_else(|e| panic!("{p}: {e} (run npm ci in tests/interop)"))
    };
    format!(
        "[backends.everything]\ntransport = \"stdio\"\ncommand = \"node\"\nargs = [\"{}\", \"stdio\"]\n\
         [backends.filesystem]\ntransport = \"stdio\"\ncommand = \"node\"\nargs = [\"{}\", \"{}\"]\n\
         [backends.memory]\ntransport = \"stdio\"\ncommand = \"node\"\nargs = [\"{}\"]\nenv = {{ MEMORY_FILE_PATH = \"{}\" }}\n",
        js("server-everything").display(),
        js("server-filesystem").display(),
        dir.display(),
        js("server-memory").display(),
        dir.join("memory.jsonl").display(),
    )
}

fn generated(a: &Args, n: usize) -> String {
    format!(
        "[backends.gen]\ntransport = \"stdio\"\ncommand = \"{}\"\nargs = [\"--tools\", \"{n}\"]\n",
        a.many_tools.canonicalize().unwrap().display()
    )
}

/// A config serving `backends` twice: `/ns/list/mcp` in list mode and
/// `/ns/search/mcp` in search mode.
fn both_modes(backends: &str, names: &[&str]) -> String {
    let members = names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "{backends}\
         [namespaces.list]\nbackends = [{members}]\n\
         [namespaces.search]\nbackends = [{members}]\ndiscovery = \"search\"\n"
    )
}

struct Sizes {
    bytes: usize,
    tokens: usize,
}

fn sizes(bpe: &tiktoken_rs::CoreBPE, v: &Value) -> Sizes {
    let text = v.to_string();
    Sizes {
        bytes: text.len(),
        tokens: bpe.encode_ordinary(&text).len(),
    }
}

fn main() {
    let a = args();
    let bpe = tiktoken_rs::o200k_base().expect("o200k_base ships with tiktoken-rs");
    let dir = std::env::temp_dir().join(format!("sluice-discovery-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    println!("### Context: what `tools/list` costs a model\n");
    println!(
        "Sizes of the JSON-RPC `result` as the client receives it (a list longer than a page, 1,000 tools, as its pages' tools in one result); tokens by o200k_base (tiktoken-rs). A search result is `search_tools` with the default limit (8).\n"
    );
    println!(
        "| backends | tools | list mode: bytes / tokens | search mode `tools/list`: bytes / tokens | one search result: bytes / tokens (query) |"
    );
    println!("|---|---|---|---|---|");
    let real = real_backends(&a, &dir);
    let cases: Vec<(String, String, Vec<&str>, &str)> = vec![
        (
            "server-everything".into(),
            real.clone(),
            vec!["everything"],
            "add two numbers",
        ),
        (
            "server-filesystem".into(),
            real.clone(),
            vec!["filesystem"],
            "read the contents of a text file",
        ),
        (
            "server-memory".into(),
            real.clone(),
            vec!["memory"],
            "search the knowledge graph",
        ),
        (
            "all three".into(),
            real.clone(),
            vec!["everything", "filesystem", "memory"],
            "read the contents of a text file",
        ),
        (
            "generated, 1,000".into(),
            generated(&a, 1000),
            vec!["gen"],
            "create a new jira customer",
        ),
        (
            "generated, 20,000".into(),
            generated(&a, 20000),
            vec!["gen"],
            "create a new jira customer",
        ),
    ];
    let mut kept: Option<Gateway> = None;
    let mut recalled = String::new();
    for (label, backends, names, query) in &cases {
        let gw = Gateway::start(&a.sluice, &both_modes(backends, names), &dir);
        let mut list = gw.session("list");
        let listed = list.whole_list();
        let tools = listed["tools"].as_array().map_or(0, Vec::len);
        let full = sizes(&bpe, &listed);
        let mut search = gw.session("search");
        let short = sizes(&bpe, &search.request("tools/list", json!({}))["result"]);
        let found = search.call("search_tools", json!({ "query": query }));
        let one = sizes(&bpe, &found["result"]);
        println!(
            "| {label} | {tools} | {} / {} | {} / {} | {} / {} (\"{query}\") |",
            fmt(full.bytes),
            fmt(full.tokens),
            fmt(short.bytes),
            fmt(short.tokens),
            fmt(one.bytes),
            fmt(one.tokens)
        );
        if label == "generated, 20,000" {
            kept = Some(gw);
        } else if label == "all three" {
            recalled = recall(&mut search, tools);
        }
    }
    print!("{recalled}");
    let gw = kept.unwrap();
    latency(&a, &gw);
    memory(&a, &dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Section 4, run while the real servers' gateway is up.
fn recall(search: &mut Session, tools: usize) -> String {
    use std::fmt::Write as _;
    let mut at1 = 0;
    let mut at5 = 0;
    let mut misses = Vec::new();
    for (query, want) in queries::QUERIES {
        let r = search.call("search_tools", json!({ "query": query, "limit": 5 }));
        let names: Vec<String> = r["result"]["structuredContent"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        let rank = names.iter().position(|n| n == want);
        at1 += usize::from(rank == Some(0));
        at5 += usize::from(rank.is_some());
        if rank != Some(0) {
            misses.push(format!(
                "\"{query}\": wanted `{want}`, got {}",
                names
                    .iter()
                    .take(3)
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let n = queries::QUERIES.len() as f64;
    let mut out = String::from("\n### Retrieval check\n\n");
    let _ = writeln!(
        out,
        "{} queries over the {tools} tools of server-everything, server-filesystem and server-memory (`bench/discovery/src/queries.rs`): **recall@1 {:.2}** ({at1}/{}), **recall@5 {:.2}** ({at5}/{}); target recall@5 >= 0.9.\n",
        queries::QUERIES.len(),
        at1 as f64 / n,
        queries::QUERIES.len(),
        at5 as f64 / n,
        queries::QUERIES.len()
    );
    if !misses.is_empty() {
        out.push_str("Not first (top three shown):\n\n");
        for m in misses {
            let _ = writeln!(out, "- {m}");
        }
    }
    out
}

/// Section 2: `searches` searches at 20,000 tools, one at a time.
fn latency(a: &Args, gw: &Gateway) {
    let words = [
        "create a jira customer",
        "delete github branch",
        "list slack channels",
        "export stripe invoices",
        "summarize a notion document",
        "archive zendesk ticket",
        "postgres table",
        "kubernetes deployment",
        "restore a dropbox file",
        "who is on call in pagerduty",
        "send a twilio message",
        "share a figma file",
    ];
    let mut search = gw.session("search");
    // Warm: the index is built by the first search.
    search.call("search_tools", json!({"query": "warm up"}));
    let run = |session: &mut Session, what: &dyn Fn(&mut Session, usize)| {
        let cpu = gw.cpu_seconds();
        let mut took = Vec::with_capacity(a.searches);
        for i in 0..a.searches {
            let t = Instant::now();
            what(session, i);
            took.push(t.elapsed().as_secs_f64() * 1e6);
        }
        let cpu = (gw.cpu_seconds() - cpu) / a.searches as f64 * 1e6;
        took.sort_by(f64::total_cmp);
        let p = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
        (p(0.5), p(0.99), cpu)
    };
    let searched = run(&mut search, &|s, i| {
        s.call("search_tools", json!({"query": words[i % words.len()]}));
    });
    let mut list = gw.session("list");
    let called = run(&mut list, &|s, _| {
        s.call("gen__slack_list_channel", json!({"limit": 1}));
    });
    let pinged = run(&mut list, &|s, _| {
        s.request("ping", json!({}));
    });
    println!("\n### Search latency and CPU at 20,000 tools\n");
    println!(
        "{} requests of each kind, one at a time on one connection, client and gateway on the same 2 cores; latency is the client's round trip; CPU is the gateway process's user+system time (its children not included) over the run, per request.\n",
        a.searches
    );
    println!("| request | p50 | p99 | gateway CPU per request |");
    println!("|---|---|---|---|");
    for (what, (p50, p99, cpu)) in [
        ("`search_tools` (limit 8, 12 queries in turn)", searched),
        ("`tools/call` forwarded to the stdio backend", called),
        ("`ping` (answered by the gateway)", pinged),
    ] {
        println!("| {what} | {p50:.0} µs | {p99:.0} µs | {cpu:.0} µs |");
    }
}

/// Section 3: the gateway's resident memory before and after the first
/// search of 20,000 tools built the index.
fn memory(a: &Args, dir: &std::path::Path) {
    let config = format!(
        "{}[namespaces.search]\nbackends = [\"gen\"]\ndiscovery = \"search\"\n",
        generated(a, 20000)
    );
    let gw = Gateway::start(&a.sluice, &config, dir);
    let mut s = gw.session("search");
    // The backend's list read and cached first (as any list does), so the
    // difference is the index.
    s.call(
        "call_tool",
        json!({"name": "gen__slack_list_channel", "arguments": {}}),
    );
    let before = gw.rss_kib();
    s.call("search_tools", json!({"query": "build the index"}));
    let after = gw.rss_kib();
    let per = (after as f64 - before as f64) / 20.0;
    println!("\n### Index memory\n");
    println!(
        "Gateway RSS before and after the first search of 20,000 tools (which builds the index; the catalogue was already read for a call): {} KiB -> {} KiB, **{per:.0} KiB per 1,000 tools** (the index holds each tool's definition as listed, its terms' postings and its names).",
        fmt(before as usize),
        fmt(after as usize)
    );
}

fn fmt(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
