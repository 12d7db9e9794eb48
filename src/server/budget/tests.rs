use std::net::IpAddr;
use std::time::Duration;

use super::*;

#[test]
fn connections_are_capped_per_peer_and_counted_until_dropped() {
    let budget = Budget::new(LIMITS, BudgetRefusals::default());
    let first = budget.connect(ip(1)).expect("first");
    let _second = budget.connect(ip(1)).expect("second");
    assert_eq!(budget.connect(ip(1)).err(), Some(Refusal::OverShare));
    drop(first);
    let _third = budget.connect(ip(1)).expect("a closed connection frees its place");
    assert_eq!(budget.in_use().0, 2);
}

#[test]
fn a_full_port_sheds_a_connection_of_the_peer_holding_the_most() {
    let limits = Limits { connections_per_peer: 4, ..LIMITS };
    let budget = Budget::new(limits, BudgetRefusals::default());
    let flood: Vec<_> = (0..4).map(|_| budget.connect(ip(1)).expect("within the caps")).collect();
    let api_server = budget.connect(ip(2)).expect("a new peer is under its share");
    assert_eq!(
        flood.iter().filter(|p| p.0.signal.is_shed()).count(),
        1,
        "one of the flood is closed for it"
    );
    assert!(!api_server.0.signal.is_shed());
    assert_eq!(budget.in_use().0, 4);
}

#[test]
fn an_ipv4_peer_seen_through_ipv6_is_the_same_peer() {
    let budget = Budget::new(LIMITS, BudgetRefusals::default());
    let _v4 = budget.connect(ip(1)).expect("v4");
    let _mapped = budget
        .connect(IpAddr::from(std::net::Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped()))
        .expect("mapped");
    assert_eq!(budget.connect(ip(1)).err(), Some(Refusal::OverShare));
}

#[test]
fn a_body_reserves_its_length_grows_past_it_and_is_given_back_when_dropped() {
    let budget = Budget::new(LIMITS, BudgetRefusals::default());
    let _connection = budget.connect(ip(1)).expect("connection");
    let body = budget.body(ip(1), 40).expect("within the share");
    body.receive(30).expect("within the reservation");
    assert_eq!(budget.in_use().1, 40);
    body.receive(15).expect("grows to 45");
    assert_eq!(budget.in_use().1, 45);
    assert_eq!(body.receive(20), Err(Refusal::OverShare), "65 is over 60");
    assert_eq!(budget.body(ip(1), 20).err(), Some(Refusal::OverShare));
    drop(body);
    assert_eq!(budget.in_use().1, 0);
}

#[test]
fn a_stalled_body_is_shed_for_a_peer_under_its_share() {
    let budget = Budget::new(LIMITS, BudgetRefusals::default());
    let _attacker = budget.connect(ip(1)).expect("connection");
    let _other = budget.connect(ip(3)).expect("connection");
    let stalled = budget.body(ip(1), 60).expect("its cap");
    let also = budget.body(ip(3), 35).expect("another");
    let _api_server = budget.connect(ip(2)).expect("connection");
    let review = budget.body(ip(2), 20).expect("shed the largest for it");
    assert!(stalled.claim.signal.is_shed() && !also.claim.signal.is_shed());
    assert_eq!(budget.in_use().1, 55);
    drop((stalled, review));
    assert_eq!(budget.in_use().1, 35);
}

// Shared with the tests of the budget's modules.

/// Two connections a peer, four in all; 60 bytes a peer, 100 in all.
pub(super) const LIMITS: Limits = Limits {
    connections: 4,
    connections_per_peer: 2,
    body_bytes: 100,
    body_bytes_per_peer: 60,
    request_deadline: Duration::from_secs(1),
    idle_timeout: Duration::from_secs(1),
};

/// The peer `10.0.0.<last>`.
pub(super) fn ip(last: u8) -> IpAddr {
    IpAddr::from([10, 0, 0, last])
}
