//! The line `write_line` writes is tracing-subscriber's JSON formatter's
//! (`json().flatten_event(true)`) for the same event, byte for byte but for
//! the timestamp's instant.

use tracing::Level;

use super::{needs_escaping, write_line};
use crate::telemetry::tests::{JsonFormatter, blank_timestamp, json_lines};

const NAME: &str = "quote \" backslash \\ tab \t newline \n bell \u{7} del \u{7f} é 漢 🎉";

#[test]
fn lines_are_those_of_the_json_formatter() {
    let mut ours = String::new();
    let written = write_line(
        &Level::INFO,
        "gpu_policy::telemetry::json_lines::tests",
        |line| {
            line.str(r#","message":"#, "admission decision")
                .str(r#","name":"#, NAME)
                .str(r#","empty":"#, "")
                .bool(r#","dry_run":"#, true)
                .u64(r#","zero":"#, 0)
                .u64(r#","biggest":"#, u64::MAX);
        },
        |line| ours.push_str(line),
    );
    assert_eq!(written, Ok(()));
    let ours = blank_timestamp(ours.trim_end());
    let theirs = json_lines(JsonFormatter::TracingSubscriber, || {
        tracing::info!(
            name = NAME,
            empty = "",
            dry_run = true,
            zero = 0u64,
            biggest = u64::MAX,
            "admission decision"
        );
    });
    assert_eq!([ours], theirs.as_slice());
}

/// Whatever its place in an eight-byte word or in the tail, every byte JSON
/// escapes is found, and no other.
#[test]
fn every_byte_json_escapes_is_found_wherever_it_is() {
    let escaped = |byte: u8| byte < 0x20 || byte == b'"' || byte == b'\\';
    for len in 1..20 {
        for at in 0..len {
            for byte in 0..=u8::MAX {
                let mut text = vec![b'a'; len];
                text[at] = byte;
                assert_eq!(needs_escaping(&text), escaped(byte), "{byte:#x} at {at} of {len}");
                // Next to bytes of UTF-8 sequences, which are 0x80 and above.
                let mut text = vec![0xe6; len];
                text[at] = byte;
                assert_eq!(needs_escaping(&text), escaped(byte), "{byte:#x} at {at} of {len}");
            }
        }
    }
    assert!(!needs_escaping(b""));
}
