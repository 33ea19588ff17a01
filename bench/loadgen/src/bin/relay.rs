//! The floor of a hop on this host, for the forwarding benchmark: a bare
//! TCP relay that does nothing a gateway must do (no HTTP, no JSON, no
//! sessions), only what every hop pays: each client connection gets a
//! connection of its own to the target, and bytes are copied both ways.
//! Per call that is the same system calls as sluice's (two reads, two
//! writes) and the same wake-ups, on the same runtime shape as sluice's
//! default: one current-thread runtime per core, connections handed to
//! them in turn, the main thread's among them. Its CPU per call against
//! the backend's is the lowest ratio any gateway could reach here.
//!
//! ```text
//! relay --to 127.0.0.1:PORT [--listen 127.0.0.1:0] [--threads N]
//! ```
//! prints `relay listening on ADDR` once it accepts connections. Only
//! loopback addresses are accepted, on either side.

use std::net::SocketAddr;
use std::sync::mpsc as std_mpsc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

fn main() {
    let mut listen: SocketAddr = "127.0.0.1:0".parse().expect("default address");
    let mut to: Option<SocketAddr> = None;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |what: &str| {
            args.next()
                .unwrap_or_else(|| fail(&format!("{a} needs {what}")))
        };
        match a.as_str() {
            "--listen" => listen = parse(&value("an address")),
            "--to" => to = Some(parse(&value("an address"))),
            "--threads" => {
                threads = value("a count")
                    .parse()
                    .unwrap_or_else(|_| fail("--threads needs a count"))
            }
            other => fail(&format!("unknown argument {other}")),
        }
    }
    let to = to.unwrap_or_else(|| fail("--to ADDR is required"));
    if !listen.ip().is_loopback() || !to.ip().is_loopback() {
        fail("only loopback addresses are accepted");
    }

    // The other runtimes, each fed accepted sockets over a channel.
    let mut feeds = Vec::new();
    for i in 1..threads.max(1) {
        let (tx, rx) = mpsc::unbounded_channel::<std::net::TcpStream>();
        let (up, ready) = std_mpsc::channel();
        std::thread::Builder::new()
            .name(format!("relay-{i}"))
            .spawn(move || {
                let rt = runtime();
                up.send(()).ok();
                rt.block_on(serve_fed(rx, to));
            })
            .expect("relay thread");
        ready.recv().expect("relay thread started");
        feeds.push(tx);
    }

    runtime().block_on(async move {
        let listener = TcpListener::bind(listen)
            .await
            .unwrap_or_else(|e| fail(&format!("bind {listen}: {e}")));
        let addr = listener.local_addr().expect("local address");
        println!("relay listening on {addr}");
        let mut turn = 0usize;
        loop {
            let Ok((client, _)) = listener.accept().await else {
                continue;
            };
            turn = (turn + 1) % (feeds.len() + 1);
            if turn == 0 {
                tokio::spawn(pump(client, to));
            } else if let Ok(client) = client.into_std() {
                feeds[turn - 1].send(client).ok();
            }
        }
    });
}

async fn serve_fed(mut rx: mpsc::UnboundedReceiver<std::net::TcpStream>, to: SocketAddr) {
    while let Some(client) = rx.recv().await {
        if let Ok(client) = TcpStream::from_std(client) {
            tokio::spawn(pump(client, to));
        }
    }
}

/// One client connection and its own connection to the target, until
/// either side closes.
async fn pump(mut client: TcpStream, to: SocketAddr) {
    let Ok(mut target) = TcpStream::connect(to).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = target.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut client, &mut target).await;
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("tokio runtime")
}

fn parse(s: &str) -> SocketAddr {
    s.parse()
        .unwrap_or_else(|_| fail(&format!("{s} is not an address")))
}

fn fail(why: &str) -> ! {
    eprintln!("relay: {why}");
    std::process::exit(2)
}
