//! Issue 38, item 3: a large result from an HTTP backend is held once, its
//! memory is given back once it has been written, and bodies in flight
//! stay within `[server] max_inflight_body_bytes`. Asserted on the
//! gateway's own memory (`/proc/PID/status`) against the payload's size,
//! and by counts; the only waits are bounded polls.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MIB: u64 = 1 << 20;

/// A `/proc/PID/status` field, in bytes.
fn status_bytes(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Resets the process's peak RSS (`VmHWM`) to its RSS now.
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}

fn fault(id: u64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
        "params":{"name":"big__fault","arguments":{}}})
}

/// A gateway in front of the fault backend answering `fault` with a text
/// of `mb` MiB: `huge-line`, as `application/json` with its length;
/// `huge-sse`, as one event of an SSE response.
async fn gateway(mode: &str, mb: u64, server: &str) -> (Gateway, Fixture, Http, String) {
    let backend = faulty_http(mode, &["--mb", &mb.to_string()]);
    let toml = format!("{server}\n{}", http_backend("big", &backend.url(), ""));
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    (gw, backend, http, session)
}

/// The text of a `fault` result, checked to be the backend's whole answer.
fn text_len(reply: &Reply) -> usize {
    assert_eq!(reply.status, 200);
    let v = reply.json();
    assert!(v["error"].is_null(), "{}", v["error"]);
    let text = text_of(&v);
    assert!(text.bytes().all(|b| b == b'x'));
    text.len()
}

/// A 48 MiB result raised the gateway's peak RSS by 117 MiB (2.4 times)
/// and RSS stayed that much higher 20 s later. Now the peak rises by at
/// most the payload plus 16 MiB, and RSS comes back within 16 MiB of
/// before (polled for at most 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_json_result_is_held_once_and_given_back() {
    held_once_and_given_back("huge-line").await;
}

/// The same, the result one event of the backend's SSE response (as the
/// Python SDK's servers answer): 4 copies of it were held before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_sse_result_is_held_once_and_given_back() {
    held_once_and_given_back("huge-sse").await;
}

async fn held_once_and_given_back(mode: &str) {
    let (gw, _backend, http, session) = gateway(mode, 48, "").await;
    // Warm: every connection and buffer a call uses exists already.
    for id in 1..=3 {
        let r = http
            .call(
                &session,
                id,
                "tools/call",
                json!({"name":"big__echo","arguments":{"text":"hi"}}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let pid = gw.pid();
    let before = status_bytes(pid, "VmRSS:");
    reset_peak(pid);

    let reply = http.post(Some(&session), &fault(10)).await;
    let payload = reply.body.len() as u64;
    assert_eq!(text_len(&reply) as u64, 48 * MIB);
    let peak = status_bytes(pid, "VmHWM:");
    let rise = peak.saturating_sub(before);
    eprintln!(
        "48 MiB result ({mode}): payload {payload} B, RSS before {} MiB, peak +{} MiB",
        before / MIB,
        rise / MIB
    );
    assert!(
        rise <= payload + 16 * MIB,
        "peak RSS rose by {} MiB for a {} MiB payload",
        rise / MIB,
        payload / MIB
    );

    let limit = Instant::now() + Duration::from_secs(30);
    let mut after = status_bytes(pid, "VmRSS:");
    while after > before + 16 * MIB && Instant::now() < limit {
        tokio::time::sleep(Duration::from_millis(200)).await;
        after = status_bytes(pid, "VmRSS:");
    }
    eprintln!("after: RSS {} MiB", after / MIB);
    assert!(
        after <= before + 16 * MIB,
        "RSS stayed {} MiB above before",
        (after - before) / MIB
    );
    // And the gateway serves on.
    let r = http
        .call(
            &session,
            11,
            "tools/call",
            json!({"name":"big__echo","arguments":{"text":"hi"}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Under a budget of 10 MiB, two 8 MiB results cannot be held at once:
/// while the first is held (its client reads nothing, through a receive
/// buffer too small to take it), the second call gets a JSON-RPC error
/// that names the budget; the first is then read whole, and once it has
/// been written the budget is free again: the next call is served.
/// Before, both were held (and without a bound, any number of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_in_flight_stay_within_the_budget() {
    let (gw, _backend, http, session) = gateway(
        "huge-line",
        8,
        "[server]\nmax_inflight_body_bytes = 10485760",
    )
    .await;
    let addr: std::net::SocketAddr = gw
        .url("")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .unwrap();

    // A client that reads the head of its answer, then nothing.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    let mut slow = socket.connect(addr).await.unwrap();
    let request = post_request(
        "/mcp",
        &[
            ("content-type", "application/json"),
            ("accept", ACCEPT_BOTH),
            ("mcp-session-id", &session),
        ],
        &fault(1).to_string(),
    );
    slow.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let head_end = loop {
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(30), slow.read(&mut buf))
            .await
            .expect("no answer to the first call")
            .unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&got[..head_end]).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    // The first is held: the second does not fit.
    let second = http.post(Some(&session), &fault(2)).await;
    assert_eq!(second.status, 200, "{}", second.body);
    let error = &second.json()["error"];
    assert_eq!(error["code"], -32603, "{}", second.body);
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("max_inflight_body_bytes"), "{message}");
    assert!(message.contains("retry later"), "{message}");
    let m = gw.metrics();
    assert_eq!(m.get("sluice_bodies_refused_total"), 1.0);
    assert!(m.get("sluice_inflight_body_bytes") >= (8 * MIB) as f64);

    // The first, read whole, is the backend's answer.
    let mut body = got.split_off(head_end);
    while body.len() < length {
        let mut buf = vec![0u8; 1 << 20];
        let n = tokio::time::timeout(Duration::from_secs(30), slow.read(&mut buf))
            .await
            .expect("the first answer stalled")
            .unwrap();
        assert!(n > 0, "cut after {} of {length} bytes", body.len());
        body.extend_from_slice(&buf[..n]);
    }
    let first = Reply {
        status: 200,
        headers: Default::default(),
        body: String::from_utf8(body).unwrap(),
    };
    assert_eq!(text_len(&first) as u64, 8 * MIB);

    // Written, it gave its budget back: the next is served.
    let limit = Instant::now() + Duration::from_secs(10);
    loop {
        let third = http.post(Some(&session), &fault(3)).await;
        if third.json()["error"].is_null() {
            assert_eq!(text_len(&third) as u64, 8 * MIB);
            break;
        }
        // The first's budget goes back as its last bytes are written.
        assert!(Instant::now() < limit, "the budget was never given back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Every body written: nothing is held.
    wait_until(Duration::from_secs(10), || {
        gw.metrics().get("sluice_inflight_body_bytes") == 0.0
    });
}
