use serde_json::json;

use super::*;
use crate::policy::RuleId;
use crate::telemetry::tests::{JsonFormatter, RecordedOutput, json_lines};
use gpu_policy_test_support::review::Review;

/// Records a decision of a pod that has only a generated name.
fn record_a_decision() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "train-\"quoted\"-"}, "spec": {}});
    let body =
        Review::create(&pod, "ml").uid("6b1f8a52-0d3e-4c1a-9f7e-2a5b8c9d0e11").dry_run(true).body();
    let request = crate::admission::decode(&body).expect("a review");
    let mut answer = Answer { allowed: true, encoded_patch: b"[]".to_vec(), ..Answer::default() };
    answer.changes.insert(RuleId::RuntimeClass);
    answer.violations.insert(RuleId::DevicePaths);
    let outcome = Outcome {
        endpoint: Endpoint::Mutate,
        latency: Duration::from_micros(80),
        result: Ok(Answered {
            request: &request,
            answer: &answer,
            took: Duration::from_micros(42),
        }),
    };
    record(&Metrics::new(), &outcome);
}

/// The same decision's line as it was logged before: the message as
/// the macro's format string.
fn log_as_before() {
    tracing::info!(
        target: LOG_TARGET,
        uid = "6b1f8a52-0d3e-4c1a-9f7e-2a5b8c9d0e11",
        namespace = "ml",
        kind = "Pod",
        name = "train-\"quoted\"-",
        operation = "CREATE",
        endpoint = "/mutate",
        dry_run = true,
        decision = "mutated",
        rules = "runtime-class,device-paths",
        duration_us = 42u64,
        "admission decision"
    );
}

/// The decision's line, and the line logged as before.
fn decision_lines(formatter: JsonFormatter) -> (Vec<String>, Vec<String>) {
    (json_lines(formatter, record_a_decision), json_lines(formatter, log_as_before))
}

#[test]
fn the_decision_line_is_the_one_of_the_format_string_message() {
    for formatter in [JsonFormatter::Installed { filter: "info" }, JsonFormatter::TracingSubscriber]
    {
        let (recorded, as_before) = decision_lines(formatter);
        assert_eq!(recorded, as_before, "{formatter:?}");
        assert_eq!(
            recorded,
            [concat!(
                r#"{"timestamp":"","level":"INFO","message":"admission decision","#,
                r#""uid":"6b1f8a52-0d3e-4c1a-9f7e-2a5b8c9d0e11","namespace":"ml","#,
                r#""kind":"Pod","name":"train-\"quoted\"-","operation":"CREATE","#,
                r#""endpoint":"/mutate","dry_run":true,"decision":"mutated","#,
                r#""rules":"runtime-class,device-paths","duration_us":42,"#,
                r#""target":"gpu_policy::server"}"#
            )],
            "{formatter:?}"
        );
    }
}

#[test]
fn the_text_line_is_the_one_of_the_format_string_message() {
    let text_of = |log: fn()| {
        let captured = RecordedOutput::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(captured.clone())
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        captured.text()
    };
    let recorded = text_of(record_a_decision);
    assert_eq!(recorded, text_of(log_as_before));
    assert!(
        recorded.starts_with(
            " INFO gpu_policy::server: admission decision \
                 uid=\"6b1f8a52-0d3e-4c1a-9f7e-2a5b8c9d0e11\""
        ),
        "{recorded}"
    );
}

/// `RUST_LOG=gpu_policy::server=warn` turns the decision line off, on
/// the line written straight as on the event.
#[test]
fn a_filter_turns_the_decision_line_off() {
    let filter = "info,gpu_policy::server=warn";
    let (recorded, as_before) = decision_lines(JsonFormatter::Installed { filter });
    assert_eq!(recorded, as_before);
    assert!(recorded.is_empty(), "{recorded:#?}");
}

/// What a request writes at length is cut in its decision line, and
/// its kind is one of the metrics' kinds.
#[test]
fn the_decision_line_of_megabyte_strings_is_short() {
    let long = |letter: &str| letter.repeat(1 << 20);
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": long("n")}, "spec": {}});
    let mut review = Review::create(&pod, &long("s")).uid(&long("u")).json();
    review["request"]["kind"]["kind"] = json!(long("k"));
    let body = serde_json::to_vec(&review).expect("a review");
    let request = crate::admission::decode(&body).expect("a review");
    let answer = Answer::ignored();
    let outcome = Outcome {
        endpoint: Endpoint::Validate(crate::admission::Mode::Audit),
        latency: Duration::from_micros(80),
        result: Ok(Answered {
            request: &request,
            answer: &answer,
            took: Duration::from_micros(42),
        }),
    };
    let lines = json_lines(JsonFormatter::Installed { filter: "info" }, || {
        record(&Metrics::new(), &outcome)
    });
    let [line] = lines.as_slice() else { panic!("{lines:?}") };
    assert!(line.len() < 1024, "{} bytes", line.len());
    let line: serde_json::Value = serde_json::from_str(line).expect("JSON");
    assert_eq!(line["kind"], "other");
    let more = (1 << 20) - UID_BYTES;
    assert_eq!(line["uid"], format!("{}… ({more} bytes more)", "u".repeat(UID_BYTES)));
    let more = (1 << 20) - NAMESPACE_BYTES;
    assert_eq!(line["namespace"], format!("{}… ({more} bytes more)", "s".repeat(NAMESPACE_BYTES)));
    let more = (1 << 20) - NAME_BYTES;
    assert_eq!(line["name"], format!("{}… ({more} bytes more)", "n".repeat(NAME_BYTES)));
}

#[test]
fn rules_are_listed_changes_first_and_all_fit() {
    let mut answer = Answer::denied("denied");
    assert_eq!(RuleList::of(&answer).as_str(), "");
    answer.violations.insert(RuleId::BoundedRequests);
    assert_eq!(RuleList::of(&answer).as_str(), "bounded-requests");
    answer.changes.insert(RuleId::RuntimeClass);
    answer.changes.insert(RuleId::VisibleDevices);
    answer.violations.insert(RuleId::BoundedRequests);
    assert_eq!(RuleList::of(&answer).as_str(), "visible-devices,runtime-class,bounded-requests");
    answer.changes.extend(RuleId::ALL.iter().copied());
    answer.violations.extend(RuleId::ALL.iter().copied());
    let everything = answer
        .changes
        .iter()
        .chain(answer.violations)
        .map(|rule| rule.as_str())
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(RuleList::of(&answer).as_str(), everything);
}
