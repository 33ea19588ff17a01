use super::*;

fn url(s: &str) -> Url {
    Url::parse(s).unwrap()
}

fn public() -> ClientIdentity {
    ClientIdentity::configured("sluice client", None)
}

fn confidential() -> ClientIdentity {
    ClientIdentity::configured("c:1", Some(Secret::new("s3cr3t+/")))
}

fn form(body: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

fn get<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[test]
fn the_authorization_url_asks_for_a_code_with_pkce_for_the_backend() {
    let pkce = Pkce::generate();
    let client = public();
    let (redirect, resource) = (
        url("https://gw.example.com/oauth/callback"),
        url("https://api.example.com/mcp"),
    );
    let request = AuthorizationRequest {
        client: &client,
        redirect: &redirect,
        resource: &resource,
        scope: Some("files:read"),
        pkce: &pkce,
        state: "f1.abc",
    };
    let at = request.url(&url("https://auth.example.com/authorize?tenant=t"));
    let pairs: Vec<(String, String)> = at.query_pairs().into_owned().collect();
    assert_eq!(
        get(&pairs, "tenant"),
        Some("t"),
        "the endpoint's own query stays"
    );
    assert_eq!(get(&pairs, "response_type"), Some("code"));
    assert_eq!(get(&pairs, "client_id"), Some("sluice client"));
    assert_eq!(get(&pairs, "redirect_uri"), Some(redirect.as_str()));
    assert_eq!(
        get(&pairs, "code_challenge"),
        Some(pkce.challenge().as_str())
    );
    assert_eq!(get(&pairs, "code_challenge_method"), Some("S256"));
    assert_eq!(get(&pairs, "state"), Some("f1.abc"));
    assert_eq!(get(&pairs, "resource"), Some(resource.as_str()));
    assert_eq!(get(&pairs, "scope"), Some("files:read"));
    assert!(!at.as_str().contains(pkce.verifier()));
    let unscoped = AuthorizationRequest {
        scope: None,
        ..request
    };
    assert!(
        !unscoped
            .url(&url("https://a/x"))
            .as_str()
            .contains("scope=")
    );
}

#[test]
fn the_code_is_exchanged_with_its_verifier_for_the_backend() {
    let pkce = Pkce::generate();
    let (redirect, resource) = (url("https://gw/oauth/callback"), url("https://api/mcp"));
    let f = TokenForm::code(&public(), "the-code", &redirect, &pkce, &resource);
    let pairs = form(&f.body);
    assert_eq!(get(&pairs, "grant_type"), Some("authorization_code"));
    assert_eq!(get(&pairs, "code"), Some("the-code"));
    assert_eq!(get(&pairs, "code_verifier"), Some(pkce.verifier()));
    assert_eq!(
        get(&pairs, "redirect_uri"),
        Some("https://gw/oauth/callback")
    );
    assert_eq!(get(&pairs, "resource"), Some("https://api/mcp"));
    assert_eq!(
        get(&pairs, "client_id"),
        Some("sluice client"),
        "a public client names itself"
    );
    assert!(f.authorization.is_none());
}

#[test]
fn a_client_with_a_secret_authenticates_with_basic() {
    let grant = read_token_answer(
        br#"{"access_token":"at","token_type":"Bearer","refresh_token":"rt"}"#,
        0,
        None,
    )
    .unwrap();
    let f = TokenForm::refresh(
        &confidential(),
        grant.refresh.as_ref().unwrap(),
        &url("https://api/mcp"),
    );
    let pairs = form(&f.body);
    assert_eq!(get(&pairs, "grant_type"), Some("refresh_token"));
    assert_eq!(get(&pairs, "refresh_token"), Some("rt"));
    assert_eq!(get(&pairs, "client_id"), None);
    // "c:1" and "s3cr3t+/" form-encoded: "c%3A1:s3cr3t%2B%2F".
    assert_eq!(
        f.authorization.unwrap().expose(),
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("c%3A1:s3cr3t%2B%2F")
        )
    );
    let revoke = form(&TokenForm::revoke(&public(), &grant).body);
    assert_eq!(get(&revoke, "token"), Some("rt"));
    assert_eq!(get(&revoke, "token_type_hint"), Some("refresh_token"));
}

#[test]
fn a_token_answer_gives_a_grant_and_a_refresh_keeps_what_it_did_not_change() {
    let first = read_token_answer(
        br#"{"access_token":"a1","token_type":"bearer","expires_in":30,"refresh_token":"r1","scope":"read"}"#,
        1_000,
        None,
    )
    .unwrap();
    assert_eq!(first.access.expose(), "a1");
    assert_eq!(first.refresh.as_ref().unwrap().expose(), "r1");
    assert_eq!(first.expires, Some(1_030));
    assert_eq!(first.connected, 1_000);
    let second = read_token_answer(
        br#"{"access_token":"a2","token_type":"Bearer","expires_in":30}"#,
        1_025,
        Some(&first),
    )
    .unwrap();
    assert_eq!(second.access.expose(), "a2");
    assert_eq!(
        second.refresh.as_ref().unwrap().expose(),
        "r1",
        "not rotated: kept"
    );
    assert_eq!(second.scope.as_deref(), Some("read"));
    assert_eq!((second.connected, second.expires), (1_000, Some(1_055)));
}

#[test]
fn refusals_and_odd_answers_give_no_grant_and_show_no_token() {
    assert_eq!(
        read_token_answer(
            br#"{"error":"invalid_grant","error_description":"expired"}"#,
            0,
            None
        ),
        Err(TokenError::Refused("invalid_grant expired".into()))
    );
    assert_eq!(
        read_token_answer(br#"{"access_token":"t0ken","token_type":"DPoP"}"#, 0, None),
        Err(TokenError::NotBearer("DPoP".into()))
    );
    for bad in [&b"{}"[..], br#"{"access_token":""}"#, b"nope"] {
        let e = read_token_answer(bad, 0, None).unwrap_err();
        assert!(matches!(e, TokenError::BadAnswer(_)), "{e}");
    }
}
