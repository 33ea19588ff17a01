//! The flow's requests against a loopback server: discovery from the
//! 401's `resource_metadata`, else RFC 9728's well-known URL; RFC 8414's
//! metadata, else OpenID's; the token endpoint's refusal named, no token
//! in it.

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use tokio::net::TcpListener;

use super::*;
use crate::http1::proxy::Proxy;

/// What the server offers.
#[derive(Clone, Copy)]
struct Offers {
    /// The 401 names the resource metadata (at a path of its own).
    challenge: bool,
    /// RFC 8414's URL answers (else only OpenID's does).
    rfc8414: bool,
}

async fn server(offers: Offers) -> Url {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let shared = Arc::new(base.clone());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let base = shared.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let base = base.clone();
                    async move { Ok::<_, Infallible>(answer(&base, offers, &req)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    Url::parse(&format!("{base}/mcp")).unwrap()
}

fn answer<B>(base: &str, offers: Offers, req: &hyper::Request<B>) -> hyper::Response<Full<Bytes>> {
    let json = |status: u16, body: serde_json::Value| {
        hyper::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap()
    };
    let server_metadata = || {
        json(
            200,
            serde_json::json!({
                "issuer": base,
                "authorization_endpoint": format!("{base}/authorize"),
                "token_endpoint": format!("{base}/token"),
                "registration_endpoint": format!("{base}/register"),
                "code_challenge_methods_supported": ["S256"],
            }),
        )
    };
    let resource = || {
        json(
            200,
            serde_json::json!({
                "resource": format!("{base}/mcp"),
                "authorization_servers": [base],
                "scopes_supported": ["mcp:tools"],
            }),
        )
    };
    match (req.method().as_str(), req.uri().path()) {
        ("POST", "/mcp") => {
            let mut r = json(401, serde_json::json!({}));
            let challenge = match offers.challenge {
                true => format!(
                    "Bearer error=\"invalid_token\", resource_metadata=\"{base}/custom-prm\", scope=\"mcp:tools extra\""
                ),
                false => "Bearer error=\"invalid_token\"".to_owned(),
            };
            r.headers_mut()
                .insert("www-authenticate", challenge.parse().unwrap());
            r
        }
        ("GET", "/custom-prm") if offers.challenge => resource(),
        ("GET", "/.well-known/oauth-protected-resource/mcp") if !offers.challenge => resource(),
        ("GET", "/.well-known/oauth-authorization-server") if offers.rfc8414 => server_metadata(),
        ("GET", "/.well-known/openid-configuration") if !offers.rfc8414 => server_metadata(),
        ("POST", "/register") => json(201, serde_json::json!({"client_id": "c1"})),
        ("POST", "/token") => json(
            400,
            serde_json::json!({"error": "invalid_grant", "error_description": "spent"}),
        ),
        _ => json(404, serde_json::json!({})),
    }
}

fn client() -> Client {
    Client::new(Proxy::none()).unwrap()
}

#[tokio::test]
async fn the_401s_resource_metadata_is_followed_first() {
    let backend = server(Offers {
        challenge: true,
        rfc8414: true,
    })
    .await;
    let found = discover(&client(), &backend).await.unwrap();
    assert_eq!(found.resource, backend);
    assert_eq!(found.scope.as_deref(), Some("mcp:tools extra"), "the 401's");
    assert_eq!(found.server.token_endpoint.path(), "/token");
    let redirect = Url::parse("http://127.0.0.1:9/oauth/callback").unwrap();
    let registered = register(&client(), &found.server, &redirect).await.unwrap();
    assert_eq!(registered.client_id, "c1");
}

#[tokio::test]
async fn without_a_challenge_the_well_known_urls_and_openid_are_tried() {
    let backend = server(Offers {
        challenge: false,
        rfc8414: false,
    })
    .await;
    let found = discover(&client(), &backend).await.unwrap();
    assert_eq!(found.scope.as_deref(), Some("mcp:tools"), "the metadata's");
    assert_eq!(found.server.authorization_endpoint.path(), "/authorize");
}

#[tokio::test]
async fn a_refused_token_request_names_the_error_and_no_secret() {
    let backend = server(Offers {
        challenge: true,
        rfc8414: true,
    })
    .await;
    let found = discover(&client(), &backend).await.unwrap();
    let who = ClientIdentity::configured("c1", Some(crate::config::Secret::new("s3cr3t")));
    let refresh = crate::config::Secret::new("refresh-s3cr3t");
    let form = TokenForm::refresh(&who, &refresh, &found.resource);
    let e = token(&client(), &found.server.token_endpoint, form, 0, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("invalid_grant"), "{e}");
    assert!(!e.contains("s3cr3t"), "{e}");
}

#[tokio::test]
async fn nothing_listening_is_an_error_in_time() {
    let backend = Url::parse("http://127.0.0.1:9/mcp").unwrap();
    let e = discover(&client(), &backend).await.unwrap_err().to_string();
    assert!(e.starts_with("the backend's 401"), "{e}");
}
