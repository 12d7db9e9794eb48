use super::*;

/// 9999-12-30T22:00:00Z, the last second jiff writes.
const LAST_SECOND: u64 = 253_402_207_200;

fn text(clock: &mut Clock, seconds: u64, micros: u32) -> String {
    let instant = UNIX_EPOCH + Duration::new(seconds, micros * 1_000 + 999);
    let mut line = String::new();
    clock.push(&mut line, since_epoch_in_range(instant).expect("in range")).expect("written");
    line
}

#[test]
fn instants_are_written_as_rfc_3339_with_microseconds() {
    // One clock throughout: the second it keeps changes forwards,
    // backwards (the system clock set back) and not at all.
    let mut clock = Clock::new();
    for (seconds, micros, written) in [
        (0, 0, "1970-01-01T00:00:00.000000Z"),
        (951_782_400, 7, "2000-02-29T00:00:00.000007Z"),
        (951_782_400, 654_321, "2000-02-29T00:00:00.654321Z"),
        (1_796_290_067, 123_456, "2026-12-03T09:27:47.123456Z"),
        (1_796_290_068, 0, "2026-12-03T09:27:48.000000Z"),
        (1_796_290_067, 999_999, "2026-12-03T09:27:47.999999Z"),
        (4_107_542_399, 999_999, "2100-02-28T23:59:59.999999Z"),
        (LAST_SECOND, 500_000, "9999-12-30T22:00:00.500000Z"),
    ] {
        assert_eq!(text(&mut clock, seconds, micros), written);
    }
}

/// Before 1970 and after jiff's last instant, the text is left to
/// tracing-subscriber.
#[test]
fn instants_out_of_range_are_not_written_here() {
    let at = |seconds| UNIX_EPOCH + Duration::from_secs(seconds);
    assert_eq!(since_epoch_in_range(at(LAST_SECOND + 1)), None);
    assert_eq!(since_epoch_in_range(UNIX_EPOCH - Duration::from_secs(1)), None);
    assert!(since_epoch_in_range(at(LAST_SECOND)).is_some());
    assert!(since_epoch_in_range(UNIX_EPOCH).is_some());
}

/// Now, as tracing-subscriber writes it: the same to the second, read
/// between two of ours that agree.
#[test]
fn now_is_written_as_tracing_subscriber_writes_it() {
    for _ in 0..5 {
        let mut before = String::new();
        Clock::new().push_now(&mut before).expect("written");
        let mut theirs = String::new();
        tracing_subscriber::fmt::time::SystemTime
            .format_time(&mut Writer::new(&mut theirs))
            .expect("written");
        let mut after = String::new();
        Clock::new().push_now(&mut after).expect("written");
        assert_eq!(before.len(), theirs.len(), "{before} {theirs}");
        if before[..19] == after[..19] {
            assert_eq!(before[..19], theirs[..19]);
            return;
        }
    }
    panic!("the second turned five times in a row");
}
