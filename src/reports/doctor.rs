//! `doctor --write-report`: the diagnosis as one cluster-scoped report
//! named [`DOCTOR_REPORT_NAME`], which `audit` never touches; its results
//! are docs/operations.md's ("As a report").

use std::collections::BTreeMap;

use super::api::ReportApi;
use super::build::{Report, report};
use super::results::{CATEGORY, ObjectRef, Outcome, ReportResult, ReportRule, SOURCE, Timestamp};
use crate::doctor::{self, Diagnosis};
use crate::policy::rules::Severity;

pub const DOCTOR_REPORT_NAME: &str = "gpu-policy-doctor";
/// `policy` of its results: a report consumer tells them from audit's.
pub const DOCTOR_POLICY: &str = "gpu-policy-doctor";

/// The results of a diagnosis: its findings, its notes, or one `pass`.
pub fn doctor_results(diagnosis: &Diagnosis, timestamp: Timestamp) -> Vec<ReportResult> {
    let result = |result, message: &str| ReportResult {
        source: SOURCE,
        policy: DOCTOR_POLICY,
        rule: None,
        result,
        severity: None,
        category: CATEGORY,
        message: message.to_owned(),
        resources: Vec::new(),
        properties: BTreeMap::new(),
        timestamp,
    };
    let mut results = Vec::new();
    for finding in &diagnosis.findings {
        let (outcome, severity) = match finding.severity {
            doctor::Severity::Error => (Outcome::Fail, Severity::High),
            doctor::Severity::Warning => (Outcome::Warn, Severity::Medium),
        };
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
        results.push(ReportResult {
            rule: Some(ReportRule::Doctor(finding.id)),
            severity: Some(severity),
            resources,
            properties,
            ..result(outcome, &finding.summary)
        });
    }
    for note in &diagnosis.notes {
        let properties = BTreeMap::from([("note".to_owned(), note.kind.to_owned())]);
        results.push(ReportResult { properties, ..result(Outcome::Skip, &note.message) });
    }
    if diagnosis.findings.is_empty() {
        results
            .push(result(Outcome::Pass, "no finding: the GPU stack and gpu-policy look healthy"));
    }
    results
}

pub fn doctor_report(diagnosis: &Diagnosis, api: ReportApi, timestamp: Timestamp) -> Report {
    report(api, DOCTOR_REPORT_NAME, None, doctor_results(diagnosis, timestamp))
}
