//! Durations as text, in Go's notation (`time.ParseDuration` without a
//! sign): one or more `<number><unit>`, `10s`, `500ms`, `1m30s`. The one
//! reader of them: the API server's `timeout` query parameter takes every
//! unit, the config file's `imageResolution.timeout` one number of `s` or
//! `ms`. Imports nothing of ours.

use std::time::Duration;

/// Every unit, in seconds.
const UNITS: [(&str, f64); 7] = [
    ("h", 3600.0),
    ("m", 60.0),
    ("s", 1.0),
    ("ms", 1e-3),
    ("us", 1e-6),
    ("µs", 1e-6),
    ("ns", 1e-9),
];

/// A Go duration: `None` when it is not one, or does not fit.
pub fn parse(text: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    for (value, seconds, _) in components(text)? {
        // Checked: a sum past `Duration::MAX` is not a duration.
        total = total.checked_add(Duration::try_from_secs_f64(value * seconds).ok()?)?;
    }
    Some(total)
}

/// One number of seconds or milliseconds (`"1s"`, `"1.5s"`, `"500ms"`),
/// blanks around it ignored: the config file's durations.
pub fn parse_seconds(text: &str) -> Option<Duration> {
    match components(text.trim())?.as_slice() {
        [(value, seconds, "s" | "ms")] => Duration::try_from_secs_f64(value * seconds).ok(),
        _ => None,
    }
}

/// The `<number><unit>` of a Go duration: the number, the unit in
/// seconds, the unit; `None` when the text is empty or not a duration.
fn components(text: &str) -> Option<Vec<(f64, f64, &str)>> {
    if text.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .filter(|&end| end > 0)?;
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let (unit, seconds) = UNITS.iter().find(|(unit, _)| *unit == &rest[..unit_end])?;
        parts.push((value, *seconds, *unit));
        rest = &rest[unit_end..];
    }
    Some(parts)
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn a_sum_past_the_largest_duration_is_none() {
        let huge = format!("{0}s{0}s", 10_000_000_000_000_000_000_u64);
        assert_eq!(parse(&huge), None);
    }
}
