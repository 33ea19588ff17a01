//! `sluice check` and config errors: exit codes and messages (contract).

mod support;

use std::process::Command;

use serde_json::json;
use support::*;

fn check(file: &str, text: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    check_config(file, text, env)
}

#[test]
fn check_accepts_a_good_config_and_shows_sources() {
    let toml = format!(
        "[server]\nsession_idle_ttl = \"10m\"\n{}\n[namespaces.default]\nbackends = [\"demo\"]\n",
        demo_backend("demo")
    );
    let (code, out, err) = check("ok.toml", &toml, &[("SLUICE_SERVER__MAX_SESSIONS", "77")]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("demo"), "{out}");
    assert!(
        out.contains("77") && out.contains("SLUICE_SERVER__MAX_SESSIONS"),
        "{out}"
    );
    assert!(out.contains("10m"), "{out}");
}

#[test]
fn check_rejects_bad_configs_with_key_and_line() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "[server]\nlisten = \"127.0.0.1:7400\"\nsesions = \"auto\"\n",
            "unknown key",
            &["sesions", ":3"],
        ),
        (
            "[server]\nsession_idle_ttl = \"soon\"\n",
            "bad duration",
            &["session_idle_ttl", ":2"],
        ),
        (
            "[server]\nsession_idle_ttl = \"0\"\n",
            "zero ttl",
            &["session_idle_ttl"],
        ),
        (
            "[backends.web]\ntransport = \"http\"\nurl = \"http://127.0.0.1:1/mcp\"\nheaders = { Authorization = \"${TEST_MISSING_VAR_OF_SLUICE}\" }\n",
            "missing env var",
            &["TEST_MISSING_VAR_OF_SLUICE", "is not set"],
        ),
        (
            "[backends.fs]\ncommand = \"fs\"\ninherit_env = [\"HOME\", \"SLUICE_SESSION_KEY\"]\n",
            "a secret for a child",
            &[
                "inherit_env[1]",
                "`SLUICE_SESSION_KEY` is the gateway's own",
                "never passed to a child",
            ],
        ),
        (
            "[namespaces.default]\nbackends = [\"ghost\"]\n",
            "unknown backend",
            &["ghost"],
        ),
    ];
    for (body, what, needles) in cases {
        let toml = if body.contains("[backends.") {
            body.to_string()
        } else {
            format!("{body}{}", demo_backend("demo"))
        };
        let (code, _, err) = check("bad.toml", &toml, &[]);
        assert_eq!(code, 2, "{what}: {err}");
        for n in *needles {
            assert!(err.contains(n), "{what}: expected {n:?} in {err}");
        }
    }
}

/// A bad session key read from a file is reported as the file's.
#[test]
fn a_bad_key_file_is_named_as_the_file() {
    let dir = tempdir::Dir::new();
    let key = tempdir::write(&dir, "key", "not-a-key\n");
    let toml = format!(
        "[server]\nsession_ids = \"sealed\"\n{}",
        demo_backend("demo")
    );
    let (code, _, err) = check(
        "sealed.toml",
        &toml,
        &[("SLUICE_SESSION_KEY_FILE", key.to_str().unwrap())],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("the file SLUICE_SESSION_KEY_FILE names"),
        "{err}"
    );
    assert!(!err.contains("not-a-key"), "the key is never shown: {err}");
}

/// `check` finds what a start would meet only later: a stdio command
/// that is not there, a launcher too (an error, exit 2, with its line),
/// and a backend that no namespace serves (a warning).
#[test]
fn check_finds_missing_commands_and_unserved_backends() {
    let served = |names: &str| format!("[namespaces.default]\nbackends = [{names}]\n");
    let toml = format!(
        "{}[backends.gone]\ncommand = \"nosuchcmd-sluice\"\n\
         [backends.abs]\ncommand = \"/nonexistent/tool\"\n\
         [backends.lazy]\ncommand = \"uvx\"\nargs = [\"x\"]\n{}",
        demo_backend("demo"),
        served("\"demo\", \"gone\", \"abs\", \"lazy\""),
    );
    let path = format!(
        "{}:/nonexistent",
        std::path::Path::new(BIN).parent().unwrap().display()
    );
    let (code, out, err) = check("missing.toml", &toml, &[("PATH", &path)]);
    assert_eq!(code, 2, "{out}{err}");
    for expected in [
        "missing.toml:6: `backends.gone.command`: command not found: `nosuchcmd-sluice`",
        "missing.toml:8: `backends.abs.command`: command not found: `/nonexistent/tool`",
        "missing.toml:10: `backends.lazy.command`: command not found: `uvx`",
        "sluice: 3 error(s)",
    ] {
        assert!(err.contains(expected), "{expected:?} in {err}");
    }

    // A backend nobody serves is reported, not refused.
    let toml = format!(
        "{}[backends.spare]\ncommand = \"{BIN}\"\nargs = [\"demo-server\"]\n{}",
        demo_backend("demo"),
        served("\"demo\""),
    );
    let (code, out, err) = check("warn.toml", &toml, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let (_, problems) = out.split_once("problems:\n").expect(&out);
    assert!(
        problems.contains("warn.toml:5: warning: `backends.spare`: no namespace serves it"),
        "{out}"
    );
    assert!(!out.contains("backends.demo"), "{out}");
}

/// The lines of `err` that name a problem of the file named `origin`,
/// as (line, text).
fn problems<'a>(err: &'a str, origin: &str) -> Vec<(usize, &'a str)> {
    err.lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(&format!("/{origin}:"))?;
            let (line, _) = rest.split_once(':')?;
            Some((line.parse().ok()?, l))
        })
        .collect()
}

/// Asserts that each needle is in a problem of its line, and that the
/// problems come in line order.
fn assert_listed(err: &str, origin: &str, expected: &[(usize, &str)]) {
    let found = problems(err, origin);
    let lines: Vec<usize> = found.iter().map(|(n, _)| *n).collect();
    assert!(lines.is_sorted(), "not in line order:\n{err}");
    for (line, needle) in expected {
        assert!(
            found.iter().any(|(n, l)| n == line && l.contains(needle)),
            "{needle:?} at line {line}:\n{err}"
        );
    }
}

/// Issue 49: the eight problems a newcomer planted (a bad duration, two
/// key typos, a bad enum, another bad duration, a missing command, an
/// unknown backend in a namespace, a bad `sessions` value) took five
/// runs; each is named in one, with its line, in line order.
#[test]
fn check_names_every_planted_problem_in_one_run() {
    let toml = "[server]
listen = \"127.0.0.1:7400\"
session_idle_ttl = \"30 minutes\"
max_sesions = 100
sessions = \"stateful\"

[backends.files]
comand = \"npx\"
args = [\"-y\", \"server-fs\"]

[backends.web]
transport = \"http\"
url = \"http://127.0.0.1:9/mcp\"
isolation = \"per_session\"
idle_ttl = \"10\"

[backends.tool]
command = \"nosuchcmd-sluice\"

[namespaces.default]
backends = [\"files\", \"web\", \"tool\", \"ghost\"]
";
    let (code, out, err) = check("eight.toml", toml, &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert_listed(
        &err,
        "eight.toml",
        &[
            (
                3,
                "`server.session_idle_ttl`: invalid duration `30 minutes`",
            ),
            (
                4,
                "unknown key `max_sesions` in [server] (did you mean `max_sessions`?)",
            ),
            (5, "`server.sessions`: unknown value `stateful`"),
            (
                8,
                "unknown key `comand` in [backends.files] (did you mean `command`?)",
            ),
            (14, "`backends.web.isolation`: unknown value `per_session`"),
            (15, "`backends.web.idle_ttl`: invalid duration `10`"),
            (
                18,
                "`backends.tool.command`: command not found: `nosuchcmd-sluice`",
            ),
            (21, "names unknown backend `ghost`"),
        ],
    );

    // The desktop form too: each server, and each key of one, read alone.
    let json = r#"{
  "mcpServers": {
    "fs": {
      "command": "nosuchcmd-sluice",
      "args": ["-y", 3],
      "autoApprove": []
    },
    "web": {
      "type": "websocket",
      "url": "http://127.0.0.1:9/mcp"
    },
    "my server": {
      "command": "x", "bogus": 1
    }
  }
}"#;
    let (code, out, err) = check("desk.json", json, &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert_listed(
        &err,
        "desk.json",
        &[
            (
                4,
                "`mcpServers.fs.command`: command not found: `nosuchcmd-sluice`",
            ),
            (5, "`mcpServers.fs.args`: invalid type: integer `3`"),
            (6, "unknown key `autoApprove` in [mcpServers.fs]"),
            (9, "`mcpServers.web.type`: unknown value `websocket`"),
            (12, "invalid backend name `my server`"),
            (13, "unknown key `bogus` in [mcpServers.\"my server\"]"),
        ],
    );
}

/// Issue 49: `check` said `(default)` for `server.tls`, `auth.oauth` and
/// `tracing.otlp_endpoint` wherever they came from.
#[test]
fn check_shows_where_tls_oauth_and_tracing_came_from() {
    let source = |out: &str, key: &str| -> String {
        let line = out.lines().find(|l| l.trim_start().starts_with(key));
        let line = line.unwrap_or_else(|| panic!("no {key} in {out}"));
        line.rsplit_once('(')
            .unwrap()
            .1
            .trim_end_matches(')')
            .to_owned()
    };
    let (code, out, err) = check("plain.toml", &demo_backend("demo"), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(source(&out, "server.tls"), "default");
    assert_eq!(source(&out, "tracing.otlp_endpoint"), "default");

    let dir = tempdir::Dir::new();
    let (cert, key) = pki::Pki::new().issue("127.0.0.1");
    let cert = tempdir::write(&dir, "cert.pem", &cert);
    let key = tempdir::write(&dir, "key.pem", &key);
    let toml = format!(
        "[server]\ntls = {{ cert_file = {cert:?}, key_file = {key:?} }}\n\
         [auth]\noauth = {{ issuer = \"https://issuer.example\", audience = \"https://gw.example/mcp\" }}\n\
         [tracing]\notlp_endpoint = \"http://127.0.0.1:4318\"\n{}",
        demo_backend("demo")
    );
    let (code, out, err) = check("set.toml", &toml, &[]);
    assert_eq!(code, 0, "{err}");
    for key in ["server.tls", "auth.oauth", "tracing.otlp_endpoint"] {
        assert_eq!(source(&out, key), "file", "{key}: {out}");
    }
    let var = "SLUICE_TRACING__OTLP_ENDPOINT";
    let (code, out, err) = check(
        "env.toml",
        &demo_backend("demo"),
        &[(var, "http://127.0.0.1:4318")],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(source(&out, "tracing.otlp_endpoint"), format!("env {var}"));
}

/// Issue 49: a Redis client certificate that rustls refuses (here, with
/// another certificate's key) was met only at each connection, logged
/// at DEBUG; `check` refuses it, naming the key.
#[test]
fn check_refuses_a_redis_client_certificate_rustls_refuses() {
    let dir = tempdir::Dir::new();
    let pki = pki::Pki::new();
    let (cert, _) = pki.issue("client");
    let (_, other_key) = pki.issue("other");
    let ca = tempdir::write(&dir, "ca.pem", &pki.ca_pem);
    let cert = tempdir::write(&dir, "cert.pem", &cert);
    let key = tempdir::write(&dir, "key.pem", &other_key);
    let toml = format!(
        "[server]\nsession_ids = \"sealed\"\n[cluster]\nredis_url = \"rediss://127.0.0.1:1/\"\n\
         redis_ca_file = {ca:?}\nredis_client_cert_file = {cert:?}\nredis_client_key_file = {key:?}\n{}",
        demo_backend("demo")
    );
    let session_key = Command::new(BIN).arg("keygen").output().unwrap().stdout;
    let session_key = String::from_utf8(session_key).unwrap();
    let (code, out, err) = check(
        "redis.toml",
        &toml,
        &[("SLUICE_SESSION_KEY", session_key.trim())],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("redis.toml:7: `cluster.redis_client_key_file`: ")
            && err.contains("is not the key of the certificate"),
        "{err}"
    );
}

#[test]
fn check_reads_the_desktop_mcp_servers_form() {
    let json = format!(
        r#"{{"mcpServers": {{"demo": {{"command": "{BIN}", "args": ["demo-server"]}}, "web": {{"url": "http://127.0.0.1:9/mcp"}}}}}}"#
    );
    let (code, out, err) = check("claude_desktop_config.json", &json, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("web") && out.contains("http://127.0.0.1:9/mcp"),
        "{out}"
    );

    let json = format!(
        r#"{{"mcpServers": {{"demo": {{"command": "{BIN}", "args": ["demo-server"], "bogus": 1}}}}}}"#
    );
    let (code, _, err) = check("c.json", &json, &[]);
    assert_eq!(code, 2);
    assert!(err.contains("bogus"), "{err}");

    let json =
        format!(r#"{{"mcpServers": {{"demo": {{"command": "{BIN}", "args": ["demo-server"]}}}}}}"#);
    let (code, out, err) = check("c.json", &json, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("demo"), "{out}");
}

/// The desktop form serves too: its one default namespace is /mcp.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_accepts_the_desktop_form() {
    let dir = tempdir::Dir::new();
    let json = format!(
        r#"{{"mcpServers": {{"local": {{"command": "{BIN}", "args": ["demo-server"]}}}}}}"#
    );
    let path = tempdir::write(&dir, "mcp.json", &json);
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--config",
            path.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let base = format!(
        "http://{}",
        line.trim().strip_prefix("sluice listening on ").unwrap()
    );
    wait_until(std::time::Duration::from_secs(20), || {
        http_get(&base, "/readyz").is_ok_and(|(s, _)| s == 200)
    });
    let http = Http::new(format!("{base}/mcp"));
    let sid = http.initialize().await;
    let r = http
        .call(
            &sid,
            2,
            "tools/call",
            serde_json::json!({"name":"local__echo","arguments":{"text":"desk"}}),
        )
        .await;
    assert_eq!(text_of(&r.json()), "desk");
    // SAFETY: our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn serve_refuses_a_bad_config_with_exit_2() {
    let dir = tempdir::Dir::new();
    let path = tempdir::write(&dir, "bad.toml", "[server]\nnope = 1\n");
    let out = Command::new(BIN)
        .args(["serve", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
    // Without [auth] the gateway must stay on loopback.
    let out = Command::new(BIN)
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Without `--config` the built-in default is read as a file is: the
/// `SLUICE_*__*` overrides apply to it, and a misspelt one is refused.
#[test]
fn the_built_in_default_takes_overrides_and_refuses_unknown_ones() {
    use std::io::BufRead;
    let mut child = Command::new(BIN)
        .arg("serve")
        .env("SLUICE_SERVER__LISTEN", "127.0.0.1:0")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // SAFETY: our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    // A stop as soon as the line is out is still a graceful one.
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let addr: std::net::SocketAddr = line
        .trim()
        .strip_prefix("sluice listening on ")
        .unwrap_or_else(|| panic!("first line: {line:?}"))
        .parse()
        .unwrap();
    // The default is 127.0.0.1:7400; port 0 took a free one.
    assert_ne!(addr.port(), 7400, "{line}");

    // A log format nobody reads is refused, not replaced by another.
    let out = Command::new(BIN)
        .arg("serve")
        .env("SLUICE_LOG_FORMAT", "xml")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SLUICE_LOG_FORMAT"));

    let out = Command::new(BIN)
        .arg("serve")
        .env("SLUICE_SERVER__BOGUS", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("SLUICE_SERVER__BOGUS"), "{err}");
}

/// `SLUICE_LOG_FORMAT=json` (issue 12, part 3): every log line is one JSON
/// object with a level and a message, for log collectors; a session's id
/// is in none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_a_line() {
    let gw = Gateway::start_logged(&demo_backend("demo"), &[("SLUICE_LOG_FORMAT", "json")]);
    let http = Http::new(gw.url("/mcp"));
    let session = http.initialize().await;
    let r = http
        .call(
            &session,
            2,
            "tools/call",
            json!({"name":"demo__echo","arguments":{"text":"hi"}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(http.delete(&session).await, 200);
    let log = gw.log();
    let lines: Vec<_> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 2, "{log}");
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["level"].is_string() && v["message"].is_string(), "{line}");
        assert!(!line.contains(&session), "a session id was logged: {line}");
    }
    assert!(
        lines.iter().any(|l| l.contains("\"sluice listening\"")),
        "{log}"
    );
}

/// `sluice probe`: a bad argument is a usage error (2); a server that
/// does not answer is a failure (1) that says so.
#[test]
fn probe_usage_and_unreachable_server() {
    let out = Command::new(BIN)
        .args(["probe", "http://127.0.0.1:9/mcp", "--sessions", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // Usage errors (docs/probe.md): exit 2, whatever the server.
    for (args, says) in [
        (&["probe", "ftp://127.0.0.1/mcp"][..], "not an http(s) URL"),
        (&["probe", "notaurl"], "not"),
        (
            &["probe", "http://127.0.0.1:9/mcp", "--header", "nocolon"],
            "is not Name: value",
        ),
        (
            &["probe", "http://127.0.0.1:9/mcp", "--metrics", "not a url"],
            "--metrics",
        ),
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // Nothing listens on the discard port.
    let out = Command::new(BIN)
        .args(["probe", "http://127.0.0.1:9/mcp"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no answer from the server"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `sluice --version` names the commit the binary was built from (issue
/// 52): what git says HEAD is here, or, from a tarball without .git, what
/// SLUICE_COMMIT said at build time, else "unknown".
#[test]
fn version_names_the_commit() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_owned());
    let want = head
        .unwrap_or_else(|| std::env::var("SLUICE_COMMIT").unwrap_or_else(|_| "unknown".to_owned()));
    assert_eq!(
        text.trim(),
        format!("sluice {} ({want})", env!("CARGO_PKG_VERSION"))
    );
}
