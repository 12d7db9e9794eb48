//! Logging setup: the filter, the output format and the writer.

mod batch_writer;
mod json_lines;
pub mod labels;
#[cfg(test)]
pub(crate) mod tests;

use std::borrow::Cow;

use tracing::Level;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::{Format, Json, JsonFields};
use tracing_subscriber::fmt::time::SystemTime;
use tracing_subscriber::util::SubscriberInitExt;

use batch_writer::BatchWriter;
pub use batch_writer::FlushGuard;
pub use json_lines::LineFields;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line, for log collectors.
    Json,
    /// Human-readable lines.
    Text,
}

/// The subscriber of the JSON format, the only one [`write_json_line`]
/// writes into.
type JsonSubscriber = tracing_subscriber::fmt::Subscriber<
    JsonFields,
    Format<Json, SystemTime>,
    EnvFilter,
    BatchWriter,
>;

fn json_subscriber(filter: EnvFilter, writer: BatchWriter) -> JsonSubscriber {
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_env_filter(filter)
        .with_writer(writer)
        .finish()
}

/// Installs the global subscriber, filtered by `RUST_LOG` (default
/// `info`), writing to stderr through `BatchWriter`. Keep the guard until
/// the process exits: dropping it writes out what is pending.
pub fn init(format: LogFormat) -> Option<FlushGuard> {
    let (writer, guard) = BatchWriter::new(std::io::stderr());
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let installed = match format {
        LogFormat::Json => json_subscriber(filter, writer).try_init().is_ok(),
        LogFormat::Text => {
            tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).try_init().is_ok()
        }
    };
    // A second call keeps the first subscriber.
    installed.then_some(guard)
}

/// `text` in at most `max` bytes, else cut with `… (1048576 bytes more)`:
/// log collectors refuse or drop lines with long fields, and a request
/// writes most of what is logged of it.
pub fn bounded_field(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let kept = crate::policy::message::prefix_within(text, max);
    Cow::Owned(format!("{kept}… ({} bytes more)", text.len() - kept.len()))
}

/// Writes the line the JSON subscriber would write for an event whose
/// fields `fields` appends, straight into its buffer (json_lines.rs says
/// why). False, having written nothing, unless the subscriber is the JSON
/// one and no span is entered. The caller checks `tracing::enabled!`.
pub fn write_json_line(
    level: &Level,
    target: &str,
    fields: impl FnOnce(&mut LineFields<'_>),
) -> bool {
    let mut fields = Some(fields);
    tracing::dispatcher::get_default(|dispatch| {
        if !dispatch.is::<JsonSubscriber>() || dispatch.current_span().id().is_some() {
            return false;
        }
        let (Some(writer), Some(fields)) = (dispatch.downcast_ref::<BatchWriter>(), fields.take())
        else {
            return false;
        };
        json_lines::write_line(level, target, fields, |line| writer.append(line.as_bytes())).is_ok()
    })
}
