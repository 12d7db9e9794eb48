//! [`write_json_line`] writes only into the JSON format's own subscriber,
//! and only outside spans; anywhere else it leaves the event to `tracing`.

use tracing::Level;

use super::testing::{JsonFormatter, json_lines};
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
    assert!(
        lines[0].contains(r#""span":{"generation":3,"name":"reload"}"#),
        "{}",
        lines[0]
    );
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
