//! Log lines collected in memory and written out a batch at a time by a
//! thread of their own, which waits [`FLUSH_INTERVAL`] for more once woken:
//! tracing-appender's non-blocking writer made two system calls and a
//! thread switch per request, on the core requests are served on
//! (docs/performance.md, "Why the hand-written pieces stay"). No line is
//! dropped (past [`MAX_PENDING_BYTES`] the logging thread writes the batch
//! itself), and lines keep their order.

use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// The longest a line waits in memory.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(5);

/// Past this, the thread that logs writes the batch out itself.
pub const MAX_PENDING_BYTES: usize = 4 * 1024 * 1024;

struct Pending {
    lines: Vec<u8>,
    stopping: bool,
}

struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
    /// Held while a batch is written, so batches keep their order.
    output: Mutex<Output>,
    max_pending: usize,
}

struct Output {
    sink: Box<dyn Write + Send>,
    /// The batch before's buffer, emptied, reused for the next batch.
    spare: Vec<u8>,
}

/// A spare buffer larger than this (a burst's) is let go.
const MAX_SPARE_BYTES: usize = 64 * 1024;

/// A poisoned lock still guards whole lines.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// A logger cannot report the output's errors anywhere: dropped.
    fn flush(&self) {
        let mut output = lock(&self.output);
        let mut batch = std::mem::take(&mut output.spare);
        std::mem::swap(&mut lock(&self.pending).lines, &mut batch);
        if !batch.is_empty() {
            let _ = output.sink.write_all(&batch);
            let _ = output.sink.flush();
        }
        if batch.capacity() <= MAX_SPARE_BYTES {
            batch.clear();
            output.spare = batch;
        }
    }

    fn append(&self, line: &[u8]) {
        let mut pending = lock(&self.pending);
        let was_empty = pending.lines.is_empty();
        pending.lines.extend_from_slice(line);
        // Without the writer thread, every line is written as it comes.
        let full = pending.lines.len() >= self.max_pending || pending.stopping;
        drop(pending);
        if full {
            self.flush();
        } else if was_empty {
            self.wake.notify_one();
        }
    }

    fn run(&self) {
        loop {
            let stopping = {
                let mut pending = lock(&self.pending);
                while pending.lines.is_empty() && !pending.stopping {
                    pending = self.wake.wait(pending).unwrap_or_else(PoisonError::into_inner);
                }
                pending.stopping
            };
            if !stopping {
                thread::sleep(FLUSH_INTERVAL);
            }
            self.flush();
            if stopping {
                return;
            }
        }
    }
}

#[derive(Clone)]
pub struct BatchWriter {
    shared: Arc<Shared>,
}

#[must_use = "dropping the guard stops the log writer"]
pub struct FlushGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl BatchWriter {
    /// Without the thread (refused, or the guard dropped), lines are
    /// written as they come.
    pub fn new(output: impl Write + Send + 'static) -> (Self, FlushGuard) {
        Self::with_limit(output, MAX_PENDING_BYTES)
    }

    fn with_limit(output: impl Write + Send + 'static, max_pending: usize) -> (Self, FlushGuard) {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending { lines: Vec::new(), stopping: false }),
            wake: Condvar::new(),
            output: Mutex::new(Output { sink: Box::new(output), spare: Vec::new() }),
            max_pending,
        });
        let worker = shared.clone();
        let thread =
            thread::Builder::new().name("log-writer".to_owned()).spawn(move || worker.run()).ok();
        if thread.is_none() {
            lock(&shared.pending).stopping = true;
        }
        let guard = FlushGuard { shared: shared.clone(), thread };
        (Self { shared }, guard)
    }
}

impl BatchWriter {
    pub fn append(&self, line: &[u8]) {
        self.shared.append(line);
    }
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        lock(&self.shared.pending).stopping = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.shared.flush();
    }
}

impl Write for BatchWriter {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        self.shared.append(line);
        Ok(line.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for BatchWriter {
    type Writer = BatchWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[cfg(test)]
mod tests;
