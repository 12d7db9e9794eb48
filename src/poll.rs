//! Re-reading on a timer: Kubernetes updates a mounted Secret or ConfigMap
//! by repointing the volume's `..data` symlink, which file-watch events on
//! the file miss; comparing bytes on a timer sees every update.

use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior};

/// The shortest interval: `tokio::time::interval` panics on zero.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// A ticker for a poll loop: the first tick comes after `every` (at least
/// [`MIN_INTERVAL`]), since the caller has just read what it polls; a tick
/// that comes late delays the next ones rather than bursting.
pub fn ticker(every: Duration) -> Interval {
    let every = every.max(MIN_INTERVAL);
    let mut interval = tokio::time::interval_at(Instant::now() + every, every);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

#[derive(Debug)]
pub enum Polled<'a, B, E> {
    Changed(&'a B),
    /// The last bytes seen stay.
    Failed(E),
}

/// Every `every`, calls `on_poll` with what `read` gives when it differs
/// from the last bytes seen (at first `last`), and with every read error.
/// Bytes are reported once, whatever `on_poll` made of them: the same
/// bytes would give the same result, and a fix changes them.
pub async fn poll_bytes<B: PartialEq, E>(
    every: Duration,
    mut last: Option<B>,
    mut read: impl FnMut() -> Result<B, E>,
    mut on_poll: impl FnMut(Polled<'_, B, E>),
) {
    let mut ticker = ticker(every);
    loop {
        ticker.tick().await;
        match read() {
            Ok(bytes) if last.as_ref() == Some(&bytes) => {}
            Ok(bytes) => {
                on_poll(Polled::Changed(&bytes));
                last = Some(bytes);
            }
            Err(error) => on_poll(Polled::Failed(error)),
        }
    }
}

#[cfg(test)]
mod tests;
