use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use super::*;

const ORIGIN: &str = "sluice.toml";

/// The example from DESIGN.md, verbatim apart from nothing.
const DESIGN_EXAMPLE: &str = r#"[server]
listen = "127.0.0.1:7400"
sessions = "auto"            # auto | stateless   (see Client sessions)
session_ids = "table"        # table | sealed      (sealed: key from SLUICE_SESSION_KEY)
session_idle_ttl = "30m"     # never unbounded; "0" is rejected
max_sessions = 10000         # table capacity; oldest-idle is evicted when full
max_sessions_per_principal = 1000
max_body_bytes = 4194304
allowed_origins = []         # empty: only requests with no Origin or a loopback Origin
request_timeout = "60s"
shutdown_grace = "10s"

[auth]                       # optional; without it the gateway must listen on loopback
bearer_tokens_env = "SLUICE_TOKENS"   # comma-separated tokens, each a principal

[metrics]
path = "/metrics"
token_env = ""               # when set, /metrics needs this bearer token
summary_interval = "15m"     # one summary log line per interval, none while idle

[backends.everything]
transport = "stdio"          # stdio | http | sse (the deprecated 2024-11-05 HTTP+SSE transport)
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything"]
env = { }
isolation = "shared"         # shared | per-session
max_sessions = 64            # backend sessions this backend may hold (per-session isolation)
idle_ttl = "10m"             # per-session backend sessions idle longer are closed
request_timeout = "60s"
tools = { include = ["*"], exclude = [], rename = { } }

[backends.web]
transport = "http"
url = "http://127.0.0.1:8931/mcp"
headers = { }                # static headers; never the client's own credentials

[namespaces.default]
backends = ["everything", "web"]
prefix = "always"            # always | never  (never: names pass unchanged; a
                             # collision between backends is a config error)
"#;

const MINIMAL: &str = "[backends.web]\ntransport = \"http\"\nurl = \"http://127.0.0.1:8931/mcp\"\n";

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn ok(text: &str, pairs: &[(&str, &str)]) -> Loaded {
    match parse_toml(text, ORIGIN, &env(pairs)) {
        Ok(loaded) => loaded,
        Err(e) => panic!("expected a valid config, got:\n{e}"),
    }
}

fn err(text: &str, pairs: &[(&str, &str)]) -> Vec<String> {
    match parse_toml(text, ORIGIN, &env(pairs)) {
        Ok(loaded) => panic!("expected an error, got {loaded:?}"),
        Err(e) => e.lines().collect(),
    }
}

fn source(loaded: &Loaded, key: &str) -> Source {
    loaded
        .provenance
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| panic!("no provenance for {key}"))
}

#[test]
fn design_example_parses() {
    let loaded = ok(DESIGN_EXAMPLE, &[("SLUICE_TOKENS", "alpha, beta")]);
    let c = &loaded.config;
    assert_eq!(c.server, ServerSettings::default());
    let tokens: Vec<&str> = c
        .auth
        .as_ref()
        .unwrap()
        .tokens
        .iter()
        .map(Secret::expose)
        .collect();
    assert_eq!(tokens, ["alpha", "beta"]);
    assert_eq!(c.metrics, MetricsSettings::default());

    let names: Vec<&str> = c.backends.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["everything", "web"]);
    let everything = c.backend("everything").unwrap();
    assert_eq!(
        everything.transport,
        Transport::Stdio {
            command: "npx".into(),
            args: vec![
                "-y".into(),
                "@modelcontextprotocol/server-everything".into()
            ],
            env: vec![],
            cwd: None,
        }
    );
    assert_eq!(everything.isolation, Isolation::Shared);
    assert_eq!(everything.max_sessions, 64);
    assert_eq!(everything.idle_ttl, Duration::from_secs(600));
    assert_eq!(everything.request_timeout, Duration::from_secs(60));
    assert_eq!(everything.tools, ToolFilter::all());
    assert_eq!(
        c.backend("web").unwrap().transport,
        Transport::Http {
            url: "http://127.0.0.1:8931/mcp".into(),
            headers: vec![]
        }
    );

    assert_eq!(c.namespaces.len(), 1);
    let ns = &c.namespaces[0];
    assert_eq!(ns.name.as_str(), "default");
    assert_eq!(
        ns.backends,
        [
            BackendName::new("everything").unwrap(),
            BackendName::new("web").unwrap()
        ]
    );
    assert_eq!(ns.prefix, Prefix::Always);

    assert_eq!(source(&loaded, "server.sessions"), Source::File);
    assert_eq!(source(&loaded, "auth.bearer_tokens_env"), Source::File);
    assert_eq!(loaded.provenance.len(), 14);
}

#[test]
fn minimal_config_gets_defaults_and_a_default_namespace() {
    let loaded = ok(MINIMAL, &[]);
    let c = &loaded.config;
    assert_eq!(c.server, ServerSettings::default());
    assert_eq!(c.server.listen.to_string(), "127.0.0.1:7400");
    assert!(c.auth.is_none());
    assert_eq!(c.metrics.path, "/metrics");
    assert_eq!(c.metrics.summary_interval, Duration::from_secs(900));
    assert_eq!(c.namespaces[0].name.as_str(), "default");
    assert_eq!(c.namespaces[0].prefix, Prefix::Always);
    assert_eq!(c.backends[0].request_timeout, Duration::from_secs(60));
    assert!(loaded.provenance.iter().all(|(_, s)| *s == Source::Default));
    // No [auth]: no auth provenance.
    assert_eq!(loaded.provenance.len(), 13);
}

#[test]
fn backend_request_timeout_defaults_to_the_servers() {
    let loaded = ok(
        &format!("[server]\nrequest_timeout = \"5s\"\n{MINIMAL}"),
        &[],
    );
    assert_eq!(
        loaded.config.backends[0].request_timeout,
        Duration::from_secs(5)
    );
}

#[test]
fn unknown_key_names_key_table_and_line() {
    let text = format!("{MINIMAL}\n[backends.other]\ncommand = \"x\"\nisolaton = \"shared\"\n");
    assert_eq!(
        err(&text, &[]),
        ["sluice.toml:7: unknown key `isolaton` in [backends.other] (did you mean `isolation`?)"]
    );
    assert_eq!(
        err("bogus = 1\n", &[]),
        ["sluice.toml:1: unknown key `bogus` at the top level"]
    );
    let inline = format!("{MINIMAL}tools = {{ include = [\"*\"], exculde = [] }}\n");
    assert_eq!(
        err(&inline, &[]),
        ["sluice.toml:4: unknown key `exculde` in [backends.web.tools] (did you mean `exclude`?)"]
    );
}

#[test]
fn bad_values_name_key_and_line() {
    let text = format!("{MINIMAL}idle_ttl = \"5x\"\n");
    assert_eq!(
        err(&text, &[]),
        [
            "sluice.toml:4: `backends.web.idle_ttl`: invalid duration `5x`: unknown unit `x` (use ms, s, m, h or d)"
        ]
    );
    assert_eq!(
        err("[server]\nsessions = \"sometimes\"\n", &[]),
        [
            "sluice.toml:2: `server.sessions`: unknown value `sometimes`, expected `auto` or `stateless`"
        ]
    );
    let lines = err("[server]\nmax_sessions = -1\n", &[]);
    assert!(
        lines[0].starts_with("sluice.toml:2: `server.max_sessions`: "),
        "{lines:?}"
    );
}

#[test]
fn syntax_errors_carry_a_line() {
    let lines = err("[server]\nlisten = \"x\"\n[server]\n", &[]);
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with("sluice.toml:3: duplicate key"),
        "{lines:?}"
    );
    assert!(err("\n[server\n", &[])[0].starts_with("sluice.toml:2: "));
}

#[test]
fn durations_parse_integer_and_unit() {
    use super::duration::{format, parse};
    let cases = [
        ("250ms", 250),
        ("5s", 5_000),
        ("30m", 1_800_000),
        ("1h", 3_600_000),
        ("1d", 86_400_000),
        ("0", 0),
        ("0s", 0),
    ];
    for (text, ms) in cases {
        assert_eq!(parse(text), Ok(Duration::from_millis(ms)), "{text}");
    }
    for bad in [
        "",
        "5",
        "s",
        "-1s",
        "1.5s",
        "1h30m",
        "5 s",
        "5sec",
        "99999999999999999999d",
    ] {
        let e = parse(bad).expect_err(bad);
        assert!(e.starts_with(&format!("invalid duration `{bad}`")), "{e}");
    }
    for (d, text) in [
        (250, "250ms"),
        (90_000, "90s"),
        (1_800_000, "30m"),
        (86_400_000, "1d"),
        (0, "0s"),
    ] {
        assert_eq!(format(Duration::from_millis(d)), text);
    }
}

#[test]
fn zero_idle_ttl_is_rejected() {
    assert_eq!(
        err(
            &format!("[server]\nsession_idle_ttl = \"0\"\n{MINIMAL}"),
            &[]
        ),
        ["sluice.toml:2: `server.session_idle_ttl`: must not be zero"]
    );
    // Zero is meaningful for the summary interval: it turns the line off.
    let loaded = ok(
        &format!("[metrics]\nsummary_interval = \"0s\"\n{MINIMAL}"),
        &[],
    );
    assert!(loaded.config.metrics.summary_interval.is_zero());
}

#[test]
fn header_interpolation_and_missing_variable() {
    let text = format!("{MINIMAL}headers = {{ Authorization = \"Bearer ${{WEB_TOKEN}}\" }}\n");
    assert_eq!(
        err(&text, &[]),
        [
            "sluice.toml:4: `backends.web.headers.Authorization`: environment variable `WEB_TOKEN` is not set"
        ]
    );
    let loaded = ok(&text, &[("WEB_TOKEN", "s3cret")]);
    let Transport::Http { headers, .. } = &loaded.config.backends[0].transport else {
        panic!("http expected");
    };
    assert_eq!(headers[0].0, "Authorization");
    assert_eq!(headers[0].1.expose(), "Bearer s3cret");
}

#[test]
fn stdio_interpolation_in_args_and_env() {
    let text = "[backends.fs]\ncommand = \"fs\"\nargs = [\"--key=${KEY}\", \"$$5\", \"$HOME\"]\n\
                env = { API = \"${KEY}\" }\n";
    let loaded = ok(text, &[("KEY", "k1")]);
    let Transport::Stdio { args, env, .. } = &loaded.config.backends[0].transport else {
        panic!("stdio expected");
    };
    assert_eq!(args, &["--key=k1", "$5", "$HOME"]);
    assert_eq!(env, &[("API".to_owned(), "k1".to_owned())]);

    let lines = err(text, &[]);
    assert_eq!(
        lines,
        [
            "sluice.toml:3: `backends.fs.args[0]`: environment variable `KEY` is not set",
            "sluice.toml:4: `backends.fs.env.API`: environment variable `KEY` is not set",
        ]
    );
}

#[test]
fn bearer_tokens_come_from_the_named_variable() {
    let text = format!("[auth]\nbearer_tokens_env = \"TOKENS\"\n{MINIMAL}");
    assert_eq!(
        err(&text, &[]),
        ["sluice.toml:2: `auth.bearer_tokens_env`: environment variable `TOKENS` is not set"]
    );
    assert_eq!(
        err(&text, &[("TOKENS", " , ,")]),
        ["sluice.toml:2: `auth.bearer_tokens_env`: environment variable `TOKENS` holds no tokens"]
    );
    let loaded = ok(&text, &[("TOKENS", " a, b,,c ")]);
    let auth = loaded.config.auth.unwrap();
    let tokens: Vec<&str> = auth.tokens.iter().map(Secret::expose).collect();
    assert_eq!(tokens, ["a", "b", "c"]);
    assert!(
        err(&format!("[auth]\n{MINIMAL}"), &[])[0]
            .starts_with("sluice.toml:1: `auth.bearer_tokens_env`")
    );
}

#[test]
fn metrics_token_env() {
    let text = format!("[metrics]\ntoken_env = \"MT\"\n{MINIMAL}");
    assert_eq!(
        err(&text, &[]),
        ["sluice.toml:2: `metrics.token_env`: environment variable `MT` is not set"]
    );
    let loaded = ok(&text, &[("MT", "m")]);
    assert_eq!(loaded.config.metrics.token, Some(Secret::new("m")));
    assert_eq!(
        err(&format!("[metrics]\npath = \"metrics\"\n{MINIMAL}"), &[]),
        ["sluice.toml:2: `metrics.path`: `metrics` must start with `/`"]
    );
}

#[test]
fn namespace_naming_an_unknown_backend() {
    let text = format!(
        "{MINIMAL}\n[namespaces.tools]\nbackends = [\"web\", \"wbe\"]\nprefix = \"never\"\n"
    );
    assert_eq!(
        err(&text, &[]),
        [
            "sluice.toml:6: `namespaces.tools.backends`: namespace `tools` names unknown backend `wbe` (known: web)"
        ]
    );
    let loaded = ok(
        &format!("{MINIMAL}\n[namespaces.tools]\nbackends = [\"web\"]\nprefix = \"never\"\n"),
        &[],
    );
    assert_eq!(
        loaded.config.namespace("tools").unwrap().prefix,
        Prefix::Never
    );
    assert!(loaded.config.namespace("default").is_none());
}

#[test]
fn non_loopback_listen_needs_auth() {
    let text = format!("[server]\nlisten = \"0.0.0.0:7400\"\n{MINIMAL}");
    assert_eq!(
        err(&text, &[]),
        [
            "sluice.toml:2: `server.listen`: 0.0.0.0:7400: without [auth] the gateway must listen on loopback (add [auth] or use 127.0.0.1 / [::1])"
        ]
    );
    let with_auth = format!("{text}[auth]\nbearer_tokens_env = \"T\"\n");
    assert_eq!(
        ok(&with_auth, &[("T", "t")])
            .config
            .server
            .listen
            .to_string(),
        "0.0.0.0:7400"
    );
    assert!(
        ok(
            "[server]\nlisten = \"[::1]:80\"\n[backends.a]\ncommand = \"a\"\n",
            &[]
        )
        .config
        .auth
        .is_none()
    );

    let mut config = ok(MINIMAL, &[]).config;
    assert!(config.set_listen("10.0.0.1:80".parse().unwrap()).is_err());
    assert!(config.set_listen("127.0.0.1:80".parse().unwrap()).is_ok());
    assert_eq!(config.server.listen.port(), 80);
}

#[test]
fn environment_overrides_record_their_source() {
    let text = format!("[server]\nsessions = \"auto\"\nmax_sessions = 5\n{MINIMAL}");
    let loaded = ok(
        &text,
        &[
            ("SLUICE_SERVER__SESSIONS", "stateless"),
            ("SLUICE_SERVER__SESSION_IDLE_TTL", "10m"),
            (
                "SLUICE_SERVER__ALLOWED_ORIGINS",
                "https://a.example, https://b.example:8443",
            ),
            ("SLUICE_METRICS__PATH", "/m"),
            ("SLUICE_TOKENS", "not an override"),
        ],
    );
    let s = &loaded.config.server;
    assert_eq!(s.sessions, SessionMode::Stateless);
    assert_eq!(s.session_idle_ttl, Duration::from_secs(600));
    assert_eq!(
        s.allowed_origins,
        ["https://a.example", "https://b.example:8443"]
    );
    assert_eq!(s.max_sessions, 5);
    assert_eq!(loaded.config.metrics.path, "/m");
    assert_eq!(
        source(&loaded, "server.sessions"),
        Source::Env("SLUICE_SERVER__SESSIONS".into())
    );
    assert_eq!(
        source(&loaded, "metrics.path"),
        Source::Env("SLUICE_METRICS__PATH".into())
    );
    assert_eq!(source(&loaded, "server.max_sessions"), Source::File);
    assert_eq!(source(&loaded, "server.listen"), Source::Default);

    let shown = describe(&loaded);
    assert!(shown.contains("(env SLUICE_SERVER__SESSIONS)"), "{shown}");
    assert!(
        shown.contains("(file)") && shown.contains("(default)"),
        "{shown}"
    );

    // An override can also turn on [auth].
    let loaded = ok(
        MINIMAL,
        &[("SLUICE_AUTH__BEARER_TOKENS_ENV", "T"), ("T", "x")],
    );
    assert_eq!(loaded.config.auth.unwrap().tokens.len(), 1);
}

#[test]
fn bad_environment_overrides_name_the_variable() {
    let lines = err(
        MINIMAL,
        &[
            ("SLUICE_SERVER__BOGUS", "1"),
            ("SLUICE_SERVER__SESSIONS", "sometimes"),
            ("SLUICE_SERVER__MAX_SESSIONS", "many"),
            ("SLUICE_SERVER__SESSION_IDLE_TTL", "0"),
            ("SLUICE_BACKENDS__WEB__URL", "http://x"),
        ],
    );
    assert_eq!(
        lines,
        [
            "sluice.toml: environment variable `SLUICE_BACKENDS__WEB__URL`: no section [backends]; only [server], [auth] and [metrics] keys can be set from the environment",
            "sluice.toml: environment variable `SLUICE_SERVER__BOGUS`: unknown key `bogus` in [server]",
            "sluice.toml: environment variable `SLUICE_SERVER__MAX_SESSIONS`: `server.max_sessions`: expected a non-negative integer, got `many`",
            "sluice.toml: environment variable `SLUICE_SERVER__SESSIONS`: `server.sessions`: unknown value `sometimes`, expected `auto` or `stateless`",
            "sluice.toml: `server.session_idle_ttl` (set by environment variable `SLUICE_SERVER__SESSION_IDLE_TTL`): must not be zero",
        ]
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = "[server]\nmax_sessions = 0\nlisten = \"nowhere\"\n\n\
                [backends.a]\ntransport = \"stdio\"\nurl = \"http://x\"\n\n\
                [backends.b]\ntransport = \"http\"\nurl = \"ftp://x\"\nidle_ttl = \"0s\"\n";
    assert_eq!(
        err(text, &[]),
        [
            "sluice.toml:3: `server.listen`: `nowhere` is not an IP address and port (e.g. 127.0.0.1:7400)",
            "sluice.toml:2: `server.max_sessions`: must be greater than zero",
            "sluice.toml:7: `backends.a.url`: not allowed with transport = \"stdio\"",
            "sluice.toml:5: `backends.a.command`: required with transport = \"stdio\"",
            "sluice.toml:11: `backends.b.url`: `ftp://x` must start with http:// or https://",
            "sluice.toml:12: `backends.b.idle_ttl`: must not be zero",
        ]
    );
}

#[test]
fn backend_names_are_validated() {
    let lines = err("[backends.a__b]\ncommand = \"x\"\n", &[]);
    assert_eq!(
        lines,
        [
            "sluice.toml:1: `backends.a__b`: invalid backend name `a__b`: must not contain `__` (the tool prefix separator)"
        ]
    );
    for bad in ["", "_a", "a_", "a.b", "a b", &"x".repeat(65)] {
        assert!(BackendName::new(bad).is_err(), "{bad:?}");
    }
    for good in ["a", "web-1_x", "A9", &"x".repeat(64)] {
        assert_eq!(BackendName::new(good).unwrap().as_str(), good);
    }
    assert!(NamespaceName::new("_team").is_ok());
    assert!(NamespaceName::new("a/b").is_err());
    assert_eq!(BackendName::new("web").unwrap().to_string(), "web");
}

#[test]
fn tool_filter_include_exclude_rename_round_trip() {
    let filter = ToolFilter::new(
        vec!["read_*".into(), "write_file".into()],
        vec!["*_secret".into()],
        vec![
            ("read_file".into(), "cat".into()),
            ("write_file".into(), "fs.write".into()),
        ],
    )
    .unwrap();
    assert_eq!(filter.expose("read_file").as_deref(), Some("cat"));
    assert_eq!(filter.expose("write_file").as_deref(), Some("fs.write"));
    assert_eq!(filter.expose("read_dir").as_deref(), Some("read_dir"));
    assert_eq!(filter.expose("read_secret"), None);
    assert_eq!(filter.expose("delete"), None);
    assert_eq!(filter.original("cat"), Some("read_file"));
    assert_eq!(filter.original("read_dir"), Some("read_dir"));
    assert_eq!(filter.original("read_file"), None, "renamed away");
    assert_eq!(filter.original("read_secret"), None);
    assert_eq!(filter.original("delete"), None);
    for name in [
        "read_file",
        "write_file",
        "read_dir",
        "read_secret",
        "delete",
    ] {
        if let Some(exposed) = filter.expose(name) {
            assert_eq!(filter.original(&exposed), Some(name));
        }
    }
    assert_eq!(
        ToolFilter::all().expose("anything").as_deref(),
        Some("anything")
    );

    let e = ToolFilter::new(
        vec!["*".into()],
        vec![],
        vec![("a".into(), "x".into()), ("b".into(), "x".into())],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "`rename`: `a` and `b` are both renamed to `x`"
    );

    let text = format!("{MINIMAL}tools = {{ rename = {{ a = \"bad name\" }} }}\n");
    assert_eq!(
        err(&text, &[]),
        [
            "sluice.toml:4: `backends.web.tools`: `rename.a`: `bad name` is not a valid tool name (1-128 characters of A-Z, a-z, 0-9, `_`, `-`, `.`)"
        ]
    );
}

#[test]
fn globs_support_star_only() {
    use super::tools::glob;
    assert!(glob("*", ""));
    assert!(glob("a*", "abc"));
    assert!(glob("*c", "abc"));
    assert!(glob("a*c", "abc"));
    assert!(glob("a*b*c", "a_b_c"));
    assert!(!glob("a*b*c", "acb"));
    assert!(!glob("ab*ba", "aba"), "prefix and suffix must not overlap");
    assert!(glob("abc", "abc"));
    assert!(!glob("abc", "abcd"));
    assert!(!glob("a?c", "abc"));
}

#[test]
fn desktop_json_both_forms() {
    let json = r#"{
      "globalShortcut": "ignored",
      "mcpServers": {
        "fs": {"command": "npx", "args": ["-y", "server-fs", "/tmp"], "env": {"DEBUG": "1"}},
        "web": {"url": "https://example.com/mcp", "headers": {"X-Key": "${KEY}"}},
        "old": {"type": "sse", "url": "http://127.0.0.1:9000/sse"},
        "typed": {"type": "streamable-http", "url": "http://127.0.0.1:9001/mcp"},
        "off": {"command": "nope", "disabled": true, "whatever": 1}
      }
    }"#;
    let loaded = parse_desktop(json, "claude.json", &env(&[("KEY", "k")])).unwrap();
    let c = &loaded.config;
    let names: Vec<&str> = c.backends.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["fs", "web", "old", "typed"]);
    assert_eq!(
        c.backends[0].transport,
        Transport::Stdio {
            command: "npx".into(),
            args: vec!["-y".into(), "server-fs".into(), "/tmp".into()],
            env: vec![("DEBUG".into(), "1".into())],
            cwd: None,
        }
    );
    assert_eq!(
        c.backends[1].transport,
        Transport::Http {
            url: "https://example.com/mcp".into(),
            headers: vec![("X-Key".into(), Secret::new("k"))],
        }
    );
    assert!(matches!(c.backends[2].transport, Transport::Sse { .. }));
    assert!(matches!(c.backends[3].transport, Transport::Http { .. }));
    assert_eq!(c.backends[0].isolation, Isolation::Shared);
    assert_eq!(c.backends[0].max_sessions, 64);
    assert_eq!(c.namespaces.len(), 1);
    assert_eq!(c.namespaces[0].name.as_str(), "default");
    assert_eq!(c.namespaces[0].backends.len(), 4);
}

#[test]
fn desktop_json_errors() {
    let unknown = r#"{"mcpServers": {"fs": {"command": "x", "autoApprove": []}}}"#;
    let e = parse_desktop(unknown, "claude.json", &env(&[])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "claude.json: unknown key `autoApprove` in [mcpServers.fs]"
    );

    let bad_name = r#"{"mcpServers": {"my server": {"command": "x"}}}"#;
    let e = parse_desktop(bad_name, "claude.json", &env(&[])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "claude.json: `mcpServers.\"my server\"`: invalid backend name `my server`: may contain only A-Z, a-z, 0-9, `_` and `-`"
    );

    let bad_type = r#"{"mcpServers": {"a": {"type": "ws", "url": "http://x"}}}"#;
    let e = parse_desktop(bad_type, "c.json", &env(&[])).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("c.json: `mcpServers.a.type`: unknown value `ws`"),
        "{e}"
    );

    let e = parse_desktop("{\n  \"mcpServers\": [\n", "c.json", &env(&[])).unwrap_err();
    assert!(e.to_string().starts_with("c.json:2: invalid JSON: "), "{e}");
    let e = parse_desktop("{}", "c.json", &env(&[])).unwrap_err();
    assert_eq!(e.to_string(), "c.json: missing the `mcpServers` object");
}

#[test]
fn load_picks_the_format() {
    let dir = std::env::temp_dir().join(format!("sluice-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("servers.json");
    std::fs::write(&json, r#"{"mcpServers": {"a": {"command": "x"}}}"#).unwrap();
    let braces = dir.join("servers.conf");
    std::fs::write(&braces, r#" {"mcpServers": {"b": {"command": "x"}}}"#).unwrap();
    let toml = dir.join("sluice.toml");
    std::fs::write(&toml, MINIMAL).unwrap();
    let none = env(&[]);
    assert_eq!(
        load(&json, &none).unwrap().config.backends[0].name.as_str(),
        "a"
    );
    assert_eq!(
        load(&braces, &none).unwrap().config.backends[0]
            .name
            .as_str(),
        "b"
    );
    assert_eq!(
        load(&toml, &none).unwrap().config.backends[0].name.as_str(),
        "web"
    );
    let missing = load(&dir.join("absent.toml"), &none).unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("absent.toml: cannot read config file"),
        "{missing}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn describe_never_shows_secrets() {
    let text = "[auth]\nbearer_tokens_env = \"TOKENS\"\n\
                [metrics]\ntoken_env = \"MT\"\n\
                [backends.fs]\ncommand = \"fs\"\nargs = [\"--key=${ARGKEY}\"]\nenv = { API_KEY = \"envvalue\" }\n\
                [backends.web]\nurl = \"https://user:pw@example.com/mcp?key=querysecret\"\n\
                headers = { Authorization = \"Bearer ${HDR}\" }\n";
    let loaded = ok(
        text,
        &[
            ("TOKENS", "tok1,tok2"),
            ("MT", "metricsecret"),
            ("ARGKEY", "argsecret"),
            ("HDR", "hdrsecret"),
        ],
    );
    let shown = describe(&loaded);
    for secret in [
        "tok1",
        "tok2",
        "metricsecret",
        "argsecret",
        "hdrsecret",
        "envvalue",
        "pw",
        "querysecret",
    ] {
        assert!(!shown.contains(secret), "{secret} leaked:\n{shown}");
    }
    for visible in [
        "API_KEY",
        "Authorization",
        "https://***@example.com/mcp?…",
        "2 token(s)",
        "fs: stdio `fs` with 1 arg(s)",
    ] {
        assert!(shown.contains(visible), "{visible} missing:\n{shown}");
    }
    assert!(
        shown.contains("default (/mcp): [fs, web], prefix always"),
        "{shown}"
    );
    let debug = format!("{loaded:?}");
    for secret in [
        "tok1",
        "metricsecret",
        "argsecret",
        "hdrsecret",
        "envvalue",
        "querysecret",
    ] {
        assert!(
            !debug.contains(secret),
            "{secret} leaked through Debug:\n{debug}"
        );
    }
    assert!(debug.contains("API_KEY"), "{debug}");
}

#[test]
fn secret_debug_is_redacted() {
    let s = Secret::new("hunter2");
    assert_eq!(format!("{s:?}"), "<redacted>");
    assert_eq!(s.expose(), "hunter2");
    assert!(s.matches("hunter2"));
    assert!(!s.matches("hunter"));
    assert!(!s.matches("hunter22"));
}

#[test]
fn demo_config() {
    let c = demo(PathBuf::from("/usr/bin/sluice"));
    assert_eq!(c.backends.len(), 1);
    let b = &c.backends[0];
    assert_eq!(b.name.as_str(), "demo");
    assert_eq!(
        b.transport,
        Transport::Stdio {
            command: "/usr/bin/sluice".into(),
            args: vec!["demo-server".into()],
            env: vec![],
            cwd: None,
        }
    );
    assert_eq!(c.namespaces[0].name.as_str(), "default");
    assert_eq!(c.namespaces[0].backends, vec![b.name.clone()]);
    assert_eq!(c.server, ServerSettings::default());
}
