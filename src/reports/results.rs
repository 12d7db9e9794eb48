//! The results of one audited object ([`results_of`]), as both report APIs
//! write a result, read from its [`ObjectReport`]. Which outcome, rule and
//! severity each finding gets is docs/operations.md's table; an object of
//! a kind the policy ignores has no results.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::admission::checker::{ObjectFacts, ObjectReport};
use crate::doctor::FindingId;
use crate::policy::dra::floor::GpuNeeds;
use crate::policy::rules::Severity;
use crate::policy::{Message, NoticeKind, RuleId};

/// `source` and `policy` of every result.
pub const SOURCE: &str = "gpu-policy";
pub const POLICY: &str = "gpu-policy";
/// `category` of every result.
pub const CATEGORY: &str = "GPU";

/// `result`: what became of one rule (or of the whole policy) on one
/// object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Pass,
    Fail,
    Warn,
    Error,
    Skip,
}

impl Outcome {
    pub const ALL: [Outcome; 5] =
        [Outcome::Pass, Outcome::Fail, Outcome::Warn, Outcome::Error, Outcome::Skip];
}

/// What the reports say of a notice: its name (the `notice` property), the
/// rule that says it (None: the namespace's own annotations), and its
/// severity (`medium` where a card or the pod's scheduling is at stake:
/// docs/operations.md, "What is in a report").
pub fn notice_row(kind: NoticeKind) -> (&'static str, Option<RuleId>, Severity) {
    match kind {
        NoticeKind::IgnoredAnnotation => ("ignored-annotation", None, Severity::Low),
        NoticeKind::UnverifiedOwner => {
            ("unverified-owner", Some(RuleId::Allowlist), Severity::Medium)
        }
        NoticeKind::MissingRuntimeClass => {
            ("missing-runtime-class", Some(RuleId::RuntimeClass), Severity::Low)
        }
        NoticeKind::UnmetComputeCapability => {
            ("unmet-compute-capability", Some(RuleId::ComputeAffinity), Severity::Medium)
        }
        NoticeKind::UnresolvedClaim => {
            ("unresolved-claim", Some(RuleId::VisibleDevices), Severity::Low)
        }
        NoticeKind::PrivilegedGpuContainer => {
            ("privileged-gpu-container", Some(RuleId::DevicePaths), Severity::Medium)
        }
        NoticeKind::UnenforcedFloor => {
            ("unenforced-floor", Some(RuleId::ComputeAffinity), Severity::Medium)
        }
        NoticeKind::ImageTableFallback => {
            ("image-table-fallback", Some(RuleId::ComputeAffinity), Severity::Low)
        }
        NoticeKind::UnguaranteedClaimFloor => {
            ("unguaranteed-claim-floor", Some(RuleId::ComputeAffinity), Severity::Medium)
        }
        NoticeKind::UnguaranteedClaimProducts => {
            ("unguaranteed-claim-products", Some(RuleId::ComputeAffinity), Severity::Medium)
        }
        NoticeKind::UnreadClaimOwner => {
            ("unread-claim-owner", Some(RuleId::ComputeAffinity), Severity::Low)
        }
        NoticeKind::UncountedPodClaims => {
            ("uncounted-pod-claims", Some(RuleId::BoundedRequests), Severity::Low)
        }
        NoticeKind::GpuTaintTolerated => {
            ("gpu-taint-tolerated", Some(RuleId::GpuTolerations), Severity::Medium)
        }
    }
}

/// The severity of an object that cannot be read: the webhook would deny
/// its creation in every mode, and nothing else is known of it.
pub const ERROR_SEVERITY: Severity = Severity::Medium;

/// `timestamp`: seconds and nanoseconds since the Unix epoch, as the
/// schemas' `metav1.Timestamp` wants them. The reports have no clock: the
/// caller says when the audit ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Timestamp {
    pub seconds: i64,
    pub nanos: i32,
}

impl Timestamp {
    /// `time` as a timestamp (the epoch for a time before it).
    pub fn of(time: SystemTime) -> Self {
        let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        Timestamp {
            seconds: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
            // Below 10^9, so it fits.
            nanos: i32::try_from(since.subsec_nanos()).unwrap_or(0),
        }
    }
}

/// `resources[]` and `scope`: an ObjectReference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

impl ObjectRef {
    /// The audited object (no namespace for a cluster-scoped one).
    pub fn of(report: &ObjectReport) -> Self {
        ObjectRef {
            api_version: report.api_version.clone(),
            kind: report.kind.clone(),
            namespace: Some(report.namespace.clone()).filter(|ns| !ns.is_empty()),
            name: report.name.clone(),
            uid: report.facts.uid.clone(),
        }
    }
}

/// `rule`: a rule of the policy (`audit`), or the id of a finding of
/// `doctor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ReportRule {
    Policy(RuleId),
    Doctor(FindingId),
}

impl ReportRule {
    pub fn policy(self) -> Option<RuleId> {
        match self {
            ReportRule::Policy(rule) => Some(rule),
            ReportRule::Doctor(_) => None,
        }
    }
}

/// One entry of `results`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReportResult {
    pub source: &'static str,
    pub policy: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<ReportRule>,
    pub result: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    pub category: &'static str,
    pub message: String,
    pub resources: Vec<ObjectRef>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
    pub timestamp: Timestamp,
}

/// The property keys: docs/operations.md, "What is in a report", tables
/// their values (all strings, as the schemas want).
pub mod property {
    pub const FINDING: &str = "finding";
    pub const NOTICE: &str = "notice";
    pub const ALLOWLIST_ENTRY: &str = "allowlistEntry";
    pub const IMAGES: &str = "images";
    pub const COMPUTE_FLOOR: &str = "computeCapabilityFloor";
    pub const DRIVER_FLOOR: &str = "driverFloor";
    pub const RESOURCE_CLAIMS: &str = "resourceClaims";
    pub const CLAIM_TEMPLATES: &str = "resourceClaimTemplates";
}

const LIST_SEPARATOR: &str = ",";

/// The properties every result of the object carries: what it runs on
/// GPUs, and what its DRA GPUs need.
fn object_properties(facts: &ObjectFacts) -> BTreeMap<String, String> {
    let mut properties = BTreeMap::new();
    let mut list = |key: &str, names: &[String]| {
        if !names.is_empty() {
            properties.insert(key.to_owned(), names.join(LIST_SEPARATOR));
        }
    };
    list(property::IMAGES, &facts.gpu_images);
    list(property::RESOURCE_CLAIMS, &facts.resource_claims);
    list(property::CLAIM_TEMPLATES, &facts.claim_templates);
    // The webhook writes it; one that does not read is left out.
    if let Some(needs) =
        facts.gpu_needs.as_deref().and_then(|text| GpuNeeds::from_annotation(text).ok())
    {
        if let Some(floor) = needs.compute_capability {
            properties.insert(property::COMPUTE_FLOOR.to_owned(), floor.to_string());
        }
        if let Some(floor) = &needs.driver {
            properties.insert(property::DRIVER_FLOOR.to_owned(), floor.requirement_text());
        }
    }
    properties
}

/// A message without the `gpu-policy: ` prefix: `source` says who speaks.
fn body(text: &str) -> &str {
    text.strip_prefix(Message::PREFIX).unwrap_or(text)
}

/// The results of one audited object, in this order: its error; or its
/// violations, changes, notices and exemption; or its one `pass`.
pub fn results_of(report: &ObjectReport, timestamp: Timestamp) -> Vec<ReportResult> {
    if report.ignored {
        return Vec::new();
    }
    let properties = object_properties(&report.facts);
    let result =
        |outcome, rule: Option<RuleId>, severity, message: String, extra: &[(&str, &str)]| {
            let mut properties = properties.clone();
            for (key, value) in extra {
                properties.insert((*key).to_owned(), (*value).to_owned());
            }
            ReportResult {
                source: SOURCE,
                policy: POLICY,
                rule: rule.map(ReportRule::Policy),
                result: outcome,
                severity,
                category: CATEGORY,
                message,
                resources: vec![ObjectRef::of(report)],
                properties,
                timestamp,
            }
        };
    if let Some(error) = &report.error {
        return vec![result(
            Outcome::Error,
            None,
            Some(ERROR_SEVERITY),
            body(error).to_owned(),
            &[(property::FINDING, "unreadable")],
        )];
    }
    let mut results = Vec::new();
    for violation in &report.violations {
        results.push(result(
            Outcome::Fail,
            Some(violation.rule),
            Some(violation.rule.rule().severity),
            violation.message.body().to_owned(),
            &[(property::FINDING, "violation")],
        ));
    }
    // A Pod (or a claim) is changed itself; a workload's pods will be.
    let changed = match report.kind.as_str() {
        "Pod" | "ResourceClaim" => "would",
        _ => "its pods would",
    };
    for (rule, summary) in &report.changes {
        results.push(result(
            Outcome::Warn,
            Some(*rule),
            Some(rule.rule().severity.lower()),
            format!("{changed} {summary}"),
            &[(property::FINDING, "change")],
        ));
    }
    for notice in &report.facts.notices {
        let (name, rule, severity) = notice_row(notice.kind);
        results.push(result(
            Outcome::Warn,
            rule,
            Some(severity),
            notice.message.body().to_owned(),
            &[(property::FINDING, "notice"), (property::NOTICE, name)],
        ));
    }
    if let Some(entry) = &report.facts.allowlisted {
        let entry = entry.to_string();
        results.push(result(
            Outcome::Skip,
            Some(RuleId::Allowlist),
            None,
            format!("exempt: allowlist entry {entry}"),
            &[(property::FINDING, "allowlisted"), (property::ALLOWLIST_ENTRY, &entry)],
        ));
    }
    if results.is_empty() {
        results.push(result(Outcome::Pass, None, None, "every rule passes".to_owned(), &[]));
    }
    results
}
