use super::*;

fn url(s: &str) -> Url {
    Url::parse(s).unwrap()
}

fn strings(urls: Vec<Url>) -> Vec<String> {
    urls.into_iter().map(String::from).collect()
}

#[test]
fn the_bearer_challenges_parameters_are_read_and_others_ignored() {
    let c = Challenge::parse([
        r#"Basic realm="x", resource_metadata="https://evil/""#,
        r#"Bearer error="invalid_token", resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/mcp", scope="files:read files:write""#,
    ]);
    assert_eq!(
        c.resource_metadata.as_deref(),
        Some("https://api.example.com/.well-known/oauth-protected-resource/mcp")
    );
    assert_eq!(c.scope.as_deref(), Some("files:read files:write"));
    // Two challenges in one value; unquoted values; odd spacing and case.
    let c = Challenge::parse(["Negotiate abc=1, bearer  Resource_Metadata = https://a/m ,realm=x"]);
    assert_eq!(c.resource_metadata.as_deref(), Some("https://a/m"));
    assert_eq!(c.scope, None);
    let c = Challenge::parse([r#"Bearer scope="a \"b\"""#]);
    assert_eq!(c.scope.as_deref(), Some(r#"a "b""#));
    for nothing in ["", "Bearer", ",,,", "Bearer =", r#"Bearer x=""#] {
        assert_eq!(
            Challenge::parse([nothing]).resource_metadata,
            None,
            "{nothing}"
        );
    }
}

#[test]
fn resource_metadata_is_looked_for_with_the_path_then_at_the_root() {
    assert_eq!(
        strings(resource_metadata_urls(&url(
            "https://api.example.com/public/mcp?x=1"
        ))),
        [
            "https://api.example.com/.well-known/oauth-protected-resource/public/mcp",
            "https://api.example.com/.well-known/oauth-protected-resource",
        ]
    );
    assert_eq!(
        strings(resource_metadata_urls(&url("http://127.0.0.1:9000/"))),
        ["http://127.0.0.1:9000/.well-known/oauth-protected-resource"]
    );
}

#[test]
fn server_metadata_is_looked_for_in_the_specs_order() {
    assert_eq!(
        strings(server_metadata_urls(&url(
            "https://auth.example.com/tenant1"
        ))),
        [
            "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
            "https://auth.example.com/.well-known/openid-configuration/tenant1",
            "https://auth.example.com/tenant1/.well-known/openid-configuration",
        ]
    );
    assert_eq!(
        strings(server_metadata_urls(&url("https://auth.example.com"))),
        [
            "https://auth.example.com/.well-known/oauth-authorization-server",
            "https://auth.example.com/.well-known/openid-configuration",
        ]
    );
}

#[test]
fn resource_metadata_must_name_the_backend_and_a_server() {
    let backend = url("https://api.example.com/mcp");
    let doc = |resource: &str, servers: &str| {
        format!(
            r#"{{"resource":"{resource}","authorization_servers":{servers},"scopes_supported":["read"]}}"#
        )
    };
    let ok = ResourceMetadata::parse(
        doc(
            "https://api.example.com/mcp",
            r#"["https://auth.example.com"]"#,
        )
        .as_bytes(),
        &backend,
    )
    .unwrap();
    assert_eq!(ok.authorization_server, url("https://auth.example.com"));
    assert_eq!(ok.scopes_supported, ["read"]);
    for covering in ["https://api.example.com", "https://api.example.com/mcp/"] {
        assert!(
            ResourceMetadata::parse(doc(covering, r#"["https://a"]"#).as_bytes(), &backend).is_ok(),
            "{covering}"
        );
    }
    for other in [
        "https://evil.example.com/mcp",
        "http://api.example.com/mcp",
        "https://api.example.com/mc",
        "https://api.example.com/mcp/deeper",
        "not a url",
    ] {
        assert!(
            matches!(
                ResourceMetadata::parse(doc(other, r#"["https://a"]"#).as_bytes(), &backend),
                Err(DiscoveryError::OtherResource { .. })
            ),
            "{other}"
        );
    }
    assert_eq!(
        ResourceMetadata::parse(
            doc("https://api.example.com/mcp", "[]").as_bytes(),
            &backend
        ),
        Err(DiscoveryError::NoAuthorizationServer)
    );
    assert!(matches!(
        ResourceMetadata::parse(b"{", &backend),
        Err(DiscoveryError::BadResourceMetadata(_))
    ));
}

#[test]
fn server_metadata_must_be_the_issuers_and_offer_s256() {
    let issuer = url("https://auth.example.com/");
    let doc = |issuer: &str, methods: &str| {
        format!(
            r#"{{"issuer":"{issuer}","authorization_endpoint":"https://auth.example.com/auth",
                "token_endpoint":"https://auth.example.com/token",
                "registration_endpoint":"https://auth.example.com/reg",
                "code_challenge_methods_supported":{methods}}}"#
        )
    };
    let ok = ServerMetadata::parse(
        doc("https://auth.example.com", r#"["plain","S256"]"#).as_bytes(),
        &issuer,
    )
    .unwrap();
    assert_eq!(ok.token_endpoint, url("https://auth.example.com/token"));
    assert_eq!(
        ok.registration_endpoint,
        Some(url("https://auth.example.com/reg"))
    );
    assert_eq!(ok.revocation_endpoint, None);
    assert!(!ok.client_id_metadata_document_supported);
    assert!(matches!(
        ServerMetadata::parse(
            doc("https://evil.example.com", r#"["S256"]"#).as_bytes(),
            &issuer
        ),
        Err(DiscoveryError::OtherIssuer { .. })
    ));
    for methods in [r#"["plain"]"#, "[]"] {
        assert_eq!(
            ServerMetadata::parse(doc("https://auth.example.com", methods).as_bytes(), &issuer),
            Err(DiscoveryError::NoPkce),
            "{methods}"
        );
    }
    let absent = r#"{"issuer":"https://auth.example.com","authorization_endpoint":"https://a/x","token_endpoint":"https://a/t"}"#;
    assert_eq!(
        ServerMetadata::parse(absent.as_bytes(), &issuer),
        Err(DiscoveryError::NoPkce)
    );
}
