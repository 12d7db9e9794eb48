//! The one place an admission request is recorded: the request counter, the
//! rule findings, the latency histogram and the decision log line.
//!
//! A request writes most of what is recorded of it, so nothing it writes
//! is recorded as it is: the metrics' labels come from closed lists (the
//! kind is one the webhooks are registered for, else `other`), and the log
//! line's kind too; its other strings are cut to the longest value the API
//! server itself accepts ([`UID_BYTES`], [`NAMESPACE_BYTES`],
//! [`NAME_BYTES`]), saying how much was left out.

use std::borrow::Cow;
use std::time::Duration;

use tracing::Level;

use super::RequestError;
use crate::admission::{AdmissionRequest, DecisionKind, Endpoint, Verdict};
use crate::metrics::{AdmissionMetrics, Finding, Metrics, kind_label, operation_name};
use crate::telemetry::{self, LineFields, bounded_field};

/// The target of the log lines: the HTTP layer's module, which log filters
/// name (`RUST_LOG=gpu_policy::server=warn`).
const LOG_TARGET: &str = "gpu_policy::server";

/// The longest uid logged: the API server's are UUIDs, 36 bytes.
pub const UID_BYTES: usize = 128;
/// The longest namespace logged: a DNS label, 63 bytes.
pub const NAMESPACE_BYTES: usize = 63;
/// The longest name logged: a DNS subdomain, 253 bytes.
pub const NAME_BYTES: usize = 253;
/// The longest reason logged for a request refused as malformed: the
/// reason may quote what the request sent (its apiVersion, its kind).
pub const ERROR_BYTES: usize = 512;

/// What became of one request on one endpoint.
pub struct Outcome<'a> {
    pub endpoint: Endpoint,
    /// From the request's arrival to its encoded answer (or refusal).
    pub latency: Duration,
    /// The decision, or why the request could not be answered.
    pub result: Result<Decided<'a>, &'a RequestError>,
}

/// A request that was read and decided.
pub struct Decided<'a> {
    pub request: &'a AdmissionRequest<'a>,
    pub verdict: &'a Verdict,
    /// From the request's arrival to the decision.
    pub took: Duration,
}

/// Counts the request and its findings, observes its latency and writes
/// its log line.
pub fn record(metrics: &Metrics, outcome: &Outcome<'_>) {
    let metrics = &metrics.admission;
    match &outcome.result {
        Ok(decided) => record_decision(metrics, outcome.endpoint, decided),
        Err(error) => {
            metrics.count_request(outcome.endpoint, "", None, DecisionKind::BadRequest);
            let endpoint = outcome.endpoint.path();
            let error = error.to_string();
            let error = bounded_field(&error, ERROR_BYTES);
            tracing::warn!(target: LOG_TARGET, endpoint, error = &*error, "bad admission request");
        }
    }
    metrics.observe_latency(outcome.endpoint, outcome.latency.as_secs_f64());
}

fn record_decision(metrics: &AdmissionMetrics, endpoint: Endpoint, decided: &Decided<'_>) {
    let Decided {
        request, verdict, ..
    } = decided;
    metrics.count_request(
        endpoint,
        &request.kind.kind,
        Some(&request.operation),
        verdict.decision,
    );
    for (rules, finding) in [
        (&verdict.changes, Finding::Change),
        (&verdict.violations, Finding::Violation),
    ] {
        for rule in rules {
            metrics.count_finding(rule, finding);
        }
    }
    // Pods created by controllers have no name yet, only generateName.
    let name = Some(&*request.name)
        .filter(|name| !name.is_empty())
        .or_else(|| {
            let metadata = request.object.as_ref()?.json().get("metadata")?;
            metadata
                .get("name")
                .or_else(|| metadata.get("generateName"))?
                .as_str()
        })
        .unwrap_or("");
    let line = DecisionLine {
        uid: bounded_field(&request.uid, UID_BYTES),
        namespace: bounded_field(request.namespace.as_deref().unwrap_or(""), NAMESPACE_BYTES),
        kind: kind_label(&request.kind.kind),
        name: bounded_field(name, NAME_BYTES),
        operation: operation_name(&request.operation),
        endpoint: endpoint.path(),
        dry_run: request.dry_run,
        decision: verdict.decision.as_str(),
        rules: RuleList::of(verdict),
        duration_us: decided.took.as_micros() as u64,
    };
    line.log();
}

/// The fields of the decision's log line, in their order.
struct DecisionLine<'a> {
    uid: Cow<'a, str>,
    namespace: Cow<'a, str>,
    kind: &'static str,
    name: Cow<'a, str>,
    operation: &'static str,
    endpoint: &'static str,
    dry_run: bool,
    decision: &'static str,
    rules: RuleList,
    duration_us: u64,
}

impl DecisionLine<'_> {
    /// Writes the line straight into the JSON log when that is where lines
    /// go (see `telemetry::write_json_line`), and logs it through `tracing`
    /// otherwise: the same line either way (a test holds the two to the
    /// same bytes).
    fn log(&self) {
        let enabled = tracing::enabled!(
            kind: tracing::metadata::Kind::EVENT,
            target: LOG_TARGET,
            Level::INFO,
            {
                message, uid, namespace, kind, name, operation, endpoint, dry_run, decision,
                rules, duration_us
            }
        );
        if !(enabled
            && telemetry::write_json_line(&Level::INFO, LOG_TARGET, |line| self.json_fields(line)))
        {
            self.log_through_tracing();
        }
    }

    fn json_fields(&self, line: &mut LineFields<'_>) {
        line.str(r#","message":"#, "admission decision")
            .str(r#","uid":"#, &self.uid)
            .str(r#","namespace":"#, &self.namespace)
            .str(r#","kind":"#, self.kind)
            .str(r#","name":"#, &self.name)
            .str(r#","operation":"#, self.operation)
            .str(r#","endpoint":"#, self.endpoint)
            .bool(r#","dry_run":"#, self.dry_run)
            .str(r#","decision":"#, self.decision)
            .str(r#","rules":"#, self.rules.as_str())
            .u64(r#","duration_us":"#, self.duration_us);
    }

    fn log_through_tracing(&self) {
        // Plain `&str` fields: the JSON formatter writes them as they are,
        // where `%` fields would be formatted into a string first. The
        // message too: a `&str` field named `message`, first as the macro
        // would put a format string, makes the same line (and the same text
        // line) without formatting it through `fmt::Arguments`.
        tracing::info!(
            target: LOG_TARGET,
            message = "admission decision",
            uid = &*self.uid,
            namespace = &*self.namespace,
            kind = self.kind,
            name = &*self.name,
            operation = self.operation,
            endpoint = self.endpoint,
            dry_run = self.dry_run,
            decision = self.decision,
            rules = self.rules.as_str(),
            duration_us = self.duration_us,
        );
    }
}

/// Room for every rule id twice (a change and a violation), with commas.
const RULE_LIST_BYTES: usize = 256;

/// The log line's `rules`: the ids of the changes, then of the violations,
/// comma-separated. No rule or one is a static string; more are written on
/// the stack rather than collected into a `Vec` and joined into a `String`
/// on every request.
// It lives on the stack of one call; boxing the large variant would be the
// allocation it is there to save.
#[allow(clippy::large_enum_variant)]
enum RuleList {
    Static(&'static str),
    Joined {
        text: [u8; RULE_LIST_BYTES],
        len: usize,
    },
}

impl RuleList {
    fn of(verdict: &Verdict) -> Self {
        let mut rules = verdict.changes.iter().chain(&verdict.violations);
        match (rules.next(), rules.next()) {
            (None, _) => RuleList::Static(""),
            (Some(only), None) => RuleList::Static(only.as_str()),
            (Some(first), Some(second)) => {
                let mut text = [0; RULE_LIST_BYTES];
                let mut len = 0;
                for (at, rule) in [first, second].into_iter().chain(rules).enumerate() {
                    for piece in [if at > 0 { "," } else { "" }, rule.as_str()] {
                        let end = len + piece.len();
                        // Every list fits (a test holds it to that).
                        if let Some(slot) = text.get_mut(len..end) {
                            slot.copy_from_slice(piece.as_bytes());
                            len = end;
                        }
                    }
                }
                RuleList::Joined { text, len }
            }
        }
    }

    fn as_str(&self) -> &str {
        match self {
            RuleList::Static(text) => text,
            RuleList::Joined { text, len } => text
                .get(..*len)
                .and_then(|text| std::str::from_utf8(text).ok())
                .unwrap_or(""),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::RuleId;
    use crate::review_builder::Review;
    use crate::telemetry::testing::{JsonFormatter, Recorded, json_lines};

    /// Records a decision of a pod that has only a generated name.
    fn record_a_decision() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "train-\"quoted\"-"}, "spec": {}});
        let body = Review::create(&pod, "ml")
            .uid("6b1f8a52-0d3e-4c1a-9f7e-2a5b8c9d0e11")
            .dry_run(true)
            .body();
        let request = crate::admission::decode(&body).expect("a review");
        let mut verdict = Verdict::new(DecisionKind::Mutated);
        verdict.changes.insert(RuleId::RuntimeClass);
        verdict.violations.insert(RuleId::DevicePaths);
        let outcome = Outcome {
            endpoint: Endpoint::Mutate,
            latency: Duration::from_micros(80),
            result: Ok(Decided {
                request: &request,
                verdict: &verdict,
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
        (
            json_lines(formatter, record_a_decision),
            json_lines(formatter, log_as_before),
        )
    }

    #[test]
    fn the_decision_line_is_the_one_of_the_format_string_message() {
        for formatter in [
            JsonFormatter::Installed { filter: "info" },
            JsonFormatter::Ours,
            JsonFormatter::TracingSubscriber,
        ] {
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
            let captured = Recorded::default();
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
        let verdict = Verdict::new(DecisionKind::Ignored);
        let outcome = Outcome {
            endpoint: Endpoint::Validate(crate::admission::Mode::Audit),
            latency: Duration::from_micros(80),
            result: Ok(Decided {
                request: &request,
                verdict: &verdict,
                took: Duration::from_micros(42),
            }),
        };
        let lines = json_lines(JsonFormatter::Ours, || record(&Metrics::new(), &outcome));
        let [line] = lines.as_slice() else {
            panic!("{lines:?}")
        };
        assert!(line.len() < 1024, "{} bytes", line.len());
        let line: serde_json::Value = serde_json::from_str(line).expect("JSON");
        assert_eq!(line["kind"], "other");
        let more = (1 << 20) - UID_BYTES;
        assert_eq!(
            line["uid"],
            format!("{}… ({more} bytes more)", "u".repeat(UID_BYTES))
        );
        let more = (1 << 20) - NAMESPACE_BYTES;
        assert_eq!(
            line["namespace"],
            format!("{}… ({more} bytes more)", "s".repeat(NAMESPACE_BYTES))
        );
        let more = (1 << 20) - NAME_BYTES;
        assert_eq!(
            line["name"],
            format!("{}… ({more} bytes more)", "n".repeat(NAME_BYTES))
        );
    }

    #[test]
    fn rules_are_listed_changes_first_and_all_fit() {
        let mut verdict = Verdict::new(DecisionKind::Denied);
        assert_eq!(RuleList::of(&verdict).as_str(), "");
        verdict.violations.insert(RuleId::BoundedRequests);
        assert_eq!(RuleList::of(&verdict).as_str(), "bounded-requests");
        verdict.changes.insert(RuleId::RuntimeClass);
        verdict.changes.insert(RuleId::VisibleDevices);
        verdict.violations.insert(RuleId::BoundedRequests);
        assert_eq!(
            RuleList::of(&verdict).as_str(),
            "visible-devices,runtime-class,bounded-requests"
        );
        verdict.changes.extend(RuleId::ALL);
        verdict.violations.extend(RuleId::ALL);
        let everything = verdict
            .changes
            .iter()
            .chain(&verdict.violations)
            .map(|rule| rule.as_str())
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(RuleList::of(&verdict).as_str(), everything);
    }
}
