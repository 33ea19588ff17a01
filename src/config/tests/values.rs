//! Value types on their own: durations, names, tool filters, secrets, and
//! what `describe` may print.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use super::*;

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
        (86_400_000, "24h"),
        (60_000, "60s"),
        (3_600_000, "60m"),
        (172_800_000, "2d"),
        (1_000, "1s"),
        (0, "0s"),
    ] {
        assert_eq!(format(Duration::from_millis(d)), text);
    }
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
    let env = HashMap::new();
    let c = demo(PathBuf::from("/usr/bin/sluice"), &env).unwrap().config;
    assert_eq!(c.backends.len(), 1);
    let b = &c.backends[0];
    assert_eq!(b.name.as_str(), "demo");
    assert_eq!(
        b.transport,
        Transport::Stdio {
            command: "/usr/bin/sluice".into(),
            args: vec!["demo-server".into()],
            env: vec![],
            inherit: Inherit::default(),
            cwd: None,
            sandbox: None,
        }
    );
    assert_eq!(c.namespaces[0].name.as_str(), "default");
    assert_eq!(c.namespaces[0].backends, vec![b.name.clone()]);
    // Like a file without [auth]: the anonymous principal is not a tenant.
    assert_eq!(
        c.server,
        ServerSettings {
            max_sessions_per_principal: c.server.max_sessions,
            ..ServerSettings::default()
        }
    );
    assert_eq!(c.namespaces[0].prefix, Prefix::Always);
    // A path TOML must escape is the command as it is.
    let odd = PathBuf::from("/opt/a \"b\"\\c/sluice");
    let c = demo(odd.clone(), &env).unwrap().config;
    assert!(matches!(&c.backends[0].transport,
        Transport::Stdio { command, .. } if *command == odd.to_string_lossy()));
}

#[test]
fn the_demo_config_takes_overrides_and_refuses_unknown_ones() {
    let exe = PathBuf::from("/usr/bin/sluice");
    let env: HashMap<String, String> = [
        ("SLUICE_SERVER__LISTEN", "127.0.0.1:7999"),
        ("SLUICE_SERVER__SESSION_IDLE_TTL", "90s"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let c = demo(exe.clone(), &env).unwrap().config;
    assert_eq!(c.server.listen, "127.0.0.1:7999".parse().unwrap());
    assert_eq!(c.server.session_idle_ttl, Duration::from_secs(90));
    let bogus: HashMap<String, String> =
        [("SLUICE_SERVER__BOGUS".to_owned(), "1".to_owned())].into();
    let e = demo(exe, &bogus).unwrap_err().to_string();
    assert!(e.contains("SLUICE_SERVER__BOGUS"), "{e}");
}

#[test]
fn tracing_needs_an_http_endpoint_and_a_ratio_in_range() {
    let with = |table: &str| format!("[tracing]\n{table}\n{MINIMAL}");
    let t = ok(&with("otlp_endpoint = \"http://127.0.0.1:4318\""), &[])
        .config
        .tracing
        .unwrap();
    // A bare origin gets the standard path; a path is kept as written.
    assert_eq!(
        t.otlp_endpoint.to_string(),
        "http://127.0.0.1:4318/v1/traces"
    );
    assert_eq!((t.sampling_ratio, t.service_name.as_str()), (1.0, "sluice"));
    let t = ok(
        &with("otlp_endpoint = \"https://otel.example/api/traces\"\nsampling_ratio = 0.25"),
        &[],
    )
    .config
    .tracing
    .unwrap();
    assert_eq!(
        t.otlp_endpoint.to_string(),
        "https://otel.example/api/traces"
    );
    assert_eq!(t.sampling_ratio, 0.25);
    // From the environment alone.
    let t = ok(
        MINIMAL,
        &[("SLUICE_TRACING__OTLP_ENDPOINT", "http://127.0.0.1:4318/")],
    )
    .config
    .tracing
    .unwrap();
    assert_eq!(
        t.otlp_endpoint.to_string(),
        "http://127.0.0.1:4318/v1/traces"
    );
    assert!(ok(MINIMAL, &[]).config.tracing.is_none());

    let lines = err(&with("sampling_ratio = 1.5"), &[]);
    assert!(
        mentions(
            &lines,
            &["tracing.sampling_ratio", "1.5 is not between 0 and 1"]
        ),
        "{lines:?}"
    );
    assert!(
        mentions(&lines, &["[tracing] needs an otlp_endpoint"]),
        "{lines:?}"
    );
    let lines = err(&with("otlp_endpoint = \"grpc://collector:4317\""), &[]);
    assert!(
        mentions(&lines, &["must be an http:// or https:// URL"]),
        "{lines:?}"
    );
    let lines = err(&with("otlp_endpoint = \"http://\""), &[]);
    assert!(mentions(&lines, &["tracing.otlp_endpoint"]), "{lines:?}");
}

#[test]
fn oauth_needs_an_issuer_and_an_audience_url() {
    let with = |table: &str| format!("[auth]\noauth = {{ {table} }}\n{MINIMAL}");
    let auth = ok(
        &with(
            "issuer = \"https://auth.example.com\", audience = \"https://mcp.example.com/mcp\", required_scopes = [\"mcp:tools\"]",
        ),
        &[],
    )
    .config
    .auth
    .unwrap();
    // OAuth alone: no static tokens needed.
    assert!(auth.tokens.is_empty());
    let o = auth.oauth.unwrap();
    assert_eq!(o.issuer, "https://auth.example.com");
    assert_eq!(o.audience, "https://mcp.example.com/mcp");
    assert_eq!(o.jwks_url, None);
    assert_eq!(o.required_scopes, ["mcp:tools"]);
    // Both kinds at once.
    let both = ok(
        &format!(
            "[auth]\nbearer_tokens_env = \"T\"\noauth = {{ issuer = \"https://a.example\", audience = \"https://g.example/mcp\", jwks_url = \"https://a.example/jwks\" }}\n{MINIMAL}"
        ),
        &[("T", "one,two")],
    )
    .config
    .auth
    .unwrap();
    assert_eq!(both.tokens.len(), 2);
    assert_eq!(
        both.oauth.unwrap().jwks_url.unwrap().to_string(),
        "https://a.example/jwks"
    );

    let lines = err(&with("issuer = \"https://a.example\""), &[]);
    assert!(
        mentions(&lines, &["needs an issuer", "audience"]),
        "{lines:?}"
    );
    let lines = err(&with("issuer = \"a.example\", audience = \"mcp\""), &[]);
    assert!(mentions(&lines, &["auth.oauth.issuer"]), "{lines:?}");
    assert!(mentions(&lines, &["auth.oauth.audience"]), "{lines:?}");
    let lines = err(
        &with(
            "issuer = \"https://a.example\", audience = \"https://g.example/mcp\", required_scopes = [\"a b\"]",
        ),
        &[],
    );
    assert!(mentions(&lines, &["`a b` is not a scope"]), "{lines:?}");
    let lines = err(&format!("[auth]\n{MINIMAL}"), &[]);
    assert!(
        mentions(&lines, &["bearer_tokens_env", "oauth"]),
        "{lines:?}"
    );
}

#[test]
fn namespace_scopes_need_oauth() {
    let ns = "[namespaces.admin]\nbackends = [\"web\"]\nrequire_scopes = [\"mcp:admin\"]\n";
    let lines = err(
        &format!("[auth]\nbearer_tokens_env = \"T\"\n{MINIMAL}{ns}"),
        &[("T", "t")],
    );
    assert!(
        mentions(&lines, &["namespaces.admin.require_scopes", "[auth] oauth"]),
        "{lines:?}"
    );
    let oauth = "[auth]\noauth = { issuer = \"https://a.example\", audience = \"https://g.example/mcp\" }\n";
    let config = ok(&format!("{oauth}{MINIMAL}{ns}"), &[]).config;
    assert_eq!(config.namespaces[0].require_scopes, ["mcp:admin"]);

    let tools = "[namespaces.admin]\nbackends = [\"web\"]\ntool_scopes = { \"web__del*\" = [\"admin\"], \"*\" = [\"read\"] }\n";
    let lines = err(&format!("{MINIMAL}{tools}"), &[]);
    assert!(
        mentions(&lines, &["namespaces.admin.tool_scopes", "[auth] oauth"]),
        "{lines:?}"
    );
    let scopes = &ok(&format!("{oauth}{MINIMAL}{tools}"), &[])
        .config
        .namespaces[0]
        .tool_scopes;
    let held = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    // Every matching pattern's scopes are needed.
    assert!(scopes.allows("web__delete", &held(&["admin", "read"])));
    assert!(!scopes.allows("web__delete", &held(&["admin"])));
    assert!(scopes.allows("web__get", &held(&["read"])));
    assert!(!scopes.allows("web__get", &held(&[])));
}

#[test]
fn backend_oauth_is_for_http_backends_with_a_secret() {
    let oauth = "oauth = { token_url = \"https://auth.example/token\", client_id = \"gw\", client_secret_env = \"S\", scopes = [\"read\"] }\n";
    let c = ok(&format!("{MINIMAL}{oauth}"), &[("S", "secret")]).config;
    let creds = c.backends[0].credentials.as_ref().unwrap();
    assert_eq!(creds.token_url.to_string(), "https://auth.example/token");
    assert_eq!(
        (creds.client_id.as_str(), creds.scopes.as_slice()),
        ("gw", &["read".to_owned()][..])
    );
    assert_eq!(creds.client_secret.expose(), "secret");
    // Never printed.
    assert!(!format!("{c:?}").contains("secret\""));

    let lines = err(&format!("{MINIMAL}{oauth}"), &[]);
    assert!(mentions(&lines, &["`S` is not set"]), "{lines:?}");
    let stdio = format!("[backends.local]\ncommand = \"x\"\n{oauth}");
    let lines = err(&stdio, &[("S", "secret")]);
    assert!(
        mentions(&lines, &["only http and sse backends"]),
        "{lines:?}"
    );
    let both = format!("{MINIMAL}headers = {{ Authorization = \"Bearer x\" }}\n{oauth}");
    let lines = err(&both, &[("S", "secret")]);
    assert!(
        mentions(&lines, &["already has an Authorization"]),
        "{lines:?}"
    );
    let lines = err(&format!("{MINIMAL}oauth = {{ client_id = \"gw\" }}\n"), &[]);
    assert!(mentions(&lines, &["needs a token_url"]), "{lines:?}");
}

#[test]
fn token_exchange_needs_oauth_on_the_gateway() {
    let backend = "oauth = { token_url = \"https://auth.example/token\", client_id = \"gw\", client_secret_env = \"S\", scopes = [\"read\"], resource = \"https://api.example/\", exchange = { audience = \"api\" } }\n";
    let lines = err(&format!("{MINIMAL}{backend}"), &[("S", "secret")]);
    assert!(
        mentions(&lines, &["oauth.exchange", "[auth] oauth"]),
        "{lines:?}"
    );
    let gateway = "[auth]\noauth = { issuer = \"https://auth.example\", audience = \"http://127.0.0.1:8080/mcp\" }\n";
    let c = ok(&format!("{gateway}{MINIMAL}{backend}"), &[("S", "secret")]).config;
    let exchange = c.backends[0]
        .credentials
        .as_ref()
        .unwrap()
        .exchange
        .as_ref()
        .unwrap();
    // Resource and scopes default to the backend's own.
    assert_eq!(exchange.audience.as_deref(), Some("api"));
    assert_eq!(exchange.resource.as_deref(), Some("https://api.example/"));
    assert_eq!(exchange.scopes, ["read"]);
    let lines = err(
        &format!(
            "{gateway}{MINIMAL}oauth = {{ token_url = \"https://a/t\", client_id = \"gw\", client_secret_env = \"S\", exchange = {{ subject = \"x\" }} }}\n"
        ),
        &[("S", "secret")],
    );
    assert!(mentions(&lines, &["subject"]), "{lines:?}");
}

/// Whether one of the error lines holds every one of `parts`.
fn mentions(lines: &[String], parts: &[&str]) -> bool {
    lines.iter().any(|l| parts.iter().all(|p| l.contains(p)))
}
