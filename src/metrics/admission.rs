//! The metrics every admission request writes. A lookup in a `Family`
//! hashes the label set and takes its lock on every request; here each
//! series is looked up once and its handle kept in a table indexed by what
//! names it (with the log line written directly, 3,263 instructions per
//! record phase against 13,000; json_lines.rs).

use std::sync::OnceLock;

use kube::core::admission::Operation;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};

use crate::admission::{Decision, Endpoint, Mode};
use crate::policy::RuleId;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub endpoint: &'static str,
    /// One of [`KINDS`]: a kind the webhooks are registered for, `""` (a
    /// request that could not be read) or `other`.
    pub kind: &'static str,
    pub operation: &'static str,
    /// [`Decision::as_str`].
    pub decision: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleLabels {
    pub rule: &'static str,
    /// `change` or `violation`.
    pub finding: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub endpoint: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum Finding {
    Change,
    Violation,
}

pub const OTHER_KIND: &str = crate::telemetry::labels::OTHER;

/// The values of the `kind` label: the kinds the webhooks are registered
/// for, none (a request not read), and [`OTHER_KIND`].
pub const KINDS: [&str; 14] = [
    "",
    "Pod",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "CronJob",
    "ReplicationController",
    "PodTemplate",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "Namespace",
    OTHER_KIND,
];

/// The `kind` label, as the decision log names kinds too.
pub fn kind_label(kind: &str) -> &'static str {
    crate::telemetry::labels::closed_label(kind, &KINDS)
}

fn kind_index(kind: &str) -> Option<usize> {
    KINDS.iter().position(|known| *known == kind)
}

const ENDPOINTS: usize = Endpoint::ALL.len();
/// None (a request that could not be read) and the four operations.
const OPERATIONS: usize = 5;
const REQUEST_SERIES: usize = ENDPOINTS * KINDS.len() * OPERATIONS * Decision::ALL.len();

#[derive(Debug)]
pub struct AdmissionMetrics {
    requests: Family<RequestLabels, Counter>,
    findings: Family<RuleLabels, Counter>,
    latency: Family<EndpointLabels, Histogram>,
    /// By endpoint, kind, operation and decision.
    request_series: Box<[OnceLock<Counter>]>,
    /// By rule and finding.
    finding_series: [[OnceLock<Counter>; 2]; RuleId::ALL.len()],
    latency_series: [OnceLock<Histogram>; ENDPOINTS],
}

fn latency_histogram() -> Histogram {
    // 50 µs .. ~0.8 s: decisions take microseconds; the tail is queueing.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 15))
}

impl AdmissionMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let requests = registered(
            registry,
            "admission_requests",
            "Admission requests by endpoint, kind, operation and decision",
        );
        let findings =
            registered(registry, "rule_findings", "Changes and violations found, by rule");
        let latency = Family::<EndpointLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register(
            "admission_duration_seconds",
            "Time from request body received to response encoded",
            latency.clone(),
        );
        Self {
            requests,
            findings,
            latency,
            request_series: (0..REQUEST_SERIES).map(|_| OnceLock::new()).collect(),
            finding_series: [const { [const { OnceLock::new() }; 2] }; RuleId::ALL.len()],
            latency_series: [const { OnceLock::new() }; ENDPOINTS],
        }
    }

    /// `operation` and `kind` are `None` and `""` for a review not read.
    pub fn count_request(
        &self,
        endpoint: Endpoint,
        kind: &str,
        operation: Option<&Operation>,
        decision: Decision,
    ) {
        let kind_at = kind_index(kind).or_else(|| kind_index(OTHER_KIND)).unwrap_or(0);
        let labels = || RequestLabels {
            endpoint: endpoint.path(),
            kind: KINDS.get(kind_at).copied().unwrap_or(OTHER_KIND),
            operation: operation.map_or("", operation_name),
            decision: decision.as_str(),
        };
        let operation_at = operation.map_or(0, |operation| operation_index(operation) + 1);
        let at = ((endpoint_index(endpoint) * KINDS.len() + kind_at) * OPERATIONS + operation_at)
            * Decision::ALL.len()
            + decision as usize;
        match self.request_series.get(at) {
            Some(series) => {
                series.get_or_init(|| self.requests.get_or_create_owned(&labels())).inc()
            }
            None => self.requests.get_or_create(&labels()).inc(),
        };
    }

    pub fn count_finding(&self, rule: RuleId, finding: Finding) {
        let labels = || RuleLabels { rule: rule.as_str(), finding: finding.into() };
        let series = self
            .finding_series
            .get(rule as usize)
            .and_then(|by_finding| by_finding.get(finding as usize));
        match series {
            Some(series) => {
                series.get_or_init(|| self.findings.get_or_create_owned(&labels())).inc()
            }
            None => self.findings.get_or_create(&labels()).inc(),
        };
    }

    pub fn observe_latency(&self, endpoint: Endpoint, seconds: f64) {
        let labels = EndpointLabels { endpoint: endpoint.path() };
        match self.latency_series.get(endpoint_index(endpoint)) {
            Some(series) => {
                series.get_or_init(|| self.latency.get_or_create_owned(&labels)).observe(seconds)
            }
            None => self.latency.get_or_create(&labels).observe(seconds),
        }
    }
}

pub fn operation_name(operation: &Operation) -> &'static str {
    match operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

// Matches, not positions or discriminants: the compiler holds each to one
// slot of its own, and a series keeps the labels of its first use.
fn endpoint_index(endpoint: Endpoint) -> usize {
    match endpoint {
        Endpoint::Mutate => 0,
        Endpoint::Validate(Mode::Enforce) => 1,
        Endpoint::Validate(Mode::Warn) => 2,
        Endpoint::Validate(Mode::Audit) => 3,
        Endpoint::Namespace => 4,
    }
}

fn operation_index(operation: &Operation) -> usize {
    match operation {
        Operation::Create => 0,
        Operation::Update => 1,
        Operation::Delete => 2,
        Operation::Connect => 3,
    }
}

/// A new metric, registered as `name` (metrics.rs registers its own with
/// it too).
pub(super) fn registered<M: Metric + Clone + Default>(
    registry: &mut Registry,
    name: &str,
    help: &str,
) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

#[cfg(test)]
mod tests;
