//! The one place an admission request is recorded: the request counter, the
//! rule findings, the latency histogram and the decision log line.

use std::time::Duration;

use kube::core::admission::{AdmissionRequest, Operation};

use super::RequestError;
use crate::admission::{DecisionKind, Endpoint, RawObject, Verdict};
use crate::metrics::{EndpointLabels, Metrics, RequestLabels, RuleLabels};

/// The target of the log lines: the HTTP layer's module, which log filters
/// name (`RUST_LOG=gpu_policy::server=warn`).
const LOG_TARGET: &str = "gpu_policy::server";

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
    pub request: &'a AdmissionRequest<RawObject>,
    pub verdict: &'a Verdict,
    /// From the request's arrival to the decision.
    pub took: Duration,
}

/// Counts the request and its findings, observes its latency and writes
/// its log line.
pub fn record(metrics: &Metrics, outcome: &Outcome<'_>) {
    let endpoint = outcome.endpoint.path();
    match &outcome.result {
        Ok(decided) => record_decision(metrics, endpoint, decided),
        Err(error) => {
            count(metrics, endpoint, "", "", DecisionKind::BadRequest);
            tracing::warn!(target: LOG_TARGET, endpoint, error = %error, "bad admission request");
        }
    }
    metrics
        .latency
        .get_or_create(&EndpointLabels {
            endpoint: endpoint.to_owned(),
        })
        .observe(outcome.latency.as_secs_f64());
}

fn record_decision(metrics: &Metrics, endpoint: &str, decided: &Decided<'_>) {
    let Decided {
        request, verdict, ..
    } = decided;
    let operation = operation_name(&request.operation);
    count(
        metrics,
        endpoint,
        &request.kind.kind,
        operation,
        verdict.decision,
    );
    for (rules, finding) in [
        (&verdict.changes, "change"),
        (&verdict.violations, "violation"),
    ] {
        for rule in rules {
            metrics
                .findings
                .get_or_create(&RuleLabels {
                    rule: rule.as_str().to_owned(),
                    finding: finding.to_owned(),
                })
                .inc();
        }
    }
    let rules = verdict
        .changes
        .iter()
        .chain(&verdict.violations)
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(",");
    // Pods created by controllers have no name yet, only generateName.
    let name = Some(request.name.as_str())
        .filter(|name| !name.is_empty())
        .or_else(|| {
            let metadata = request.object.as_ref()?.raw.get("metadata")?;
            metadata
                .get("name")
                .or_else(|| metadata.get("generateName"))?
                .as_str()
        })
        .unwrap_or("");
    // Plain `&str` fields: the JSON formatter writes them as they are,
    // where `%` fields would be formatted into a string first.
    tracing::info!(
        target: LOG_TARGET,
        uid = request.uid.as_str(),
        namespace = request.namespace.as_deref().unwrap_or(""),
        kind = request.kind.kind.as_str(),
        name,
        operation,
        endpoint,
        dry_run = request.dry_run,
        decision = verdict.decision.as_str(),
        rules = rules.as_str(),
        duration_us = decided.took.as_micros() as u64,
        "admission decision"
    );
}

fn count(metrics: &Metrics, endpoint: &str, kind: &str, operation: &str, decision: DecisionKind) {
    metrics
        .requests
        .get_or_create(&RequestLabels {
            endpoint: endpoint.to_owned(),
            kind: kind.to_owned(),
            operation: operation.to_owned(),
            decision: decision.as_str().to_owned(),
        })
        .inc();
}

/// The operation as the API server spells it.
fn operation_name(operation: &Operation) -> &'static str {
    match operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}
