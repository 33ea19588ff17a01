//! Environment: `${VAR}` interpolation, secrets named by variables, and
//! `SLUICE_<SECTION>__<KEY>` overrides.

use std::time::Duration;

use super::*;

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
    let tokens: Vec<&str> = auth.tokens.iter().map(|t| t.token.expose()).collect();
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
            ("SLUICE_SERVER__MAX_CONNECTIONS_PER_PEER", "12"),
            ("SLUICE_TOKENS", "not an override"),
        ],
    );
    let s = &loaded.config.server;
    assert_eq!(s.max_connections_per_peer, 12);
    assert_eq!(
        source(&loaded, "server.max_connections_per_peer"),
        Source::Env("SLUICE_SERVER__MAX_CONNECTIONS_PER_PEER".into())
    );
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
        shown.contains("server.max_connections_per_peer")
            && shown.contains("(env SLUICE_SERVER__MAX_CONNECTIONS_PER_PEER)"),
        "{shown}"
    );
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
            "sluice.toml: environment variable `SLUICE_BACKENDS__WEB__URL`: no section [backends]; only [server], [auth], [metrics], [limits], [cluster] and [tracing] keys can be set from the environment",
            "sluice.toml: environment variable `SLUICE_SERVER__BOGUS`: unknown key `bogus` in [server]",
            "sluice.toml: environment variable `SLUICE_SERVER__MAX_SESSIONS`: `server.max_sessions`: expected a non-negative integer, got `many`",
            "sluice.toml: environment variable `SLUICE_SERVER__SESSIONS`: `server.sessions`: unknown value `sometimes`, expected `auto` or `stateless`",
            "sluice.toml: `server.session_idle_ttl` (set by environment variable `SLUICE_SERVER__SESSION_IDLE_TTL`): must not be zero",
        ]
    );
}

#[test]
fn limits_from_the_file_and_the_environment() {
    use std::num::{NonZeroU32, NonZeroUsize};
    // Off unless written.
    let loaded = ok(MINIMAL, &[]);
    assert_eq!(loaded.config.limits, LimitsSettings::default());
    assert!(describe(&loaded).contains("limits.requests_per_second"));

    let text = format!("[limits]\nrequests_per_second = 20\n{MINIMAL}");
    let loaded = ok(&text, &[("SLUICE_LIMITS__MAX_CONCURRENT_REQUESTS", "8")]);
    let l = loaded.config.limits;
    let rate = l.rate.unwrap();
    assert_eq!(rate.per_second, NonZeroU32::new(20).unwrap());
    // The burst defaults to one second's worth.
    assert_eq!(rate.burst, rate.per_second);
    assert_eq!(l.max_concurrent_requests, NonZeroUsize::new(8));
    assert_eq!(source(&loaded, "limits.requests_per_second"), Source::File);
    assert_eq!(
        source(&loaded, "limits.max_concurrent_requests"),
        Source::Env("SLUICE_LIMITS__MAX_CONCURRENT_REQUESTS".into())
    );

    let text = format!("[limits]\nburst = 5\n{MINIMAL}");
    assert_eq!(
        err(&text, &[]),
        ["sluice.toml:2: `limits.burst`: a burst needs limits.requests_per_second"]
    );
    assert_eq!(
        err(MINIMAL, &[("SLUICE_LIMITS__BURST", "-1")]),
        [
            "sluice.toml: environment variable `SLUICE_LIMITS__BURST`: `limits.burst`: expected a non-negative integer below 2^32, got `-1`"
        ]
    );
}

#[test]
fn inherit_env_adds_names_and_never_a_secret() {
    let stdio =
        "[backends.fs]\ncommand = \"fs\"\ninherit_env = [\"GITHUB_HOST\", \"NODE_OPTIONS\"]\n";
    let loaded = ok(stdio, &[]);
    let Transport::Stdio { inherit, .. } = &loaded.config.backends[0].transport else {
        panic!("stdio expected");
    };
    assert_eq!(inherit.added(), ["GITHUB_HOST", "NODE_OPTIONS"]);
    assert!(inherit.passes("NODE_OPTIONS") && inherit.passes("HOME"));
    assert!(!inherit.passes("OTHER"));

    let secrets = "[auth]\nbearer_tokens_env = \"TOKENS\"\n[metrics]\ntoken_env = \"SCRAPE\"\n\
                   [backends.fs]\ncommand = \"fs\"\n\
                   inherit_env = [\"TOKENS\", \"SCRAPE_FILE\", \"SLUICE_SESSION_KEY\", \"OK\", \"OK\", \"A=B\"]\n";
    let pairs = [("TOKENS", "t"), ("SCRAPE", "s")];
    assert_eq!(
        err(secrets, &pairs),
        [
            "sluice.toml:7: `backends.fs.inherit_env[0]`: `TOKENS` holds the gateway's secret `auth.bearer_tokens_env`, and is never passed to a child",
            "sluice.toml:7: `backends.fs.inherit_env[1]`: `SCRAPE_FILE` holds the gateway's secret `metrics.token_env`, and is never passed to a child",
            "sluice.toml:7: `backends.fs.inherit_env[2]`: `SLUICE_SESSION_KEY` is the gateway's own (every `SLUICE_*` variable is), and is never passed to a child",
            "sluice.toml:7: `backends.fs.inherit_env[4]`: `OK` is listed twice",
            "sluice.toml:7: `backends.fs.inherit_env[5]`: not a valid environment variable name",
        ]
    );

    let http = format!("{MINIMAL}inherit_env = [\"HOME\"]\n");
    assert_eq!(
        err(&http, &[]),
        ["sluice.toml:4: `backends.web.inherit_env`: not allowed with transport = \"http\""]
    );
}

/// A secret of the gateway's cannot be smuggled out by interpolation: not
/// into a child's env or arguments, nor into a backend's headers.
#[test]
fn interpolating_a_gateway_secret_is_refused() {
    let text = "[auth]\nbearer_tokens_env = \"TOKENS\"\n\
                [backends.fs]\ncommand = \"fs\"\nargs = [\"--key=${SLUICE_SESSION_KEY}\"]\n\
                env = { LEAK = \"${TOKENS}\", OWN = \"${OWN_KEY}\" }\n\
                [backends.web]\nurl = \"http://127.0.0.1:1/mcp\"\n\
                headers = { Authorization = \"Bearer ${TOKENS_FILE}\" }\n\
                oauth = { token_url = \"http://127.0.0.1:1/t\", client_id = \"c\", client_secret_env = \"CS\" }\n\
                [backends.other]\ncommand = \"x\"\nenv = { S = \"${CS}\" }\n";
    let pairs = [
        ("TOKENS", "t"),
        ("SLUICE_SESSION_KEY", "k"),
        ("OWN_KEY", "mine"),
        ("CS", "cs"),
    ];
    assert_eq!(
        err(text, &pairs),
        [
            "sluice.toml:5: `backends.fs.args[0]`: `SLUICE_SESSION_KEY` is the gateway's own (every `SLUICE_*` variable is), and never leaves it",
            "sluice.toml:6: `backends.fs.env.LEAK`: `TOKENS` holds the gateway's secret `auth.bearer_tokens_env`, and never leaves it",
            "sluice.toml:9: `backends.web.headers.Authorization`: `TOKENS_FILE` holds the gateway's secret `auth.bearer_tokens_env`, and never leaves it",
            "sluice.toml:13: `backends.other.env.S`: `CS` holds the gateway's secret `backends.web.oauth.client_secret_env`, and never leaves it",
        ]
    );
}

/// The `mcpServers` JSON's `env` reaches the child as before.
#[test]
fn desktop_env_still_reaches_the_child() {
    let json =
        r#"{"mcpServers": {"fs": {"command": "fs", "env": {"API": "${KEY}", "MODE": "x"}}}}"#;
    let loaded = parse_desktop(json, "claude.json", &env(&[("KEY", "k")])).unwrap();
    let Transport::Stdio { env, inherit, .. } = &loaded.config.backends[0].transport else {
        panic!("stdio expected");
    };
    assert_eq!(
        env,
        &[("API".into(), "k".into()), ("MODE".into(), "x".into())]
    );
    assert!(inherit.added().is_empty());
}

/// A principal's credentials: its own variables expanded into its entry
/// (and its key resolved to a static name or, with OAuth, a subject); the
/// same variables refused to the backend's own env and to a child by
/// `inherit_env`.
#[test]
fn principal_credentials_are_their_own_secrets() {
    let text = "[auth]\nbearer_tokens_env = \"TOKENS\"\n\
                oauth = { issuer = \"https://issuer.example\", audience = \"https://gw.example/mcp\" }\n\
                [backends.fs]\ncommand = \"fs\"\nenv = { LEAK = \"${ALICE_FS}\" }\n\
                inherit_env = [\"ALICE_FS\"]\n\
                [backends.fs.principals.alice]\nenv = { FS_TOKEN = \"${ALICE_FS}\" }\n\
                [backends.fs.principals.\"auth0|42\"]\nenv = { FS_TOKEN = \"x\" }\n";
    let pairs = [("TOKENS", "alice=t"), ("ALICE_FS", "alice-secret")];
    assert_eq!(
        err(text, &pairs),
        [
            "sluice.toml:6: `backends.fs.env.LEAK`: `ALICE_FS` holds principal `alice`'s credentials (`backends.fs.principals.alice.env.FS_TOKEN`), and never leaves it",
            "sluice.toml:7: `backends.fs.inherit_env[0]`: `ALICE_FS` holds principal `alice`'s credentials (`backends.fs.principals.alice.env.FS_TOKEN`), and is never passed to a child",
        ]
    );
    let text = text
        .replace("env = { LEAK = \"${ALICE_FS}\" }\n", "")
        .replace("inherit_env = [\"ALICE_FS\"]\n", "");
    let loaded = ok(&text, &pairs);
    let p = loaded.config.backends[0].principals.as_ref().unwrap();
    assert_eq!(p.fallback, crate::config::Fallback::Hide);
    assert_eq!(p.entries.len(), 2);
    assert_eq!(p.entries[0].principal.to_string(), "alice");
    assert_eq!(p.entries[0].values[0].1.expose(), "alice-secret");
    assert_eq!(
        p.entries[1].principal,
        crate::vocab::Principal::subject("https://issuer.example", "auth0|42")
    );
}
