//! `computeAffinity`: what R4 does when the nodes carry none of the labels
//! its node affinity names.

use serde::{Deserialize, Serialize};

/// R4's node affinity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ComputeAffinity {
    pub when_nodes_unlabelled: WhenNodesUnlabelled,
}

/// What R4 does with a floor (compute capability, or driver) when nodes
/// offer GPUs and none of them carries GPU Feature Discovery's labels for
/// it: an affinity on those labels is one no node can meet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WhenNodesUnlabelled {
    /// The floor is not written, and the pod is warned that it is not
    /// enforced.
    #[default]
    Skip,
    /// The floor is written all the same, and the pod is warned that no
    /// node can meet it.
    Require,
}
