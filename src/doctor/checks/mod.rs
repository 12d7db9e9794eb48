//! The checks: pure functions over an [`Inventory`], each in its own file,
//! listed once in [`CHECKS`] with the finding ids it may report.

mod capacity;
mod daemon_sets;
mod dra_driver;
mod feature_discovery;
pub mod gpu_nodes;
mod nvidia_runtime;
mod own_install;

use super::finding::{Finding, FindingId, Note};
use super::inventory::Inventory;

pub struct Check {
    pub ids: &'static [FindingId],
    pub run: fn(&Inventory) -> Vec<Finding>,
}

/// Every check, in the order the doctor reports their findings: the GPUs
/// first (capacity, labels, runtime, components, DRA), then gpu-policy.
pub const CHECKS: &[Check] = &[
    Check { ids: &[FindingId::NoGpuCapacity], run: capacity::check },
    Check {
        ids: &[FindingId::GfdMissing, FindingId::GfdLabelsMissing],
        run: feature_discovery::check,
    },
    Check {
        ids: &[FindingId::RuntimeClassMissing, FindingId::RuntimeHandlerUnknown],
        run: nvidia_runtime::check,
    },
    Check { ids: &[FindingId::DaemonSetNotReady], run: daemon_sets::check },
    Check {
        ids: &[FindingId::DraDriverMissing, FindingId::DraSliceVersionsMissing],
        run: dra_driver::check,
    },
    Check {
        ids: &[
            FindingId::AllowlistTargetMissing,
            FindingId::ModeLabelInvalid,
            FindingId::NoNamespaceOptedIn,
            FindingId::CaBundleMismatch,
            FindingId::WebhookNotReady,
        ],
        run: own_install::check,
    },
];

pub fn findings(inventory: &Inventory) -> Vec<Finding> {
    CHECKS.iter().flat_map(|check| (check.run)(inventory)).collect()
}

/// The notes the checks leave besides what was not read.
pub fn check_notes(inventory: &Inventory) -> Vec<Note> {
    nvidia_runtime::notes(inventory)
}

#[cfg(test)]
mod tests;
