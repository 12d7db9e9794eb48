use super::*;

fn caller(last: u8) -> Caller {
    Caller(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)))
}

const TWO_PER_SECOND: RateLimit = RateLimit { burst: 2, interval: Duration::from_millis(500) };

#[test]
fn a_caller_gets_its_burst_then_one_per_interval() {
    let limit = PerCaller::new(TWO_PER_SECOND);
    let start = Instant::now();
    let taken: Vec<bool> = (0..5).map(|_| limit.take(caller(1), start)).collect();
    assert_eq!(taken, [true, true, false, false, false]);
    let later = start + Duration::from_millis(499);
    assert!(!limit.take(caller(1), later));
    let later = start + Duration::from_millis(500);
    assert!(limit.take(caller(1), later));
    assert!(!limit.take(caller(1), later));
    // Idle long enough, the burst is whole again, and no more.
    let idle = start + Duration::from_secs(60);
    let taken: Vec<bool> = (0..3).map(|_| limit.take(caller(1), idle)).collect();
    assert_eq!(taken, [true, true, false]);
}

#[test]
fn a_flood_gets_the_rate_and_no_more() {
    let limit = PerCaller::new(TWO_PER_SECOND);
    let start = Instant::now();
    // 10,000 attempts within 1 s, and over 10 s: the burst, then one
    // per 500 ms.
    let allowed = (0..10_000u64)
        .filter(|n| limit.take(caller(1), start + Duration::from_micros(n * 100)))
        .count();
    let allowed_over_10s =
        (0..10_000u64).filter(|n| limit.take(caller(2), start + Duration::from_millis(*n))).count();
    assert_eq!(allowed, 3, "1 s: the burst of 2 and one more");
    assert_eq!(allowed_over_10s, 2 + 19);
}

#[test]
fn callers_do_not_share_an_allowance() {
    let limit = PerCaller::new(TWO_PER_SECOND);
    let now = Instant::now();
    assert!(limit.take(caller(1), now) && limit.take(caller(1), now));
    assert!(!limit.take(caller(1), now));
    assert!(limit.take(caller(2), now), "another caller still has its own");
}

#[test]
fn the_table_is_bounded_and_new_callers_share_the_overflow() {
    let limit = PerCaller::with_capacity(TWO_PER_SECOND, 4);
    let now = Instant::now();
    for n in 1..=4 {
        assert!(limit.take(caller(n), now));
    }
    assert_eq!(limit.callers(), 4);
    // Callers 5 to 200 find the table full of callers still counting:
    // they share one allowance.
    let allowed = (5..=200).filter(|&n| limit.take(caller(n), now)).count();
    assert_eq!(allowed, 2);
    assert_eq!(limit.callers(), 4);
    // Once the first callers are whole again they are forgotten, and
    // a new caller gets an entry of its own.
    let later = now + Duration::from_secs(5);
    assert!(limit.take(caller(201), later));
    assert!(limit.take(caller(201), later));
    assert!(!limit.take(caller(201), later));
    assert_eq!(limit.callers(), 1);
}

#[test]
fn a_zero_burst_allows_nothing() {
    let limit = PerCaller::new(RateLimit { burst: 0, interval: Duration::from_secs(1) });
    assert!(!limit.take(caller(1), Instant::now()));
}

#[test]
fn looks_are_limited_per_caller_and_in_number() {
    let reads = ClusterReads::default();
    let first = reads.namespace_look(caller(1)).expect("a first look");
    assert_eq!(reads.namespace_look(caller(3)).err(), Some(LookRefused::Busy));
    drop(first);
    for _ in 1..NAMESPACE_LOOKS.burst {
        drop(reads.namespace_look(caller(1)).expect("within the burst"));
    }
    assert_eq!(reads.namespace_look(caller(1)).err(), Some(LookRefused::CallerLimit));
    assert!(reads.namespace_look(caller(3)).is_ok());
}

impl PerCaller {
    fn callers(&self) -> usize {
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        table.callers.len()
    }
}
