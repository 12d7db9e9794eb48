//! The test helpers of the logging room: an output that records what
//! reaches it, and the JSON lines some code logs.

use std::io;
use std::sync::{Arc, Mutex};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use super::batch_writer::BatchWriter;

/// Records the bytes written to it, and in how many writes.
#[derive(Clone, Default)]
pub struct RecordedOutput {
    bytes: Arc<Mutex<Vec<u8>>>,
    writes: Arc<Mutex<usize>>,
}

impl io::Write for RecordedOutput {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.bytes.lock().expect("lock").extend_from_slice(bytes);
        *self.writes.lock().expect("lock") += 1;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for RecordedOutput {
    type Writer = RecordedOutput;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl RecordedOutput {
    pub fn text(&self) -> String {
        String::from_utf8(self.bytes.lock().expect("lock").clone()).expect("UTF-8")
    }

    pub fn writes(&self) -> usize {
        *self.writes.lock().expect("lock")
    }
}

/// The JSON formatter of a test's lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonFormatter {
    /// The subscriber `init` installs for the JSON format, with this
    /// filter, into a [`BatchWriter`]: the one
    /// `telemetry::write_json_line` writes through.
    Installed { filter: &'static str },
    /// tracing-subscriber's, `json().flatten_event(true)`.
    TracingSubscriber,
}

/// The lines `log` writes through `formatter`, each with its timestamp's
/// value blanked.
pub fn json_lines(formatter: JsonFormatter, log: impl FnOnce()) -> Vec<String> {
    let captured = RecordedOutput::default();
    let builder = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_max_level(tracing::Level::TRACE);
    match formatter {
        JsonFormatter::Installed { filter } => {
            let (writer, guard) = BatchWriter::new(captured.clone());
            let subscriber = super::json_subscriber(EnvFilter::new(filter), writer);
            tracing::dispatcher::with_default(&tracing::Dispatch::new(subscriber), log);
            // Writes out what is pending.
            drop(guard);
        }
        JsonFormatter::TracingSubscriber => {
            let subscriber = builder.json().flatten_event(true).finish();
            tracing::dispatcher::with_default(&tracing::Dispatch::new(subscriber), log);
        }
    }
    captured.text().lines().map(blank_timestamp).collect()
}

/// A JSON line with its timestamp's value blanked.
pub fn blank_timestamp(line: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
    assert!(value["timestamp"].is_string(), "{line}");
    let start = line.find("\"timestamp\":\"").expect("timestamp") + 13;
    let end = start + line[start..].find('"').expect("closing quote");
    format!("{}{}", &line[..start], &line[end..])
}
