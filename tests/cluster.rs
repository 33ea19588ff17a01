//! Issue 8, part 2: replicas behind a load balancer without stickiness,
//! sharing one Redis (a real `redis-server` on loopback). A session works
//! on every replica and ends on every replica; the per-principal cap holds
//! across them; a client's answer reaches the replica whose backend asked;
//! backend sessions a killed replica left open are closed by a survivor;
//! and with Redis gone, sessions are still served while /readyz says why,
//! and what was ended meanwhile reaches the others once Redis is back.

mod support;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use support::pki::Pki;
use support::*;

fn cluster_config(redis: &Redis, server: &str, backends: &str) -> String {
    format!(
        "[server]\nsession_ids = \"sealed\"\n{server}\n[cluster]\nredis_url = \"{}\"\n{backends}",
        redis.url()
    )
}

/// `n` replicas with one key and one Redis, each once it has reached Redis.
fn replicas(n: usize, toml: &str, env: &[(&str, &str)]) -> Vec<Gateway> {
    let gws: Vec<_> = (0..n).map(|_| Gateway::start_with_env(toml, env)).collect();
    for gw in &gws {
        wait_until(Duration::from_secs(15), || {
            gw.metrics().get("sluice_cluster_up") == 1.0
        });
    }
    gws
}

/// Redis, the stateful backend as a per-session HTTP backend (`web`, idle
/// TTL 3 s) and `n` replicas sharing one key.
fn per_session_cluster(n: usize) -> (Redis, Fixture, Vec<Gateway>) {
    let redis = Redis::start();
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let toml = cluster_config(
        &redis,
        "",
        &http_backend(
            "web",
            &fx.url(),
            "isolation = \"per-session\"\nidle_ttl = \"3s\"",
        ),
    );
    let gws = replicas(n, &toml, &[("SLUICE_SESSION_KEY", &keygen())]);
    (redis, fx, gws)
}

/// Waits for time itself, until the wall clock is in a later second: a
/// principal's sessions are ordered by their expiry, which a sealed id
/// keeps in whole seconds, so two opened within one second tie and either
/// could be taken for the oldest. A session opened before this call
/// expires in an earlier second than one opened after it.
async fn next_second() {
    let now = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let start = now().as_secs();
    while now().as_secs() == start {
        let into = Duration::from_nanos(u64::from(now().subsec_nanos()));
        tokio::time::sleep(Duration::from_secs(1).saturating_sub(into)).await;
    }
}

/// A labelled counter summed over the replicas; a replica that never
/// touched its label set (refused nothing, resumed nothing) counts 0.
fn summed(gws: &[Gateway], key: &str) -> f64 {
    gws.iter().map(|g| g.metrics().get_or_untouched(key)).sum()
}

fn echo(id: u64, text: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":text}}})
}

/// Polls an async condition until it holds, for at most `limit`.
async fn eventually<F, Fut>(limit: Duration, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !f().await {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The stateful backend's per-session counter, incremented.
async fn counter(http: &Http, session: &str, id: u64) -> u64 {
    let r = http
        .call(
            session,
            id,
            "tools/call",
            json!({"name":"web__counter","arguments":{}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    text_of(&r.messages()[0]).parse::<u64>().unwrap()
}

async fn status_of(http: &Http, session: &str, id: u64) -> u16 {
    http.post(Some(session), &echo(id, "still there?"))
        .await
        .status
}

/// A session opened on one replica is served by every other (counted as
/// resumed from a live replica); a DELETE on any replica ends it on all,
/// including one that holds it in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_lives_and_ends_on_every_replica() {
    let redis = Redis::start();
    let k = keygen();
    let toml = cluster_config(&redis, "", &demo_backend("demo"));
    let gws = replicas(3, &toml, &[("SLUICE_SESSION_KEY", &k)]);
    let http: Vec<_> = gws.iter().map(|g| Http::new(g.url("/mcp"))).collect();

    let id = http[0].initialize().await;
    for (i, h) in http.iter().enumerate() {
        let r = h.post(Some(&id), &echo(i as u64, &format!("on {i}"))).await;
        assert_eq!(r.status, 200, "replica {i}: {}", r.body);
        assert_eq!(text_of(&r.messages()[0]), format!("on {i}"));
    }
    for g in &gws[1..] {
        let m = g.metrics();
        assert_eq!(
            m.get(r#"sluice_client_sessions_resumed_total{cause="replica"}"#),
            1.0
        );
        assert_eq!(m.get("sluice_client_sessions_opened_total"), 0.0);
    }

    // Ended on replica 1: replicas 0 and 2 hold it in memory, and drop it.
    assert_eq!(http[1].delete(&id).await, 200);
    for (i, h) in http.iter().enumerate() {
        eventually(
            Duration::from_secs(5),
            &format!("404 on replica {i}"),
            || {
                let (h, id) = (h.clone(), id.clone());
                async move { status_of(&h, &id, 9).await == 404 }
            },
        )
        .await;
    }
    // A replica started after the DELETE never saw it: Redis tells it.
    let late = Gateway::start_with_env(&toml, &[("SLUICE_SESSION_KEY", &k)]);
    wait_until(Duration::from_secs(15), || {
        late.metrics().get("sluice_cluster_up") == 1.0
    });
    let r = Http::new(late.url("/mcp"))
        .post(Some(&id), &echo(10, "late"))
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
}

/// `max_sessions_per_principal` counts a principal's sessions on every
/// replica: the third session, opened on another replica, ends the
/// principal's oldest, everywhere; another principal is not touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_principal_cap_holds_across_replicas() {
    let redis = Redis::start();
    let k = keygen();
    let toml = format!(
        "[auth]\nbearer_tokens_env = \"T\"\n{}",
        cluster_config(
            &redis,
            "max_sessions_per_principal = 2",
            &demo_backend("demo")
        )
    );
    let gws = replicas(
        2,
        &toml,
        &[("SLUICE_SESSION_KEY", &k), ("T", "tok-a,tok-b")],
    );
    let post = |gw: usize, token: &'static str, session: Option<String>, body: Value| {
        let url = gws[gw].url("/mcp");
        async move { post_as(url, token, session, &body).await }
    };
    let open = |gw: usize, token: &'static str| {
        let r = post(gw, token, None, init_request(1));
        async move {
            let r = r.await;
            assert_eq!(r.status(), 200);
            r.headers()["mcp-session-id"].to_str().unwrap().to_owned()
        }
    };
    let b = open(1, "tok-b").await;
    let first = open(0, "tok-a").await;
    next_second().await;
    let second = open(0, "tok-a").await;
    next_second().await;
    let third = open(1, "tok-a").await;
    let works = |gw: usize, token: &'static str, s: &String| {
        let r = post(gw, token, Some(s.clone()), echo(2, "x"));
        async move { r.await.status().as_u16() }
    };
    for gw in 0..2 {
        eventually(Duration::from_secs(5), "the oldest session ended", || {
            let status = works(gw, "tok-a", &first);
            async move { status.await == 404 }
        })
        .await;
        assert_eq!(works(gw, "tok-a", &second).await, 200, "replica {gw}");
        assert_eq!(works(gw, "tok-a", &third).await, 200, "replica {gw}");
        assert_eq!(works(gw, "tok-b", &b).await, 200, "replica {gw}");
    }
}

/// A principal's request rate is one allowance across replicas (issue 11,
/// part 2): a burst of 6 at 1 per second, spent through two replicas, lets
/// in at most the burst plus what the elapsed seconds refill, where two
/// replicas keeping their own count would let in twice the burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_rate_is_shared_across_replicas() {
    let redis = Redis::start();
    let toml = format!(
        "[auth]\nbearer_tokens_env = \"T\"\n[limits]\nrequests_per_second = 1\nburst = 6\n{}",
        cluster_config(&redis, "", &demo_backend("demo"))
    );
    let gws = replicas(
        2,
        &toml,
        &[("SLUICE_SESSION_KEY", &keygen()), ("T", "tok-a")],
    );
    let init = post_as(gws[0].url("/mcp"), "tok-a", None, &init_request(1)).await;
    assert_eq!(init.status(), 200);
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();

    let started = Instant::now();
    let pings = (0..24).map(|i| {
        let url = gws[i % 2].url("/mcp");
        let session = session.clone();
        async move {
            let ping = json!({"jsonrpc":"2.0","id":10 + i,"method":"ping"});
            post_as(url, "tok-a", Some(session), &ping)
                .await
                .status()
                .as_u16()
        }
    });
    let statuses = futures_util::future::join_all(pings).await;
    let elapsed = started.elapsed().as_secs();
    let ok = statuses.iter().filter(|s| **s == 200).count() as u64;
    let refused = statuses.iter().filter(|s| **s == 429).count() as u64;
    assert_eq!(ok + refused, 24, "{statuses:?}");
    // 5 left of the burst after initialize, one more per elapsed second.
    assert!(ok >= 5, "only {ok} let in");
    assert!(
        ok <= 5 + elapsed + 1,
        "{ok} let in within {elapsed} s: not shared"
    );
    let limited = summed(&gws, r#"sluice_requests_limited_total{reason="rate"}"#);
    assert_eq!(limited, refused as f64);
}

/// A backend's question (sampling) relayed on replica 0 is answered by the
/// client through replica 1 (a load balancer sent its POST there): the
/// answer crosses the bus to replica 0, which completes the call. Only the
/// client that was asked may answer, across replicas as on one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_reaches_the_replica_whose_backend_asked() {
    let redis = Redis::start();
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let k = keygen();
    let toml = cluster_config(&redis, "", &http_backend("web", &fx.url(), ""));
    let gws = replicas(2, &toml, &[("SLUICE_SESSION_KEY", &k)]);
    let (a, b) = (Http::new(gws[0].url("/mcp")), Http::new(gws[1].url("/mcp")));
    let session = a.initialize_with(json!({"sampling": {}})).await;
    let mut call = a
        .client
        .post(&a.url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("mcp-session-id", &session)
        .body(
            json!({"jsonrpc":"2.0","id":"ask-1","method":"tools/call",
                   "params":{"name":"web__ask","arguments":{}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let mut seen = String::new();
    let request: Value = loop {
        let chunk = tokio::time::timeout(Duration::from_secs(10), call.chunk())
            .await
            .expect("a sampling request within 10 s")
            .unwrap()
            .expect("no sampling request");
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(line) = seen.lines().find(|l| l.contains("sampling/createMessage")) {
            break serde_json::from_str(line.trim_start_matches("data:").trim()).unwrap();
        }
    };
    let answer = |text: &str| {
        json!({"jsonrpc":"2.0","id":request["id"],"result":{
            "role":"assistant","content":{"type":"text","text":text},"model":"test"}})
    };
    // Another client that learns the id answers first, through replica 1:
    // replica 0 drops it, and the question still waits.
    let intruder = b.initialize().await;
    let r = b.post(Some(&intruder), &answer("from the intruder")).await;
    assert_eq!(r.status, 202, "{}", r.body);
    wait_until(Duration::from_secs(5), || {
        gws[0]
            .metrics()
            .get_or_untouched(r#"sluice_server_answers_dropped_total{reason="not_yours"}"#)
            == 1.0
    });
    let r = b
        .post(Some(&session), &answer("answered via replica 1"))
        .await;
    assert_eq!(r.status, 202, "{}", r.body);

    let rest = tokio::time::timeout(Duration::from_secs(10), call.text())
        .await
        .expect("the call completes")
        .unwrap();
    assert!(rest.contains("answered via replica 1"), "{rest}");
    assert!(!rest.contains("intruder"), "{rest}");
    // Passed on, not dropped, by replica 1.
    assert_eq!(
        gws[1]
            .metrics()
            .get_or_untouched(r#"sluice_server_answers_dropped_total{reason="unknown"}"#),
        0.0
    );
}

/// A per-session backend session ends with its client session, whichever
/// replica took the DELETE; those opened by a replica that is SIGKILLed
/// (it can close nothing) are closed at the backend by a surviving replica
/// once they are past their idle TTL; the survivor's own, in use, stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replicas_backend_sessions_are_closed_by_a_survivor() {
    let (_redis, fx, mut gws) = per_session_cluster(2);
    let (doomed, survivor) = (Http::new(gws[0].url("/mcp")), Http::new(gws[1].url("/mcp")));
    let mut theirs = Vec::new();
    for i in 0..5 {
        let s = doomed.initialize().await;
        counter(&doomed, &s, i).await;
        theirs.push(s);
    }
    let mine = survivor.initialize().await;
    assert_eq!(counter(&survivor, &mine, 1).await, 1);
    assert_eq!(fx.live(), 6);
    // Ended through the survivor: the replica that holds its backend
    // session closes it.
    assert_eq!(survivor.delete(&theirs[0]).await, 200);
    wait_until(Duration::from_secs(5), || fx.live() == 5);

    let dead = gws.remove(0);
    // SAFETY: our own child.
    unsafe {
        libc::kill(dead.pid() as i32, libc::SIGKILL);
    }
    wait_until(Duration::from_secs(10), || !dead.is_running());
    // The survivor's client keeps working meanwhile, on its own session.
    let mut n = 1;
    let deadline = Instant::now() + Duration::from_secs(40);
    while fx.live() > 1 {
        assert!(
            Instant::now() < deadline,
            "{} backend sessions still open",
            fx.live()
        );
        n += 1;
        assert_eq!(
            counter(&survivor, &mine, n).await,
            n,
            "the same backend session"
        );
        // Paces the loop while time itself passes (the dead replica's
        // records reach their idle TTL and the survivor's sweeper takes
        // them); the loop ends on the event, the count of live sessions.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(fx.live(), 1);
    n += 1;
    assert_eq!(counter(&survivor, &mine, n).await, n);
}

/// Redis stops: /readyz says so (503, `redis`), every replica still serves
/// sealed sessions (fail-open), and a DELETE made meanwhile is held and
/// reaches the other replicas once Redis is back on the same address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_served_through_a_redis_outage() {
    let redis = Redis::start();
    let port = redis.port;
    let k = keygen();
    let toml = cluster_config(&redis, "", &demo_backend("demo"));
    let gws = replicas(2, &toml, &[("SLUICE_SESSION_KEY", &k)]);
    let http: Vec<_> = gws.iter().map(|g| Http::new(g.url("/mcp"))).collect();
    let kept = http[0].initialize().await;
    let ended = http[0].initialize().await;
    let opened_before = http[0].initialize().await;

    redis.stop();
    for gw in &gws {
        wait_until(Duration::from_secs(15), || {
            gw.metrics().get("sluice_cluster_up") == 0.0
        });
        let (status, body) = http_get(&gw.base, "/readyz").unwrap();
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("\"redis\""), "{body}");
    }
    // Served everywhere, including a session new to replica 1.
    for h in &http {
        assert_eq!(status_of(h, &kept, 1).await, 200);
    }
    let during = http[1].initialize().await;
    assert_eq!(status_of(&http[0], &during, 2).await, 200);
    assert_eq!(status_of(&http[1], &opened_before, 3).await, 200);
    // Ended on replica 0 while Redis is away: there at once, and held.
    assert_eq!(http[0].delete(&ended).await, 200);
    assert_eq!(status_of(&http[0], &ended, 4).await, 404);

    let _redis = Redis::on_port(port);
    for gw in &gws {
        wait_until(Duration::from_secs(20), || {
            gw.metrics().get("sluice_cluster_up") == 1.0
        });
        let (status, body) = http_get(&gw.base, "/readyz").unwrap();
        assert_eq!(status, 200, "{body}");
    }
    // The held ending reached Redis and replica 1 (which never had it in
    // memory, and now cannot rebuild it either).
    eventually(
        Duration::from_secs(5),
        "the DELETE reaches replica 1",
        || {
            let (h, s) = (http[1].clone(), ended.clone());
            async move { status_of(&h, &s, 5).await == 404 }
        },
    )
    .await;
    for h in &http {
        assert_eq!(status_of(h, &kept, 6).await, 200);
        assert_eq!(status_of(h, &during, 7).await, 200);
    }
}

/// A client session has one backend session at a per-session HTTP backend,
/// whichever replicas serve it: its state carries from replica to replica,
/// and it is ended once, when the client session is (a DELETE through any
/// replica), or when no replica has used it for its idle TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_a_clients_backend_session() {
    let (_redis, fx, gws) = per_session_cluster(3);
    let http: Vec<_> = gws.iter().map(|g| Http::new(g.url("/mcp"))).collect();
    let opened_before = fx.stats()["opened"].as_u64().unwrap();
    let ended = http[0].initialize().await;
    for i in 0..9u64 {
        let n = counter(&http[(i % 3) as usize], &ended, i).await;
        assert_eq!(n, i + 1, "one backend session across replicas");
    }
    assert_eq!(fx.live(), 1);
    let idle = http[1].initialize().await;
    assert_eq!(counter(&http[2], &idle, 1).await, 1);
    assert_eq!(counter(&http[0], &idle, 2).await, 2);
    assert_eq!(fx.live(), 2);

    // Ended through a replica: its backend session goes, the other stays.
    assert_eq!(http[2].delete(&ended).await, 200);
    wait_until(Duration::from_secs(5), || fx.live() == 1);
    // Unused everywhere past its idle TTL: ended too.
    wait_until(Duration::from_secs(20), || fx.live() == 0);
    let opened = fx.stats()["opened"].as_u64().unwrap() - opened_before;
    assert_eq!(opened, 2, "backend sessions opened for two client sessions");
}

/// A list change that only one replica hears (the backend tells the one
/// backend session whose client asked) refreshes every replica's cached
/// list: the next `tools/list` through another replica shows the new list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_change_heard_by_one_replica_reaches_every_replica() {
    let redis = Redis::start();
    let fx = Fixture::start("127.0.0.1:0", &[]);
    let k = keygen();
    let toml = cluster_config(&redis, "", &http_backend("web", &fx.url(), ""));
    let gws = replicas(2, &toml, &[("SLUICE_SESSION_KEY", &k)]);
    let http: Vec<_> = gws.iter().map(|g| Http::new(g.url("/mcp"))).collect();
    let session = http[0].initialize().await;
    let mut id = 0;
    let mut version_via = async |h: &Http| {
        id += 1;
        let r = h.call(&session, id, "tools/list", json!({})).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let tools = r.messages()[0]["result"]["tools"].clone();
        let change = tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "web__change")
            .cloned()
            .unwrap_or_else(|| panic!("no web__change in {tools}"));
        change["description"].as_str().unwrap().to_owned()
    };
    let before = version_via(&http[1]).await;
    assert!(before.ends_with("(now 1)"), "{before}");
    // Cached on replica 1 now: the backend is not asked again.
    let calls = fx.stats()["tools_list_calls"].as_u64().unwrap();
    assert_eq!(version_via(&http[1]).await, before);
    assert_eq!(fx.stats()["tools_list_calls"].as_u64().unwrap(), calls);

    let r = http[0]
        .call(
            &session,
            100,
            "tools/call",
            json!({"name":"web__change_here","arguments":{}}),
        )
        .await;
    assert_eq!(text_of(&r.messages()[0]), "changed here", "{}", r.body);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = version_via(&http[1]).await;
        if now.ends_with("(now 2)") {
            break;
        }
        assert!(Instant::now() < deadline, "replica 1 still lists {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A load balancer on loopback that sends each HTTP request to the next
/// replica in turn (no stickiness, not even per connection), streaming the
/// reply back; a replica can be taken out as a balancer's health check would.
struct Balancer {
    addr: std::net::SocketAddr,
    upstreams: std::sync::Arc<parking_lot::Mutex<Vec<String>>>,
    hits: std::sync::Arc<parking_lot::Mutex<std::collections::HashMap<String, u64>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Balancer {
    async fn start(upstreams: Vec<String>) -> Balancer {
        use hyper::body::Incoming;
        use hyper_util::rt::{TokioExecutor, TokioIo};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let upstreams = std::sync::Arc::new(parking_lot::Mutex::new(upstreams));
        let hits = std::sync::Arc::new(parking_lot::Mutex::new(std::collections::HashMap::new()));
        let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .build_http::<Incoming>();
        let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (ups, counts) = (upstreams.clone(), hits.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (client, next, ups, counts) =
                    (client.clone(), next.clone(), ups.clone(), counts.clone());
                let service =
                    hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
                        let (client, next, ups, counts) =
                            (client.clone(), next.clone(), ups.clone(), counts.clone());
                        async move {
                            let up = {
                                let ups = ups.lock();
                                ups[next.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                                    % ups.len()]
                                .clone()
                            };
                            *counts.lock().entry(up.clone()).or_insert(0) += 1;
                            let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
                            *req.uri_mut() = format!("http://{up}{path}").parse().unwrap();
                            client.request(req).await
                        }
                    });
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        Balancer {
            addr,
            upstreams,
            hits,
            task,
        }
    }

    fn remove(&self, upstream: &str) {
        self.upstreams.lock().retain(|u| u != upstream);
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// rmcp's official client behind a balancer that alternates every request
/// between three replicas: one initialize, every call answered whichever
/// replica takes it; a replica SIGKILLed (and taken out of the balancer):
/// the same session goes on through the other two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_alternates_between_replicas() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::StreamableHttpClientTransport;

    let redis = Redis::start();
    let k = keygen();
    let toml = cluster_config(&redis, "", &demo_backend("demo"));
    let gws = replicas(3, &toml, &[("SLUICE_SESSION_KEY", &k)]);
    let addrs: Vec<String> = gws
        .iter()
        .map(|g| g.base.trim_start_matches("http://").to_owned())
        .collect();
    let lb = Balancer::start(addrs.clone()).await;
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{}/mcp", lb.addr));
    let client = ().serve(transport).await.expect("initialize through the balancer");
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "demo__echo"), "{tools:?}");
    let call = async |text: String| {
        let mut p = CallToolRequestParams::new("demo__echo");
        p.arguments = json!({ "text": text }).as_object().cloned();
        let r = client.call_tool(p).await.expect("answered");
        serde_json::to_value(&r.content[0]).unwrap()["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    for i in 0..9 {
        assert_eq!(call(format!("m{i}")).await, format!("m{i}"));
    }
    for a in &addrs {
        assert!(
            lb.hits.lock().get(a).copied().unwrap_or(0) >= 3,
            "{:?}",
            lb.hits.lock()
        );
    }

    let opened: f64 = gws
        .iter()
        .map(|g| g.metrics().get("sluice_client_sessions_opened_total"))
        .sum();
    assert_eq!(opened, 1.0, "one initialize in all");
    assert!(
        summed(
            &gws,
            r#"sluice_client_sessions_resumed_total{cause="replica"}"#
        ) >= 1.0,
        "served by replicas that did not open it"
    );

    // SAFETY: our own child.
    unsafe {
        libc::kill(gws[2].pid() as i32, libc::SIGKILL);
    }
    lb.remove(&addrs[2]);
    for i in 0..6 {
        assert_eq!(call(format!("after {i}")).await, format!("after {i}"));
    }
    let _ = client.cancel().await;
}

/// What managed Redis asks for (issue 42, part 2): TLS only, a client
/// certificate, and a named ACL user allowed only what sluice sends
/// (docs/cluster.md lists it), its password from a `_FILE` variable.
/// Sessions are still shared by two replicas, and a revocation reaches both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_sessions_over_tls_as_an_acl_user() {
    let dir = tempdir::Dir::new();
    let pki = Pki::new();
    let file = |name: &str, text: &str| tempdir::write(&dir, name, text);
    let ca = file("ca.pem", &pki.ca_pem);
    let (server_cert, server_key) = pki.issue("127.0.0.1");
    let (client_cert, client_key) = pki.issue("sluice");
    let (server_cert, server_key) = (file("s.pem", &server_cert), file("s.key", &server_key));
    let (client_cert, client_key) = (file("c.pem", &client_cert), file("c.key", &client_key));
    let password = file("redis-password", "s3cret-acl-pw\n");

    let mut directives = vec!["--user", "default", "off", "--user", "sluice", "on"];
    directives.extend(["resetchannels", ">s3cret-acl-pw", "~sluice:*", "&sluice:*"]);
    directives.extend(REDIS_COMMANDS.split_whitespace());
    let redis = Redis::start_tls(&server_cert, &server_key, &ca, &directives);
    // (The shared rate limit runs its script on every request.)
    let toml = format!(
        "[server]\nsession_ids = \"sealed\"\n[limits]\nrequests_per_second = 1000\n\
         [cluster]\nredis_url = \"rediss://sluice@127.0.0.1:{}/\"\n\
         redis_password_env = \"REDIS_PW\"\nredis_ca_file = \"{}\"\n\
         redis_client_cert_file = \"{}\"\nredis_client_key_file = \"{}\"\n{}",
        redis.port,
        ca.display(),
        client_cert.display(),
        client_key.display(),
        demo_backend("demo")
    );
    let key = keygen();
    let gws = replicas(
        2,
        &toml,
        &[
            ("SLUICE_SESSION_KEY", &key),
            ("REDIS_PW_FILE", password.to_str().unwrap()),
        ],
    );
    let http: Vec<_> = gws.iter().map(|g| Http::new(g.url("/mcp"))).collect();
    let id = http[0].initialize().await;
    let r = http[1].post(Some(&id), &echo(1, "over tls")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(text_of(&r.messages()[0]), "over tls");
    assert_eq!(
        gws[1]
            .metrics()
            .get(r#"sluice_client_sessions_resumed_total{cause="replica"}"#),
        1.0
    );
    // Revoked on one, gone on both.
    assert_eq!(http[1].delete(&id).await, 200);
    for (i, h) in http.iter().enumerate() {
        eventually(Duration::from_secs(5), &format!("404 on {i}"), || {
            let (h, id) = (h.clone(), id.clone());
            async move { status_of(&h, &id, 9).await == 404 }
        })
        .await;
    }
    // Nothing of it refused by the ACL: a command sluice needs and the
    // user lacks would have left a replica's cluster down or an error.
    // (Each part is needed to get this far: without the CA, the client
    // certificate or the password from its file, no replica reaches Redis.)
    for g in &gws {
        assert_eq!(g.metrics().get("sluice_cluster_up"), 1.0);
    }
}

/// The commands sluice sends (docs/cluster.md), as an ACL rule.
const REDIS_COMMANDS: &str = "+auth +ping +get +set +del +exists +publish +subscribe \
    +zadd +zcard +zremrangebyscore +zrangebyscore +zpopmin +hget +hsetnx +multi +exec +evalsha \
    +script|load +hset +hmget +pexpire +zrem +zscore +time +hdel +hlen +ttl";

/// How many times a client failed to authenticate to `redis` (its ACL
/// log, read with the right password), by `redis-cli`.
fn failed_auths(redis: &Redis, password: &str) -> u64 {
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &redis.port.to_string(), "-a", password])
        .args(["--no-auth-warning", "ACL", "LOG"])
        .output()
        .expect("redis-cli (Debian's redis-tools, which redis-server brings)");
    let text = String::from_utf8_lossy(&out.stdout);
    // Failed AUTHs make one entry, its count rising with each.
    let mut lines = text.lines();
    let mut count = 0;
    while let Some(line) = lines.next() {
        if line == "count" {
            count += lines
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    count
}

/// A Redis wrong from the start, here its password (issue 49, part 4): the
/// cause is logged at WARN, once however often the heartbeat retries, and
/// the password is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_redis_password_is_logged_once_with_its_cause() {
    let redis = Redis::start_with(&["--requirepass", "the-right-redis-pw"]);
    let toml = format!(
        "[server]\nsession_ids = \"sealed\"\n[cluster]\nredis_url = \"redis://:a-wrong-redis-pw@127.0.0.1:{}/\"\n{}",
        redis.port,
        demo_backend("demo")
    );
    let gw = Gateway::start_in_env_logged(&toml, &[("SLUICE_SESSION_KEY", &keygen())]);
    let warned = |log: &str| -> Vec<String> {
        log.lines()
            .filter(|l| l.contains("WARN") && l.contains("redis unreachable"))
            .map(str::to_owned)
            .collect()
    };
    wait_until(Duration::from_secs(15), || !warned(&gw.log()).is_empty());
    // Retried meanwhile: by the connection manager, and by each heartbeat
    // (every 2 s), which then asks a connection of its own why.
    // (Eight take about 5 s here: the line would have been logged again.)
    let before = failed_auths(&redis, "the-right-redis-pw");
    wait_until(Duration::from_secs(30), || {
        failed_auths(&redis, "the-right-redis-pw") >= before + 8
    });
    assert_eq!(gw.metrics().get("sluice_cluster_up"), 0.0);
    let log = gw.log();
    let lines = warned(&log);
    assert_eq!(lines.len(), 1, "{log}");
    assert!(
        lines[0].contains("cause=Password authentication failed"),
        "{log}"
    );
    assert!(!log.contains("a-wrong-redis-pw"), "{log}");
}
