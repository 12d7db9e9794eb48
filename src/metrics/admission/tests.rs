//! The kept series are the family's own: what a request counts is what
//! `/metrics` shows, under the same names and label values as a lookup in
//! the family would give.

use kube::core::admission::Operation;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

use super::*;
use crate::admission::{Mode, Workload};
use crate::policy::dra::claims::ClaimKind;

fn exposition(registry: &Registry) -> String {
    let mut text = String::new();
    encode(&mut text, registry).expect("encoded");
    text
}

fn metrics() -> (Registry, AdmissionMetrics) {
    let mut registry = Registry::with_prefix("gpu_policy");
    let metrics = AdmissionMetrics::register(&mut registry);
    (registry, metrics)
}

#[test]
fn kept_series_are_the_families_series() {
    let (registry, metrics) = metrics();
    for _ in 0..3 {
        metrics.count_request(Endpoint::Mutate, "Pod", Some(&Operation::Create), Decision::Mutated);
    }
    metrics.count_request(
        Endpoint::Validate(Mode::Enforce),
        "DaemonSet",
        Some(&Operation::Update),
        Decision::Denied,
    );
    metrics.count_request(Endpoint::Namespace, "", None, crate::admission::Decision::BadRequest);
    metrics.count_finding(RuleId::RuntimeClass, Finding::Change);
    metrics.count_finding(RuleId::RuntimeClass, Finding::Change);
    metrics.count_finding(RuleId::DevicePaths, Finding::Violation);
    metrics.observe_latency(Endpoint::Mutate, 0.000_2);
    metrics.observe_latency(Endpoint::Mutate, 0.3);
    let text = exposition(&registry);
    for line in [
        r#"gpu_policy_admission_requests_total{endpoint="/mutate",kind="Pod",operation="CREATE",decision="mutated"} 3"#,
        r#"gpu_policy_admission_requests_total{endpoint="/validate/enforce",kind="DaemonSet",operation="UPDATE",decision="denied"} 1"#,
        r#"gpu_policy_admission_requests_total{endpoint="/validate/namespace",kind="",operation="",decision="bad_request"} 1"#,
        r#"gpu_policy_rule_findings_total{rule="runtime-class",finding="change"} 2"#,
        r#"gpu_policy_rule_findings_total{rule="device-paths",finding="violation"} 1"#,
        r#"gpu_policy_admission_duration_seconds_count{endpoint="/mutate"} 2"#,
        r#"gpu_policy_admission_duration_seconds_bucket{le="0.0002",endpoint="/mutate"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    // Only what was written is shown: no series is made ahead of its
    // first request.
    assert_eq!(text.matches("gpu_policy_admission_requests_total{").count(), 3, "{text}");
    assert_eq!(text.matches("gpu_policy_rule_findings_total{").count(), 2, "{text}");
}

/// A kind the webhooks are not registered for, whatever it is, is counted
/// as `other`: no request makes a series, and none names what it wrote.
#[test]
fn a_kind_outside_the_webhooks_kinds_is_counted_as_other() {
    let (registry, metrics) = metrics();
    let long = format!("Widget{}", "x".repeat(1 << 20));
    for kind in ["Widget", "Widget", "pod", "Pod\"}", &long, "other"] {
        metrics.count_request(
            Endpoint::Validate(Mode::Warn),
            kind,
            Some(&Operation::Delete),
            Decision::Ignored,
        );
    }
    metrics.count_request(
        Endpoint::Validate(Mode::Warn),
        "Pod",
        Some(&Operation::Delete),
        Decision::Ignored,
    );
    let text = exposition(&registry);
    for (kind, count) in [("other", 6), ("Pod", 1)] {
        let line = format!(
            "gpu_policy_admission_requests_total{{endpoint=\"/validate/warn\",kind=\"{kind}\",operation=\"DELETE\",decision=\"ignored\"}} {count}"
        );
        assert!(text.contains(&line), "missing {line} in\n{text}");
    }
    assert_eq!(text.matches("gpu_policy_admission_requests_total{").count(), 2, "{text}");
    assert!(!text.contains("Widget") && !text.contains("pod\""), "{text}");
    assert_eq!(kind_label(&long), OTHER_KIND);
    assert_eq!(kind_label("Deployment"), "Deployment");
}

/// Every combination has a series of its own: no two share a slot of the
/// table, and each counts under its own labels.
/// A decision's slot is its discriminant: `ALL` lists them in that order,
/// each once, each with its own label.
#[test]
fn decisions_are_listed_in_the_order_of_their_slots() {
    for (at, decision) in Decision::ALL.into_iter().enumerate() {
        assert_eq!(decision as usize, at, "{decision:?}");
    }
    let labels: std::collections::BTreeSet<&str> =
        Decision::ALL.iter().map(|decision| decision.as_str()).collect();
    assert_eq!(labels.len(), Decision::ALL.len());
}

#[test]
fn every_kept_series_has_its_own_slot() {
    let (registry, metrics) = metrics();
    let operations = [
        None,
        Some(Operation::Create),
        Some(Operation::Update),
        Some(Operation::Delete),
        Some(Operation::Connect),
    ];
    let decisions = Decision::ALL;
    assert_eq!(operations.len(), OPERATIONS);
    for endpoint in Endpoint::ALL {
        for kind in KINDS {
            for operation in &operations {
                for decision in decisions {
                    metrics.count_request(endpoint, kind, operation.as_ref(), decision);
                }
            }
        }
        metrics.observe_latency(endpoint, 0.001);
    }
    for &rule in RuleId::ALL {
        metrics.count_finding(rule, Finding::Change);
        metrics.count_finding(rule, Finding::Violation);
    }
    assert!(metrics.request_series.iter().all(|series| series.get().is_some()));
    let text = exposition(&registry);
    let ones = |prefix: &str| {
        text.lines()
            .filter(|line| line.starts_with(prefix))
            .inspect(|line| assert!(line.ends_with("} 1"), "{line}"))
            .count()
    };
    assert_eq!(ones("gpu_policy_admission_requests_total{"), REQUEST_SERIES);
    assert_eq!(ones("gpu_policy_rule_findings_total{"), RuleId::ALL.len() * 2);
    assert_eq!(ones("gpu_policy_admission_duration_seconds_count{"), ENDPOINTS);
}

/// The kinds the webhooks are registered for are all label values.
#[test]
fn the_webhooks_kinds_are_kept() {
    let kinds = Workload::ALL
        .iter()
        .map(|workload| workload.kind())
        .chain(ClaimKind::ALL.iter().map(|claim| claim.as_str()))
        .chain(["Pod", "Namespace"]);
    for kind in kinds {
        assert!(KINDS.contains(&kind), "{kind}");
    }
}
