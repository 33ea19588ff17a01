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
use crate::http1::proxy::Proxy;

/// An HTTP/1.1 server answering every request with `body`; counts the
/// connections it accepted. `keep_alive: false` closes each one after its
/// response (`Connection: close`).
async fn server(body: &'static str, keep_alive: bool) -> (Target, Arc<AtomicUsize>) {
    let (listener, uri) = listen().await;
    let accepted = serve_counted(listener, move |tcp| async move {
        let service = hyper::service::service_fn(move |_req| async move {
            Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(
                body.as_bytes(),
            ))))
        });
        let _ = hyper::server::conn::http1::Builder::new()
            .keep_alive(keep_alive)
            .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
            .await;
    });
    (uri, accepted)
}

/// Serves each connection `listener` accepts in a task of its own with
/// `serve`; counts them.
fn serve_counted<F, S>(listener: TcpListener, serve: S) -> Arc<AtomicUsize>
where
    S: Fn(tokio::net::TcpStream) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(tcp));
        }
    });
    accepted
}

/// A loopback listener, and the target of `/mcp` there.
async fn listen() -> (TcpListener, Target) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    (listener, Target::new(&uri, &Proxy::none()).unwrap())
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

/// Why a request to `uri` failed (it must).
async fn failure(client: &Client, uri: &Target) -> super::SendError {
    let sent = client.request(Method::POST, uri).send().await;
    sent.err().expect("the request failed")
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
    let client = Client::new(Proxy::none()).unwrap();
    for _ in 0..50 {
        assert_eq!(get(&client, &uri).await, "ok");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    assert_eq!(client.idle(), 1);
}

#[tokio::test]
async fn concurrent_calls_open_a_connection_each_and_keep_them() {
    let (uri, accepted) = server("ok", true).await;
    let client = Client::new(Proxy::none()).unwrap();
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
    let client = Client::new(Proxy::none()).unwrap();
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
    let client = Client::new(Proxy::none()).unwrap();
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
    let (listener, uri) = listen().await;
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
    let client = Client::new(Proxy::none()).unwrap();
    for _ in 0..3 {
        assert_eq!(get(&client, &uri).await, "ok");
        closed.recv().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn idle_connections_are_closed_when_they_expire() {
    let (uri, _) = server("ok", true).await;
    let client = Client::new(Proxy::none()).unwrap();
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

/// What a server reads of one request (head and body), as its lines
/// sorted (hyper writes a request's headers grouped by name), and the
/// answer the client read.
async fn exchange(
    engine: super::super::Engine,
    method: Method,
    body: &'static str,
) -> (Vec<String>, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let uri: Uri = format!("http://{addr}/mcp?x=1").parse().unwrap();
    let uri = Target::new(&uri, &Proxy::none()).unwrap();
    let read = tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let mut request = read_head(&mut tcp).await;
        let wanted = request.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4 + body.len();
        while request.len() < wanted {
            let mut buf = [0u8; 1024];
            let n = tcp.read(&mut buf).await.unwrap();
            request.extend_from_slice(&buf[..n]);
        }
        tcp.write_all(b"HTTP/1.1 200 OK\r\nX-Reply: 1\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
            .await
            .unwrap();
        let text = String::from_utf8(request)
            .unwrap()
            .replace(&addr.to_string(), "ADDR");
        let mut lines: Vec<String> = text.split("\r\n").map(str::to_owned).collect();
        lines.sort();
        lines
    });
    let client = Client::on(engine, Proxy::none()).unwrap();
    let resp = client
        .request(method, &uri)
        .header("x-team", "a b")
        .header("x-team", "c")
        .header("host", "elsewhere")
        .header("connection", "x-team")
        .header("content-length", "99")
        .body(body)
        .send()
        .await
        .unwrap();
    let reply = resp
        .headers()
        .get_str(&http::HeaderName::from_static("x-reply"))
        .map(str::to_owned);
    assert_eq!(reply.as_deref(), Some("1"));
    let answer = resp.bytes(100).await.unwrap();
    (
        read.await.unwrap(),
        String::from_utf8(answer.to_vec()).unwrap(),
    )
}

/// The request line carries the path, `Host` the authority; the twin
/// (`SLUICE_HTTP=hyper`) sends what the own client sends: the same request
/// line, `Host`, headers (framing ones left out) and length, and reads the
/// same answer.
#[tokio::test]
async fn hyper_sends_the_request_the_own_client_sends() {
    use super::super::Engine;
    for (method, body) in [
        (Method::POST, "{}"),
        (Method::POST, ""),
        (Method::GET, ""),
        (Method::DELETE, ""),
    ] {
        let own = exchange(Engine::Own, method.clone(), body).await;
        let hyper = exchange(Engine::Hyper, method.clone(), body).await;
        assert_eq!(own, hyper, "{method} with {body:?}");
        assert_eq!(own.1, "ok");
        let line = format!("{method} /mcp?x=1 HTTP/1.1");
        assert!(own.0.contains(&line), "{:?}", own.0);
        assert!(own.0.contains(&"host: ADDR".to_owned()), "{:?}", own.0);
    }
}

/// The twin reuses a connection as the own client does, and reports a
/// failed connect in the same words (which never name the URL).
#[tokio::test]
async fn hyper_pools_and_fails_as_the_own_client_does() {
    use super::super::Engine;
    for engine in [Engine::Own, Engine::Hyper] {
        let (uri, accepted) = server("ok", true).await;
        let client = Client::on(engine, Proxy::none()).unwrap();
        for _ in 0..5 {
            assert_eq!(get(&client, &uri).await, "ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "{engine:?}");
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    let uri = Target::new(&uri, &Proxy::none()).unwrap();
    drop(listener);
    let mut errors = Vec::new();
    for engine in [Engine::Own, Engine::Hyper] {
        let err = failure(&Client::on(engine, Proxy::none()).unwrap(), &uri).await;
        assert!(err.is_connect(), "{engine:?}: {err}");
        assert!(!err.to_string().contains("/mcp"), "{err}");
        errors.push(err.to_string());
    }
    assert_eq!(errors[0], errors[1]);
}

/// A server that answers one request per connection, keeping it open in
/// its answer, then closes it as the next request arrives, unread (a
/// reset): what a server closing idle keep-alive connections does when
/// the client reuses one at that moment (uvicorn after 5 s). Counts the
/// connections it accepted. `answer: false` closes each connection on its
/// first request instead, read and unanswered.
async fn closing_server(answer: bool) -> (Target, Arc<AtomicUsize>) {
    let (listener, uri) = listen().await;
    let accepted = serve_counted(listener, move |mut tcp| async move {
        let request = read_head(&mut tcp).await;
        if !answer {
            return;
        }
        // The body ("{}" at most) came with the head.
        assert!(request.ends_with(b"\r\n\r\n{}") || request.ends_with(b"\r\n\r\n"));
        tcp.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .await
            .unwrap();
        // The next request is here: closed without reading it.
        let _ = tcp.readable().await;
        drop(tcp);
    });
    (uri, accepted)
}

/// Issue 38 item 5: a request a reused connection is closed on before any
/// answer is sent again once, on a new connection, by either engine.
#[tokio::test]
async fn a_request_a_reused_connection_closed_on_is_sent_again_on_a_new_one() {
    use super::super::Engine;
    for engine in [Engine::Own, Engine::Hyper] {
        let (uri, accepted) = closing_server(true).await;
        let client = Client::on(engine, Proxy::none()).unwrap();
        for _ in 0..5 {
            assert_eq!(get(&client, &uri).await, "ok", "{engine:?}");
        }
        // Each request after the first: the reused connection, then a new one.
        assert_eq!(accepted.load(Ordering::SeqCst), 5, "{engine:?}");
    }
}

/// Never on a new connection: a server that closes it without answering
/// may have acted on the request (the own client; hyper-util cannot say
/// which connection was new, `twin`).
#[tokio::test]
async fn a_request_a_new_connection_closed_on_is_not_sent_again() {
    let (uri, accepted) = closing_server(false).await;
    let err = failure(&Client::new(Proxy::none()).unwrap(), &uri).await;
    assert!(!err.is_connect(), "{err}");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

/// A forward proxy that answers every request (these have no body) with
/// `head` and `ok`, as many on one connection as come; counts the
/// connections it accepted.
async fn answering_proxy(head: &'static str) -> (Proxy, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = Proxy::all(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
    let accepted = serve_counted(listener, move |mut tcp| async move {
        let mut read = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            while let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") {
                read.drain(..end + 4);
                let answer = format!("{head}content-length: 2\r\n\r\nok");
                tcp.write_all(answer.as_bytes()).await.unwrap();
            }
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => read.extend_from_slice(&buf[..n]),
            }
        }
    });
    (proxy, accepted)
}

/// Issue 49: through a forward proxy, a connection is used again only when
/// the proxy's answer says it keeps it, by either engine: an HTTP/1.1
/// answer that says nothing (tinyproxy's, which closes the connection
/// once its origin has) or `close`, on either header, is not taken for
/// one.
#[tokio::test]
async fn through_a_proxy_a_connection_is_kept_only_when_it_says_so() {
    use super::super::Engine;
    let mut wrong = Vec::new();
    for (head, kept) in [
        ("HTTP/1.1 200 OK\r\n", false),
        ("HTTP/1.0 200 OK\r\n", false),
        ("HTTP/1.1 200 OK\r\nConnection: close\r\n", false),
        ("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n", true),
        ("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n", true),
        ("HTTP/1.1 200 OK\r\nProxy-Connection: keep-alive\r\n", true),
        (
            "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nProxy-Connection: close\r\n",
            false,
        ),
    ] {
        for engine in [Engine::Own, Engine::Hyper] {
            let (proxy, accepted) = answering_proxy(head).await;
            let client = Client::on(engine, proxy).unwrap();
            let uri: Uri = "http://backend.test/mcp".parse().unwrap();
            let target = client.target(&uri).unwrap();
            for _ in 0..3 {
                assert_eq!(get(&client, &target).await, "ok");
            }
            let opened = accepted.load(Ordering::SeqCst);
            if opened != if kept { 1 } else { 3 } {
                wrong.push(format!(
                    "{engine:?}: {opened} connections, answered {head:?}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
