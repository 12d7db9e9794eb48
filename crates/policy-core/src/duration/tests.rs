use rstest::rstest;

use super::*;

#[allow(clippy::cast_possible_truncation)]
fn millis(duration: Option<Duration>) -> Option<u64> {
    duration.map(|d| d.as_millis() as u64)
}

/// The API server's `timeout` parameter.
#[rstest]
#[case("10s", Some(10_000))]
#[case("500ms", Some(500))]
#[case("1m30s", Some(90_000))]
#[case("1.5s", Some(1_500))]
#[case("", None)]
#[case("10", None)]
#[case("s", None)]
#[case("10x", None)]
#[case("2h45m", Some(9_900_000))]
#[case("1.5m", Some(90_000))]
#[case("0.1s", Some(100))]
#[case("250us", Some(0))]
#[case("1.2.3s", None)]
#[case("1e3ms", None)]
#[case(".", None)]
fn go_durations(#[case] text: &str, #[case] expected: Option<u64>) {
    assert_eq!(millis(parse(text)), expected);
}

/// The config file's `imageResolution.timeout`.
#[rstest]
#[case("1s", Some(1000))]
#[case("500ms", Some(500))]
#[case("1.5s", Some(1500))]
#[case(" 2s ", Some(2000))]
#[case("1", None)]
#[case("s", None)]
#[case("1m", None)]
#[case("1e3ms", None)]
#[case("1s500ms", None)]
#[case("5us", None)]
fn durations(#[case] text: &str, #[case] expected: Option<u64>) {
    assert_eq!(millis(parse_seconds(text)), expected);
}

/// Whole numbers are read exactly, to the nanosecond, where a float
/// would round; a number as large as a `u64` still reads.
#[rstest]
#[case("1500ns", Duration::from_nanos(1500))]
#[case("3µs", Duration::from_micros(3))]
#[case("18446744073709551615s", Duration::from_secs(u64::MAX))]
#[case("1h1ns", Duration::new(3600, 1))]
fn whole_numbers_are_exact(#[case] text: &str, #[case] expected: Duration) {
    assert_eq!(parse(text), Some(expected));
}

#[test]
fn a_sum_past_the_largest_duration_is_none() {
    let huge = format!("{0}s{0}s", 10_000_000_000_000_000_000_u64);
    assert_eq!(parse(&huge), None);
}
