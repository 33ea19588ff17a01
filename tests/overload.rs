//! Issue 38, item 1: a flood of sockets that send nothing keeps no new
//! client out. At `max_connections` a new connection displaces the one
//! that has waited longest for its first request head, then the keep-alive
//! connection idle longest; a connection with a request in progress never
//! gives way. One address holds at most `max_connections_per_peer`, and
//! under pressure a connection gets less time to send its first head.
//! Issue 49, item 2: nor does a flood of request heads whose bodies never
//! come; a request whose body has come, and runs, still never gives way.
//! Every test runs against the gateway process over real sockets, each
//! socket bound to the loopback address it comes from; the suite also runs
//! with `SLUICE_HTTP=hyper`.

mod support;

use std::io::{BufRead, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use support::*;

const CAP: usize = 20;
const ONE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
const TWO: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const THREE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
const FOUR: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 4);

/// A gateway of `CAP` connections whose timeouts play no part (the
/// header-read timeout under pressure is a tenth of it: 12 s), with no
/// client connection open. Requests still running when it stops (the
/// tests' `busy_from`) are given a second.
fn gateway(server: &str) -> Gateway {
    let gw = Gateway::start(&format!(
        "[server]\nmax_connections = {CAP}\nheader_read_timeout = \"120s\"\n\
         body_read_timeout = \"120s\"\nshutdown_grace = \"1s\"\n{server}\n{}",
        demo_backend("demo")
    ));
    settled(&gw);
    gw
}

/// Waits until the gateway holds no client connection (the readiness
/// checks' own have closed): a test then counts every place itself.
fn settled(gw: &Gateway) {
    let port = address(gw).port();
    wait_until(Duration::from_secs(10), || held_sockets(port) == 0);
}

/// The gateway's connections from clients that it has not closed yet: the
/// sockets of /proc/net/tcp on its port, but its listener, that a process
/// holds (an inode; one that lingers after its close has none).
fn held_sockets(port: u16) -> usize {
    let text = std::fs::read_to_string("/proc/net/tcp").unwrap();
    text.lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields[1].rsplit_once(':').map(|(_, p)| p);
            local_port == Some(&format!("{port:04X}")) && fields[3] != "0A" && fields[9] != "0"
        })
        .count()
}

fn address(gw: &Gateway) -> SocketAddr {
    gw.base.strip_prefix("http://").unwrap().parse().unwrap()
}

/// A TCP connection to `to` from the loopback address `from`.
fn connect_from(from: Ipv4Addr, to: SocketAddr) -> TcpStream {
    try_connect_from(from, to).unwrap_or_else(|e| panic!("connect from {from}: {e}"))
}

fn try_connect_from(from: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let SocketAddr::V4(to) = to else {
        panic!("the gateway listens on IPv4 loopback")
    };
    let sockaddr = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a new socket, bound and connected with addresses built
    // above; its descriptor is owned by the returned stream alone (and
    // closed with it on failure).
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let stream = TcpStream::from_raw_fd(fd);
        let local = sockaddr(from, 0);
        if libc::bind(fd, (&raw const local).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let remote = sockaddr(*to.ip(), to.port());
        if libc::connect(fd, (&raw const remote).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stream)
    }
}

fn keep_alive(stream: TcpStream) -> KeepAlive {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    KeepAlive {
        stream: std::io::BufReader::new(stream),
    }
}

fn initialize(id: u64) -> String {
    serde_json::to_string(&init_request(id)).unwrap()
}

fn post_headers() -> [(&'static str, &'static str); 2] {
    [
        ("Content-Type", "application/json"),
        ("Accept", ACCEPT_BOTH),
    ]
}

/// A fresh connection from `from` that sends `initialize` at once and
/// stays open: its answer's status, and the connection.
fn fresh_client(from: Ipv4Addr, to: SocketAddr) -> (u16, TcpStream) {
    let mut c = keep_alive(connect_from(from, to));
    let r = c.response_to(&post_request("/mcp", &post_headers(), &initialize(1)));
    (r.status, c.stream.into_inner())
}

/// A fresh connection from `from` that sends `initialize` at once: the
/// status it is answered with (a refusal closes the connection).
fn fresh_status(from: Ipv4Addr, to: SocketAddr) -> u16 {
    let mut s = connect_from(from, to);
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(post_request("/mcp", &post_headers(), &initialize(1)).as_bytes())
        .unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    std::str::from_utf8(&head[9..12]).unwrap().parse().unwrap()
}

/// `n` connections with a request in progress: each one's call (a sleep
/// of ten minutes) sent whole, and its answer begun (an SSE stream, its
/// first progress event read).
fn busy_from(n: usize, from: Ipv4Addr, to: SocketAddr) -> Vec<KeepAlive> {
    (0..n)
        .map(|i| {
            let mut c = keep_alive(connect_from(from, to));
            c.send(sleep_request(i as u64).as_bytes());
            let mut line = String::new();
            c.stream.read_line(&mut line).unwrap();
            assert!(line.starts_with("HTTP/1.1 200"), "{line}");
            while !line.contains("notifications/progress") {
                line.clear();
                assert!(c.stream.read_line(&mut line).unwrap() > 0, "no progress");
            }
            c
        })
        .collect()
}

/// A 2026-07-28 call of the demo's `sleep_ms` for ten minutes, with
/// progress (so its answer is a stream, begun at once).
fn sleep_request(id: u64) -> String {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "overload", "version": "0"},
        "progressToken": id,
    });
    let params = json!({"name": "demo__sleep_ms", "arguments": {"ms": 600_000}, "_meta": meta});
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", ACCEPT_BOTH),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "demo__sleep_ms"),
    ];
    post_request("/mcp", &headers, &body.to_string())
}

/// A request of `busy_from` is still in progress: its connection was
/// never closed.
fn still_busy(c: &KeepAlive) {
    assert!(
        open(c.stream.get_ref()),
        "a connection with a request in progress was displaced"
    );
}

/// The gateway closed `s` (it reads the end, or a reset).
fn closed(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(e) => panic!("{e}: neither data nor the end within 30 s"),
        }
    }
}

/// `s` is still open: nothing to read, and no end.
fn open(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let read = (&*s).read(&mut [0u8; 1]);
    s.set_nonblocking(false).unwrap();
    matches!(read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// /metrics, read over `reader`, a keep-alive connection.
fn scrape(reader: &mut KeepAlive) -> Metrics {
    let r = reader.response_to("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    assert_eq!(r.status, 200);
    Metrics::parse(&r.text())
}

fn shed(m: &Metrics, reason: &str) -> f64 {
    m.get_or_untouched(&format!(
        "sluice_connections_shed_total{{reason=\"{reason}\"}}"
    ))
}

/// Silent sockets from two addresses fill the cap; a fresh client from a
/// third address, then one from the flood's own, send a request at once
/// and are served: the oldest silent socket gives way, then the oldest of
/// the address at its own cap. The others are kept.
#[test]
fn silent_sockets_at_the_cap_give_way_to_fresh_clients() {
    let gw = gateway(""); // one address: at most half the cap, 10
    let to = address(&gw);
    // Metrics are read over a connection of its own, opened first: a new
    // one for each reading would take a place too.
    let mut reader = keep_alive(connect_from(FOUR, to));
    let mut two: Vec<TcpStream> = (0..9).map(|_| connect_from(TWO, to)).collect();
    let mut one: Vec<TcpStream> = (0..9).map(|_| connect_from(ONE, to)).collect();
    wait_until(Duration::from_secs(20), || {
        scrape(&mut reader).get("sluice_connections_open") == (CAP - 1) as f64
    });
    one.push(connect_from(ONE, to)); // the cap, and 127.0.0.1's own cap

    let (status, three) = fresh_client(THREE, to);
    assert_eq!(status, 200, "a fresh client was kept out by silent sockets");
    assert!(closed(&mut two[0]), "the oldest silent socket gave way");
    let (status, fresh_one) = fresh_client(ONE, to);
    assert_eq!(
        status, 200,
        "a fresh client was kept out by its own address's"
    );
    assert!(
        closed(&mut one[0]),
        "its address's oldest silent socket gave way"
    );
    for s in two[1..].iter().chain(&one[1..]).chain([&three, &fresh_one]) {
        assert!(
            open(s),
            "a connection that did not have to give way was closed"
        );
    }
    let m = scrape(&mut reader);
    assert_eq!(shed(&m, "no_request"), 2.0);
    assert_eq!(shed(&m, "idle"), 0.0);
    assert_eq!(m.get("sluice_connections_refused_total"), 0.0);
    assert_eq!(m.get("sluice_connections_open"), CAP as f64);
}

/// How many of 10 fresh clients from `fresh`, one after another, each
/// sending `initialize` at once on a new connection, are answered 200
/// while `floods` (from an address, so many sockets, sending that) hold
/// `held` of the gateway's places.
fn served_in_flood(
    to: SocketAddr,
    floods: &[(Ipv4Addr, usize, &'static str)],
    held: usize,
    fresh: Ipv4Addr,
) -> usize {
    let served = |_| {
        let mut s = try_connect_from(fresh, to).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(post_request("/mcp", &post_headers(), &initialize(1)).as_bytes())
            .ok()?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head).ok()?;
        head.starts_with(b"HTTP/1.1 200").then_some(())
    };
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let flood: Vec<_> = floods
            .iter()
            .flat_map(|&(from, sockets, head)| flood_from(scope, from, to, sockets, head, &stop))
            .collect();
        wait_until(Duration::from_secs(20), || held_sockets(to.port()) >= held);
        let served = (0..10).filter_map(served).count();
        stop.store(true, Ordering::Relaxed);
        flood.into_iter().for_each(|t| t.join().unwrap());
        served
    })
}

/// A flood from `from`: `sockets` at once, each sending `head` (nothing,
/// or a request head whose body never comes) and re-opened as soon as the
/// gateway lets it go, until `stop` (or a minute, or 5,000 a socket).
fn flood_from<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    from: Ipv4Addr,
    to: SocketAddr,
    sockets: usize,
    head: &'static str,
    stop: &'scope AtomicBool,
) -> Vec<std::thread::ScopedJoinHandle<'scope, ()>> {
    let hold = move || {
        let end = Instant::now() + Duration::from_secs(60);
        let mut opened = 0;
        while !stop.load(Ordering::Relaxed) && Instant::now() < end && opened < 5_000 {
            let Ok(mut s) = try_connect_from(from, to) else {
                continue;
            };
            opened += 1;
            if s.write_all(head.as_bytes()).is_err() {
                continue;
            }
            // Held until the gateway lets go (a 503, or the end), with a
            // look at `stop` every 100 ms.
            s.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let mut buf = [0u8; 512];
            while !stop.load(Ordering::Relaxed) {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => break,
                }
            }
        }
    };
    (0..sockets).map(|_| scope.spawn(hold)).collect()
}

/// A request head whose body never comes.
const WITHHELD: &str = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\
    Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
    Content-Length: 100000\r\n\r\n";

/// Issue 49, item 2: request heads whose bodies never come, from two
/// addresses and re-opened as fast as the gateway lets them go, hold
/// every place; fresh clients from a third send their requests at once
/// and are served, at least 9 in 10: each takes the place of the request
/// whose body is furthest behind the floor rate (before, such a request
/// was busy until `body_read_timeout`, and every fresh client got 503).
#[test]
fn withheld_bodies_at_the_cap_give_way_to_fresh_clients() {
    let gw = gateway(""); // one address: at most half the cap, 10
    let to = address(&gw);
    let floods = [(TWO, 15, WITHHELD), (THREE, 15, WITHHELD)];
    let served = served_in_flood(to, &floods, CAP, FOUR);
    assert!(served >= 9, "{served} of 10 fresh clients served");
    let m = gw.metrics();
    assert!(
        shed(&m, "slow_body") >= served as f64,
        "{} shed for the {served} served",
        shed(&m, "slow_body")
    );
}

/// Issue 49, item 2: silent sockets from one address, re-opened as fast
/// as the gateway lets them go, hold the address's share; fresh clients
/// from that same address send their requests at once and are served, at
/// least 9 in 10: each takes the place of the address's oldest silent one.
#[test]
fn a_silent_flood_keeps_no_fresh_client_of_its_own_address_out() {
    let gw = gateway(""); // one address: at most half the cap, 10
    let to = address(&gw);
    let served = served_in_flood(to, &[(ONE, 30, "")], CAP / 2, ONE);
    assert!(served >= 9, "{served} of 10 fresh clients served");
}

/// The oldest connection has a request in progress, the others are idle
/// between requests: at the cap the oldest idle one gives way, the busy
/// one finishes its request.
#[test]
fn a_request_in_progress_is_never_displaced() {
    let gw = gateway(&format!("max_connections_per_peer = {CAP}"));
    let to = address(&gw);
    let [busy] = <[_; 1]>::try_from(busy_from(1, ONE, to)).ok().unwrap();
    let mut idle: Vec<KeepAlive> = (0..CAP - 1)
        .map(|_| {
            let mut c = keep_alive(connect_from(ONE, to));
            let r = c.response_to("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
            assert_eq!(r.status, 200);
            c
        })
        .collect();
    let (status, _fresh) = fresh_client(TWO, to);
    assert_eq!(status, 200);
    assert!(closed(idle[0].stream.get_mut()), "the oldest idle gave way");
    for c in &idle[1..] {
        assert!(
            open(c.stream.get_ref()),
            "a younger idle connection was closed"
        );
    }
    let m = gw.metrics();
    assert_eq!(
        shed(&m, "idle"),
        2.0,
        "the fresh client's, then the scrape's"
    );
    assert_eq!(shed(&m, "no_request"), 0.0);
    still_busy(&busy);
}

/// Every connection busy: a new one is refused at once with 503, and the
/// busy ones go on.
#[test]
fn at_the_cap_with_every_connection_busy_a_new_one_is_refused() {
    let gw = gateway(&format!("max_connections_per_peer = {CAP}"));
    let to = address(&gw);
    let busy = busy_from(CAP, ONE, to);
    assert_eq!(fresh_status(TWO, to), 503);
    busy.iter().for_each(still_busy);
    // Their clients gone, the gateway lets go of them, and the scrape
    // gets a place.
    drop(busy);
    wait_until(Duration::from_secs(20), || held_sockets(to.port()) < CAP);
    let m = gw.metrics();
    assert_eq!(m.get("sluice_connections_refused_total"), 1.0);
    assert_eq!(shed(&m, "no_request"), 0.0);
}

/// One address holds at most `max_connections_per_peer`: its silent
/// sockets past it displace its own, its busy ones make a new one of its
/// own be refused, while another address is served.
#[test]
fn one_address_holds_at_most_its_share() {
    let gw = gateway("max_connections_per_peer = 5");
    let to = address(&gw);
    let busy = busy_from(5, TWO, to);
    assert_eq!(fresh_status(TWO, to), 503, "a sixth from a full address");
    assert_eq!(fresh_status(THREE, to), 200, "another address is served");
    let mut silent: Vec<TcpStream> = (0..12).map(|_| connect_from(FOUR, to)).collect();
    wait_until(Duration::from_secs(20), || {
        shed(&gw.metrics(), "no_request") == 7.0
    });
    for s in &mut silent[..7] {
        assert!(closed(s), "the oldest of the address gave way");
    }
    for s in &silent[7..] {
        assert!(open(s), "the address's five youngest are kept");
    }
    busy.iter().for_each(still_busy);
    let m = gw.metrics();
    assert_eq!(m.get("sluice_connections_refused_per_peer_total"), 1.0);
    assert_eq!(m.get("sluice_connections_refused_total"), 0.0);
}

/// Above three quarters of the cap, a connection that sends nothing gets
/// a tenth of the header-read timeout; each one closed so is counted.
#[test]
fn under_pressure_silent_sockets_get_a_shorter_header_read_timeout() {
    let gw = Gateway::start(&format!(
        "[server]\nmax_connections = {CAP}\nmax_connections_per_peer = {CAP}\n\
         header_read_timeout = \"10s\"\n{}",
        demo_backend("demo")
    ));
    settled(&gw);
    let to = address(&gw);
    let mut silent: Vec<TcpStream> = (0..16).map(|_| connect_from(TWO, to)).collect();
    for s in &mut silent {
        assert!(closed(s));
    }
    // Every one closed, by the shortened timeout while more than 15 were
    // open (then the rest by the usual one, if the sweep that took the
    // gateway below pressure came between them): only the count tells.
    let m = gw.metrics();
    assert!(
        shed(&m, "head_timeout") >= 2.0,
        "pressure did not shorten it"
    );
    assert_eq!(shed(&m, "no_request"), 0.0);
}
