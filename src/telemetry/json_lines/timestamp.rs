//! The line's timestamp as tracing-subscriber's `SystemTime` writes it,
//! `2026-12-03T09:41:07.123456Z`: it takes seven `write!`s, about 2,000
//! instructions a line, where each thread here keeps the text of its last
//! second ([`Clock`]) and adds the microseconds. Instants outside 1970 to
//! jiff's last are left to tracing-subscriber.

use std::fmt::{self, Write as _};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

pub struct Clock {
    second: Option<u64>,
    /// `YYYY-MM-DDTHH:MM:SS.` of `second`.
    text: String,
}

impl Clock {
    pub const fn new() -> Self {
        Self { second: None, text: String::new() }
    }

    pub fn push_now(&mut self, line: &mut String) -> fmt::Result {
        match since_epoch_in_range(SystemTime::now()) {
            Some(since_epoch) => self.push(line, since_epoch),
            None => tracing_subscriber::fmt::time::SystemTime.format_time(&mut Writer::new(line)),
        }
    }

    fn push(&mut self, line: &mut String, since_epoch: Duration) -> fmt::Result {
        let second = since_epoch.as_secs();
        if self.second != Some(second) {
            let at = i64::try_from(second)
                .ok()
                .and_then(|second| jiff::Timestamp::from_second(second).ok())
                .ok_or(fmt::Error)?;
            // `2026-12-03T09:41:07Z`, a whole second, without its `Z`.
            self.text.clear();
            write!(self.text, "{at}")?;
            self.text.pop();
            self.text.push('.');
            self.second = Some(second);
        }
        line.push_str(&self.text);
        let micros = since_epoch.subsec_micros();
        for place in (0..6).rev() {
            let digit = micros / 10u32.pow(place) % 10;
            line.push(char::from(b'0' + digit as u8));
        }
        line.push('Z');
        Ok(())
    }
}

fn since_epoch_in_range(instant: SystemTime) -> Option<Duration> {
    instant.duration_since(UNIX_EPOCH).ok().filter(|since| {
        i64::try_from(since.as_secs())
            .is_ok_and(|second| second <= jiff::Timestamp::MAX.as_second())
    })
}

#[cfg(test)]
mod tests;
