//! `gpu-policy doctor`: what keeps GPUs from showing up, and gpu-policy from
//! working, read from the cluster once.
//!
//! Pure: `cluster::read_inventory` reads the cluster into an
//! [`Inventory`] of plain values; the checks are functions over it; the
//! CLI prints the [`Diagnosis`] and `reports::doctor_report` makes it a
//! cluster-scoped policy report. Nothing here touches the network, a clock
//! or a log.

pub mod checks;
mod diagnosis;
mod finding;
pub mod inventory;
mod render;

pub use diagnosis::{Diagnosis, Summary, diagnose};
pub use finding::{Finding, FindingId, LISTED, Note, Severity, Subject};
pub use inventory::{Inventory, Seen};
pub use render::{JSON_SCHEMA_VERSION, json, text};
