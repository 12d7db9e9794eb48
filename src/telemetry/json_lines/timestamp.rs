//! The line's timestamp, as tracing-subscriber's `SystemTime` writes it:
//! RFC 3339 in UTC with microseconds, `2026-12-03T09:41:07.123456Z`.
//!
//! tracing-subscriber writes it through seven `write!`s of padded numbers,
//! about 2,000 instructions a line. Lines come many to a second, so each
//! thread keeps the text of the last second it wrote ([`Clock`]) and adds
//! only the microseconds. Instants its arithmetic does not cover (before
//! 1970, after the year 9999) are left to tracing-subscriber.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

const SECONDS_PER_DAY: u64 = 86_400;
/// 10000-01-01T00:00:00Z.
const END_OF_YEAR_9999: u64 = 253_402_300_800;

/// The text of the last second a thread wrote.
pub struct Clock {
    second: Option<u64>,
    /// `YYYY-MM-DDTHH:MM:SS.` of `second`.
    text: String,
}

impl Clock {
    pub const fn new() -> Self {
        Self {
            second: None,
            text: String::new(),
        }
    }

    /// Appends the current time to `line`.
    pub fn push_now(&mut self, line: &mut String) -> fmt::Result {
        match since_epoch_in_range(SystemTime::now()) {
            Some(since_epoch) => {
                self.push(line, since_epoch);
                Ok(())
            }
            None => tracing_subscriber::fmt::time::SystemTime.format_time(&mut Writer::new(line)),
        }
    }

    fn push(&mut self, line: &mut String, since_epoch: Duration) {
        let second = since_epoch.as_secs();
        if self.second != Some(second) {
            self.text.clear();
            push_second(&mut self.text, second);
            self.second = Some(second);
        }
        line.push_str(&self.text);
        push_digits(line, u64::from(since_epoch.subsec_micros()), 6);
        line.push('Z');
    }
}

/// The time since the epoch, for instants from 1970 to the end of the year
/// 9999.
fn since_epoch_in_range(instant: SystemTime) -> Option<Duration> {
    instant
        .duration_since(UNIX_EPOCH)
        .ok()
        .filter(|since| since.as_secs() < END_OF_YEAR_9999)
}

/// Appends `YYYY-MM-DDTHH:MM:SS.` of the second `seconds` after the epoch.
fn push_second(text: &mut String, seconds: u64) {
    let (year, month, day) = civil_from_days(seconds / SECONDS_PER_DAY);
    let of_day = seconds % SECONDS_PER_DAY;
    for (value, digits, then) in [
        (year, 4, '-'),
        (month, 2, '-'),
        (day, 2, 'T'),
        (of_day / 3600, 2, ':'),
        (of_day / 60 % 60, 2, ':'),
        (of_day % 60, 2, '.'),
    ] {
        push_digits(text, value, digits);
        text.push(then);
    }
}

/// Appends the last `digits` decimal digits of `value`, zero-padded.
fn push_digits(text: &mut String, value: u64, digits: u32) {
    for place in (0..digits).rev() {
        let digit = value / 10u64.pow(place) % 10;
        text.push(char::from(b'0' + digit as u8));
    }
}

/// Year, month and day of the proleptic Gregorian calendar, `days` after
/// 1970-01-01 (Howard Hinnant's `civil_from_days`, for days on or after
/// the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Counted from 0000-03-01, so that a leap day ends its year.
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests;
