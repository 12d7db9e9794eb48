//! The reports of one audit ([`build`]), as docs/operations.md, "What is in
//! a report", lays them out: each named [`REPORT_NAME`] and labelled
//! [`MANAGED_BY_LABEL`]`: `[`MANAGED_BY`].

use std::collections::BTreeMap;

use serde::Serialize;

use super::api::{MANAGED_BY, MANAGED_BY_LABEL, REPORT_NAME, ReportApi, ReportScope};
use super::results::{ObjectRef, Outcome, ReportResult, SOURCE, Timestamp, results_of};
use crate::admission::checker::ObjectReport;

/// `summary`: how many results of each outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub pass: u64,
    pub fail: u64,
    pub warn: u64,
    pub error: u64,
    pub skip: u64,
}

impl Summary {
    pub fn of(results: &[ReportResult]) -> Self {
        let mut summary = Summary::default();
        for result in results {
            *summary.count_mut(result.result) += 1;
        }
        summary
    }

    pub fn count(mut self, outcome: Outcome) -> u64 {
        *self.count_mut(outcome)
    }

    fn count_mut(&mut self, outcome: Outcome) -> &mut u64 {
        match outcome {
            Outcome::Pass => &mut self.pass,
            Outcome::Fail => &mut self.fail,
            Outcome::Warn => &mut self.warn,
            Outcome::Error => &mut self.error,
            Outcome::Skip => &mut self.skip,
        }
    }

    pub fn total(&self) -> u64 {
        self.pass + self.fail + self.warn + self.error + self.skip
    }
}

/// `metadata`: what a server-side apply of the report sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReportMetadata {
    pub name: String,
    /// None for a cluster-scoped report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub labels: BTreeMap<String, String>,
}

/// One PolicyReport, ClusterPolicyReport, Report or ClusterReport.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub api_version: String,
    pub kind: &'static str,
    pub metadata: ReportMetadata,
    /// OpenReports only ([`ReportApi::has_report_source`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'static str>,
    /// The Namespace, of a namespaced report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<ObjectRef>,
    pub summary: Summary,
    pub results: Vec<ReportResult>,
    /// Which API and scope it is written in (not a field of the object).
    #[serde(skip)]
    pub api: ReportApi,
    #[serde(skip)]
    pub report_scope: ReportScope,
}

impl Report {
    /// `namespace/name`, or `name` for a cluster-scoped report.
    pub fn display_name(&self) -> String {
        match &self.metadata.namespace {
            Some(namespace) => format!("{namespace}/{}", self.metadata.name),
            None => self.metadata.name.clone(),
        }
    }
}

/// The namespaced reports by namespace name, then the cluster-scoped one.
pub fn build(objects: &[ObjectReport], api: ReportApi, timestamp: Timestamp) -> Vec<Report> {
    // Namespace ("" for cluster-scoped objects) -> its results.
    let mut by_namespace: BTreeMap<&str, Vec<ReportResult>> = BTreeMap::new();
    for object in objects {
        let results = results_of(object, timestamp);
        if !results.is_empty() {
            by_namespace.entry(object.namespace.as_str()).or_default().extend(results);
        }
    }
    let mut reports: Vec<Report> = Vec::new();
    let mut cluster = None;
    for (namespace, results) in by_namespace {
        let namespace = Some(namespace).filter(|ns| !ns.is_empty());
        let report = report(api, REPORT_NAME, namespace, results);
        match report.report_scope {
            ReportScope::Namespaced => reports.push(report),
            ReportScope::Cluster => cluster = Some(report),
        }
    }
    reports.extend(cluster);
    reports
}

pub(super) fn report(
    api: ReportApi,
    name: &str,
    namespace: Option<&str>,
    results: Vec<ReportResult>,
) -> Report {
    let scope = match namespace {
        Some(_) => ReportScope::Namespaced,
        None => ReportScope::Cluster,
    };
    Report {
        api_version: api.api_version(),
        kind: api.kind(scope),
        metadata: ReportMetadata {
            name: name.to_owned(),
            namespace: namespace.map(str::to_owned),
            labels: BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())]),
        },
        source: api.has_report_source().then_some(SOURCE),
        scope: namespace.map(|name| ObjectRef {
            api_version: "v1".to_owned(),
            kind: "Namespace".to_owned(),
            namespace: None,
            name: name.to_owned(),
            uid: None,
        }),
        summary: Summary::of(&results),
        results,
        api,
        report_scope: scope,
    }
}
