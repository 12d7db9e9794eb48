//! The lines of `JsonLines` are those of tracing-subscriber's JSON
//! formatter (`json().flatten_event(true)`), byte for byte but for the
//! timestamp's instant.

use std::io;

use super::needs_escaping;
use crate::telemetry::testing::{JsonFormatter, json_lines};

/// The events of the test, logged once under each formatter.
fn log_everything() {
    let error = io::Error::other("refused: \"quoted\"\nsecond line");
    tracing::info!(
        uid = "6b1f8a52-0d3e-4c1a-9f7e-2a5b8c9d0e11",
        namespace = "ml",
        name = "quote \" backslash \\ tab \t newline \n bell \u{7} del \u{7f} é 漢 🎉",
        dry_run = true,
        duration_us = 42u64,
        offset = -7i64,
        zero = 0u64,
        biggest = u64::MAX,
        smallest = i64::MIN,
        ratio = 0.1f64,
        not_a_number = f64::NAN,
        infinite = f64::INFINITY,
        whole = 2.0f64,
        wide = 1u128 << 100,
        "admission decision"
    );
    tracing::warn!(error = %error, shape = ?Some(("pod\"x", 3)), "with {} arguments", 2);
    tracing::error!(target: "gpu_policy::server", endpoint = "/mutate", "a target of its own");
    tracing::info!(target: "hyper::proto", "a library's event");
    tracing::info!("");
    let span = tracing::info_span!("reload", generation = 3u64);
    span.in_scope(|| tracing::info!(changed = "allowlist", "inside a span"));
}

fn lines_with(own: bool) -> Vec<String> {
    let formatter = if own {
        JsonFormatter::Ours
    } else {
        JsonFormatter::TracingSubscriber
    };
    json_lines(formatter, log_everything)
}

#[test]
fn lines_are_those_of_the_json_formatter() {
    let ours = lines_with(true);
    let theirs = lines_with(false);
    assert_eq!(ours.len(), 6, "{ours:#?}");
    for (ours, theirs) in ours.iter().zip(&theirs) {
        assert_eq!(ours, theirs);
    }
    assert_eq!(ours.len(), theirs.len());
}

#[test]
fn the_decision_line_keeps_its_fields_in_order() {
    let lines = lines_with(true);
    let first = &lines[0];
    let keys = [
        "\"timestamp\"",
        "\"level\":\"INFO\"",
        "\"message\":\"admission decision\"",
        "\"uid\"",
        "\"duration_us\":42",
        "\"target\":\"gpu_policy::telemetry::json_lines::tests\"",
    ];
    let mut at = 0;
    for key in keys {
        let found = first[at..]
            .find(key)
            .unwrap_or_else(|| panic!("{key} after byte {at} in {first}"));
        at += found + key.len();
    }
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
                assert_eq!(
                    needs_escaping(&text),
                    escaped(byte),
                    "{byte:#x} at {at} of {len}"
                );
                // Next to bytes of UTF-8 sequences, which are 0x80 and above.
                let mut text = vec![0xe6; len];
                text[at] = byte;
                assert_eq!(
                    needs_escaping(&text),
                    escaped(byte),
                    "{byte:#x} at {at} of {len}"
                );
            }
        }
    }
    assert!(!needs_escaping(b""));
}
