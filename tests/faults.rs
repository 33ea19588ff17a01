//! The standing fault-injection harness (issue 9): one table of broken
//! backends, stdio and HTTP, from `examples/faulty_backend.rs`. For each
//! one the client gets the answer or the JSON-RPC error the table says, a
//! healthy session on another backend is served meanwhile (counted, not
//! timed), and afterwards nothing is left: no pending call, no server
//! request, no extra backend session, no zombie, no child after shutdown.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Transport {
    /// stdio
    Pipe,
    /// Streamable HTTP
    Web,
}

#[derive(Clone, Copy, Debug)]
enum Expect {
    /// The fault call is answered normally.
    Answer,
    /// The fault call gets a JSON-RPC error naming the backend.
    Error,
    /// The backend's list never names the tool (its cursor loops): the
    /// gateway refuses the call itself, and its read of the list ends.
    Unlisted,
}

struct Scenario {
    mode: &'static str,
    transport: Transport,
    args: &'static [&'static str],
    timeout: &'static str,
    expect: Expect,
}

const fn case(
    mode: &'static str,
    transport: Transport,
    args: &'static [&'static str],
    timeout: &'static str,
    expect: Expect,
) -> Scenario {
    Scenario {
        mode,
        transport,
        args,
        timeout,
        expect,
    }
}

use Expect::*;
use Transport::*;

const SCENARIOS: &[Scenario] = &[
    case("hang", Pipe, &[], "2s", Error),
    case("exit-at-start", Pipe, &[], "2s", Error),
    case("exit-mid-call", Pipe, &[], "2s", Error),
    case("garbage", Pipe, &["--mb", "2"], "2s", Answer),
    case("huge-line", Pipe, &["--mb", "70"], "10s", Error),
    case("close-stdout", Pipe, &[], "2s", Error),
    case("never-answer", Pipe, &[], "2s", Error),
    case("endless-sse", Pipe, &[], "2s", Error),
    case("slow-drip", Pipe, &[], "30s", Answer),
    case("loop-cursor", Pipe, &[], "2s", Unlisted),
    case("flood", Pipe, &["--count", "10000"], "10s", Answer),
    case("stubborn", Pipe, &[], "2s", Answer),
    case("hang", Web, &[], "2s", Error),
    case("exit-mid-call", Web, &[], "2s", Error),
    case("garbage", Web, &["--mb", "2"], "2s", Error),
    case("huge-line", Web, &["--mb", "70"], "10s", Error),
    case("http-500", Web, &[], "2s", Error),
    case("never-answer", Web, &[], "2s", Error),
    case("endless-sse", Web, &[], "2s", Error),
    case("slow-drip", Web, &[], "30s", Answer),
    case("loop-cursor", Web, &[], "2s", Unlisted),
    case("flood", Web, &["--count", "10000"], "10s", Answer),
];

fn call(id: u64, tool: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{"text":"ok"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_broken_backend_is_contained() {
    for s in SCENARIOS {
        run(s).await;
    }
}

async fn run(s: &Scenario) {
    let what = format!("{} over {:?}", s.mode, s.transport);
    let fixture = (s.transport == Web).then(|| faulty_http(s.mode, s.args));
    let bad = match &fixture {
        Some(fx) => http_backend(
            "bad",
            &fx.url(),
            &format!("request_timeout = \"{}\"", s.timeout),
        ),
        None => {
            let args: Vec<String> = ["--transport", "stdio", "--mode", s.mode]
                .iter()
                .chain(s.args)
                .map(|a| format!("\"{a}\""))
                .collect();
            format!(
                "[backends.bad]\ncommand = \"{}\"\nargs = [{}]\nrequest_timeout = \"{}\"\n",
                Fixture::bin("faulty_backend").display(),
                args.join(", "),
                s.timeout
            )
        }
    };
    let toml = format!(
        "[server]\nshutdown_grace = \"1s\"\n{}{bad}",
        demo_backend("demo")
    );
    let gw = Gateway::start_unready(&toml, &[]);
    wait_until(Duration::from_secs(30), || {
        http_get(&gw.base, "/readyz").is_ok_and(|(_, b)| !b.contains("\"demo\""))
    });
    let http = Http::new(gw.url("/mcp"));
    let faulty = http.initialize().await;
    let healthy = http.initialize().await;

    let fault = {
        let http = http.clone();
        tokio::spawn(async move { http.post(Some(&faulty), &call(1, "bad__fault")).await })
    };
    // Meanwhile another backend's client is served, every time.
    for i in 0..20 {
        let r = http
            .post(Some(&healthy), &call(100 + i, "demo__echo"))
            .await;
        assert_eq!(r.status, 200, "{what}: healthy call {i}: {}", r.body);
        assert_eq!(text_of(&r.messages().pop().unwrap()), "ok", "{what}");
    }
    let r = fault.await.unwrap();
    assert_eq!(r.status, 200, "{what}: {}", r.body);
    let answer = r.messages().pop().unwrap();
    match s.expect {
        Answer => assert_eq!(text_of(&answer), "fault-ok", "{what}: {answer}"),
        Error => {
            let message = answer["error"]["message"]
                .as_str()
                .unwrap_or_else(|| panic!("{what}: {answer}"));
            assert!(message.contains("`bad`"), "{what}: {message}");
        }
        Unlisted => {
            assert_eq!(answer["error"]["code"], -32602, "{what}: {answer}");
            assert_eq!(answer["error"]["message"], "Unknown tool: bad__fault");
        }
    }

    // Nothing is left behind by the fault.
    wait_until(Duration::from_secs(30), || {
        let m = gw.metrics();
        let entry = |map: &str| {
            m.get(&format!(
                r#"sluice_bounded_entries{{map="{map}",owner="bad"}}"#
            ))
        };
        entry("pending_calls") == 0.0
            && entry("server_requests") == 0.0
            // Untouched while `bad` has never opened a session.
            && m.get_or_untouched(r#"sluice_backend_sessions_live{backend="bad"}"#) <= 1.0
    });
    assert_no_zombies(gw.pid());
    // demo, and at most one child of the broken backend.
    assert!(
        children(gw.pid()).len() <= 2,
        "{what}: {:?}",
        children(gw.pid())
    );
    if let Some(fx) = &fixture
        && s.mode != "exit-mid-call"
        && s.mode != "hang"
    {
        assert!(
            fx.live() <= 1,
            "{what}: backend sessions at the backend {}",
            fx.live()
        );
    }
    let descendants = descendants(gw.pid());
    assert_eq!(gw.stop(), Some(0), "{what}: shutdown");
    for pid in descendants {
        wait_until(Duration::from_secs(10), || !exists(pid));
    }
}

/// Every process below `pid` (children, grandchildren, ...).
fn descendants(pid: u32) -> Vec<u32> {
    let mut all = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for (child, _) in children(p) {
            all.push(child);
            frontier.push(child);
        }
    }
    all
}
