//! `gpuSharing` and `privilegedGpu`: the GPU sharing schemes the cluster runs, whose containers are
//! GPU containers though they ask for no whole card, and what a privileged GPU container gets.

use serde::{Deserialize, Serialize};

/// HAMi's share resources: percent of a card's cores, MiB of its memory,
/// percent of its memory. Values of one card's share, never cards.
pub const HAMI_CORES: &str = "nvidia.com/gpucores";
pub const HAMI_MEMORY: &str = "nvidia.com/gpumem";
pub const HAMI_MEMORY_PERCENTAGE: &str = "nvidia.com/gpumem-percentage";
pub const HAMI_RESOURCES: [&str; 3] = [HAMI_CORES, HAMI_MEMORY, HAMI_MEMORY_PERCENTAGE];
/// The whole-card resource HAMi counts in, set to 1 when a container asks only for a share.
pub const HAMI_CARDS: &str = "nvidia.com/gpu";

/// The sharing schemes the cluster runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GpuSharing {
    pub kai_scheduler: KaiScheduler,
    pub hami: Hami,
}

/// KAI-Scheduler's GPU fractions: a pod annotated `gpu-fraction` or
/// `gpu-memory` and scheduled by KAI gets a share of a card in one
/// container, through `NVIDIA_VISIBLE_DEVICES` from a ConfigMap KAI writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct KaiScheduler {
    pub enabled: bool,
    /// The `spec.schedulerName` of KAI's pods: only KAI binds them, so only
    /// they get the ConfigMap KAI writes.
    pub scheduler_name: String,
}

impl Default for KaiScheduler {
    fn default() -> Self {
        Self { enabled: true, scheduler_name: "kai-scheduler".to_owned() }
    }
}

/// HAMi's vGPU: `nvidia.com/gpucores`, `nvidia.com/gpumem` and
/// `nvidia.com/gpumem-percentage` make a container a GPU container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Hami {
    pub enabled: bool,
}

impl Default for Hami {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// What R6 does with a privileged GPU container, which sees every card of
/// the node, not only its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrivilegedGpu {
    #[default]
    Warn,
    Deny,
}

impl GpuSharing {
    /// The problem with the block, if any.
    pub(super) fn problem(&self) -> Option<String> {
        let kai = &self.kai_scheduler;
        (kai.enabled && kai.scheduler_name.trim().is_empty())
            .then(|| "gpuSharing.kaiScheduler.schedulerName: must not be empty".to_owned())
    }

    /// A HAMi share resource, when HAMi is on.
    pub fn is_share_resource(&self, name: &str) -> bool {
        self.hami.enabled && HAMI_RESOURCES.contains(&name)
    }
}
