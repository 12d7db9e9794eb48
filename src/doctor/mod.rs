//! `gpu-policy doctor`: what keeps GPUs from showing up, and gpu-policy from
//! working, read from the cluster once.
//!
//! Pure: `cluster::read_inventory` reads the cluster into an
//! [`Inventory`] of plain values; the checks are functions over it; the
//! CLI prints the [`Diagnosis`] and `reports::doctor_report` makes it a
//! cluster-scoped policy report. Nothing here touches the network, a clock
//! or a log.
//!
//! The children, each using only those listed before it:
//!
//! - `inventory.rs`: [`Inventory`] and its parts, each [`Seen`] whole, in
//!   part, not at all (forbidden) or not served;
//! - `finding.rs`: [`Finding`] with its stable [`FindingId`], [`Severity`],
//!   evidence and fix; [`Note`];
//! - `checks/`: one file per concern, listed in `CHECKS` (`gpu_nodes.rs`:
//!   what makes a node a GPU node; `capacity.rs`: `no-gpu-capacity`;
//!   `feature_discovery.rs`: `gfd-missing`, `gfd-labels-missing`;
//!   `runtime.rs`: `runtime-class-missing`, `runtime-handler-unknown`;
//!   `daemon_sets.rs`: `daemonset-not-ready`; `dra.rs`:
//!   `dra-driver-missing`, `dra-slice-versions-missing`; `install.rs`:
//!   gpu-policy's own install);
//! - `diagnosis.rs`: [`diagnose`]: the findings, the notes, the summary;
//! - `render.rs`: the text and JSON outputs.

pub mod checks;
mod diagnosis;
mod finding;
pub mod inventory;
mod render;

pub use diagnosis::{Diagnosis, Summary, diagnose};
pub use finding::{Finding, FindingId, LISTED, Note, Severity, Subject};
pub use inventory::{Inventory, Seen};
pub use render::{JSON_SCHEMA_VERSION, json, text};
