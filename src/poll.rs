//! Re-reading on a timer: the serving certificate, the config file and the
//! certificate Secret are polled rather than watched. Kubernetes updates a
//! mounted Secret or ConfigMap by repointing the volume's `..data` symlink,
//! which file-watch events on the file itself miss; comparing bytes on a
//! timer sees every update.

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

/// What one poll of [`poll_bytes`] found.
#[derive(Debug)]
pub enum Polled<'a, B, E> {
    /// Bytes that differ from the last ones seen.
    Changed(&'a B),
    /// The source could not be read; the last bytes seen stay.
    Failed(E),
}

/// Every `every` (see [`ticker`]), reads the source with `read` and calls
/// `on_poll` with bytes that differ from the last ones seen (starting from
/// `last`, the bytes already loaded), and with every read error. Runs until
/// the task is dropped or aborted.
///
/// Bytes are reported once, whatever `on_poll` made of them: the same bytes
/// would give the same result, and a fix changes them. `B` is the bytes of
/// the source, or a tuple of them when it is several files.
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
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::sync::mpsc;

    use super::*;

    type Read = Result<Vec<u8>, &'static str>;

    /// What the next read returns, and how many reads there were.
    #[derive(Default)]
    struct Source {
        next: Mutex<(Option<Read>, u64)>,
    }

    impl Source {
        fn set(&self, value: Result<&[u8], &'static str>) {
            self.next.lock().expect("lock").0 = Some(value.map(<[u8]>::to_vec));
        }

        fn read(&self) -> Read {
            let mut next = self.next.lock().expect("lock");
            next.1 += 1;
            next.0.clone().unwrap_or(Err("unset"))
        }

        fn reads(&self) -> u64 {
            self.next.lock().expect("lock").1
        }

        /// Returns once the source was read at least once after this call.
        async fn read_again(&self) {
            // A read already under way may have seen the previous value.
            let after = self.reads() + 2;
            while self.reads() < after {
                tokio::time::sleep(MIN_INTERVAL).await;
            }
        }
    }

    /// Polls `source` every 10 ms, sending what each call of `on_poll` saw.
    fn spawn(
        source: &Arc<Source>,
        last: Option<Vec<u8>>,
    ) -> (tokio::task::JoinHandle<()>, mpsc::UnboundedReceiver<Read>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let source = Arc::clone(source);
        let task = tokio::spawn(poll_bytes(
            MIN_INTERVAL,
            last,
            move || source.read(),
            move |polled| {
                let _ = tx.send(match polled {
                    Polled::Changed(bytes) => Ok(bytes.clone()),
                    Polled::Failed(error) => Err(error),
                });
            },
        ));
        (task, rx)
    }

    async fn next(rx: &mut mpsc::UnboundedReceiver<Read>) -> Read {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("a poll reported within 10 s")
            .expect("the poll loop runs")
    }

    #[tokio::test]
    async fn reports_each_change_once_and_every_read_error() {
        let source = Arc::new(Source::default());
        source.set(Ok(b"one"));
        let (task, mut rx) = spawn(&source, Some(b"one".to_vec()));

        // The loaded bytes are not reported; the next ones are, once.
        source.read_again().await;
        source.set(Ok(b"two"));
        assert_eq!(next(&mut rx).await, Ok(b"two".to_vec()));
        source.set(Err("gone"));
        assert_eq!(next(&mut rx).await, Err("gone"));
        assert_eq!(next(&mut rx).await, Err("gone"), "reported on every poll");
        // Back to the bytes seen last: not reported again.
        source.set(Ok(b"two"));
        source.read_again().await;
        source.set(Ok(b"three"));
        let mut reported = next(&mut rx).await;
        while reported == Err("gone") {
            reported = next(&mut rx).await;
        }
        assert_eq!(reported, Ok(b"three".to_vec()));
        task.abort();
    }

    #[tokio::test]
    async fn without_loaded_bytes_the_first_read_is_a_change() {
        let source = Arc::new(Source::default());
        source.set(Ok(b"first"));
        let (task, mut rx) = spawn(&source, None);
        assert_eq!(next(&mut rx).await, Ok(b"first".to_vec()));
        task.abort();
    }
}
