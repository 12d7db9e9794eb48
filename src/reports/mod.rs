//! Policy reports: what `gpu-policy audit` (and `doctor`) found in the cluster, as the
//! `wgpolicyk8s.io` PolicyReports and the `openreports.io` Reports that
//! operators already collect (Policy Reporter, Kyverno's tooling, OpenReports
//! consumers).
//!
//! Pure: it reads the audited objects' [`ObjectReport`]s (their findings and
//! [`ObjectFacts`](crate::admission::ObjectFacts)) and the time the caller
//! gives, and builds the report objects; no I/O, no clock.
//! `cli/audit.rs` prints them (`-o policyreport`, `-o openreports`) and
//! `cluster/reports.rs` writes them (`--write-reports`).
//!
//! The children, each using only those listed before it:
//!
//! - `api.rs`: [`ReportApi`] (the two APIs: group, version, kinds, plurals),
//!   [`ReportScope`], the report name and the managed-by label;
//! - `results.rs`: one object's results ([`results_of`]): the outcome,
//!   rule, severity, message, resource reference and properties of each
//!   finding, and the tables that choose them;
//! - `build.rs`: the reports of one audit ([`build`](fn@build)), one per namespace,
//!   with their [`Summary`];
//! - `doctor.rs`: `doctor`'s diagnosis as one cluster-scoped report
//!   ([`doctor_report`]).
//!
//! [`ObjectReport`]: crate::admission::ObjectReport

mod api;
mod build;
mod doctor;
mod results;
#[cfg(test)]
mod tests;

pub use api::{FIELD_MANAGER, MANAGED_BY, MANAGED_BY_LABEL, REPORT_NAME, ReportApi, ReportScope};
pub use build::{Report, ReportMetadata, Summary, build};
pub use doctor::{DOCTOR_POLICY, DOCTOR_REPORT_NAME, doctor_report, doctor_results};
pub use results::{
    CATEGORY, ERROR_SEVERITY, ObjectRef, Outcome, POLICY, ReportResult, ReportRule, SOURCE,
    Timestamp, notice_row, property, results_of,
};
