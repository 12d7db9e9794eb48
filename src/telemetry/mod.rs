//! Logging setup: one place for the filter, the output format and the
//! writer.

mod batch_writer;
mod json_lines;
#[cfg(test)]
mod testing;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::JsonFields;

use batch_writer::BatchWriter;
pub use batch_writer::FlushGuard;
use json_lines::JsonLines;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line, for log collectors.
    Json,
    /// Human-readable lines.
    Text,
}

/// Installs the global subscriber. The filter comes from `RUST_LOG`
/// (default `info`). Calling it twice is harmless.
///
/// Lines go to stderr through [`BatchWriter`]: every admission decision is
/// logged, and this keeps system calls and thread switches per line off the
/// request path. Keep the returned guard until the process exits; dropping
/// it writes out what is still pending.
pub fn init(format: LogFormat) -> Option<FlushGuard> {
    let (writer, guard) = BatchWriter::new(std::io::stderr());
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
