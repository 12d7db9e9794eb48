//! [`write_json_line`] writes only into the JSON format's own subscriber,
//! and only outside spans; anywhere else it leaves the event to `tracing`.
//!
//! Also the logging room's test helpers: an output that records what
//! reaches it, and the JSON lines some code logs.

use tracing::Level;

use super::write_json_line;

const TARGET: &str = "gpu_policy::server";

/// Writes the test's line straight, or logs it through `tracing` when
/// that is declined; and tells which.
fn log_line(written_straight: &mut Vec<bool>) {
    let straight = write_json_line(&Level::WARN, TARGET, |line| {
        line.str(r#","message":"#, "a line")
            .str(r#","path":"#, "/validate/enforce")
            .str(r#","quoted":"#, "a \"b\"\n")
            .bool(r#","dry_run":"#, false)
            .u64(r#","count":"#, 18_446_744_073_709_551_615);
    });
    if !straight {
        tracing::warn!(
            target: TARGET,
            message = "a line",
            path = "/validate/enforce",
            quoted = "a \"b\"\n",
            dry_run = false,
            count = u64::MAX,
        );
    }
    written_straight.push(straight);
}

const LINE: &str = concat!(
    r#"{"timestamp":"","level":"WARN","message":"a line","path":"/validate/enforce","#,
    r#""quoted":"a \"b\"\n","dry_run":false,"count":18446744073709551615,"#,
    r#""target":"gpu_policy::server"}"#
);

#[test]
fn lines_are_written_straight_into_the_json_format_s_subscriber() {
    let mut straight = Vec::new();
    let lines = json_lines(JsonFormatter::Installed { filter: "info" }, || {
        log_line(&mut straight);
        log_line(&mut straight);
    });
    assert_eq!(straight, [true, true]);
    assert_eq!(lines, [LINE, LINE]);
}

#[test]
fn any_other_subscriber_gets_the_event() {
    let mut straight = Vec::new();
    let lines = json_lines(JsonFormatter::TracingSubscriber, || log_line(&mut straight));
    assert_eq!(straight, [false]);
    assert_eq!(lines, [LINE]);
    let mut straight = Vec::new();
    tracing::subscriber::with_default(tracing_subscriber::fmt().finish(), || {
        log_line(&mut straight)
    });
    assert_eq!(straight, [false]);
}

/// Inside a span the line lists the spans, which only tracing-subscriber's
/// formatter writes.
#[test]
fn inside_a_span_the_event_goes_through_tracing() {
    let mut straight = Vec::new();
    let lines = json_lines(JsonFormatter::Installed { filter: "info" }, || {
        let span = tracing::info_span!("reload", generation = 3u64);
        span.in_scope(|| log_line(&mut straight));
        log_line(&mut straight);
    });
    assert_eq!(straight, [false, true]);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(lines[0].contains(r#""span":{"generation":3,"name":"reload"}"#), "{}", lines[0]);
    assert_eq!(lines[1], LINE);
}

/// A field that fits is kept as it is; a longer one is cut on a character
/// boundary and says how much was left out.
#[test]
fn a_long_field_is_cut_and_says_how_much_is_left_out() {
    assert_eq!(super::bounded_field("train", 63), "train");
    assert_eq!(super::bounded_field("", 0), "");
    let long = "x".repeat(1 << 20);
    let cut = super::bounded_field(&long, 63);
    assert_eq!(cut, format!("{}… (1048513 bytes more)", "x".repeat(63)));
    // `é` is two bytes: the cut does not split it.
    assert_eq!(super::bounded_field("aé", 2), "a… (2 bytes more)");
}

// The room's test helpers, shared with the server's tests.

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
