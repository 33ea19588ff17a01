//! Loading TOML end to end: the DESIGN example, defaults, file order, and
//! every kind of problem with its rendered message and line. Environment,
//! desktop JSON and the value types have their own files under `tests/`.

use std::collections::HashMap;
use std::time::Duration;

use super::*;

mod code_flow;
mod desktop;
mod discovery;
mod env;
mod sandbox;
mod tls;
mod values;

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
        .map(|t| t.token.expose())
        .collect();
    assert_eq!(tokens, ["alpha", "beta"]);
    assert_eq!(c.metrics, MetricsSettings::default());

    let names: Vec<&str> = c.backends.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["everything", "web"]);
    let everything = c.backend("everything").unwrap();
    let Transport::Stdio { inherit, .. } = &everything.transport else {
        panic!("stdio expected");
    };
    assert!(inherit.added().is_empty());
    assert_eq!(
        everything.transport,
        Transport::Stdio {
            command: "npx".into(),
            args: vec![
                "-y".into(),
                "@modelcontextprotocol/server-everything".into()
            ],
            env: vec![],
            inherit: inherit.clone(),
            cwd: None,
            sandbox: None,
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
    assert_eq!(loaded.provenance.len(), 35);
}

#[test]
fn the_redis_url_says_where_it_came_from() {
    let key = crate::vocab::generate_key();
    let sealed = [("SLUICE_SESSION_KEY", key.as_str())];
    let written = format!(
        "[server]\nsession_ids = \"sealed\"\n[cluster]\nredis_url = \"redis://127.0.0.1:1/\"\n{MINIMAL}"
    );
    let loaded = ok(&written, &sealed);
    assert_eq!(source(&loaded, "cluster.redis_url"), Source::File);
    let loaded = ok(
        &format!("[server]\nsession_ids = \"sealed\"\n{MINIMAL}"),
        &[
            sealed[0],
            ("SLUICE_CLUSTER__REDIS_URL", "redis://127.0.0.1:1/"),
        ],
    );
    assert_eq!(
        source(&loaded, "cluster.redis_url"),
        Source::Env("SLUICE_CLUSTER__REDIS_URL".into())
    );
    assert_eq!(
        source(&ok(MINIMAL, &[]), "cluster.redis_url"),
        Source::Default
    );
}

#[test]
fn minimal_config_gets_defaults_and_a_default_namespace() {
    let loaded = ok(MINIMAL, &[]);
    let c = &loaded.config;
    // Without [auth] every client is the one anonymous principal: its cap
    // is the table's, not a tenant's.
    assert_eq!(c.server.max_sessions_per_principal, c.server.max_sessions);
    assert_eq!(
        c.server,
        ServerSettings {
            max_sessions_per_principal: c.server.max_sessions,
            ..ServerSettings::default()
        }
    );
    assert_eq!(c.server.listen.to_string(), "127.0.0.1:7400");
    assert!(c.auth.is_none());
    assert_eq!(c.metrics.path, "/metrics");
    assert_eq!(c.metrics.summary_interval, Duration::from_secs(900));
    assert_eq!(c.namespaces[0].name.as_str(), "default");
    assert_eq!(c.namespaces[0].prefix, Prefix::Always);
    assert_eq!(c.backends[0].request_timeout, Duration::from_secs(60));
    assert!(loaded.provenance.iter().all(|(_, s)| *s == Source::Default));
    // No [auth]: no auth provenance.
    assert_eq!(loaded.provenance.len(), 33);
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
        err(&format!("bogus = 1\n{MINIMAL}"), &[]),
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
        err(
            &format!("[server]\nsessions = \"sometimes\"\n{MINIMAL}"),
            &[]
        ),
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
    let lines = err(
        &format!("[server]\nlisten = \"127.0.0.1:1\"\n[server]\n{MINIMAL}"),
        &[],
    );
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with("sluice.toml:3: duplicate key"),
        "{lines:?}"
    );
    assert!(err("\n[server\n", &[])[0].starts_with("sluice.toml:2: "));
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
fn every_problem_is_reported_at_once() {
    let text = "[server]\nmax_sessions = 0\nlisten = \"nowhere\"\n\n\
                [backends.a]\ntransport = \"stdio\"\nurl = \"http://x\"\n\n\
                [backends.b]\ntransport = \"http\"\nurl = \"ftp://x\"\nidle_ttl = \"0s\"\n";
    assert_eq!(
        err(text, &[]),
        [
            "sluice.toml:2: `server.max_sessions`: must be greater than zero",
            "sluice.toml:3: `server.listen`: `nowhere` is not an IP address and port (e.g. 127.0.0.1:7400)",
            "sluice.toml:5: `backends.a.command`: required with transport = \"stdio\"",
            "sluice.toml:7: `backends.a.url`: not allowed with transport = \"stdio\"",
            "sluice.toml:11: `backends.b.url`: `ftp://x` must start with http:// or https://",
            "sluice.toml:12: `backends.b.idle_ttl`: must not be zero",
        ]
    );
}

#[test]
fn transport_keys_are_checked() {
    let text = "[backends.web]\nurl = \"ftp://user:pw@host/mcp?key=k\"\n\
                headers = { X-A = \"1\", x-a = \"2\", \"b c\" = \"3\" }\n\
                [backends.both]\ncommand = \"x\"\nurl = \"http://x\"\n\
                [backends.old]\ntransport = \"sse\"\nurl = \"http://x/sse\"\ncwd = \"/tmp\"\n";
    assert_eq!(
        err(text, &[]),
        [
            "sluice.toml:2: `backends.web.url`: `ftp://***@host/mcp?…` must start with http:// or https://",
            "sluice.toml:3: `backends.web.headers.x-a`: duplicate header (names are case-insensitive)",
            "sluice.toml:3: `backends.web.headers.\"b c\"`: not a valid HTTP header name",
            "sluice.toml:4: `backends.both`: both `command` and `url` are set; `transport` must say which to use",
            "sluice.toml:10: `backends.old.cwd`: not allowed with transport = \"sse\"",
        ]
    );
    let lines = err(
        &format!("[server]\nallowed_origins = [\"https://a\", 5]\n{MINIMAL}"),
        &[],
    );
    assert_eq!(
        lines,
        [
            "sluice.toml:2: `server.allowed_origins[1]`: invalid type: integer `5`, expected a string"
        ]
    );
}

#[test]
fn tables_keep_file_order() {
    let text = "[backends.zeta]\ncommand = \"z\"\nenv = { Z = \"1\", A = \"2\" }\n\
                [backends.alpha]\nurl = \"http://a\"\nheaders = { Z-H = \"1\", A-H = \"2\" }\n\
                [backends.mid]\ncommand = \"m\"\n\
                [backends.mid.tools]\nrename = { z = \"zz\", a = \"aa\" }\n\
                [namespaces.two]\nbackends = [\"mid\", \"zeta\"]\n\
                [namespaces.one]\nbackends = [\"alpha\"]\n";
    let c = ok(text, &[]).config;
    let names: Vec<&str> = c.backends.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["zeta", "alpha", "mid"]);
    let Transport::Stdio { env, .. } = &c.backends[0].transport else {
        panic!("stdio expected");
    };
    let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["Z", "A"]);
    let Transport::Http { headers, .. } = &c.backends[1].transport else {
        panic!("http expected");
    };
    let keys: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["Z-H", "A-H"]);
    let (_, _, rename) = c.backends[2].tools.parts();
    assert_eq!(rename[0], ("z".to_owned(), "zz".to_owned()));
    let namespaces: Vec<&str> = c.namespaces.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(namespaces, ["two", "one"]);
    assert_eq!(c.namespaces[0].backends[0].as_str(), "mid");
}

/// Sealed ids need their keys from the environment, checked, and never
/// a key made up at startup; `check` shows how many keys, never a key.
#[test]
fn sealed_ids_need_keys_and_never_show_them() {
    let sealed = format!("[server]\nsession_ids = \"sealed\"\n{MINIMAL}");
    let e = err(&sealed, &[]);
    assert!(e[0].contains("SLUICE_SESSION_KEY"), "{e:?}");
    assert!(e[0].contains("sluice keygen"), "{e:?}");
    let e = err(&sealed, &[("SLUICE_SESSION_KEY", "c2VjcmV0LWJ1dC1zaG9ydA")]);
    assert!(e[0].contains("not 32 bytes"), "{e:?}");
    assert!(!e[0].contains("c2VjcmV0"), "the key is never shown: {e:?}");
    let (a, b) = (crate::vocab::generate_key(), crate::vocab::generate_key());
    let loaded = ok(&sealed, &[("SLUICE_SESSION_KEY", &format!("{a},{b}"))]);
    assert_eq!(loaded.config.server.session_ids, SessionIdMode::Sealed);
    assert_eq!(
        loaded.config.server.session_max_lifetime,
        Duration::from_secs(86_400)
    );
    let shown = describe(&loaded);
    assert!(shown.contains("sealed (2 key(s)"), "{shown}");
    assert!(!shown.contains(&a) && !shown.contains(&b), "{shown}");
}

/// Where each rendered problem is (`sluice.toml:N`).
fn places(lines: &[String]) -> Vec<&str> {
    lines
        .iter()
        .map(|l| l.split(": ").next().unwrap())
        .collect()
}

/// Every problem of a file in one run, in line order (issue 49): values
/// serde refuses, several in one table, beside what the build stage
/// finds in the same tables; a refused value counts as absent, so what
/// needs it is reported too. After a syntax error, what the parser made
/// of the broken line is not reported on.
#[test]
fn every_problem_is_listed_at_once_in_line_order() {
    let text = "[namespaces.x]\nbackends = [\"web\", \"ghost\"]\nbogus_ns = 1\n\
                [server]\nsesions = \"auto\"\nmax_sessions = 0\nsession_idle_ttl = \"5\"\n\
                [backends.web]\ntransport = \"htp\"\nurl = \"http://127.0.0.1:1/mcp\"\nbogus_b = 2\n\
                [backends.other]\ncommand = 3\n";
    let lines = err(text, &[]);
    let at = places(&lines);
    assert_eq!(
        at,
        [
            "sluice.toml:2",
            "sluice.toml:3",
            "sluice.toml:5",
            "sluice.toml:6",
            "sluice.toml:7",
            "sluice.toml:9",
            "sluice.toml:11",
            "sluice.toml:12",
            "sluice.toml:13",
        ],
        "{lines:#?}"
    );
    for (line, says) in lines.iter().zip([
        "unknown backend `ghost`",
        "bogus_ns",
        "sesions",
        "must be greater than zero",
        "invalid duration `5`",
        "unknown value `htp`",
        "bogus_b",
        "`backends.other`: missing `transport`",
        "`backends.other.command`: invalid type",
    ]) {
        assert!(line.contains(says), "{says:?} in {lines:#?}");
    }

    let lines = err("[server\nlisten = \"x\"\n[backends.a]\nurl = = 1\n", &[]);
    let at = places(&lines);
    assert_eq!(
        at,
        ["sluice.toml:1", "sluice.toml:4", "sluice.toml:4"],
        "{lines:#?}"
    );
}

/// `[cluster]` over TLS: the files only with `rediss://`, a certificate
/// with its key, the password's variable set; the password a secret no
/// child gets.
#[test]
fn redis_tls_settings_are_checked() {
    let key = crate::vocab::generate_key();
    let sealed = [("SLUICE_SESSION_KEY", key.as_str()), ("REDIS_PW", "pw")];
    let with = |cluster: &str| {
        format!("[server]\nsession_ids = \"sealed\"\n[cluster]\n{cluster}\n{MINIMAL}")
    };
    let ok_file = "/proc/self/status";
    let loaded = ok(
        &with("redis_url = \"rediss://u@127.0.0.1:1/\"\nredis_password_env = \"REDIS_PW\""),
        &sealed,
    );
    let c = loaded.config.cluster.as_ref().unwrap();
    assert_eq!(c.password.as_ref().unwrap().expose(), "pw");
    // The files themselves: tests/tls.rs.
    // The password's variable is the gateway's: no child may ask for it.
    let asks = format!(
        "{}[backends.fs]\ncommand = \"fs\"\ninherit_env = [\"REDIS_PW\"]\n",
        with("redis_url = \"rediss://u@127.0.0.1:1/\"\nredis_password_env = \"REDIS_PW\"")
    );
    let e = err(&asks, &sealed).join("\n");
    assert!(
        e.contains("REDIS_PW") && e.contains("cluster.redis_password_env"),
        "{e}"
    );

    let e = err(
        &with(&format!(
            "redis_url = \"redis://127.0.0.1:1/\"\nredis_ca_file = \"{ok_file}\"\n\
             redis_client_cert_file = \"/nonexistent.pem\"\nredis_password_env = \"UNSET_PW\""
        )),
        &sealed,
    );
    let all = e.join("\n");
    assert!(
        all.contains("cluster.redis_ca_file`: only for a rediss://"),
        "{all}"
    );
    assert!(all.contains("cluster.redis_client_cert_file"), "{all}");
    assert!(all.contains("`UNSET_PW`"), "{all}");
}

/// `[auth] token_scopes`: keyed by principal names, each an entry of
/// `bearer_tokens_env`; it makes `tool_scopes` usable without OAuth.
#[test]
fn token_scopes_name_static_tokens() {
    let tokens = [("T", "alice=tok-a, bob.ops=tok=b")];
    let ns =
        "[namespaces.default]\nbackends = [\"web\"]\ntool_scopes = { \"web__x\" = [\"admin\"] }\n";
    let auth = |scopes: &str| {
        format!("[auth]\nbearer_tokens_env = \"T\"\ntoken_scopes = {{ {scopes} }}\n{MINIMAL}{ns}")
    };
    let a = ok(&auth("\"bob.ops\" = [\"admin\"]"), &tokens)
        .config
        .auth
        .unwrap();
    assert!(a.scoped_tokens);
    let seen: Vec<(String, &str, Vec<String>)> = a
        .tokens
        .iter()
        .enumerate()
        .map(|(i, t)| {
            (
                t.principal(i).to_string(),
                t.token.expose(),
                t.scopes.clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("alice".to_owned(), "tok-a", vec![]),
            // After the first `=` it is all token.
            ("bob.ops".to_owned(), "tok=b", vec!["admin".to_owned()]),
        ]
    );

    // A position is refused, with how to name the tokens instead; so is a
    // name no entry has.
    let e = err(&auth("\"token#1\" = [\"admin\"], carol = [\"x\"]"), &tokens).join("\n");
    assert!(
        e.contains("sluice.toml:3: `auth.token_scopes.\"token#1\"`"),
        "{e}"
    );
    assert!(e.contains("T=alice=tok-a,bob=tok-b"), "{e}");
    assert!(
        e.contains(
            "`auth.token_scopes.carol`: no entry of `T` is named `carol` (named: alice, bob.ops)"
        ),
        "{e}"
    );
    assert!(!e.contains("tok=b"), "a token in an error: {e}");

    // With token_scopes, every entry is named.
    let e = err(
        &auth("alice = [\"admin\"]"),
        &[("T", "alice=tok-a,bare,other")],
    )
    .join("\n");
    assert!(e.contains("token#1, token#2 have none"), "{e}");
    assert!(!e.contains("bare"), "a token in an error: {e}");
}

/// `NAME=TOKEN` only when NAME is a name and TOKEN a token; names and
/// tokens each appear once; no error quotes a token.
#[test]
fn token_entries_are_named_unambiguously() {
    let text = format!("[auth]\nbearer_tokens_env = \"T\"\n{MINIMAL}");
    let parsed = |value: &str| -> Vec<(String, String)> {
        let a = ok(&text, &[("T", value)]).config.auth.unwrap();
        assert!(!a.scoped_tokens);
        a.tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.principal(i).to_string(), t.token.expose().to_owned()))
            .collect()
    };
    let pair = |p: &str, t: &str| (p.to_owned(), t.to_owned());
    assert_eq!(
        parsed("c2VjcmV0==, YWJj=, a b=c, x=y, n=t=u, =v, no#=w"),
        [
            // Base64 padding is no name's separator.
            pair("token#0", "c2VjcmV0=="),
            pair("token#1", "YWJj="),
            // Not a name before the `=`: one whole token.
            pair("token#2", "a b=c"),
            pair("x", "y"),
            pair("n", "t=u"),
            pair("token#5", "=v"),
            pair("token#6", "no#=w"),
        ]
    );
    let e = err(&text, &[("T", "alice=one,alice=two")]).join("\n");
    assert!(e.contains("`T` names `alice` twice"), "{e}");
    let e = err(&text, &[("T", "alice=same,same")]).join("\n");
    assert!(
        e.contains("the same token twice (alice and token#1)"),
        "{e}"
    );
    assert!(!e.contains("same,") && !e.contains("=same"), "{e}");
}
