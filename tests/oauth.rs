//! `[auth] oauth` without a reachable authorization server: what can be
//! answered without the issuer is (the metadata, the challenge, a token
//! that is not a JWT), and what cannot is a 503, not a 401 that would send
//! clients into a new authorization. The flows against a real
//! authorization server are in tests/interop/test_oauth.py.

mod support;

use base64::Engine as _;
use serde_json::json;
use support::*;

fn b64(v: &serde_json::Value) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

/// A JWT with this header, plausible claims and a signature of nothing.
fn token_with(header: serde_json::Value) -> String {
    let claims =
        json!({"iss": "http://127.0.0.1:9", "sub": "a", "aud": "x", "exp": 4_000_000_000u64});
    format!("{}.{}.c2ln", b64(&header), b64(&claims))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_issuer_is_a_503_and_the_rest_still_answers() {
    // Port 9 (discard) on loopback: nothing listens there.
    let toml = format!(
        "[auth]\noauth = {{ issuer = \"http://127.0.0.1:9\", audience = \"http://127.0.0.1:7400/mcp\", required_scopes = [\"mcp\"] }}\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));

    let (status, body) =
        http_get(&gw.url(""), "/.well-known/oauth-protected-resource/mcp").unwrap();
    assert_eq!(status, 200, "{body}");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["resource"], "http://127.0.0.1:7400/mcp");
    assert_eq!(doc["authorization_servers"], json!(["http://127.0.0.1:9"]));

    let init = init_request(1);
    let r = http.post(None, &init).await;
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(
        r.headers["www-authenticate"],
        "Bearer resource_metadata=\"http://127.0.0.1:7400/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\""
    );
    let r = http
        .post_with(None, &[("authorization", "Bearer not-a-jwt")], &init)
        .await;
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(
        r.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .ends_with("error=\"invalid_token\"")
    );

    // A well-formed RS256 token: only the issuer's keys could judge it.
    let token = token_with(json!({"alg": "RS256", "typ": "JWT", "kid": "k1"}));
    let bearer = format!("Bearer {token}");
    let r = http
        .post_with(None, &[("authorization", bearer.as_str())], &init)
        .await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.headers["retry-after"], "1");
    assert!(!r.body.contains(&token));
    // HMAC and `none` are refused before any key is looked for.
    for alg in ["HS256", "none"] {
        let forged = token_with(json!({"alg": alg, "typ": "JWT"}));
        let bearer = format!("Bearer {forged}");
        let r = http
            .post_with(None, &[("authorization", bearer.as_str())], &init)
            .await;
        assert_eq!(r.status, 401, "{alg}: {}", r.body);
    }
    let log = gw.stop();
    assert_eq!(log, Some(0));
}

/// An issuer whose metadata names another issuer (here, with a trailing
/// `/`: issue 49, part 4): the log names both, the configured one and the
/// one found, and where it was found; the token gets 503, not 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issuer_mismatch_is_logged_with_both_urls() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let found = format!("{issuer}/");
    let doc = json!({"issuer": found, "jwks_uri": format!("{issuer}/jwks")});
    // Only RFC 8414's document: the OpenID ones that follow are 404.
    let app = axum::Router::new().route(
        "/.well-known/oauth-authorization-server",
        axum::routing::get(move || async move { axum::Json(doc) }),
    );
    // Ends with the test's runtime.
    tokio::spawn(async move { axum::serve(listener, app).await });

    let toml = format!(
        "[auth]\noauth = {{ issuer = \"{issuer}\", audience = \"http://127.0.0.1:7400/mcp\" }}\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start_logged(&toml, &[]);
    let http = Http::new(gw.url("/mcp"));
    let token = token_with(json!({"alg": "RS256", "typ": "JWT", "kid": "k1"}));
    let bearer = format!("Bearer {token}");
    let r = http
        .post_with(
            None,
            &[("authorization", bearer.as_str())],
            &init_request(1),
        )
        .await;
    assert_eq!(r.status, 503, "{}", r.body);
    let want = format!(
        "issuer signing keys not fetched: the issuer's metadata at {issuer}/.well-known/oauth-authorization-server names the issuer \"{found}\", not the configured \"{issuer}\""
    );
    wait_until(std::time::Duration::from_secs(10), || {
        gw.log().contains(&want)
    });
    assert!(!gw.log().contains(&token));
}
