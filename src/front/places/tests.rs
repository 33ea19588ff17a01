use std::io::Read;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{FLOOR, Place, Places};
use crate::metrics::Metrics;

const PEER: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A connection in the table: its place, and the client's end of its
/// socket (which reads the end once the gateway's end is shut down).
struct Conn {
    place: Place,
    client: UnixStream,
    _ours: UnixStream,
}

/// A table of `max` places for one address, its clock begun an hour ago
/// (so that a test can date a head before the table was made).
fn places(max: usize, metrics: Arc<Metrics>) -> Arc<Places> {
    let mut places = Places::new(max, max, Duration::from_secs(10), metrics);
    Arc::get_mut(&mut places).unwrap().epoch = Instant::now() - Duration::from_secs(3600);
    places
}

fn enter(places: &Arc<Places>) -> Conn {
    let (ours, client) = UnixStream::pair().unwrap();
    let place = places.enter(PEER, ours.as_raw_fd()).unwrap().place;
    client.set_nonblocking(true).unwrap();
    Conn {
        place,
        client,
        _ours: ours,
    }
}

/// The gateway shut this connection down.
fn shut(c: &Conn) -> bool {
    matches!((&c.client).read(&mut [0u8; 1]), Ok(0))
}

fn shed(metrics: &Metrics, reason: &str) -> u64 {
    let line = format!("sluice_connections_shed_total{{reason=\"{reason}\"}} ");
    metrics
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(line.as_str()))
        .map_or(0, |v| v.parse().unwrap())
}

/// The order of `places`' doc: the connection that owes longest (its head
/// since it was accepted, its body since it fell behind `FLOOR`), then the
/// one idle longest; never a body that keeps up, nor a busy request.
#[test]
fn at_the_cap_the_connection_that_owes_longest_gives_way() {
    let metrics = Arc::new(Metrics::new());
    let places = places(8, metrics.clone());
    let ago = |d: Duration| Instant::now() - d;
    let secs = Duration::from_secs;
    let idle = enter(&places);
    assert!(idle.place.phase().begin());
    idle.place.phase().end(ago(secs(60)));
    // Its head came 30 s ago with 100 bytes of its body, and no more.
    let early = enter(&places);
    assert!(early.place.phase().receive(100, ago(secs(30))));
    let waiting = enter(&places);
    // Its head came after `waiting` was accepted, and nothing since.
    let recent = enter(&places);
    assert!(recent.place.phase().receive(0, Instant::now()));
    // Its head came long ago, but every second of it brought FLOOR bytes.
    let keeping_up = enter(&places);
    let phase = keeping_up.place.phase();
    assert!(phase.receive(0, ago(secs(30))));
    assert!(phase.received(31 * FLOOR as usize));
    let busy = enter(&places);
    assert!(busy.place.phase().receive(0, ago(secs(30))));
    assert!(busy.place.phase().begin(), "the body came: busy");
    let new = enter(&places);

    let order = [&early, &waiting, &recent, &idle];
    for (n, gone) in order.iter().enumerate() {
        assert!(places.make_room(&new.place), "turn {n}");
        assert!(shut(gone), "turn {n} displaced another");
        for kept in &order[n + 1..] {
            assert!(!shut(kept), "turn {n} displaced one whose turn was later");
        }
    }
    assert!(
        !places.make_room(&new.place),
        "a body that keeps up, and a busy request, never give way"
    );
    assert!(!shut(&keeping_up) && !shut(&busy) && !shut(&new));
    assert_eq!(shed(&metrics, "slow_body"), 2);
    assert_eq!(shed(&metrics, "no_request"), 1);
    assert_eq!(shed(&metrics, "idle"), 1);
}

#[test]
fn a_receiving_request_ends_idle_and_a_displaced_one_takes_nothing_more() {
    let metrics = Arc::new(Metrics::new());
    let places = places(2, metrics);
    let refused = enter(&places);
    let phase = refused.place.phase();
    assert!(phase.receive(0, Instant::now() - Duration::from_secs(5)));
    // Answered (refused) before its body came: idle, as after any answer.
    phase.end(Instant::now());
    let new = enter(&places);
    assert!(places.make_room(&new.place));
    assert!(shut(&refused));
    assert_eq!(shed(&places.metrics, "idle"), 1);

    let cut = enter(&places);
    assert!(cut.place.phase().receive(0, Instant::now()));
    assert!(places.make_room(&new.place));
    assert!(shut(&cut));
    assert!(!cut.place.phase().received(10), "displaced");
    assert!(!cut.place.phase().begin(), "displaced: its body never runs");
}
