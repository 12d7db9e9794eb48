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
