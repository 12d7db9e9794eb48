//! Durations as text, in Go's notation (`time.ParseDuration` without a
//! sign): one or more `<number><unit>`, `10s`, `500ms`, `1m30s`. The one
//! reader of them: the API server's `timeout` query parameter takes every
//! unit, the config file's `imageResolution.timeout` one number of `s` or
//! `ms`. Imports nothing of ours.

use std::time::Duration;

/// Every unit, in nanoseconds.
const UNITS: [(&str, u64); 7] = [
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("µs", 1_000),
    ("ns", 1),
];

/// A Go duration: `None` when it is not one, or does not fit.
pub fn parse(text: &str) -> Option<Duration> {
    if text.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        // Checked: a sum past `Duration::MAX` is not a duration.
        total = total.checked_add(next_component(&mut rest)?.duration()?)?;
    }
    Some(total)
}

/// One number of seconds or milliseconds (`"1s"`, `"1.5s"`, `"500ms"`),
/// blanks around it ignored: the config file's durations.
pub fn parse_seconds(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    let component = next_component(&mut rest)?;
    match component.unit {
        "s" | "ms" if rest.is_empty() => component.duration(),
        _ => None,
    }
}

/// One `<number><unit>` of a Go duration.
struct Component<'a> {
    number: &'a str,
    unit: &'static str,
    /// The unit, in nanoseconds.
    nanos: u64,
}

/// The `<number><unit>` at the start of `rest`, which is moved past it;
/// `None` when there is none.
fn next_component<'a>(rest: &mut &'a str) -> Option<Component<'a>> {
    let digits = rest
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .filter(|&end| end > 0)?;
    let (number, after) = rest.split_at(digits);
    let unit_end = after
        .find(|c: char| c.is_ascii_digit() || c == '.')
        .unwrap_or(after.len());
    let (unit, nanos) = UNITS.iter().find(|(unit, _)| *unit == &after[..unit_end])?;
    *rest = &after[unit_end..];
    Some(Component {
        number,
        unit,
        nanos: *nanos,
    })
}

impl Component<'_> {
    fn duration(&self) -> Option<Duration> {
        match self.number.parse::<u64>() {
            // A whole number, as the API server writes its timeouts (on
            // every request): exact, and without parsing a float.
            Ok(whole) => {
                let nanos = u128::from(whole) * u128::from(self.nanos);
                let seconds = u64::try_from(nanos / 1_000_000_000).ok()?;
                let below = u32::try_from(nanos % 1_000_000_000).ok()?;
                Some(Duration::new(seconds, below))
            }
            Err(_) => {
                let value: f64 = self.number.parse().ok()?;
                #[allow(clippy::cast_precision_loss)]
                let unit = self.nanos as f64;
                Duration::try_from_secs_f64(value * unit / 1e9).ok()
            }
        }
    }
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
}
