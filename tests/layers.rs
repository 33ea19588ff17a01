//! The layers of `src/`, declared here and held by the build: a module
//! imports only modules of its own layer or below (an import of a higher
//! one fails this test), and no module imports, through any chain, one that
//! imports it. docs/architecture.md draws the same order.
//!
//! Read from the source's text: every `crate::NAME` a file names (in a
//! `use` or inline) is an import of `NAME`. Unit-test files (`tests.rs`,
//! `tests/`) are left out: tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Bottom to top. A module missing from this list fails the test, so a
/// new one is placed on purpose.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "vocabulary and the runtime's own utilities",
        &[
            "vocab",
            "allocator",
            "budget",
            "cancel_flag",
            "clock",
            "fast_map",
            "raw_io",
            "workers",
            "timers",
            "demo_server",
            "std_pipes",
        ],
    ),
    (
        "the protocol and JSON-RPC",
        &["jsonrpc", "mirror", "protocol"],
    ),
    ("HTTP/1.1: the codec and the client", &["http1"]),
    ("config", &["config"]),
    ("metrics", &["metrics"]),
    ("traces", &["traces"]),
    ("client sessions", &["sessions"]),
    ("backends", &["upstream"]),
    (
        "what uses backends: cluster state, routing, identity",
        &["cluster", "router", "auth"],
    ),
    ("the edge, and the probe beside it", &["front", "probe"]),
    ("reloading", &["reload"]),
    ("wiring", &["app", "stdio", "catalogue", "cli", "fuzzing"]),
    ("the binary", &["lib", "main"]),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tests") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// `src/front/conn/feed.rs` is in `front`; `src/app.rs` is `app`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next().unwrap().as_os_str();
    first.to_str().unwrap().trim_end_matches(".rs").to_owned()
}

/// Every `crate::NAME` in `text`, outside comments.
fn imports(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let preceded = rest[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$');
            rest = &rest[i + "crate::".len()..];
            if preceded {
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

/// module -> (module it imports -> a file that does).
fn graph() -> BTreeMap<String, BTreeMap<String, PathBuf>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    for file in files {
        let module = module_of(&src, &file);
        let text = std::fs::read_to_string(&file).unwrap();
        let edges = graph.entry(module.clone()).or_default();
        for import in imports(&text) {
            if import != module {
                edges.entry(import).or_insert_with(|| file.clone());
            }
        }
    }
    graph
}

#[test]
fn every_import_runs_down_the_layers() {
    let graph = graph();
    let mut problems = Vec::new();
    for (module, edges) in &graph {
        let Some(from) = layer_of(module) else {
            problems.push(format!("src/{module}: in no layer (add it to LAYERS)"));
            continue;
        };
        for (import, file) in edges {
            match layer_of(import) {
                Some(to) if to <= from => {}
                Some(to) => problems.push(format!(
                    "{}: {module} ({}) imports {import} ({}), a layer above it",
                    file.display(),
                    LAYERS[from].0,
                    LAYERS[to].0
                )),
                None => problems.push(format!("{}: imports {import}, in no layer", file.display())),
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn no_module_imports_itself_through_others() {
    let graph = graph();
    // Depth-first, keeping the path: a module met again on it closes a circle.
    fn visit<'a>(
        graph: &'a BTreeMap<String, BTreeMap<String, PathBuf>>,
        module: &'a str,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
        circles: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|m| *m == module) {
            let mut circle = path[at..].to_vec();
            circle.push(module);
            circles.push(circle.join(" -> "));
            return;
        }
        if !done.insert(module) {
            return;
        }
        path.push(module);
        for next in graph.get(module).into_iter().flat_map(|e| e.keys()) {
            visit(graph, next, path, done, circles);
        }
        path.pop();
    }
    let mut circles = Vec::new();
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        visit(&graph, module, &mut Vec::new(), &mut done, &mut circles);
    }
    assert!(circles.is_empty(), "\n{}", circles.join("\n"));
}

/// The reader of imports sees what it must: a name after `crate::`, not
/// one inside a longer path or a comment.
#[test]
fn imports_are_read_as_written() {
    let text = "use crate::vocab::{A, B};\nlet x = crate::http1::client::Client::new();\n\
                // crate::front is only mentioned\nlet y = $crate::jsonrpc::x; mycrate::z;";
    let found: Vec<String> = imports(text).into_iter().collect();
    assert_eq!(found, ["http1", "vocab"]);
}
