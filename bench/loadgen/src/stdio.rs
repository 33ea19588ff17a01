//! The physical limit for a stdio backend: the same `tools/call` workload
//! written straight to the server's stdin (one JSON-RPC message a line),
//! with `concurrency` requests in flight, no HTTP and no gateway. The load
//! generator spawns the server itself (its own child, ended when done).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{Barrier, mpsc, oneshot};
use tokio::time::Instant;

use crate::client::{Failure, REQUEST_TIMEOUT, answer_text, check_tool_result};
use crate::forward::Run;
use crate::procs;
use crate::stats::Tally;

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<String>>>>;

struct Server {
    child: Child,
    lines: mpsc::UnboundedSender<String>,
    pending: Pending,
    next_id: Arc<std::sync::atomic::AtomicU64>,
}

#[derive(Deserialize)]
struct IdOnly<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<&'a str>,
}

async fn writer(mut stdin: ChildStdin, mut rx: mpsc::UnboundedReceiver<String>) {
    while let Some(mut line) = rx.recv().await {
        // Coalesce what is queued into one write.
        while let Ok(more) = rx.try_recv() {
            line.push_str(&more);
        }
        if stdin.write_all(line.as_bytes()).await.is_err() {
            return;
        }
    }
}

impl Server {
    fn spawn(command: &str, args: &[String]) -> Result<Server, String> {
        let mut child = Command::new(command)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawn {command}: {e}"))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(writer(stdin, rx));
        let pending: Pending = Arc::default();
        let p = pending.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(msg) = serde_json::from_str::<IdOnly<'_>>(&line) else {
                    continue;
                };
                // Responses only: requests and notifications from the server carry a method.
                if msg.method.is_some() {
                    continue;
                }
                let Some(id) = msg.id.and_then(|i| i.get().parse::<u64>().ok()) else {
                    continue;
                };
                if let Some(tx) = p.lock().expect("pending").remove(&id) {
                    let _ = tx.send(line);
                }
            }
        });
        Ok(Server {
            child,
            lines: tx,
            pending,
            next_id: Arc::default(),
        })
    }

    fn handle(&self) -> Handle {
        Handle {
            lines: self.lines.clone(),
            pending: self.pending.clone(),
            next_id: self.next_id.clone(),
        }
    }
}

#[derive(Clone)]
struct Handle {
    lines: mpsc::UnboundedSender<String>,
    pending: Pending,
    next_id: Arc<std::sync::atomic::AtomicU64>,
}

impl Handle {
    async fn request(&self, method: &str, params: &str) -> Result<(), Failure> {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let (tx, rx) = oneshot::channel();
        self.pending.lock().expect("pending").insert(id, tx);
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":{params}}}\n"
        );
        self.lines.send(line).map_err(|_| Failure::Transport)?;
        let text = match tokio::time::timeout(REQUEST_TIMEOUT, rx).await {
            Ok(Ok(t)) => t,
            Ok(Err(_)) => return Err(Failure::Transport),
            Err(_) => {
                self.pending.lock().expect("pending").remove(&id);
                return Err(Failure::Timeout);
            }
        };
        let result = answer_text(&text, id)?;
        check_tool_result(method, result)
    }

    fn notify(&self, method: &str) -> Result<(), Failure> {
        let line = format!("{{\"jsonrpc\":\"2.0\",\"method\":\"{method}\"}}\n");
        self.lines.send(line).map_err(|_| Failure::Transport)
    }
}

pub struct Plan {
    pub command: String,
    pub args: Vec<String>,
    pub concurrency: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub params: String,
}

pub async fn run(plan: &Plan) -> Result<Run, String> {
    let mut server = Server::spawn(&plan.command, &plan.args)?;
    let h = server.handle();
    let init = format!(
        r#"{{"protocolVersion":"{}","capabilities":{{}},"clientInfo":{{"name":"sluice-loadgen","version":"0.1.0"}}}}"#,
        crate::client::PROTOCOL_VERSION
    );
    h.request("initialize", &init)
        .await
        .map_err(|f| format!("{}: initialize failed: {f}", plan.command))?;
    h.notify("notifications/initialized")
        .map_err(|f| f.to_string())?;
    let pid = server.child.id().map(|p| p as i32);

    let n = plan.concurrency.max(1);
    let go = Arc::new(Barrier::new(n + 1));
    let start = Instant::now() + plan.warmup;
    let end = start + plan.duration;
    let mut users = Vec::new();
    for _ in 0..n {
        let (h, go, params) = (h.clone(), go.clone(), plan.params.clone());
        users.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            go.wait().await;
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                let outcome = h.request("tools/call", &params).await;
                let t1 = Instant::now();
                if t0 >= start && t1 <= end {
                    tally.record(t1 - t0, &outcome);
                } else if let Err(f) = &outcome {
                    tally.fail(f);
                }
                if outcome.is_err() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            tally
        }));
    }
    go.wait().await;
    tokio::time::sleep_until(start).await;
    let before = pid.map(procs::sample);
    let lg_before = procs::self_cpu_s();
    tokio::time::sleep_until(end).await;
    let after = pid.map(procs::sample);
    let lg_after = procs::self_cpu_s();
    let total = Tally::join(users).await;
    let _ = server.child.kill().await;
    Ok(Run::measured(
        n,
        plan.duration,
        &total,
        (before, after),
        lg_after - lg_before,
        0,
    ))
}
