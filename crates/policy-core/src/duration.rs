//! Durations as text, in Go's notation (`time.ParseDuration` without a
//! sign): one or more `<number><unit>`, `10s`, `500ms`, `1m30s`, as the API
//! server writes its `timeout` query parameter.

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

/// The `<number><unit>` at the start of `rest`, which is moved past it.
fn next_component<'a>(rest: &mut &'a str) -> Option<Component<'a>> {
    let digits = rest.find(|c: char| !c.is_ascii_digit() && c != '.').filter(|&end| end > 0)?;
    let (number, after) = rest.split_at(digits);
    let unit_end = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
    let (unit, nanos) = UNITS.iter().find(|(unit, _)| *unit == &after[..unit_end])?;
    *rest = &after[unit_end..];
    Some(Component { number, unit, nanos: *nanos })
}

impl Component<'_> {
    fn duration(&self) -> Option<Duration> {
        match self.number.parse::<u64>() {
            // A whole number, as the API server writes its timeouts: exact, with no float parsed.
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
mod tests;
