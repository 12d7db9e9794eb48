//! The lines of [`JsonLines`] are those of tracing-subscriber's JSON
//! formatter (`json().flatten_event(true)`), byte for byte but for the
//! timestamp's instant.

use std::io;

use tracing_subscriber::fmt::format::JsonFields;

use super::JsonLines;
use crate::telemetry::testing::Recorded;

/// The lines written, each with its timestamp's value blanked.
fn lines_of(output: &Recorded) -> Vec<String> {
    let text = output.text();
    text.lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            assert!(value["timestamp"].is_string(), "{line}");
            let start = line.find("\"timestamp\":\"").expect("timestamp") + 13;
            let end = start + line[start..].find('"').expect("closing quote");
            format!("{}{}", &line[..start], &line[end..])
        })
        .collect()
}

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
    let captured = Recorded::default();
    let builder = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_max_level(tracing::Level::TRACE);
    let dispatch = if own {
        tracing::Dispatch::new(
            builder
                .fmt_fields(JsonFields::new())
                .event_format(JsonLines::new())
                .finish(),
        )
    } else {
        tracing::Dispatch::new(builder.json().flatten_event(true).finish())
    };
    tracing::dispatcher::with_default(&dispatch, log_everything);
    lines_of(&captured)
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
