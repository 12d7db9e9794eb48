//! Logging setup: one place for the filter, the output format and the
//! writer.

mod json_lines;

use std::io::BufWriter;

use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::JsonFields;

pub use json_lines::JsonLines;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line, for log collectors.
    Json,
    /// Human-readable lines.
    Text,
}

/// Lines that may wait for the writer thread before a request thread that
/// logs waits for it in turn.
const BUFFERED_LINES: usize = 8 * 1024;

/// Installs the global subscriber. The filter comes from `RUST_LOG`
/// (default `info`). Calling it twice is harmless.
///
/// Lines go to stderr through a thread of their own: every admission
/// decision is logged, and this keeps a `write` system call per request off
/// the request path. The thread writes what has queued up in one go and
/// flushes whenever the queue is empty. No line is dropped: when the queue
/// is full, logging waits. Keep the returned guard until the process
/// exits; dropping it writes out what is still queued.
pub fn init(format: LogFormat) -> Option<WorkerGuard> {
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(false)
        .buffered_lines_limit(BUFFERED_LINES)
        .thread_name("log-writer")
        .finish(BufWriter::new(std::io::stderr()));
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    let installed = match format {
        LogFormat::Json => builder
            .fmt_fields(JsonFields::new())
            .event_format(JsonLines::new())
            .try_init(),
        LogFormat::Text => builder.try_init(),
    };
    // A second call keeps the first subscriber; its writer thread stops
    // with the unused guard.
    installed.ok().map(|()| guard)
}
