//! The probed server's memory: the resident set of a process and all its
//! descendants (children hold per-session state too: a child per session
//! is one way to leak), or `process_resident_memory_bytes` scraped from a
//! Prometheus endpoint.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::StreamExt;
use http::{Method, Uri};

use crate::http1::client::Client;

pub(super) enum Memory {
    Tree(u32),
    Metrics(Client, Uri),
}

impl Memory {
    pub(super) fn metrics(url: &str) -> Result<Memory, String> {
        let uri: Uri = url.parse().map_err(|_| format!("not a URL: {url}"))?;
        let proxy = crate::http1::proxy::Proxy::from_process()?;
        Ok(Memory::Metrics(Client::new(proxy)?, uri))
    }

    /// Bytes resident now (None: the process is gone, or no answer).
    pub(super) async fn sample(&self) -> Option<u64> {
        match self {
            Memory::Tree(pid) => tree_rss(*pid),
            Memory::Metrics(client, uri) => scrape(client, uri).await,
        }
    }

    pub(super) fn describe(&self) -> String {
        match self {
            Memory::Tree(pid) => format!("RSS of pid {pid} and its descendants"),
            Memory::Metrics(_, uri) => format!("process_resident_memory_bytes from {uri}"),
        }
    }
}

fn tree_rss(root: u32) -> Option<u64> {
    let resident = |pid: u32| crate::metrics::resident_of(&pid.to_string());
    let mut parents: HashMap<u32, u32> = HashMap::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(ppid) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| parent_of(&s))
        {
            parents.insert(pid, ppid);
        }
    }
    let mut total = resident(root)?;
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (child, _) in parents.iter().filter(|(_, pp)| **pp == p) {
            total += resident(*child).unwrap_or(0);
            frontier.push(*child);
        }
    }
    Some(total)
}

/// The parent pid from `/proc/PID/stat` (after the `(comm)`, which may
/// hold spaces and parentheses).
fn parent_of(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// One scrape, headers and body within `SCRAPE`.
async fn scrape(client: &Client, uri: &Uri) -> Option<u64> {
    tokio::time::timeout(SCRAPE, scrape_unbounded(client, uri))
        .await
        .ok()?
}

const SCRAPE: Duration = Duration::from_secs(5);

async fn scrape_unbounded(client: &Client, uri: &Uri) -> Option<u64> {
    let target = client.target(uri).ok()?;
    let resp = client.request(Method::GET, &target).send().await.ok()?;
    let mut body = Vec::new();
    let mut chunks = std::pin::pin!(resp.bytes_stream());
    while let Some(Ok(chunk)) = chunks.next().await {
        body.extend_from_slice(&chunk);
        if body.len() > 16 * 1024 * 1024 {
            return None;
        }
    }
    let text = String::from_utf8_lossy(&body);
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (name, value) = l.split_once(' ')?;
            let bare = name.split('{').next()?;
            (bare == "process_resident_memory_bytes")
                .then(|| value.split_whitespace().next()?.parse::<f64>().ok())
                .flatten()
        })
        .map(|v| v as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn parent_pid_after_a_command_with_spaces() {
        assert_eq!(super::parent_of("123 (a b) c) S 77 123 123 0 -1"), Some(77));
    }
}
