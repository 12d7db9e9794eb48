//! Policy reports: what `gpu-policy audit` (and `doctor`) found, as the
//! `wgpolicyk8s.io` PolicyReports and the `openreports.io` Reports that
//! operators already collect (Policy Reporter, Kyverno's tooling,
//! OpenReports consumers). Pure: built from the audited objects'
//! [`ObjectReport`]s and the time the caller gives; no I/O, no clock.
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
