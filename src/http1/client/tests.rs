//! The pool against real loopback servers: connections counted at accept.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::StreamExt;
use http::{Method, Uri};
use http_body_util::Full;
use hyper::body::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::{Client, Target};

/// An HTTP/1.1 server answering every request with `body`; counts the
/// connections it accepted. `keep_alive: false` closes each one after its
/// response (`Connection: close`).
async fn server(body: &'static str, keep_alive: bool) -> (Target, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let service = hyper::service::service_fn(move |_req| async move {
                Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(
                    body.as_bytes(),
                ))))
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .keep_alive(keep_alive)
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service),
            );
        }
    });
    (Target::new(&uri).unwrap(), accepted)
}

/// A request's head (these requests have no body), read off a raw socket.
async fn read_head(tcp: &mut tokio::net::TcpStream) -> Vec<u8> {
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tcp.read(&mut buf).await.unwrap();
        assert!(n > 0, "the client closed mid-request");
        request.extend_from_slice(&buf[..n]);
    }
    request
}

async fn get(client: &Client, uri: &Target) -> String {
    let resp = client
        .request(Method::POST, uri)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    let mut body = resp.bytes_stream();
    let mut text = Vec::new();
    while let Some(chunk) = body.next().await {
        text.extend_from_slice(&chunk.unwrap());
    }
    String::from_utf8(text).unwrap()
}

#[tokio::test]
async fn calls_one_after_another_share_one_connection() {
    let (uri, accepted) = server("ok", true).await;
    let client = Client::new().unwrap();
    for _ in 0..50 {
        assert_eq!(get(&client, &uri).await, "ok");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    assert_eq!(client.idle(), 1);
}

#[tokio::test]
async fn concurrent_calls_open_a_connection_each_and_keep_them() {
    let (uri, accepted) = server("ok", true).await;
    let client = Client::new().unwrap();
    for _ in 0..3 {
        let calls = (0..8).map(|_| get(&client, &uri));
        for text in futures_util::future::join_all(calls).await {
            assert_eq!(text, "ok");
        }
    }
    let opened = accepted.load(Ordering::SeqCst);
    assert!(
        (1..=8).contains(&opened),
        "{opened} connections for 8 at a time"
    );
    assert_eq!(client.idle(), opened);
}

#[tokio::test]
async fn a_body_left_unread_closes_its_connection() {
    let (uri, accepted) = server("a body nobody reads", true).await;
    let client = Client::new().unwrap();
    for _ in 0..3 {
        let resp = client.request(Method::POST, &uri).send().await.unwrap();
        drop(resp);
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
    assert_eq!(client.idle(), 0);
}

#[tokio::test]
async fn a_server_that_closes_after_each_response_is_served_anyway() {
    let (uri, accepted) = server("ok", false).await;
    let client = Client::new().unwrap();
    for _ in 0..5 {
        assert_eq!(get(&client, &uri).await, "ok");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 5);
}

/// A server that keeps the connection open in its answer but closes it
/// right after (as one restarting or timing out idle connections does):
/// the pooled connection is found closed when taken (or refuses the
/// request unwritten), and a new one serves.
#[tokio::test]
async fn an_idle_connection_the_server_closed_costs_the_call_nothing() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    let uri = Target::new(&uri).unwrap();
    let (closed_tx, mut closed) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            read_head(&mut tcp).await;
            tcp.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .await
                .unwrap();
            drop(tcp);
            closed_tx.send(()).await.unwrap();
        }
    });
    let client = Client::new().unwrap();
    for _ in 0..3 {
        assert_eq!(get(&client, &uri).await, "ok");
        closed.recv().await.unwrap();
    }
}

#[tokio::test]
async fn the_request_line_carries_the_path_and_host_the_authority() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let uri: Uri = format!("http://{addr}/mcp?x=1").parse().unwrap();
    let uri = Target::new(&uri).unwrap();
    let head = tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let request = read_head(&mut tcp).await;
        tcp.write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
            .await
            .unwrap();
        String::from_utf8(request).unwrap()
    });
    let client = Client::new().unwrap();
    let resp = client.request(Method::GET, &uri).send().await.unwrap();
    assert_eq!(resp.status(), http::StatusCode::NO_CONTENT);
    let head = head.await.unwrap().to_ascii_lowercase();
    assert!(head.starts_with("get /mcp?x=1 http/1.1\r\n"), "{head}");
    assert!(head.contains(&format!("\r\nhost: {addr}\r\n")), "{head}");
}

#[tokio::test]
async fn nothing_listening_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    let uri = Target::new(&uri).unwrap();
    drop(listener);
    let err = Client::new()
        .unwrap()
        .request(Method::POST, &uri)
        .send()
        .await
        .err()
        .expect("nothing listens");
    assert!(err.is_connect(), "{err}");
    assert!(!err.to_string().contains("/mcp"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn idle_connections_are_closed_when_they_expire() {
    let (uri, _) = server("ok", true).await;
    let client = Client::new().unwrap();
    assert_eq!(get(&client, &uri).await, "ok");
    assert_eq!(client.idle(), 1);
    tokio::time::sleep(super::pool::IDLE_TIMEOUT * 2).await;
    assert_eq!(client.idle(), 0);
    // And a later call opens a new one, reaped in turn.
    assert_eq!(get(&client, &uri).await, "ok");
    assert_eq!(client.idle(), 1);
    tokio::time::sleep(super::pool::IDLE_TIMEOUT * 2).await;
    assert_eq!(client.idle(), 0);
}
