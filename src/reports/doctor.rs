//! `doctor --write-report`: the diagnosis as one cluster-scoped report
//! named [`DOCTOR_REPORT_NAME`], which `audit` never touches; its results
//! are docs/operations.md's ("As a report").

use std::collections::BTreeMap;

use super::api::{MANAGED_BY, MANAGED_BY_LABEL, ReportApi, ReportScope};
use super::build::{Report, ReportMetadata, Summary};
use super::results::{CATEGORY, ObjectRef, Outcome, ReportResult, ReportRule, SOURCE, Timestamp};
use crate::doctor::{self, Diagnosis, Finding};
use crate::policy::rules::Severity;

/// The name of doctor's report.
pub const DOCTOR_REPORT_NAME: &str = "gpu-policy-doctor";
/// `policy` of its results: a report consumer tells them from audit's.
pub const DOCTOR_POLICY: &str = "gpu-policy-doctor";

fn severity(finding: &Finding) -> (Outcome, Severity) {
    match finding.severity {
        doctor::Severity::Error => (Outcome::Fail, Severity::High),
        doctor::Severity::Warning => (Outcome::Warn, Severity::Medium),
    }
}

fn result(
    outcome: Outcome,
    rule: Option<ReportRule>,
    severity: Option<Severity>,
    message: String,
    resources: Vec<ObjectRef>,
    properties: BTreeMap<String, String>,
    timestamp: Timestamp,
) -> ReportResult {
    ReportResult {
        source: SOURCE,
        policy: DOCTOR_POLICY,
        rule,
        result: outcome,
        severity,
        category: CATEGORY,
        message,
        resources,
        properties,
        timestamp,
    }
}

/// The results of a diagnosis: its findings, its notes, or one `pass`.
pub fn doctor_results(diagnosis: &Diagnosis, timestamp: Timestamp) -> Vec<ReportResult> {
    let mut results = Vec::new();
    for finding in &diagnosis.findings {
        let (outcome, severity) = severity(finding);
        let mut properties = BTreeMap::from([
            ("fix".to_owned(), finding.fix.clone()),
            ("evidence".to_owned(), finding.evidence.join("; ")),
        ]);
        if let Some(cause) = finding.cause {
            properties.insert("cause".to_owned(), cause.to_owned());
        }
        if finding.more_subjects > 0 {
            properties.insert("moreObjects".to_owned(), finding.more_subjects.to_string());
        }
        let resources = finding
            .subjects
            .iter()
            .map(|subject| ObjectRef {
                api_version: subject.api_version.to_owned(),
                kind: subject.kind.to_owned(),
                namespace: subject.namespace.clone(),
                name: subject.name.clone(),
                uid: None,
            })
            .collect();
        results.push(result(
            outcome,
            Some(ReportRule::Doctor(finding.id)),
            Some(severity),
            finding.summary.clone(),
            resources,
            properties,
            timestamp,
        ));
    }
    for note in &diagnosis.notes {
        results.push(result(
            Outcome::Skip,
            None,
            None,
            note.message.clone(),
            Vec::new(),
            BTreeMap::from([("note".to_owned(), note.kind.to_owned())]),
            timestamp,
        ));
    }
    if diagnosis.findings.is_empty() {
        results.push(result(
            Outcome::Pass,
            None,
            None,
            "no finding: the GPU stack and gpu-policy look healthy".to_owned(),
            Vec::new(),
            BTreeMap::new(),
            timestamp,
        ));
    }
    results
}

/// The cluster-scoped report of a diagnosis in `api`.
pub fn doctor_report(diagnosis: &Diagnosis, api: ReportApi, timestamp: Timestamp) -> Report {
    let results = doctor_results(diagnosis, timestamp);
    Report {
        api_version: api.api_version(),
        kind: api.kind(ReportScope::Cluster),
        metadata: ReportMetadata {
            name: DOCTOR_REPORT_NAME.to_owned(),
            namespace: None,
            labels: BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())]),
        },
        source: api.has_report_source().then_some(SOURCE),
        scope: None,
        summary: Summary::of(&results),
        results,
        api,
        report_scope: ReportScope::Cluster,
    }
}
