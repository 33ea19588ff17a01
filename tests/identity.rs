//! Per-principal credentials (issue 50, part 1): each principal reaches a
//! backend with its own headers (HTTP) or its own child and environment
//! (stdio), over backend sessions no other principal uses; a principal
//! with no entry is hidden from the backend or served with its own
//! credentials (`fallback`). Real gateway, real backends.

mod support;

use std::collections::{BTreeSet, HashSet};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

const TOKENS: &str = "alice=tok-alice,bob=tok-bob,carol=tok-carol";
const ALICE_SECRET: &str = "alice-secret-7f3a91";
const BOB_SECRET: &str = "bob-secret-c2e8d4";
const ENV_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/env_backend.py");

fn env() -> [(&'static str, &'static str); 3] {
    [
        ("TEST_TOKENS", TOKENS),
        ("ALICE_CRED", ALICE_SECRET),
        ("BOB_CRED", BOB_SECRET),
    ]
}

/// An HTTP backend `web` with alice's and bob's own `Authorization` and
/// these extra backend keys.
fn web(url: &str, extra: &str) -> String {
    format!(
        "[auth]\nbearer_tokens_env = \"TEST_TOKENS\"\n\
         [backends.web]\ntransport = \"http\"\nurl = \"{url}\"\n\
         headers = {{ X-Shared = \"everyone\" }}\n{extra}\n\
         [backends.web.principals.alice]\nheaders = {{ Authorization = \"Bearer ${{ALICE_CRED}}\" }}\n\
         [backends.web.principals.bob]\nheaders = {{ Authorization = \"Bearer ${{BOB_CRED}}\" }}\n"
    )
}

/// The faulty backend (`ok`) as `web`, and a gateway over it: (the
/// backend, the gateway, its `/mcp` URL).
fn start_web(extra: &str) -> (Fixture, Gateway, String) {
    let fx = faulty_http("ok", &[]);
    let gw = Gateway::start_with_env(&web(&fx.url(), extra), &env());
    let url = gw.url("/mcp");
    (fx, gw, url)
}

/// The environment-reporting stdio backend `env`, alice's and bob's own
/// `ENV_TOKEN`, and these extra backend keys.
fn env_backend(extra: &str) -> String {
    let python = python();
    format!(
        "[auth]\nbearer_tokens_env = \"TEST_TOKENS\"\n\
         [backends.env]\ncommand = \"{python}\"\nargs = [\"{ENV_FIXTURE}\"]\n\
         env = {{ SET_BY_CONFIG = \"yes\", ENV_TOKEN = \"the-backend's-own\" }}\n{extra}\n\
         [backends.env.principals.alice]\nenv = {{ ENV_TOKEN = \"${{ALICE_CRED}}\" }}\n\
         [backends.env.principals.bob]\nenv = {{ ENV_TOKEN = \"${{BOB_CRED}}\" }}\n"
    )
}

/// The interpreter itself: a launcher (pyenv's shim, say) would stand
/// between the gateway and the backend's process.
fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A new session of this token's principal.
async fn open(url: &str, token: &str) -> String {
    let r = post_as(url.to_owned(), token, None, &init_request(1)).await;
    assert_eq!(r.status(), 200, "initialize as {token}");
    r.headers()["mcp-session-id"].to_str().unwrap().to_owned()
}

/// The JSON-RPC answer to a request on a session as this token.
async fn ask(url: &str, token: &str, sid: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params});
    let r = post_as(url.to_owned(), token, Some(sid.to_owned()), &body).await;
    assert_eq!(r.status(), 200, "{method} as {token}");
    let text = r.text().await.unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or(&text);
    serde_json::from_str(line).unwrap()
}

async fn tools(url: &str, token: &str, sid: &str) -> BTreeSet<String> {
    let listed = ask(url, token, sid, "tools/list", json!({})).await;
    listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

async fn echo(url: &str, token: &str, sid: &str, text: &str) -> Value {
    let call = json!({"name": "web__echo", "arguments": {"text": text}});
    ask(url, token, sid, "tools/call", call).await
}

/// What the faulty backend saw of each `tools/call echo` whose text starts
/// with `prefix`: (Authorization, X-Shared, Mcp-Session-Id).
fn seen_calls(fx: &Fixture, prefix: &str) -> Vec<(String, String, String)> {
    let (_, seen) = http_get(&format!("http://{}", fx.addr), "/seen").unwrap();
    let seen: Vec<Value> = serde_json::from_str(&seen).unwrap();
    seen.iter()
        .filter(|e| e["body"]["method"] == "tools/call")
        .filter(|e| {
            e["body"]["params"]["arguments"]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with(prefix))
        })
        .map(|e| {
            let h = &e["headers"];
            let get = |k: &str| h[k].as_str().unwrap_or("(none)").to_owned();
            (get("authorization"), get("x-shared"), get("mcp-session-id"))
        })
        .collect()
}

fn live(gw: &Gateway, backend: &str) -> f64 {
    gw.metrics().get_or_untouched(&format!(
        "sluice_backend_sessions_live{{backend=\"{backend}\"}}"
    ))
}

/// Two principals' calls reach the HTTP backend each with its own header
/// (and the backend's other headers), over one backend session per
/// principal that its two client sessions share; a principal with no entry
/// does not see the backend, and its call gets what an unlisted tool gets.
/// The principal's backend session ends with its last client session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_principal_reaches_an_http_backend_as_itself() {
    let (fx, gw, url) = start_web("");
    let (a1, a2) = (open(&url, "tok-alice").await, open(&url, "tok-alice").await);
    let b1 = open(&url, "tok-bob").await;
    for (token, sid, text) in [
        ("tok-alice", &a1, "alice-1"),
        ("tok-alice", &a2, "alice-2"),
        ("tok-bob", &b1, "bob-1"),
    ] {
        assert!(tools(&url, token, sid).await.contains("web__echo"));
        let r = echo(&url, token, sid, text).await;
        assert_eq!(text_of(&r), text, "{r}");
    }
    let alice = seen_calls(&fx, "alice-");
    let bob = seen_calls(&fx, "bob-");
    assert_eq!(alice.len(), 2, "{alice:?}");
    assert_eq!(bob.len(), 1, "{bob:?}");
    for (auth, shared, _) in &alice {
        assert_eq!(auth, &format!("Bearer {ALICE_SECRET}"));
        assert_eq!(shared, "everyone");
    }
    assert_eq!(bob[0].0, format!("Bearer {BOB_SECRET}"));
    // One backend session for alice's two client sessions, another for bob.
    assert_eq!(alice[0].2, alice[1].2, "alice's sessions share hers");
    assert_ne!(alice[0].2, bob[0].2, "bob never uses alice's");
    assert_eq!(live(&gw, "web"), 2.0);
    assert_eq!(fx.live(), 2);

    // carol has no entry: the backend is not there for her.
    let c1 = open(&url, "tok-carol").await;
    assert!(!tools(&url, "tok-carol", &c1).await.contains("web__echo"));
    let refused = echo(&url, "tok-carol", &c1, "carol-1").await;
    let call = json!({"name": "web__nothing", "arguments": {}});
    let unlisted = ask(&url, "tok-carol", &c1, "tools/call", call).await;
    assert_eq!(
        refused["error"]["code"], unlisted["error"]["code"],
        "{refused}"
    );
    assert_eq!(
        refused["error"]["message"],
        unlisted["error"]["message"]
            .as_str()
            .unwrap()
            .replace("web__nothing", "web__echo"),
        "{refused}"
    );
    assert!(seen_calls(&fx, "carol-").is_empty());

    // Without a session (2026-07-28), bob's calls still go over his own.
    let http = Http::new(url.clone());
    for (token, text) in [("tok-bob", "bob-modern"), ("tok-carol", "carol-modern")] {
        let params = json!({
            "name": "web__echo",
            "arguments": {"text": text},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "sluice-test", "version": "0"}
            }
        });
        let auth = format!("Bearer {token}");
        let r = http
            .modern_call(9, "web__echo", params, &[("authorization", &auth)])
            .await;
        let reply = r.json();
        match token {
            "tok-bob" => assert_eq!(text_of(&reply), text, "{reply}"),
            _ => assert!(reply["error"]["message"].as_str().is_some(), "{reply}"),
        }
    }
    let modern = seen_calls(&fx, "bob-modern");
    assert_eq!(modern.len(), 1);
    assert_eq!(modern[0].0, format!("Bearer {BOB_SECRET}"));
    assert_eq!(modern[0].2, bob[0].2, "bob's one backend session");
    assert!(seen_calls(&fx, "carol-").is_empty());

    // alice's backend session ends with her last client session, not before.
    let deleted = fx.stats()["deleted"].as_u64().unwrap();
    assert_eq!(delete_as(&url, "tok-alice", &a1).await, 200);
    let r = echo(&url, "tok-alice", &a2, "alice-3").await;
    assert_eq!(text_of(&r), "alice-3");
    assert_eq!(seen_calls(&fx, "alice-3")[0].2, alice[0].2);
    assert_eq!(fx.stats()["deleted"].as_u64().unwrap(), deleted);
    assert_eq!(delete_as(&url, "tok-alice", &a2).await, 200);
    wait_until(Duration::from_secs(10), || live(&gw, "web") == 1.0);
    wait_until(Duration::from_secs(10), || fx.live() == 1);
    assert_eq!(fx.stats()["deleted"].as_u64().unwrap(), deleted + 1);
}

async fn delete_as(url: &str, token: &str, sid: &str) -> u16 {
    ::reqwest::Client::new()
        .delete(url)
        .header("authorization", format!("Bearer {token}"))
        .header("mcp-session-id", sid)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// What the env backend's child reports: (its pid, ENV_TOKEN, the names
/// of its variables).
async fn environment(url: &str, token: &str, sid: &str) -> (u64, String, Vec<String>) {
    let call = json!({"name": "env__environment", "arguments": {"values": ["ENV_TOKEN"]}});
    let r = ask(url, token, sid, "tools/call", call).await;
    let report: Value = serde_json::from_str(text_of(&r)).unwrap();
    let names = report["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect();
    (
        report["pid"].as_u64().unwrap(),
        report["values"]["ENV_TOKEN"]
            .as_str()
            .unwrap_or("(unset)")
            .to_owned(),
        names,
    )
}

/// Two principals each get their own stdio child, whose environment holds
/// their own variable (and no variable a principal's credentials come
/// from); a principal without an entry, with `fallback = "shared"`, the
/// backend's ordinary child with its own value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_principal_gets_its_own_stdio_child() {
    let gw = Gateway::start_with_env(&env_backend("fallback = \"shared\""), &env());
    let url = gw.url("/mcp");
    let (a1, a2) = (open(&url, "tok-alice").await, open(&url, "tok-alice").await);
    let b1 = open(&url, "tok-bob").await;
    let c1 = open(&url, "tok-carol").await;
    let (pa1, va1, names_a) = environment(&url, "tok-alice", &a1).await;
    let (pa2, va2, _) = environment(&url, "tok-alice", &a2).await;
    let (pb, vb, names_b) = environment(&url, "tok-bob", &b1).await;
    let (pc, vc, names_c) = environment(&url, "tok-carol", &c1).await;
    assert_eq!((va1.as_str(), va2.as_str()), (ALICE_SECRET, ALICE_SECRET));
    assert_eq!(vb, BOB_SECRET);
    assert_eq!(vc, "the-backend's-own");
    assert_eq!(pa1, pa2, "alice's sessions share her child");
    let pids: HashSet<u64> = [pa1, pb, pc].into();
    assert_eq!(pids.len(), 3, "alice, bob and the shared child");
    let children: HashSet<u64> = children(gw.pid())
        .iter()
        .map(|(p, _)| u64::from(*p))
        .collect();
    assert!(pids.is_subset(&children), "{pids:?} {children:?}");
    for names in [&names_a, &names_b, &names_c] {
        for secret in ["ALICE_CRED", "BOB_CRED", "TEST_TOKENS"] {
            assert!(!names.contains(&secret.to_owned()), "{secret} in {names:?}");
        }
        assert!(names.contains(&"SET_BY_CONFIG".to_owned()));
    }
    assert_eq!(live(&gw, "env"), 3.0);
}

/// `fallback = "hide"` with a stdio backend: the health check and lists go
/// over the first principal's credentials, and a principal without an
/// entry never gets a child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hidden_stdio_backend_starts_no_child_for_others() {
    let gw = Gateway::start_with_env(&env_backend(""), &env());
    let url = gw.url("/mcp");
    let c1 = open(&url, "tok-carol").await;
    assert!(
        !tools(&url, "tok-carol", &c1)
            .await
            .contains("env__environment")
    );
    let call = json!({"name": "env__environment", "arguments": {}});
    let r = ask(&url, "tok-carol", &c1, "tools/call", call).await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("env__environment"),
        "{r}"
    );
    assert_eq!(live(&gw, "env"), 0.0, "the probe's child is closed again");
    let b1 = open(&url, "tok-bob").await;
    assert!(
        tools(&url, "tok-bob", &b1)
            .await
            .contains("env__environment")
    );
    let (_, vb, _) = environment(&url, "tok-bob", &b1).await;
    assert_eq!(vb, BOB_SECRET);
    assert_eq!(live(&gw, "env"), 1.0);
}

/// A principal's backend session is closed at the backend's `idle_ttl`,
/// and `max_sessions` bounds them: a second principal is refused while the
/// first holds the one allowed, and served once it was closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principal_sessions_are_bounded_and_closed_when_idle() {
    let (fx, gw, url) = start_web("max_sessions = 1\nidle_ttl = \"1s\"");
    let a1 = open(&url, "tok-alice").await;
    let b1 = open(&url, "tok-bob").await;
    assert_eq!(
        text_of(&echo(&url, "tok-alice", &a1, "alice-1").await),
        "alice-1"
    );
    let refused = echo(&url, "tok-bob", &b1, "bob-1").await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`web` has reached its limit of 1"),
        "{refused}"
    );
    assert!(seen_calls(&fx, "bob-").is_empty());
    // Idle past its TTL, alice's session is closed though hers is open.
    wait_until(Duration::from_secs(10), || fx.live() == 0);
    assert_eq!(live(&gw, "web"), 0.0);
    assert_eq!(text_of(&echo(&url, "tok-bob", &b1, "bob-2").await), "bob-2");
    assert_eq!(
        seen_calls(&fx, "bob-2")[0].0,
        format!("Bearer {BOB_SECRET}")
    );
}

/// With per-session isolation each client session has its own backend
/// session, opened with its principal's credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_session_isolation_uses_the_principal_credentials() {
    let (fx, gw, url) = start_web("isolation = \"per-session\"");
    let (a1, a2) = (open(&url, "tok-alice").await, open(&url, "tok-alice").await);
    echo(&url, "tok-alice", &a1, "alice-1").await;
    echo(&url, "tok-alice", &a2, "alice-2").await;
    let alice = seen_calls(&fx, "alice-");
    assert_eq!(alice.len(), 2);
    assert_ne!(
        alice[0].2, alice[1].2,
        "one backend session per client session"
    );
    assert!(
        alice
            .iter()
            .all(|c| c.0 == format!("Bearer {ALICE_SECRET}"))
    );
    assert_eq!(live(&gw, "web"), 2.0);
}

fn check(toml: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    check_config("sluice.toml", toml, env)
}

/// `sluice check` lists each backend's principals with the names of their
/// headers or variables, never the values, and the fallback.
#[test]
fn check_lists_principals_without_their_secrets() {
    let python = python();
    let toml = format!(
        "{}\n[backends.env]\ncommand = \"{python}\"\nargs = [\"{ENV_FIXTURE}\"]\nfallback = \"shared\"\n\
         [backends.env.principals.bob]\nenv = {{ ENV_TOKEN = \"${{BOB_CRED}}\" }}\n",
        web("http://127.0.0.1:9/mcp", "")
    );
    let (code, out, err) = check(&toml, &env());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("principals: fallback hide"), "{out}");
    assert!(out.contains("alice: headers [Authorization]"), "{out}");
    assert!(out.contains("principals: fallback shared"), "{out}");
    assert!(out.contains("bob: env [ENV_TOKEN]"), "{out}");
    for secret in [ALICE_SECRET, BOB_SECRET] {
        assert!(!out.contains(secret) && !err.contains(secret), "{out}{err}");
    }
}

/// Config errors name their key: a principal no token is named for, the
/// other transport's key, a fallback without principals, another
/// principal's variable, and principals without [auth].
#[test]
fn check_refuses_wrong_principal_entries() {
    let base = web("http://127.0.0.1:9/mcp", "");
    let cases = [
        (
            format!("{base}[backends.web.principals.dave]\nheaders = {{ X = \"y\" }}\n"),
            "`backends.web.principals.dave`: names no principal: no entry of [auth] bearer_tokens_env is named `dave` (named: alice, bob, carol)",
        ),
        (
            format!("{base}[backends.web.principals.carol]\nenv = {{ X = \"y\" }}\n"),
            "`backends.web.principals.carol.env`: not allowed with transport = \"http\" (a principal's credentials here are `headers`)",
        ),
        (
            format!(
                "{}[backends.web.principals.carol]\nheaders = {{ Authorization = \"${{ALICE_CRED}}\" }}\n",
                base
            ),
            "`ALICE_CRED` holds principal `alice`'s credentials",
        ),
        (
            "[auth]\nbearer_tokens_env = \"TEST_TOKENS\"\n[backends.d]\ncommand = \"true\"\nfallback = \"shared\"\n".to_owned(),
            "`backends.d.fallback`: applies only to a backend with `principals`",
        ),
        (
            "[backends.d]\ncommand = \"true\"\n[backends.d.principals.alice]\nheaders = { X = \"y\" }\n".to_owned(),
            "`backends.d.principals.alice.headers`: not allowed with transport = \"stdio\"",
        ),
        (
            "[backends.d]\ncommand = \"true\"\n[backends.d.principals.alice]\nenv = { X = \"y\" }\n".to_owned(),
            "`backends.d.principals`: per-principal credentials need [auth]",
        ),
        (
            format!("{base}inherit = 1\n"),
            "unknown key `inherit` in [backends.web.principals.bob]",
        ),
    ];
    for (toml, expected) in cases {
        let (code, _, err) = check(&toml, &env());
        assert_eq!(code, 2, "{toml}\n{err}");
        assert!(err.contains(expected), "expected {expected:?} in:\n{err}");
    }
}

/// The secrets never leave: not in the log at trace level, the status page,
/// /metrics or `check` output, and a child holds only its own principal's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principal_secrets_stay_secret() {
    let python = python();
    let fx = faulty_http("ok", &[]);
    let toml = format!(
        "{}\n[backends.env]\ncommand = \"{python}\"\nargs = [\"{ENV_FIXTURE}\"]\n\
         [backends.env.principals.bob]\nenv = {{ ENV_TOKEN = \"${{BOB_CRED}}\" }}\n\
         [backends.env.principals.alice]\nenv = {{ OTHER = \"x\" }}\n",
        web(&fx.url(), "")
    );
    let mut env = env().to_vec();
    env.push(("SLUICE_LOG", "trace"));
    let gw = Gateway::start_logged(&toml, &env);
    let url = gw.url("/mcp");
    let a1 = open(&url, "tok-alice").await;
    let b1 = open(&url, "tok-bob").await;
    echo(&url, "tok-alice", &a1, "alice-1").await;
    echo(&url, "tok-bob", &b1, "bob-1").await;
    let (_, alice_sees, _) = environment(&url, "tok-alice", &a1).await;
    assert_eq!(alice_sees, "(unset)", "bob's variable in alice's child");
    let (_, bob_sees, _) = environment(&url, "tok-bob", &b1).await;
    assert_eq!(bob_sees, BOB_SECRET);
    let (_, status) = http_get(&gw.base, "/status").unwrap();
    let (_, metrics) = http_get(&gw.base, "/metrics").unwrap();
    let (_, checked, _) = check(&toml, &env);
    let log = gw.log();
    assert!(
        log.contains("TRACE") || log.contains("trace"),
        "not at trace level"
    );
    for (what, text) in [
        ("log", &log),
        ("status", &status),
        ("metrics", &metrics),
        ("check", &checked),
    ] {
        for secret in [ALICE_SECRET, BOB_SECRET] {
            assert!(!text.contains(secret), "{secret} in the {what}");
        }
    }
}

/// Cluster mode: the replicas serving one principal use one backend
/// session (the stateful backend's counter goes on across them), another
/// principal has its own, and a principal's session left by a replica that
/// died is closed by a survivor's sweeper once past its idle TTL, while
/// the other principal's, in use, stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_a_principals_backend_session_and_sweep_it() {
    let redis = Redis::start();
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let toml = format!(
        "[server]\nsession_ids = \"sealed\"\n[auth]\nbearer_tokens_env = \"TEST_TOKENS\"\n\
         [cluster]\nredis_url = \"{}\"\n\
         [backends.web]\ntransport = \"http\"\nurl = \"{}\"\nidle_ttl = \"3s\"\n\
         [backends.web.principals.alice]\nheaders = {{ X-Who = \"${{ALICE_CRED}}\" }}\n\
         [backends.web.principals.bob]\nheaders = {{ X-Who = \"${{BOB_CRED}}\" }}\n",
        redis.url(),
        fx.url()
    );
    let key = keygen();
    let mut env = env().to_vec();
    env.push(("SLUICE_SESSION_KEY", &key));
    let mut gws: Vec<Gateway> = (0..2)
        .map(|_| Gateway::start_with_env(&toml, &env))
        .collect();
    for gw in &gws {
        wait_until(Duration::from_secs(15), || {
            gw.metrics().get("sluice_cluster_up") == 1.0
        });
    }
    let urls: Vec<String> = gws.iter().map(|g| g.url("/mcp")).collect();
    let counter = async |url: &str, token: &str, sid: &str| {
        let call = json!({"name": "web__counter", "arguments": {}});
        let r = ask(url, token, sid, "tools/call", call).await;
        text_of(&r).parse::<u64>().unwrap()
    };
    // alice's one client session, served by either replica.
    let alice = open(&urls[0], "tok-alice").await;
    for i in 0..4u64 {
        let n = counter(&urls[(i % 2) as usize], "tok-alice", &alice).await;
        assert_eq!(n, i + 1, "one backend session for alice across replicas");
    }
    let bob = open(&urls[1], "tok-bob").await;
    assert_eq!(counter(&urls[1], "tok-bob", &bob).await, 1, "bob's own");
    assert_eq!(fx.live(), 2);
    // alice's only through the replica that dies now.
    let alice = open(&urls[0], "tok-alice").await;
    assert_eq!(counter(&urls[0], "tok-alice", &alice).await, 5);
    let dead = gws.remove(0);
    // SAFETY: our own child.
    unsafe {
        libc::kill(dead.pid() as i32, libc::SIGKILL);
    }
    wait_until(Duration::from_secs(10), || !dead.is_running());
    let mut n = 1;
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    while fx.live() > 1 {
        assert!(std::time::Instant::now() < deadline, "{} live", fx.live());
        n += 1;
        assert_eq!(counter(&urls[1], "tok-bob", &bob).await, n, "bob's stays");
        // Paces the loop while the dead replica's record reaches its idle
        // TTL; the loop ends on the event, the count of live sessions.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(fx.live(), 1);
}
