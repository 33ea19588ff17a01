use super::sealed;
use super::*;

fn sessions(max: usize, per_principal: usize, ttl_ms: u64) -> (Arc<Sessions>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let s = Sessions::new(
        Limits {
            max_sessions: max,
            max_per_principal: per_principal,
            idle_ttl: Duration::from_millis(ttl_ms),
        },
        Ids::Table,
        metrics.clone(),
    );
    (s, metrics)
}

const V: LegacyVersion = LegacyVersion::V2025_11_25;

#[tokio::test(start_paused = true)]
async fn idle_sessions_expire_and_busy_ones_do_not() {
    let (s, m) = sessions(100, 100, 1000);
    let a = s
        .open(Principal::Anonymous, V, ClientCaps::default(), b"")
        .unwrap();
    let b = s
        .open(Principal::Anonymous, V, ClientCaps::default(), b"")
        .unwrap();
    let guard = s.begin(&b.id, &Principal::Anonymous, b"").unwrap();
    tokio::time::advance(Duration::from_millis(1500)).await;
    assert_eq!(s.sweep(), 1);
    assert!(a.ended().is_cancelled());
    assert!(!b.ended().is_cancelled());
    assert!(s.begin(&a.id, &Principal::Anonymous, b"").is_err());
    drop(guard);
    tokio::time::advance(Duration::from_millis(1500)).await;
    assert_eq!(s.sweep(), 1);
    assert_eq!(m.sessions_live(), 0);
    s.assert_consistent();
}

/// A request's start marks the session busy without reading the clock
/// (`Table::enter`); its end is the session's last use: a request longer
/// than the TTL leaves a session with its whole TTL still ahead.
#[tokio::test(start_paused = true)]
async fn idle_time_counts_from_the_end_of_the_last_request() {
    let (s, _) = sessions(100, 100, 1000);
    let a = s
        .open(Principal::Anonymous, V, ClientCaps::default(), b"")
        .unwrap();
    let guard = s.begin(&a.id, &Principal::Anonymous, b"").unwrap();
    tokio::time::advance(Duration::from_millis(1500)).await;
    assert_eq!(s.sweep(), 0, "busy for longer than the TTL, never idle");
    drop(guard);
    tokio::time::advance(Duration::from_millis(900)).await;
    assert_eq!(s.sweep(), 0, "idle 900 ms of 1000 since the request ended");
    assert!(!a.ended().is_cancelled());
    tokio::time::advance(Duration::from_millis(200)).await;
    assert_eq!(s.sweep(), 1);
    assert!(a.ended().is_cancelled());
    s.assert_consistent();
}

#[tokio::test(start_paused = true)]
async fn capacity_evicts_least_recently_used_idle_session() {
    let (s, _) = sessions(3, 100, 60_000);
    let ids: Vec<_> = (0..3)
        .map(|_| {
            s.open(Principal::Anonymous, V, ClientCaps::default(), b"")
                .unwrap()
        })
        .collect();
    // Using the oldest makes the second the least recently used.
    drop(s.begin(&ids[0].id, &Principal::Anonymous, b"").unwrap());
    let _busy = s.begin(&ids[1].id, &Principal::Anonymous, b"").unwrap();
    // ids[1] is busy, so ids[2] is the oldest idle one.
    let d = s
        .open(Principal::Anonymous, V, ClientCaps::default(), b"")
        .unwrap();
    assert!(ids[2].ended().is_cancelled());
    assert!(!ids[0].ended().is_cancelled() && !ids[1].ended().is_cancelled());
    assert_eq!(s.len(), 3);
    assert!(!d.ended().is_cancelled());
    s.assert_consistent();
}

#[tokio::test(start_paused = true)]
async fn full_table_of_busy_sessions_refuses() {
    let (s, m) = sessions(2, 100, 60_000);
    let a = s
        .open(Principal::Anonymous, V, ClientCaps::default(), b"")
        .unwrap();
    let b = s
        .open(Principal::Anonymous, V, ClientCaps::default(), b"")
        .unwrap();
    let _ga = s.begin(&a.id, &Principal::Anonymous, b"").unwrap();
    let _gb = s.begin(&b.id, &Principal::Anonymous, b"").unwrap();
    assert!(
        s.open(Principal::Anonymous, V, ClientCaps::default(), b"")
            .is_err()
    );
    assert_eq!(s.len(), 2);
    assert_eq!(m.sessions_live(), 2);
    s.assert_consistent();
}

#[tokio::test(start_paused = true)]
async fn principal_cap_evicts_only_that_principals_sessions() {
    let (s, _) = sessions(100, 2, 60_000);
    let other = s
        .open(Principal::named(1), V, ClientCaps::default(), b"")
        .unwrap();
    let a = s
        .open(Principal::named(0), V, ClientCaps::default(), b"")
        .unwrap();
    let _b = s
        .open(Principal::named(0), V, ClientCaps::default(), b"")
        .unwrap();
    let _c = s
        .open(Principal::named(0), V, ClientCaps::default(), b"")
        .unwrap();
    assert!(a.ended().is_cancelled());
    assert!(!other.ended().is_cancelled());
    s.assert_consistent();
}

#[tokio::test(start_paused = true)]
async fn sessions_are_bound_to_their_principal() {
    let (s, _) = sessions(100, 100, 60_000);
    let a = s
        .open(Principal::named(0), V, ClientCaps::default(), b"")
        .unwrap();
    assert!(s.begin(&a.id, &Principal::named(1), b"").is_err());
    assert!(s.delete(&a.id, &Principal::named(1), b"").is_err());
    assert!(s.begin(&a.id, &Principal::named(0), b"").is_ok());
}

#[tokio::test(start_paused = true)]
async fn sweep_handles_more_than_one_batch() {
    let (s, m) = sessions(10_000, 10_000, 1000);
    for _ in 0..3000 {
        s.open(Principal::Anonymous, V, ClientCaps::default(), b"")
            .unwrap();
    }
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(s.sweep(), 3000);
    assert_eq!(m.sessions_live(), 0);
    s.assert_consistent();
}

#[test]
fn ids_are_random_visible_ascii() {
    let a = SessionId::random();
    let b = SessionId::random();
    assert_ne!(a, b);
    assert_eq!(a.as_str().len(), 48);
    assert!(a.as_str().bytes().all(|c| (0x21..=0x7e).contains(&c)));
    assert_eq!(format!("{a:?}"), "SessionId(..)");
}

/// Issue 9 (12): with a per-principal cap, finding that principal's oldest
/// session does not walk the other principals' sessions, and with no cap
/// that can bind (no auth) nothing is kept per principal.
#[tokio::test(start_paused = true)]
async fn principal_eviction_takes_the_principals_own_oldest() {
    let (s, _) = sessions(100_000, 3, 60_000);
    // Many sessions of others, older than the principal's.
    for i in 0..50_000 {
        s.open(Principal::named(1 + i % 7), V, ClientCaps::default(), b"")
            .unwrap();
    }
    let mine: Vec<_> = (0..3)
        .map(|_| {
            s.open(Principal::named(0), V, ClientCaps::default(), b"")
                .unwrap()
        })
        .collect();
    let _busy = s.begin(&mine[0].id, &Principal::named(0), b"").unwrap();
    s.open(Principal::named(0), V, ClientCaps::default(), b"")
        .unwrap();
    assert!(!mine[0].ended().is_cancelled(), "busy: never evicted");
    assert!(
        mine[1].ended().is_cancelled(),
        "the principal's oldest idle one"
    );
    assert!(!mine[2].ended().is_cancelled());
    s.assert_consistent();
}

fn sealed_sessions(lifetime: Duration) -> (Arc<Sessions>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let ring = sealed::KeyRing::parse(&sealed::KeyRing::generate()).unwrap();
    let s = Sessions::new(
        Limits {
            max_sessions: 100,
            max_per_principal: 100,
            idle_ttl: Duration::from_millis(1000),
        },
        Ids::Sealed(Sealer::new(ring, lifetime, Sealer::new_boot(), true)),
        metrics.clone(),
    );
    (s, metrics)
}

/// Issue 8: an evicted sealed session comes back from its id alone, only
/// for its own principal and namespace, never after DELETE or its end.
#[tokio::test(start_paused = true)]
async fn sealed_sessions_resume_until_revoked_or_expired() {
    let (s, m) = sealed_sessions(Duration::from_secs(3600));
    let caps = ClientCaps::parse(r#"{"sampling":{}}"#);
    let a = s.open(Principal::named(0), V, caps, b"t0/ns").unwrap();
    let id = a.id.clone();
    tokio::time::advance(Duration::from_millis(1500)).await;
    assert_eq!(s.sweep(), 1, "evicted when idle");
    assert!(a.ended().is_cancelled());
    assert!(
        s.begin(&id, &Principal::named(1), b"t1/ns").is_err(),
        "another principal"
    );
    assert!(
        s.begin(&id, &Principal::named(0), b"t0/other").is_err(),
        "another namespace"
    );
    let back = s.begin(&id, &Principal::named(0), b"t0/ns").unwrap();
    assert_eq!(back.session().caps, caps, "capabilities come back with it");
    assert_eq!(back.session().version, V);
    assert!(!back.session().ended().is_cancelled());
    drop(back);
    assert_eq!(m.sessions_live(), 1);
    s.assert_consistent();
    // DELETE revokes: gone here, and it cannot come back.
    assert!(s.delete(&id, &Principal::named(0), b"t0/ns").is_ok());
    assert!(s.begin(&id, &Principal::named(0), b"t0/ns").is_err());
    assert_eq!(s.revoked(), 1);

    let (s, _) = sealed_sessions(Duration::ZERO);
    let b = s.open(Principal::Anonymous, V, caps, b"x").unwrap();
    assert!(
        s.begin(&b.id, &Principal::Anonymous, b"x").is_err(),
        "past its end"
    );
}

/// Sessions are counted by the namespace they were opened in, and every
/// way out (DELETE, idle, capacity) takes them off that count.
#[tokio::test(start_paused = true)]
async fn sessions_are_counted_by_namespace() {
    let metrics = Arc::new(Metrics::new());
    let s = Sessions::with_namespaces(
        Limits {
            max_sessions: 3,
            max_per_principal: 3,
            idle_ttl: Duration::from_millis(1000),
        },
        Ids::Table,
        metrics,
        2,
    );
    let open = |ns: u16| {
        s.open_in(Principal::Anonymous, V, ClientCaps::default(), b"", ns)
            .unwrap()
    };
    let a = open(0);
    let _b = open(1);
    let _c = open(1);
    assert_eq!(s.by_namespace(), [(1, 1), (2, 2)]);
    // At capacity the least recently used (a, namespace 0) is evicted.
    let _d = open(1);
    assert!(a.ended().is_cancelled());
    assert_eq!(s.by_namespace(), [(0, 1), (3, 3)]);
    // A tag past the last counts in the last.
    s.delete(&_d.id, &Principal::Anonymous, b"").unwrap();
    let _e = open(7);
    assert_eq!(s.by_namespace(), [(0, 1), (3, 4)]);
    tokio::time::advance(Duration::from_millis(1500)).await;
    assert_eq!(s.sweep(), 3);
    assert_eq!(s.by_namespace(), [(0, 1), (0, 4)]);
    s.assert_consistent();
}

/// The table holds hundreds of thousands: a session with its `Arc` header
/// fits mimalloc's 160-byte class (one byte more takes the 192-byte one).
#[test]
fn a_session_fits_its_allocation_class() {
    assert!(
        std::mem::size_of::<Session>() + 16 <= 160,
        "{} bytes",
        std::mem::size_of::<Session>()
    );
}
