//! The one place an admission request is recorded: the metrics and the
//! decision log line.
//!
//! Why labels come from closed lists and strings are cut
//! ([`UID_BYTES`], [`NAMESPACE_BYTES`], [`NAME_BYTES`]): docs/operations.md,
//! "Metrics and the decision log: closed label sets, bounded lines".

use std::borrow::Cow;
use std::time::Duration;

use tracing::Level;

use super::RequestError;
use crate::admission::{AdmissionRequest, Answer, Decision, Endpoint};
use crate::metrics::{AdmissionMetrics, Finding, Metrics, kind_label, operation_name};
use crate::telemetry::{self, LineFields, bounded_field};

/// What log filters name (`RUST_LOG=gpu_policy::server=warn`).
const LOG_TARGET: &str = "gpu_policy::server";

/// The API server's uids are UUIDs, 36 bytes.
pub const UID_BYTES: usize = 128;
/// A DNS label.
pub const NAMESPACE_BYTES: usize = 63;
/// A DNS subdomain.
pub const NAME_BYTES: usize = 253;
/// The reason a request is refused may quote what it sent.
pub const ERROR_BYTES: usize = 512;

pub struct Outcome<'a> {
    pub endpoint: Endpoint,
    /// From the request's arrival to its encoded answer or refusal.
    pub latency: Duration,
    pub result: Result<Answered<'a>, &'a RequestError>,
}

pub struct Answered<'a> {
    pub request: &'a AdmissionRequest<'a>,
    pub answer: &'a Answer,
    /// From the request's arrival to the answer.
    pub took: Duration,
}

pub fn record(metrics: &Metrics, outcome: &Outcome<'_>) {
    let metrics = &metrics.admission;
    match &outcome.result {
        Ok(decided) => record_decision(metrics, outcome.endpoint, decided),
        Err(error) => {
            metrics.count_request(outcome.endpoint, "", None, Decision::BadRequest);
            let endpoint = outcome.endpoint.path();
            let error = error.to_string();
            let error = bounded_field(&error, ERROR_BYTES);
            tracing::warn!(target: LOG_TARGET, endpoint, error = &*error, "bad admission request");
        }
    }
    metrics.observe_latency(outcome.endpoint, outcome.latency.as_secs_f64());
}

fn record_decision(metrics: &AdmissionMetrics, endpoint: Endpoint, decided: &Answered<'_>) {
    let Answered { request, answer, .. } = decided;
    let decision = answer.decision();
    metrics.count_request(endpoint, &request.kind.kind, Some(&request.operation), decision);
    for (rules, finding) in
        [(answer.changes, Finding::Change), (answer.violations, Finding::Violation)]
    {
        for rule in rules {
            metrics.count_finding(rule, finding);
        }
    }
    // Pods created by controllers have no name yet, only generateName.
    let name = Some(&*request.name)
        .filter(|name| !name.is_empty())
        .or_else(|| {
            let metadata = request.object.as_ref()?.json().get("metadata")?;
            metadata.get("name").or_else(|| metadata.get("generateName"))?.as_str()
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
        decision: decision.as_str(),
        rules: RuleList::of(answer),
        duration_us: decided.took.as_micros() as u64,
    };
    line.log();
}

/// In field order.
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
    /// Writes the line straight into the JSON log when lines go there
    /// (`telemetry::write_json_line`), else through `tracing`: the same
    /// bytes either way (a test holds them).
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
        // Plain `&str` fields, the message too, are written as they are
        // where `%` fields and a format string would be formatted first.
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

/// The log line's `rules`: the changes' ids, then the violations',
/// comma-separated, written on the stack rather than joined into a
/// `String` on every request.
// Boxing the large variant would be the allocation it is there to save.
#[allow(clippy::large_enum_variant)]
enum RuleList {
    Static(&'static str),
    Joined { text: [u8; RULE_LIST_BYTES], len: usize },
}

impl RuleList {
    fn of(answer: &Answer) -> Self {
        let mut rules = answer.changes.iter().chain(answer.violations);
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
            RuleList::Joined { text, len } => {
                text.get(..*len).and_then(|text| std::str::from_utf8(text).ok()).unwrap_or("")
            }
        }
    }
}

#[cfg(test)]
mod tests;
