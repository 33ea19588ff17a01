//! The runtime client connections run on (`SLUICE_RUNTIME`, see
//! docs/operations.md): per-core (the default) and work-stealing both serve
//! many connections to stdio and HTTP backends, give every connection back,
//! and stop cleanly. The HTTP code they are served with (`SLUICE_HTTP`) is
//! chosen the same way; the whole suite runs on each (`scripts/test`).

mod support;

use std::process::Command;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::json;
use support::*;

/// A process's threads: (name, voluntary context switches so far).
fn threads(pid: u32) -> Vec<(String, u64)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|t| {
            let name = std::fs::read_to_string(t.path().join("comm")).ok()?;
            let status = std::fs::read_to_string(t.path().join("status")).ok()?;
            let switches = status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
                .trim()
                .parse()
                .ok()?;
            Some((name.trim().to_owned(), switches))
        })
        .collect()
}

/// The per-core worker threads (the main thread's runtime is not one).
fn workers(pid: u32) -> Vec<(String, u64)> {
    threads(pid)
        .into_iter()
        .filter(|(name, _)| name.starts_with("sluice-worker-"))
        .collect()
}

async fn serves_many_connections(runtime: &str, expected_workers: usize) {
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let toml = format!(
        "{}\n{}",
        demo_backend("demo"),
        http_backend("web", &fx.url(), "")
    );
    let gw = Gateway::start_with_env(
        &toml,
        &[("SLUICE_RUNTIME", runtime), ("TOKIO_WORKER_THREADS", "3")],
    );
    assert_eq!(
        workers(gw.pid()).len(),
        expected_workers,
        "{:?}",
        threads(gw.pid())
    );

    // Six clients, each with its own connections, calling concurrently.
    let clients: Vec<Http> = (0..6).map(|_| Http::new(gw.url("/mcp"))).collect();
    join_all(clients.iter().enumerate().map(|(i, http)| async move {
        let sid = http.initialize().await;
        for round in 0..5u64 {
            let text = format!("{i}-{round}");
            let r = http
                .tool(&sid, 2 + 2 * round, "web__echo", json!({ "text": text }))
                .await;
            assert_eq!(text_of(&r), text);
            let r = http
                .tool(
                    &sid,
                    3 + 2 * round,
                    "demo__add",
                    json!({ "a": i, "b": round }),
                )
                .await;
            assert_eq!(
                r["result"]["structuredContent"]["sum"].as_f64(),
                Some((i as u64 + round) as f64),
                "{r}"
            );
        }
    }))
    .await;
    // Connections went to every worker: each slept waiting for its
    // requests' backends dozens of times (an idle worker: once or twice).
    for (name, switches) in workers(gw.pid()) {
        assert!(switches >= 10, "{name} served nothing: {switches} switches");
    }
    // The metrics request counts its own connection.
    assert!(gw.metrics().get("sluice_connections_open") >= 7.0);
    drop(clients);
    wait_until(Duration::from_secs(10), || {
        gw.metrics().get("sluice_connections_open") == 1.0
    });
    // One shared session with the HTTP backend, closed at shutdown.
    assert_eq!(fx.live(), 1);
    assert_eq!(gw.stop(), Some(0));
    assert_eq!(fx.live(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_core_runtime_serves_many_connections() {
    // Three runtimes: the main thread's and two more.
    serves_many_connections("per-core", 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_work_stealing_runtime_serves_many_connections() {
    serves_many_connections("work-stealing", 0).await;
}

/// `var=value` stops the gateway at start with exit code 2 and a message
/// naming the variable and `hint`, a value it takes.
fn refused_at_start(var: &str, value: &str, hint: &str) {
    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env(var, value)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(var) && err.contains(hint), "{err}");
}

#[test]
fn an_unknown_runtime_is_a_config_error() {
    refused_at_start("SLUICE_RUNTIME", "fastest", "per-core");
}

#[test]
fn an_unknown_http_engine_is_a_config_error() {
    refused_at_start("SLUICE_HTTP", "reqwest", "hyper");
}
