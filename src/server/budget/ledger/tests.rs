use super::*;
use crate::server::budget::tests::ip;

fn signal() -> Arc<ShedSignal> {
    Arc::new(ShedSignal::default())
}

#[test]
fn a_peer_is_held_to_its_cap_and_gets_its_units_back() {
    let mut pool = Pool::new(100, 30);
    let s = signal();
    assert_eq!(pool.take(ip(1), 1, 20, &s, 1), Ok(()));
    assert_eq!(pool.take(ip(1), 2, 11, &s, 1), Err(Refusal::OverShare));
    assert_eq!(pool.take(ip(1), 1, 10, &s, 1), Ok(()), "a claim grows");
    assert_eq!(pool.held_by(ip(1)), 30);
    assert_eq!(pool.take(ip(2), 3, 30, &s, 2), Ok(()), "another peer");
    pool.release(ip(1), 1);
    assert_eq!((pool.held(), pool.held_by(ip(1)), pool.peers()), (30, 0, 1));
    pool.release(ip(2), 3);
    assert_eq!((pool.held(), pool.peers()), (0, 0));
    assert!(!s.is_shed());
}

#[test]
fn a_full_pool_sheds_the_largest_holder_for_a_peer_under_its_fair_share() {
    let mut pool = Pool::new(100, 60);
    let (big, small, quiet) = (signal(), signal(), signal());
    pool.take(ip(1), 1, 30, &big, 1).expect("first");
    pool.take(ip(1), 2, 25, &small, 1).expect("second");
    pool.take(ip(2), 3, 40, &quiet, 2).expect("another peer");
    // 95 of 100 held; a third peer's 20 fits its share of 33.
    assert_eq!(pool.take(ip(3), 4, 20, &signal(), 3), Ok(()));
    assert!(big.is_shed(), "the largest claim of the largest holder");
    assert!(!small.is_shed() && !quiet.is_shed());
    assert_eq!(pool.held(), 85);
    assert_eq!(pool.held_by(ip(1)), 25);
    // The shed claim is gone: its release gives nothing back twice.
    pool.release(ip(1), 1);
    assert_eq!(pool.held(), 85);
}

#[test]
fn past_the_pool_a_peer_over_its_fair_share_is_refused_and_nobody_is_shed() {
    let mut pool = Pool::new(100, 80);
    let held = signal();
    pool.take(ip(1), 1, 80, &held, 1).expect("first");
    pool.take(ip(2), 2, 10, &signal(), 2).expect("second");
    assert_eq!(
        pool.take(ip(2), 2, 45, &signal(), 2),
        Err(Refusal::OverShare),
        "55 is over the fair share of 50"
    );
    assert!(!held.is_shed());
    assert_eq!(pool.held(), 90);
}

#[test]
fn bodies_being_decided_are_not_shed_and_the_pool_answers_full() {
    let mut pool = Pool::new(100, 100);
    let settled = signal();
    pool.take(ip(1), 1, 90, &settled, 1).expect("first");
    pool.settle(ip(1), 1);
    assert_eq!(pool.take(ip(2), 2, 20, &signal(), 2), Err(Refusal::Full));
    assert!(!settled.is_shed());
    assert_eq!(pool.held_by(ip(2)), 0);
    assert_eq!(pool.peers(), 1);
}

#[test]
fn shedding_that_cannot_free_enough_sheds_nothing() {
    let mut pool = Pool::new(100, 100);
    let (open, settled) = (signal(), signal());
    pool.take(ip(1), 1, 10, &open, 1).expect("sheddable");
    pool.take(ip(1), 2, 85, &settled, 1).expect("settled");
    pool.settle(ip(1), 2);
    assert_eq!(pool.take(ip(2), 3, 30, &signal(), 2), Err(Refusal::Full));
    assert!(!open.is_shed());
}

#[test]
fn many_peers_each_within_the_fair_share_leave_the_newcomer_its_share() {
    // Ten peers fill the pool evenly; an eleventh peer's fair share is
    // 100 / 11 = 9, and everyone else holds 10: one claim is shed.
    let mut pool = Pool::new(100, 100);
    let signals: Vec<_> = (0..10).map(|_| signal()).collect();
    for (n, s) in (1..=10u8).zip(&signals) {
        pool.take(ip(n), u64::from(n), 10, s, usize::from(n)).expect("within the pool");
    }
    assert_eq!(pool.take(ip(11), 11, 5, &signal(), 11), Ok(()));
    assert_eq!(signals.iter().filter(|s| s.is_shed()).count(), 1);
    assert_eq!(pool.held(), 95);
}
