//! Issue 42 part 3: backends behind a proxy. A real gateway reaches the
//! stateful example backend through a counting proxy on loopback
//! (`support::proxy`): `HTTP_PROXY` and `HTTPS_PROXY` from its
//! environment, `NO_PROXY` by host, domain and CIDR, a backend's own
//! `proxy` (or "none"), credentials in the proxy's URL, and an `https`
//! backend (TLS by a test CA) through a CONNECT tunnel. The gateway runs
//! in an environment of exactly what each test gives it. Run on both HTTP
//! engines by `scripts/test` (`SLUICE_HTTP=hyper`).

mod support;

use std::time::Duration;

use serde_json::json;
use support::proxy::CountingProxy;
use support::*;

/// `echo` through `backend`, on a new session: what it answered.
async fn echo(gw: &Gateway, backend: &str) -> String {
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    let reply = http
        .tool(
            &sid,
            2,
            &format!("{backend}__echo"),
            json!({"text": "through"}),
        )
        .await;
    text_of(&reply).to_owned()
}

fn status(gw: &Gateway) -> String {
    let (_, status) = http_get(&gw.base, "/status").unwrap();
    let (_, ready) = http_get(&gw.base, "/readyz").unwrap();
    status + &ready
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_proxy_from_the_environment_forwards_in_absolute_form() {
    let backend = Fixture::start("127.0.0.1:0", &[]);
    let proxy = CountingProxy::open();
    let toml = http_backend("b", &backend.url(), "");
    let gw = Gateway::start_in_env_logged(&toml, &[("HTTP_PROXY", &proxy.url())]);
    gw.wait_ready();
    assert_eq!(echo(&gw, "b").await, "through");

    let seen = proxy.seen();
    assert!(seen.forwarded[&backend.addr] >= 2, "{seen:?}");
    let line = format!("POST http://{}/mcp HTTP/1.1", backend.addr);
    let head = seen.heads.iter().find(|h| h.starts_with(&line));
    let head = head.unwrap_or_else(|| panic!("no {line}: {:?}", seen.heads));
    // The origin's Host, not the proxy's.
    let host = format!("host: {}", backend.addr);
    assert!(head.to_ascii_lowercase().contains(&host), "{head}");
    assert!(seen.tunnels.is_empty(), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_proxy_by_host_domain_or_cidr_goes_direct() {
    let backend = Fixture::start("127.0.0.1:0", &[]);
    let port = backend.addr.rsplit_once(':').unwrap().1.to_owned();
    let by_name = format!("http://localhost:{port}/mcp");
    for (url, no_proxy) in [
        (backend.url(), "example.com, 127.0.0.1"),
        (backend.url(), "10.0.0.0/8,127.0.0.0/8"),
        (by_name.clone(), "example.com,.localhost"),
        (by_name, "localhost:9"),
    ] {
        let proxy = CountingProxy::open();
        let toml = http_backend("b", &url, "");
        let env = [
            ("http_proxy", proxy.url()),
            ("no_proxy", no_proxy.to_owned()),
        ];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let gw = Gateway::start_in_env_logged(&toml, &env);
        gw.wait_ready();
        assert_eq!(echo(&gw, "b").await, "through", "{no_proxy}");
        assert_eq!(proxy.total(), 0, "NO_PROXY={no_proxy}: {:?}", proxy.seen());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_proxy_overrides_the_environment_and_none_bypasses_it() {
    let backend = Fixture::start("127.0.0.1:0", &[]);
    let from_env = CountingProxy::open();
    let own = CountingProxy::open();
    let toml = format!(
        "{}{}",
        http_backend("direct", &backend.url(), "proxy = \"none\""),
        http_backend("own", &backend.url(), &format!("proxy = \"{}\"", own.url())),
    );
    let from_env_url = from_env.url();
    let env = [("HTTP_PROXY", from_env_url.as_str()), ("NO_PROXY", "")];
    let gw = Gateway::start_in_env_logged(&toml, &env);
    gw.wait_ready();
    assert_eq!(echo(&gw, "direct").await, "through");
    assert_eq!(echo(&gw, "own").await, "through");
    assert_eq!(from_env.total(), 0, "{:?}", from_env.seen());
    assert!(own.seen().forwarded[&backend.addr] >= 2, "{:?}", own.seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_credentials_are_sent_and_never_shown() {
    let backend = Fixture::start("127.0.0.1:0", &[]);
    // "s:cr@t", percent-encoded in the URL, decoded in the header.
    let proxy = CountingProxy::with_basic("agent", "s:cr@t");
    let addr = &proxy.addr;
    let toml = format!(
        "{}{}",
        http_backend(
            "good",
            &backend.url(),
            &format!("proxy = \"http://agent:s%3Acr%40t@{addr}\"")
        ),
        http_backend(
            "bad",
            &backend.url(),
            &format!("proxy = \"http://agent:wr0ng-pass@{addr}\"")
        ),
    );
    let gw = Gateway::start_in_env_logged(&toml, &[]);
    assert_eq!(echo(&gw, "good").await, "through");
    let wanted = format!("http://{addr} answered 407 Proxy Authentication Required");
    wait_until(Duration::from_secs(20), || gw.log().contains(&wanted));
    let log = gw.log();
    assert!(
        log.lines()
            .any(|l| l.contains("bad") && l.contains(&wanted)),
        "{log}"
    );
    assert!(proxy.seen().refused >= 1);
    assert!(proxy.seen().forwarded[&backend.addr] >= 2);
    let shown = status(&gw);
    assert!(shown.contains("bad"), "{shown}");

    let check = std::process::Command::new(BIN)
        .args(["check", "--config"])
        .arg(gw.dir.path().join("sluice.toml"))
        .env_clear()
        .output()
        .unwrap();
    let check = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(check.contains(&format!("proxy: http://{addr}")), "{check}");

    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    for secret in [
        "s:cr@t".to_owned(),
        "s%3Acr%40t".to_owned(),
        "wr0ng-pass".to_owned(),
        b64("agent:s:cr@t"),
        b64("agent:wr0ng-pass"),
    ] {
        for (what, text) in [("log", &log), ("status", &shown), ("check", &check)] {
            assert!(!text.contains(&secret), "{what} shows {secret}: {text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_proxy_is_named_in_the_backends_error() {
    let backend = Fixture::start("127.0.0.1:0", &[]);
    // Bound and closed: nothing listens there.
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = gone.local_addr().unwrap().to_string();
    drop(gone);
    let toml = http_backend("b", &backend.url(), "");
    let proxy = format!("http://someone:hidden@{addr}");
    let gw = Gateway::start_in_env_logged(&toml, &[("HTTP_PROXY", &proxy)]);
    let wanted = format!("proxy http://{addr}: tcp connect error");
    wait_until(Duration::from_secs(20), || gw.log().contains(&wanted));
    let log = gw.log();
    assert!(!log.contains("hidden") && !log.contains("someone"), "{log}");
}

/// The example backend behind TLS, and a proxy that wants `agent:pw`.
fn behind_tls() -> (Fixture, tls::Terminator, CountingProxy) {
    let backend = Fixture::start("127.0.0.1:0", &[]);
    let tls = tls::Terminator::start(&backend.addr);
    (backend, tls, CountingProxy::with_basic("agent", "pw"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_backend_through_a_connect_tunnel() {
    let (_backend, tls, proxy) = behind_tls();
    let url = format!("https://{}/mcp", tls.addr);
    let toml = http_backend("b", &url, "");
    let ca = tempdir::Dir::new();
    let ca_file = tempdir::write(&ca, "ca.pem", &tls.ca_pem);
    let env = [
        ("HTTPS_PROXY", format!("http://agent:pw@{}", proxy.addr)),
        // Only for https targets: an http one would go direct.
        ("HTTP_PROXY", "http://127.0.0.1:9".to_owned()),
        ("SSL_CERT_FILE", ca_file.display().to_string()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let gw = Gateway::start_in_env_logged(&toml, &env);
    gw.wait_ready();
    assert_eq!(echo(&gw, "b").await, "through");
    let seen = proxy.seen();
    assert!(seen.tunnels[&tls.addr] >= 1, "{seen:?}");
    assert!(seen.forwarded.is_empty(), "{seen:?}");
    assert_eq!(seen.refused, 0, "{seen:?}");
    let connect = format!("CONNECT {} HTTP/1.1", tls.addr);
    assert!(
        seen.heads.iter().all(|h| h.starts_with(&connect)),
        "{seen:?}"
    );
    assert!(tls.handshakes() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_tunnel_is_the_proxys_error() {
    let (_backend, tls, proxy) = behind_tls();
    let url = format!("https://{}/mcp", tls.addr);
    let toml = http_backend(
        "b",
        &url,
        &format!("proxy = \"http://agent:nope@{}\"", proxy.addr),
    );
    let gw = Gateway::start_in_env_logged(&toml, &[]);
    let wanted = format!(
        "proxy http://{}: refused CONNECT {}: 407 Proxy Authentication Required",
        proxy.addr, tls.addr
    );
    wait_until(Duration::from_secs(20), || gw.log().contains(&wanted));
    assert_eq!(tls.handshakes(), 0);
    assert!(!gw.log().contains("nope"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_that_never_answers_connect_is_given_up_on() {
    let (_backend, tls, _) = behind_tls();
    // Takes connections, and says nothing on them.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let held = std::thread::spawn(move || silent.incoming().take(4).collect::<Vec<_>>());
    let url = format!("https://{}/mcp", tls.addr);
    let toml = http_backend("b", &url, &format!("proxy = \"http://{addr}\""));
    let gw = Gateway::start_in_env_logged(&toml, &[]);
    let wanted = format!("proxy http://{addr}: no answer within 5s");
    wait_until(Duration::from_secs(20), || gw.log().contains(&wanted));
    drop((gw, held));
}

/// The OAuth issuer's metadata and the OTLP collector are reached through
/// the environment's proxy too (both down here: the proxy counts the
/// requests it was asked to forward, and answers 502).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_issuer_and_the_collector_go_through_the_environments_proxy() {
    let proxy = CountingProxy::open();
    let nothing = || {
        let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        gone.local_addr().unwrap().to_string()
    };
    let (issuer, collector) = (nothing(), nothing());
    let env = [
        ("HTTP_PROXY", proxy.url()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let oauth = format!(
        "[auth]\noauth = {{ issuer = \"http://{issuer}\", audience = \"http://127.0.0.1/mcp\" }}\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start_in_env_logged(&oauth, &env);
    // An RS256 token: judging it needs the issuer's keys, fetched now.
    let token = "Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6ImsifQ.eyJzdWIiOiJ4In0.c2ln";
    let post = reqwest::Client::new().post(gw.url("/mcp"));
    let _ = post.header("authorization", token).body("{}").send().await;
    let fetched = |to: &str| proxy.seen().forwarded.contains_key(to);
    wait_until(Duration::from_secs(20), || fetched(&issuer));

    let tracing = format!(
        "[tracing]\notlp_endpoint = \"http://{collector}\"\n{}",
        demo_backend("demo")
    );
    let gw = Gateway::start_in_env_logged(&tracing, &env);
    gw.wait_ready();
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    http.call(&sid, 2, "tools/list", json!({})).await;
    wait_until(Duration::from_secs(20), || fetched(&collector));
}

/// Ten calls in a row to `backend` (an HTTP backend named `b`) through
/// the proxy at `proxy`, each answered with its own text.
async fn ten_calls_through(backend: &Fixture, proxy: &str) -> Gateway {
    let toml = http_backend("b", &backend.url(), &format!("proxy = \"{proxy}\""));
    let gw = Gateway::start_in_env_logged(&toml, &[]);
    // Its handshake is the first two requests in a row.
    let ready = (0..300).any(|_| {
        let up = http_get(&gw.base, "/readyz").is_ok_and(|(status, _)| status == 200);
        if !up {
            std::thread::sleep(Duration::from_millis(100));
        }
        up
    });
    assert!(ready, "the backend never came up: {}", gw.log());
    let http = Http::new(gw.url("/mcp"));
    let sid = http.initialize().await;
    for i in 0..10 {
        let text = format!("call {i}");
        let reply = http
            .tool(&sid, 2 + i, "b__echo", json!({ "text": text }))
            .await;
        let said = reply["result"]["content"][0]["text"].as_str();
        assert_eq!(said, Some(text.as_str()), "call {i} of 10: {reply}");
    }
    gw
}

/// Issue 49: through a proxy that keeps no client connection and does not
/// say so (tinyproxy's way: `CountingProxy::once`), no request is written
/// on a connection the proxy has answered, so ten calls in a row all
/// succeed. Reusing it, every second call got the proxy's 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_that_keeps_no_connection_gets_each_request_on_a_new_one() {
    let backend = Fixture::start("127.0.0.1:0", &[]);
    let proxy = CountingProxy::once();
    let _gw = ten_calls_through(&backend, &proxy.url()).await;
    let seen = proxy.seen();
    assert_eq!(seen.after_answer, 0, "{:?}", seen.heads);
    assert!(seen.forwarded[&backend.addr] >= 10, "{seen:?}");
}

/// The same with the real peer: Debian's tinyproxy (1.11), which forwards
/// one request per client connection and answers in HTTP/1.1 without
/// `Connection: close`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_calls_in_a_row_through_tinyproxy() {
    let backend = Fixture::start("127.0.0.1:0", &[]);
    let tinyproxy = support::proxy::Tinyproxy::start();
    let gw = ten_calls_through(&backend, &tinyproxy.url()).await;
    assert!(gw.is_running());
}

#[test]
fn a_bad_proxy_is_a_config_error() {
    let dir = tempdir::Dir::new();
    let toml = http_backend(
        "b",
        "http://127.0.0.1:1/mcp",
        "proxy = \"https://user:pw@p.test\"",
    );
    let path = tempdir::write(&dir, "sluice.toml", &toml);
    let run = |cmd: &str, env: &[(&str, &str)]| {
        let out = std::process::Command::new(BIN)
            .arg(cmd)
            .args(["--config", path.to_str().unwrap()])
            .env_clear()
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for cmd in ["check", "serve"] {
        let (code, err) = run(cmd, &[]);
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains("backends.b.proxy") && err.contains("https://"),
            "{err}"
        );
        assert!(!err.contains("pw"), "{err}");
    }
    // From the environment, named by its variable.
    let toml = http_backend("b", "http://127.0.0.1:1/mcp", "");
    std::fs::write(&path, toml).unwrap();
    let (code, err) = run("check", &[("HTTP_PROXY", "socks5://p.test:1080")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("HTTP_PROXY"), "{err}");
}

/// A TLS server in front of a plain one, with a certificate of a test CA.
mod tls {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::net::{TcpListener, TcpStream};
    use tokio_rustls::rustls;

    pub(super) struct Terminator {
        pub(super) addr: String,
        pub(super) ca_pem: String,
        handshakes: Arc<AtomicUsize>,
    }

    impl Terminator {
        pub(super) fn start(origin: &str) -> Terminator {
            let pki = super::support::pki::Pki::new();
            let (cert_pem, key_pem) = pki.issue("127.0.0.1");
            let ca_pem = pki.ca_pem.clone();
            use rustls::pki_types::pem::PemObject;
            let cert =
                rustls::pki_types::CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap();
            let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
            let config = rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::aws_lc_rs::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            let handshakes = Arc::new(AtomicUsize::new(0));
            let (count, origin) = (handshakes.clone(), origin.to_owned());
            tokio::spawn(async move {
                let listener = TcpListener::from_std(listener).unwrap();
                while let Ok((tcp, _)) = listener.accept().await {
                    let (acceptor, count, origin) =
                        (acceptor.clone(), count.clone(), origin.clone());
                    tokio::spawn(async move {
                        let Ok(mut tls) = acceptor.accept(tcp).await else {
                            return;
                        };
                        count.fetch_add(1, Ordering::SeqCst);
                        let Ok(mut plain) = TcpStream::connect(&origin).await else {
                            return;
                        };
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                    });
                }
            });
            Terminator {
                addr,
                ca_pem,
                handshakes,
            }
        }

        pub(super) fn handshakes(&self) -> usize {
            self.handshakes.load(Ordering::SeqCst)
        }
    }
}
