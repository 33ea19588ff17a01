use super::*;
use crate::vocab::PrincipalName;

fn who(name: &str) -> Principal {
    Principal::Named(PrincipalName::new(name).unwrap())
}

fn backend(name: &str) -> BackendName {
    BackendName::new(name).unwrap()
}

const NOW: u64 = 1_800_000_000;

#[test]
fn asking_twice_gives_the_same_link_while_it_is_fresh() {
    let starts = Starts::new(100, 4);
    let first = starts.issue(&who("alice"), &backend("gh"), "a1".into(), NOW);
    assert_eq!(first, "a1");
    let again = starts.issue(&who("alice"), &backend("gh"), "a2".into(), NOW + 299);
    assert_eq!(again, "a1", "half its life left: the same link");
    assert_eq!(starts.len(), 1);
    // Another backend, another principal: their own.
    assert_eq!(
        starts.issue(&who("alice"), &backend("linear"), "a3".into(), NOW),
        "a3"
    );
    assert_eq!(
        starts.issue(&who("bob"), &backend("gh"), "b1".into(), NOW),
        "b1"
    );
    // Less than half left: a new one, the old one gone.
    assert_eq!(
        starts.issue(&who("alice"), &backend("gh"), "a4".into(), NOW + 301),
        "a4"
    );
    assert_eq!(starts.take("a1", NOW + 302), Err(Refused::UnknownStart));
    assert_eq!(
        starts.take("a4", NOW + 302),
        Ok((who("alice"), backend("gh")))
    );
}

#[test]
fn an_id_opens_once_for_its_principal_and_dies_at_its_expiry() {
    let starts = Starts::new(100, 4);
    starts.issue(&who("alice"), &backend("gh"), "a1".into(), NOW);
    assert_eq!(
        starts.take("a1", NOW + 1),
        Ok((who("alice"), backend("gh")))
    );
    assert_eq!(starts.take("a1", NOW + 2), Err(Refused::UsedStart));
    assert_eq!(starts.take("nope", NOW + 2), Err(Refused::UnknownStart));
    // Opened, the next ask makes a new link.
    assert_eq!(
        starts.issue(&who("alice"), &backend("gh"), "a2".into(), NOW + 3),
        "a2"
    );
    assert_eq!(starts.take("a2", NOW + 3 + 600), Err(Refused::ExpiredStart));
    assert_eq!(starts.take("a2", NOW + 3 + 601), Err(Refused::UnknownStart));
}

#[test]
fn one_principal_cannot_evict_the_others() {
    let starts = Starts::new(10, 3);
    starts.issue(&who("bob"), &backend("gh"), "bob".into(), NOW);
    // alice asks for many backends' links, over and over.
    for round in 0..50u64 {
        for b in 0..6 {
            starts.issue(
                &who("alice"),
                &backend(&format!("b{b}")),
                format!("a{round}-{b}"),
                NOW + round,
            );
        }
    }
    assert!(starts.len() <= 4, "alice holds at most 3: {}", starts.len());
    assert_eq!(
        starts.take("bob", NOW + 60),
        Ok((who("bob"), backend("gh"))),
        "bob's link survived alice's polling"
    );
}

#[test]
fn full_the_oldest_goes_and_expired_ones_are_popped_from_the_front() {
    let starts = Starts::new(3, 4);
    for (i, name) in ["p0", "p1", "p2", "p3"].iter().enumerate() {
        starts.issue(&who(name), &backend("gh"), (*name).into(), NOW + i as u64);
    }
    assert_eq!(starts.len(), 3);
    assert_eq!(starts.take("p0", NOW + 10), Err(Refused::UnknownStart));
    assert!(starts.take("p1", NOW + 10).is_ok());
    // Every earlier id expired: a new one finds them gone.
    starts.issue(&who("p9"), &backend("gh"), "p9".into(), NOW + 700);
    assert_eq!(starts.len(), 1);
    // Sizes below one still hold one.
    let tiny = Starts::new(0, 0);
    tiny.issue(&who("a"), &backend("gh"), "x".into(), NOW);
    tiny.issue(&who("b"), &backend("gh"), "y".into(), NOW);
    assert_eq!(tiny.len(), 1);
}

/// Eviction does not scan: 100,000 ids, each issue pops the front.
#[test]
fn a_full_table_stays_at_its_bound() {
    // Twice the bound issued: each past it evicts one (a scan per issue at
    // the cap, as before, would take minutes: the cost is measured in no
    // test, the bound is).
    let starts = Starts::new(MAX_STARTS, MAX_PER_PRINCIPAL);
    for i in 0..(2 * MAX_STARTS) {
        starts.issue(
            &who(&format!("p{}", i % 50_000)),
            &backend(&format!("b{}", i / 50_000)),
            format!("id{i}"),
            NOW,
        );
    }
    assert_eq!(starts.len(), MAX_STARTS);
}
