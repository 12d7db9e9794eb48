//! The decision's JSON log line, written straight into a line buffer: the
//! bytes tracing-subscriber's JSON formatter (`json().flatten_event(true)`)
//! writes for the same event (a test compares them), without its dispatch
//! and serializer: the record phase 25,000 instructions to 3,263 with
//! [`Clock`] (`scripts/callgrind.sh`; docs/performance.md, "Why the
//! hand-written pieces stay"). Every other event goes through the formatter.

use std::cell::RefCell;
use std::fmt;

use tracing::Level;

mod timestamp;

use timestamp::Clock;

/// A line kept longer than this is let go rather than kept for the next.
const MAX_KEPT_BYTES: usize = 64 * 1024;

struct Scratch {
    line: String,
    clock: Clock,
}

impl Scratch {
    const fn new() -> Self {
        Self { line: String::new(), clock: Clock::new() }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const { RefCell::new(Scratch::new()) };
}

/// Runs `write` with this thread's scratch, or a fresh one when it is in
/// use or gone (the thread is ending).
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

pub fn write_line(
    level: &Level,
    target: &str,
    fields: impl FnOnce(&mut LineFields<'_>),
    output: impl FnOnce(&str),
) -> fmt::Result {
    with_scratch(|scratch| {
        let Scratch { line, clock, .. } = scratch;
        push_start(line, clock, level)?;
        let mut line_fields = LineFields { line: &mut *line, result: Ok(()) };
        fields(&mut line_fields);
        line_fields.result?;
        push_end(line, target)?;
        output(line);
        if line.capacity() > MAX_KEPT_BYTES {
            *line = String::new();
        }
        Ok(())
    })
}

/// `{"timestamp":"…","level":"…"`
fn push_start(line: &mut String, clock: &mut Clock, level: &Level) -> fmt::Result {
    line.clear();
    line.push_str("{\"timestamp\":\"");
    clock.push_now(line)?;
    line.push_str("\",\"level\":\"");
    line.push_str(level.as_str());
    line.push('"');
    Ok(())
}

/// `,"target":"…"}` and the newline.
fn push_end(line: &mut String, target: &str) -> fmt::Result {
    line.push_str(",\"target\":");
    push_json_str(line, target)?;
    line.push_str("}\n");
    Ok(())
}

/// The fields of a line: `key` is written as it is, comma and colon
/// included (`,"uid":`), rather than looked over for escaping every line.
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
        self.line.push_str(itoa::Buffer::new().format(value));
        self
    }
}

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

#[cold]
#[inline(never)]
fn push_escaped_json_str(line: &mut String, text: &str) -> fmt::Result {
    let quoted = serde_json::to_string(text).map_err(|_| fmt::Error)?;
    line.push_str(&quoted);
    Ok(())
}

/// Whether `bytes` holds a control character, a quote or a backslash,
/// eight bytes at a time: a byte at a time was most of the line's cost.
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

/// Anything but eight bytes as a word that needs escaping (only slower).
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
