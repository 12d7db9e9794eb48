//! `gpu-policy doctor`: what keeps GPUs from showing up, and gpu-policy from
//! working. Pure: `cluster::read_inventory` fills the [`Inventory`], the
//! checks are functions over it; nothing here touches the network, a clock
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
