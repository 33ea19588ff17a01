//! The `mcpServers` JSON form and format detection in `load`.

use super::*;

#[test]
fn desktop_json_both_forms() {
    let json = r#"{
      "globalShortcut": "ignored",
      "mcpServers": {
        "fs": {"command": "npx", "args": ["-y", "server-fs", "/tmp"], "env": {"DEBUG": "1", "API": "${KEY}"}},
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
            env: vec![("DEBUG".into(), "1".into()), ("API".into(), "k".into())],
            inherit: Inherit::default(),
            cwd: None,
            sandbox: None,
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
    let unknown = "{\n  \"mcpServers\": {\n    \"fs\": {\n      \"command\": \"x\",\n      \"autoApprove\": []\n    }\n  }\n}\n";
    let e = parse_desktop(unknown, "claude.json", &env(&[])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "claude.json:5: unknown key `autoApprove` in [mcpServers.fs]"
    );

    let bad_name = r#"{"mcpServers": {"my server": {"command": "x"}}}"#;
    let e = parse_desktop(bad_name, "claude.json", &env(&[])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "claude.json:1: `mcpServers.\"my server\"`: invalid backend name `my server`: may contain only A-Z, a-z, 0-9, `_` and `-`"
    );

    let bad_type = r#"{"mcpServers": {"a": {"type": "ws", "url": "http://x"}}}"#;
    let e = parse_desktop(bad_type, "c.json", &env(&[])).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("c.json:1: `mcpServers.a.type`: unknown value `ws`"),
        "{e}"
    );

    let e = parse_desktop("{\n  \"mcpServers\": [\n", "c.json", &env(&[])).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("c.json:2: invalid JSON at column "),
        "{e}"
    );
    // One line: the column says where.
    let e = parse_desktop(
        r#"{"mcpServers": {"a": {"command": "x",}}}"#,
        "c.json",
        &env(&[]),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("c.json:1: invalid JSON at column 38: "),
        "{e}"
    );
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
