//! The JSON log line, written straight into the line buffer.
//!
//! Every admission decision is logged, so the line's cost is paid on every
//! request. tracing-subscriber's JSON formatter builds each line through a
//! serde serializer writing into an `io::Write` adaptor of the line buffer,
//! and checks every piece it writes for UTF-8 again; for the decision line
//! that came to about 22,000 instructions, more than the rules. This
//! formatter writes the same line (the same keys, in the same order, with
//! the same values) directly: `{"timestamp":…,"level":…,` then the event's
//! fields as recorded, then `"target":…}`.
//!
//! It takes gpu-policy's own events outside spans, which is all the request
//! path logs. Everything else (the libraries' events, and anything inside a
//! span, whose line also lists the spans) goes to tracing-subscriber's own
//! JSON formatter, configured as before.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{Format, Json, JsonFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent};
use tracing_subscriber::registry::LookupSpan;

/// The events this formatter writes itself: those of this crate.
const OWN_TARGET: &str = "gpu_policy";

/// gpu-policy's JSON lines; see the module documentation.
pub struct JsonLines {
    fallback: Format<Json, SystemTime>,
}

impl JsonLines {
    pub fn new() -> Self {
        Self {
            fallback: Format::default().json().flatten_event(true),
        }
    }
}

impl Default for JsonLines {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> FormatEvent<S, JsonFields> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let own = meta.target() == OWN_TARGET
            || meta
                .target()
                .strip_prefix(OWN_TARGET)
                .is_some_and(|rest| rest.starts_with("::"));
        let in_span = event.parent().is_some() || ctx.lookup_current().is_some();
        if !own || in_span {
            return self.fallback.format_event(ctx, writer, event);
        }
        writer.write_str("{\"timestamp\":\"")?;
        SystemTime.format_time(&mut writer)?;
        writer.write_str("\",\"level\":\"")?;
        writer.write_str(meta.level().as_str())?;
        writer.write_char('"')?;
        let mut fields = FieldWriter {
            writer: &mut writer,
            result: Ok(()),
            scratch: String::new(),
        };
        event.record(&mut fields);
        fields.result?;
        writer.write_str(",\"target\":")?;
        write_json_str(&mut writer, meta.target())?;
        writer.write_str("}\n")
    }
}

/// Writes each field as `,"name":value`, as tracing-serde's map visitor
/// serializes it: strings and `Debug` values as JSON strings, booleans and
/// integers as they are, floats as serde_json writes them.
struct FieldWriter<'w, 'b> {
    writer: &'w mut Writer<'b>,
    result: fmt::Result,
    /// A `Debug` value's text, before it is quoted.
    scratch: String,
}

impl FieldWriter<'_, '_> {
    fn entry(&mut self, field: &Field, value: impl FnOnce(&mut Writer<'_>) -> fmt::Result) {
        if self.result.is_ok() {
            self.result = self
                .writer
                .write_char(',')
                .and_then(|()| write_json_str(self.writer, field.name()))
                .and_then(|()| self.writer.write_char(':'))
                .and_then(|()| value(self.writer));
        }
    }
}

impl Visit for FieldWriter<'_, '_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.entry(field, |w| write_json_str(w, value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.entry(field, |w| w.write_str(if value { "true" } else { "false" }));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.entry(field, |w| write!(w, "{value}"));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.entry(field, |w| write!(w, "{value}"));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // serde_json writes non-finite floats as null, and finite ones in
        // its own shortest form.
        self.entry(field, |w| match serde_json::to_string(&value) {
            Ok(text) => w.write_str(&text),
            Err(_) => w.write_str("null"),
        });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let formatted = write!(scratch, "{value:?}");
        self.entry(field, |w| {
            formatted.and_then(|()| write_json_str(w, &scratch))
        });
        self.scratch = scratch;
    }
}

/// Writes `text` as a JSON string. Text that needs no escaping (the common
/// case: names, uids, paths) is copied as it is; anything else is escaped
/// by serde_json.
fn write_json_str(writer: &mut Writer<'_>, text: &str) -> fmt::Result {
    let plain = text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\');
    if plain {
        writer.write_char('"')?;
        writer.write_str(text)?;
        writer.write_char('"')
    } else {
        let quoted = serde_json::to_string(text).map_err(|_| fmt::Error)?;
        writer.write_str(&quoted)
    }
}

#[cfg(test)]
mod tests;
