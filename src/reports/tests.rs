//! The reports' table tests: each finding's result, the summaries, the
//! severities, the properties, the two APIs.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::admission::Mode;
use crate::admission::checker::{Checker, ObjectReport};
use crate::policy::dra::floor::GpuNeeds;
use crate::policy::rules::Severity;
use crate::policy::{Message, Notice, NoticeKind, RuleId, Violation};
use crate::settings::{AllowlistEntry, Settings};

const AT: Timestamp = Timestamp { seconds: 1_767_225_600, nanos: 5 };

fn pod(namespace: &str, name: &str) -> ObjectReport {
    let object = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}")}});
    ObjectReport::allowed(&object, "default")
}

fn violation(rule: RuleId) -> Violation {
    Violation { rule, message: Message::new(format_args!("{rule} is broken")) }
}

/// One result as the table tests see it: (outcome, rule, severity).
type Row = (Outcome, Option<RuleId>, Option<Severity>);

/// The rows of each result, in order.
fn rows(report: &ObjectReport) -> Vec<Row> {
    results_of(report, AT)
        .iter()
        .map(|r| (r.result, r.rule.and_then(ReportRule::policy), r.severity))
        .collect()
}

#[test]
fn each_finding_becomes_its_result() {
    type Setup = fn(&mut ObjectReport);
    let table: [(&str, Setup, Vec<Row>); 7] = [
        ("nothing found: one pass, no rule", |_| {}, vec![(Outcome::Pass, None, None)]),
        (
            "a violation: fail, at the rule's severity",
            |r| r.violations.push(violation(RuleId::BoundedRequests)),
            vec![(Outcome::Fail, Some(RuleId::BoundedRequests), Some(Severity::Medium))],
        ),
        (
            "a change: warn, one step below",
            |r| r.changes.push((RuleId::VisibleDevices, "pin it".into())),
            vec![(Outcome::Warn, Some(RuleId::VisibleDevices), Some(Severity::Medium))],
        ),
        (
            "a notice: warn, with the rule that says it",
            |r| r.facts.notices.push(Notice::new(NoticeKind::PrivilegedGpuContainer, "sees all")),
            vec![(Outcome::Warn, Some(RuleId::DevicePaths), Some(Severity::Medium))],
        ),
        (
            "allowlisted: skip, and nothing passes",
            |r| r.facts.allowlisted = Some(AllowlistEntry::exact("kube-system", "DaemonSet", "x")),
            vec![(Outcome::Skip, Some(RuleId::Allowlist), None)],
        ),
        (
            "unreadable: one error, whatever else",
            |r| {
                r.error =
                    Some(Message::new("cannot read this Pod: spec: must be an object").into());
                r.violations.push(violation(RuleId::DevicePaths));
            },
            vec![(Outcome::Error, None, Some(ERROR_SEVERITY))],
        ),
        (
            "several findings, in order, without a pass",
            |r| {
                r.violations.push(violation(RuleId::DevicePaths));
                r.changes.push((RuleId::RuntimeClass, "set it".into()));
                r.facts.notices.push(Notice::new(NoticeKind::IgnoredAnnotation, "ignored"));
                r.facts.allowlisted = Some(AllowlistEntry::exact("ml", "Pod", "p"));
            },
            vec![
                (Outcome::Fail, Some(RuleId::DevicePaths), Some(Severity::High)),
                (Outcome::Warn, Some(RuleId::RuntimeClass), Some(Severity::Low)),
                (Outcome::Warn, None, Some(Severity::Low)),
                (Outcome::Skip, Some(RuleId::Allowlist), None),
            ],
        ),
    ];
    for (what, setup, expected) in table {
        let mut report = pod("ml", "p");
        setup(&mut report);
        assert_eq!(rows(&report), expected, "{what}");
    }
    let mut ignored = pod("ml", "p");
    ignored.ignored = true;
    assert!(results_of(&ignored, AT).is_empty(), "an ignored kind has no result");
}

#[test]
fn a_result_names_its_object_and_speaks_without_the_prefix() {
    let mut report = pod("ml", "train");
    report.violations.push(violation(RuleId::BoundedRequests));
    report.changes.push((RuleId::VisibleDevices, "pin NVIDIA_VISIBLE_DEVICES=void".into()));
    let results = results_of(&report, AT);
    let fail = &results[0];
    assert_eq!((fail.source, fail.policy, fail.category), ("gpu-policy", "gpu-policy", "GPU"));
    assert_eq!(fail.message, "bounded-requests is broken");
    assert_eq!(fail.timestamp, AT);
    assert_eq!(
        fail.resources,
        [ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some("ml".into()),
            name: "train".into(),
            uid: Some("uid-train".into()),
        }]
    );
    assert_eq!(results[1].message, "would pin NVIDIA_VISIBLE_DEVICES=void");
    let mut workload = report.clone();
    workload.kind = "Deployment".into();
    assert_eq!(
        results_of(&workload, AT)[1].message,
        "its pods would pin NVIDIA_VISIBLE_DEVICES=void"
    );
}

/// Each rule's declared severity is the one docs/operations.md's
/// "Severities" table promises report readers, for a violation and for a
/// change, and the table names every rule.
#[test]
fn declared_severities_are_the_documented_ones() {
    let docs = include_str!("../../docs/operations.md");
    let table = docs.split_once("**Severities.**").map(|(_, after)| after).unwrap_or_default();
    let mut documented = BTreeMap::new();
    for row in table.lines().skip_while(|line| !line.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let [_, rules, fail, change, _] = cells[..] else {
            break;
        };
        let rules = rules.split(':').next().unwrap_or_default();
        for name in rules.split('`').skip(1).step_by(2) {
            documented.insert(name.to_owned(), (fail.to_owned(), change.to_owned()));
        }
    }
    let named = |severity: Severity| json!(severity).as_str().unwrap_or_default().to_owned();
    for &rule in RuleId::ALL {
        let declared = rule.rule().severity;
        let (fail, change) = documented
            .get(rule.as_str())
            .unwrap_or_else(|| panic!("{rule} is not in the table: {documented:?}"));
        assert_eq!(*fail, format!("`{}`", named(declared)), "{rule}");
        assert!(change.starts_with(&format!("`{}`", named(declared.lower()))), "{rule}: {change}");
    }
    assert_eq!(documented.len(), RuleId::ALL.len(), "{documented:?}");
}

/// A violation weighs what its rule declares, a change one step less.
#[test]
fn severities_follow_the_rule_and_changes_weigh_less() {
    for &rule in RuleId::ALL {
        let declared = rule.rule().severity;
        let mut report = pod("team", "p");
        report.violations.push(violation(rule));
        report.changes.push((rule, "x".into()));
        let severities: Vec<(Outcome, Option<Severity>)> =
            results_of(&report, AT).iter().map(|result| (result.result, result.severity)).collect();
        assert_eq!(
            severities,
            [(Outcome::Fail, Some(declared)), (Outcome::Warn, Some(declared.lower()))],
            "{rule}"
        );
        assert!(declared.lower() > declared, "{rule}");
    }
    assert_eq!(Severity::Low.lower(), Severity::Low);
    // Notices: medium where a card or scheduling is at stake.
    for (kind, severity) in [
        (NoticeKind::PrivilegedGpuContainer, Severity::Medium),
        (NoticeKind::UnmetComputeCapability, Severity::Medium),
        (NoticeKind::UnenforcedFloor, Severity::Medium),
        (NoticeKind::UnverifiedOwner, Severity::Medium),
        (NoticeKind::UnguaranteedClaimFloor, Severity::Medium),
        (NoticeKind::UnguaranteedClaimProducts, Severity::Medium),
        (NoticeKind::IgnoredAnnotation, Severity::Low),
        (NoticeKind::UnresolvedClaim, Severity::Low),
        (NoticeKind::MissingRuntimeClass, Severity::Low),
    ] {
        assert_eq!(notice_row(kind).2, severity, "{kind:?}");
    }
}

#[test]
fn properties_name_images_claims_floors_and_the_entry() {
    let needs = GpuNeeds::from_annotation(
        r#"{"computeCapability":"8.0","driverVersion":"cuda>=12.4","images":["a"]}"#,
    )
    .expect("gpu-policy's annotation");
    let mut report = pod("ml", "p");
    report.facts.gpu_images = vec!["nvcr.io/a:1".into(), "b:2".into()];
    report.facts.resource_claims = vec!["pod-gpu-x7".into(), "shared".into()];
    report.facts.claim_templates = vec!["one-gpu".into()];
    report.facts.gpu_needs = Some(needs.annotation_value());
    report.facts.allowlisted = Some(AllowlistEntry::exact("ml", "Pod", "p"));
    let skip = &results_of(&report, AT)[0];
    let properties: Vec<(&str, &str)> =
        skip.properties.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        properties,
        [
            ("allowlistEntry", "ml/Pod/p"),
            ("computeCapabilityFloor", "8.0"),
            ("driverFloor", "cuda>=12.4"),
            ("finding", "allowlisted"),
            ("images", "nvcr.io/a:1,b:2"),
            ("resourceClaimTemplates", "one-gpu"),
            ("resourceClaims", "pod-gpu-x7,shared"),
        ]
    );
    // An annotation someone else wrote is no floor; a pass has no finding.
    report.facts = Default::default();
    report.facts.gpu_needs = Some("not json".into());
    assert!(results_of(&report, AT)[0].properties.is_empty());
}

#[test]
fn one_report_per_namespace_whose_summary_counts_its_results() {
    let mut failing = pod("ml", "a");
    failing.violations.push(violation(RuleId::DevicePaths));
    failing.changes.push((RuleId::VisibleDevices, "pin".into()));
    let passing = pod("ml", "b");
    let mut skipped = pod("infra", "c");
    skipped.facts.allowlisted = Some(AllowlistEntry::exact("infra", "Pod", "c"));
    let mut ignored = pod("empty", "d");
    ignored.ignored = true;
    let mut cluster = pod("", "e");
    cluster.error = Some("gpu-policy: cannot read".into());
    let objects = [failing, passing, skipped, ignored, cluster];
    for api in ReportApi::ALL {
        let reports = build(&objects, api, AT);
        let names: Vec<(String, &str)> =
            reports.iter().map(|r| (r.display_name(), r.kind)).collect();
        let (namespaced, clustered) =
            (api.kind(ReportScope::Namespaced), api.kind(ReportScope::Cluster));
        assert_eq!(
            names,
            [
                ("infra/gpu-policy".to_owned(), namespaced),
                ("ml/gpu-policy".to_owned(), namespaced),
                ("gpu-policy".to_owned(), clustered),
            ],
            "{api}: none for a namespace without results"
        );
        let ml = &reports[1];
        assert_eq!(ml.summary, Summary { pass: 1, fail: 1, warn: 1, error: 0, skip: 0 });
        for report in &reports {
            assert_eq!(report.summary.total(), report.results.len() as u64);
            assert_eq!(report.summary, Summary::of(&report.results));
            assert_eq!(report.api_version, api.api_version());
            assert_eq!(
                report.metadata.labels.get(MANAGED_BY_LABEL).map(String::as_str),
                Some(MANAGED_BY)
            );
        }
        assert_eq!(reports[2].summary.error, 1);
        assert_eq!(reports[2].scope, None, "a cluster report has no namespace scope");
    }
}

#[test]
fn the_two_apis_differ_in_version_kind_and_report_source() {
    let report =
        |api| serde_json::to_value(&build(&[pod("ml", "p")], api, AT)[0]).expect("serialises");
    let (policy_report, open_report) =
        (report(ReportApi::PolicyReport), report(ReportApi::OpenReports));
    assert_eq!(policy_report["apiVersion"], "wgpolicyk8s.io/v1alpha2");
    assert_eq!(policy_report["kind"], "PolicyReport");
    assert_eq!(open_report["apiVersion"], "openreports.io/v1alpha1");
    assert_eq!(open_report["kind"], "Report");
    assert_eq!(policy_report.get("source"), None);
    assert_eq!(open_report["source"], "gpu-policy");
    let strip = |mut report: Value| {
        for field in ["apiVersion", "kind", "source"] {
            report.as_object_mut().map(|o| o.remove(field));
        }
        report
    };
    assert_eq!(strip(policy_report.clone()), strip(open_report));
    assert_eq!(
        policy_report["scope"],
        json!({"apiVersion": "v1", "kind": "Namespace", "name": "ml"})
    );
    assert_eq!(
        policy_report["results"][0]["timestamp"],
        json!({"seconds": 1_767_225_600, "nanos": 5})
    );
    assert_eq!(
        policy_report["metadata"],
        json!({"name": "gpu-policy", "namespace": "ml",
               "labels": {"app.kubernetes.io/managed-by": "gpu-policy"}})
    );
}

#[test]
fn timestamps_are_seconds_and_nanos_since_the_epoch() {
    use std::time::{Duration, UNIX_EPOCH};
    let time = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
    assert_eq!(Timestamp::of(time), Timestamp { seconds: 1_700_000_000, nanos: 123_456_789 });
    assert_eq!(
        Timestamp::of(UNIX_EPOCH - Duration::from_secs(1)),
        Timestamp { seconds: 0, nanos: 0 }
    );
}

/// The checker records what the reports show: the uid, the GPU images, the
/// claims by name (those made from templates by the pod's status), and the
/// needs R4 would record.
#[test]
fn the_checker_fills_the_facts_of_a_dra_pod() {
    let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}});
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "train", "namespace": "ml", "uid": "u-1"},
        "spec": {"containers": [{"name": "c", "image": "nvidia/cuda:12.6.3-base-ubuntu24.04",
                "resources": {"claims": [{"name": "gpu"}]}},
                {"name": "side", "image": "busybox"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                               {"name": "nic", "resourceClaimName": "shared-nic"}]},
        "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "train-gpu-x7"}]}});
    let settings = Settings::default();
    let objects = [&template, &pod];
    let checker = Checker::new(&settings, Mode::Enforce, "ml").with_input(&objects);
    let report = checker.check(&pod);
    let facts = &report.facts;
    assert_eq!(facts.uid.as_deref(), Some("u-1"));
    assert_eq!(facts.gpu_images, ["nvidia/cuda:12.6.3-base-ubuntu24.04"]);
    assert_eq!(facts.resource_claims, ["train-gpu-x7", "shared-nic"]);
    assert_eq!(facts.claim_templates, ["one-gpu"]);
    // The CUDA 12.6 image needs compute capability 5.0, which R4 writes.
    let needs = facts.gpu_needs.as_deref().map(GpuNeeds::from_annotation);
    assert!(
        matches!(&needs, Some(Ok(needs)) if needs.compute_capability.is_some_and(|c| c.to_string() == "5.0")),
        "the needs R4 writes: {needs:?} of {report:?}"
    );
    let results = results_of(&report, AT);
    assert!(
        results
            .iter()
            .all(|r| r.properties.get(property::COMPUTE_FLOOR).map(String::as_str) == Some("5.0")),
        "{results:?}"
    );
    // `check -o json` is unchanged: the facts are not serialised.
    let json = serde_json::to_value(&report).expect("serialises");
    assert_eq!(json.get("facts"), None);
    assert_eq!(json.get("uid"), None);
}
