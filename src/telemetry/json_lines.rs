//! The JSON log line, written straight into the line buffer.
//!
//! Every admission decision is logged, so the line's cost is paid on every
//! request. tracing-subscriber's JSON formatter builds each line through a
//! serde serializer writing into an `io::Write` adaptor of the line buffer,
//! and checks every piece it writes for UTF-8 again. This formatter writes
//! the same line (the same keys, in the same order, with the same values)
//! directly: `{"timestamp":…,"level":…,` then the event's fields as
//! recorded, then `"target":…}`. The pieces go into a buffer the thread
//! keeps, not through a `dyn fmt::Write` call each; strings are looked over
//! for what JSON escapes eight bytes at a time; the timestamp and integers
//! are written without `fmt`'s machinery.
//!
//! It takes gpu-policy's own events outside spans, which is all the request
//! path logs. Everything else (the libraries' events, and anything inside a
//! span, whose line also lists the spans) goes to tracing-subscriber's own
//! JSON formatter, configured as before.
//!
//! [`write_line`] writes the same line for a caller that spells out the
//! event's fields itself, without tracing's dispatch and its visit of each
//! field: `telemetry::write_json_line`, for the line of every admission
//! request.

use std::cell::RefCell;
use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{Format, Json, JsonFields, Writer};
use tracing_subscriber::fmt::time::SystemTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent};
use tracing_subscriber::registry::LookupSpan;

mod timestamp;

use timestamp::Clock;

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
        with_scratch(|scratch| write_own(scratch, event, &mut writer))
    }
}

/// A line kept longer than this is let go rather than kept for the next.
const MAX_KEPT_BYTES: usize = 64 * 1024;

/// The buffers of one thread's lines, kept from one event to the next.
struct Scratch {
    line: String,
    /// A `Debug` value's text, before it is quoted.
    debug: String,
    clock: Clock,
}

impl Scratch {
    const fn new() -> Self {
        Self {
            line: String::new(),
            debug: String::new(),
            clock: Clock::new(),
        }
    }

    fn let_go_of_long_lines(&mut self) {
        for kept in [&mut self.line, &mut self.debug] {
            if kept.capacity() > MAX_KEPT_BYTES {
                *kept = String::new();
            }
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const { RefCell::new(Scratch::new()) };
}

/// Runs `write` with this thread's scratch, or a fresh one when the
/// thread's is in use (an event logged while a line is written, by a
/// field's `Debug`, say) or gone (the thread is ending).
fn with_scratch(write: impl FnOnce(&mut Scratch) -> fmt::Result) -> fmt::Result {
    let mut write = Some(write);
    let mut run =
        |scratch: &mut Scratch| write.take().map_or(Err(fmt::Error), |write| write(scratch));
    SCRATCH
        .try_with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut scratch) => run(&mut scratch),
            Err(_) => run(&mut Scratch::new()),
        })
        .unwrap_or_else(|_| run(&mut Scratch::new()))
}

/// Writes one of gpu-policy's events as a line into `scratch`, then into
/// `writer` in one piece: the pieces go into a `String` without a
/// `dyn fmt::Write` call each.
fn write_own(scratch: &mut Scratch, event: &Event<'_>, writer: &mut Writer<'_>) -> fmt::Result {
    let Scratch { line, debug, clock } = scratch;
    let meta = event.metadata();
    push_start(line, clock, meta.level())?;
    let mut fields = FieldWriter {
        line: &mut *line,
        debug,
        result: Ok(()),
    };
    event.record(&mut fields);
    fields.result?;
    push_end(line, meta.target())?;
    let written = writer.write_str(line);
    scratch.let_go_of_long_lines();
    written
}

/// Writes the line of an event of `target` at `level` whose fields
/// `fields` appends, the line [`JsonLines`] writes for that event, and
/// hands it to `output`; without tracing's dispatch, for
/// `telemetry::write_json_line`.
pub fn write_line(
    level: &Level,
    target: &str,
    fields: impl FnOnce(&mut LineFields<'_>),
    output: impl FnOnce(&str),
) -> fmt::Result {
    with_scratch(|scratch| {
        let Scratch { line, clock, .. } = scratch;
        push_start(line, clock, level)?;
        let mut line_fields = LineFields {
            line: &mut *line,
            result: Ok(()),
        };
        fields(&mut line_fields);
        line_fields.result?;
        push_end(line, target)?;
        output(line);
        scratch.let_go_of_long_lines();
        Ok(())
    })
}

/// Starts a line afresh: `{"timestamp":"…","level":"…"`.
fn push_start(line: &mut String, clock: &mut Clock, level: &Level) -> fmt::Result {
    line.clear();
    line.push_str("{\"timestamp\":\"");
    clock.push_now(line)?;
    line.push_str("\",\"level\":\"");
    line.push_str(level.as_str());
    line.push('"');
    Ok(())
}

/// Ends a line: `,"target":"…"}` and the newline.
fn push_end(line: &mut String, target: &str) -> fmt::Result {
    line.push_str(",\"target\":");
    push_json_str(line, target)?;
    line.push_str("}\n");
    Ok(())
}

/// The fields of a line written by `write_line`, appended as the fields
/// of an event are: `key` is the field's name as it is written, with the
/// comma before it and the colon after (`,"uid":`), so that the names a
/// caller spells out are copied as they are rather than looked over for
/// escaping on every line.
pub struct LineFields<'s> {
    line: &'s mut String,
    result: fmt::Result,
}

impl LineFields<'_> {
    pub fn str(&mut self, key: &str, value: &str) -> &mut Self {
        self.line.push_str(key);
        if self.result.is_ok() {
            self.result = push_json_str(self.line, value);
        }
        self
    }

    pub fn bool(&mut self, key: &str, value: bool) -> &mut Self {
        self.line.push_str(key);
        self.line.push_str(if value { "true" } else { "false" });
        self
    }

    pub fn u64(&mut self, key: &str, value: u64) -> &mut Self {
        self.line.push_str(key);
        push_u64(self.line, value);
        self
    }
}

/// Writes each field as `,"name":value`, as tracing-serde's map visitor
/// serializes it: strings and `Debug` values as JSON strings, booleans and
/// integers as they are, floats as serde_json writes them.
struct FieldWriter<'s> {
    line: &'s mut String,
    debug: &'s mut String,
    result: fmt::Result,
}

impl FieldWriter<'_> {
    fn entry(&mut self, field: &Field, value: impl FnOnce(&mut String) -> fmt::Result) {
        if self.result.is_ok() {
            self.line.push(',');
            self.result = push_json_str(self.line, field.name()).and_then(|()| {
                self.line.push(':');
                value(self.line)
            });
        }
    }
}

impl Visit for FieldWriter<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.entry(field, |line| push_json_str(line, value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.entry(field, |line| {
            line.push_str(if value { "true" } else { "false" });
            Ok(())
        });
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.entry(field, |line| {
            push_u64(line, value);
            Ok(())
        });
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.entry(field, |line| {
            if value < 0 {
                line.push('-');
            }
            push_u64(line, value.unsigned_abs());
            Ok(())
        });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // serde_json writes non-finite floats as null, and finite ones in
        // its own shortest form.
        self.entry(field, |line| {
            match serde_json::to_string(&value) {
                Ok(text) => line.push_str(&text),
                Err(_) => line.push_str("null"),
            }
            Ok(())
        });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let mut debug = std::mem::take(self.debug);
        debug.clear();
        let formatted = write!(debug, "{value:?}");
        self.entry(field, |line| {
            formatted.and_then(|()| push_json_str(line, &debug))
        });
        *self.debug = debug;
    }
}

/// Appends `value` in decimal, as `Display` writes it.
fn push_u64(line: &mut String, value: u64) {
    // u64::MAX has 20 digits.
    let mut digits = [0u8; 20];
    let mut rest = value;
    let mut start = digits.len();
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (rest % 10) as u8;
        rest /= 10;
        start -= 1;
        if rest == 0 {
            break;
        }
    }
    for &digit in digits.get(start..).unwrap_or_default() {
        line.push(char::from(digit));
    }
}

/// Appends `text` as a JSON string. Text that needs no escaping (the
/// common case: names, uids, paths) is copied as it is.
fn push_json_str(line: &mut String, text: &str) -> fmt::Result {
    if needs_escaping(text.as_bytes()) {
        return push_escaped_json_str(line, text);
    }
    line.reserve(text.len() + 2);
    line.push('"');
    line.push_str(text);
    line.push('"');
    Ok(())
}

/// Appends `text` as a JSON string, escaped by serde_json.
#[cold]
#[inline(never)]
fn push_escaped_json_str(line: &mut String, text: &str) -> fmt::Result {
    let quoted = serde_json::to_string(text).map_err(|_| fmt::Error)?;
    line.push_str(&quoted);
    Ok(())
}

/// Whether `bytes` holds a control character, a quote or a backslash,
/// looked for eight bytes at a time: the line's strings are read whole, and
/// reading them a byte at a time was the most of the line's cost.
fn needs_escaping(bytes: &[u8]) -> bool {
    let mut words = bytes.chunks_exact(8);
    if words.any(|word| word_needs_escaping(word_of(word))) {
        return true;
    }
    let tail = words.remainder();
    if tail.is_empty() {
        return false;
    }
    // The last eight bytes again, overlapping the words already read; or,
    // in text shorter than a word, the text padded with spaces.
    let last = match bytes.len().checked_sub(8).and_then(|at| bytes.get(at..)) {
        Some(last) => word_of(last),
        None => {
            let mut padded = [b' '; 8];
            if let Some(start) = padded.get_mut(..tail.len()) {
                start.copy_from_slice(tail);
            }
            u64::from_ne_bytes(padded)
        }
    };
    word_needs_escaping(last)
}

/// Eight bytes as one word; anything else as a word that needs escaping,
/// which is never wrong, only slower.
fn word_of(bytes: &[u8]) -> u64 {
    <[u8; 8]>::try_from(bytes).map_or(0, u64::from_ne_bytes)
}

fn word_needs_escaping(word: u64) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH_BITS: u64 = u64::from_ne_bytes([0x80; 8]);
    // Some byte's high bit is set when a byte of `word` is below `limit`
    // (at most 0x80): bytes of 0x80 and above never set it, and a borrow
    // only carries past a byte that is below the limit itself.
    let any_below =
        |word: u64, limit: u8| word.wrapping_sub(ONES * u64::from(limit)) & !word & HIGH_BITS != 0;
    let any_equal = |word: u64, byte: u8| any_below(word ^ (ONES * u64::from(byte)), 1);
    any_below(word, 0x20) || any_equal(word, b'"') || any_equal(word, b'\\')
}

#[cfg(test)]
mod tests;
