//! Log lines collected in memory and written out by a thread of their own,
//! a batch at a time.
//!
//! Every admission decision is logged. Handing each line to a writer
//! thread over a channel (tracing-appender's non-blocking writer) woke that
//! thread for nearly every line under load, and it wrote each line with a
//! `write` system call of its own and yielded the CPU while it waited for
//! the next: two system calls and a thread switch per request, on the core
//! the requests are served on. Here a request thread appends its line to a
//! buffer under a lock; the writer thread, woken once when the buffer stops
//! being empty, waits [`FLUSH_INTERVAL`] for more lines and writes them all
//! in one go.
//!
//! No line is dropped: when the buffer holds [`MAX_PENDING_BYTES`], the
//! thread that logs writes the batch out itself before it goes on. Lines
//! reach the output in the order they were logged. Dropping the
//! [`FlushGuard`] writes out what is pending and stops the thread.

use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// How long the writer thread lets lines gather before it writes them: the
/// longest a line waits in memory.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(5);

/// Past this, the thread that logs writes the batch out itself.
pub const MAX_PENDING_BYTES: usize = 4 * 1024 * 1024;

struct Pending {
    lines: Vec<u8>,
    stopping: bool,
}

struct Shared {
    pending: Mutex<Pending>,
    /// Signalled when `lines` stops being empty, and at shutdown.
    wake: Condvar,
    /// Held while a batch is taken and written, so that batches reach the
    /// output in order.
    output: Mutex<Output>,
    max_pending: usize,
}

struct Output {
    sink: Box<dyn Write + Send>,
    /// The buffer of the batch before, emptied: it takes the place of the
    /// batch being written, so that lines are appended to a buffer that
    /// has its room already rather than one grown again from nothing.
    spare: Vec<u8>,
}

/// A spare buffer larger than this (a burst's) is let go.
const MAX_SPARE_BYTES: usize = 64 * 1024;

/// A lock whose holder panicked still guards consistent bytes: a line is
/// appended whole or not at all.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Writes out everything pending. Errors of the output are dropped, as
    /// a logger cannot report them anywhere else.
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
        // Once the writer thread is gone (or was never there), every line
        // is written as it comes.
        let full = pending.lines.len() >= self.max_pending || pending.stopping;
        drop(pending);
        if full {
            self.flush();
        } else if was_empty {
            self.wake.notify_one();
        }
    }

    /// The writer thread: wait for a line, let more gather, write them.
    fn run(&self) {
        loop {
            let stopping = {
                let mut pending = lock(&self.pending);
                while pending.lines.is_empty() && !pending.stopping {
                    pending = self
                        .wake
                        .wait(pending)
                        .unwrap_or_else(PoisonError::into_inner);
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

/// The `MakeWriter` of the subscriber: cheap to clone, one per event.
#[derive(Clone)]
pub struct BatchWriter {
    shared: Arc<Shared>,
}

/// Writes out what is pending and stops the writer thread when dropped.
#[must_use = "dropping the guard stops the log writer"]
pub struct FlushGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl BatchWriter {
    /// A writer onto `output`, and the guard of its thread. Without the
    /// thread (the system refused one, or the guard was dropped), lines are
    /// written as they come.
    pub fn new(output: impl Write + Send + 'static) -> (Self, FlushGuard) {
        Self::with_limit(output, MAX_PENDING_BYTES)
    }

    fn with_limit(output: impl Write + Send + 'static, max_pending: usize) -> (Self, FlushGuard) {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending {
                lines: Vec::new(),
                stopping: false,
            }),
            wake: Condvar::new(),
            output: Mutex::new(Output {
                sink: Box::new(output),
                spare: Vec::new(),
            }),
            max_pending,
        });
        let worker = shared.clone();
        let thread = thread::Builder::new()
            .name("log-writer".to_owned())
            .spawn(move || worker.run())
            .ok();
        if thread.is_none() {
            lock(&shared.pending).stopping = true;
        }
        let guard = FlushGuard {
            shared: shared.clone(),
            thread,
        };
        (Self { shared }, guard)
    }
}

impl BatchWriter {
    /// Appends one whole line.
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
