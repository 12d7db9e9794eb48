//! The GPU Feature Discovery labels R4's node affinity is written on, read both when a pod is
//! created (`compute_affinity.rs`) and when it is updated (`update.rs`).

/// The compute capability's major and minor number of a node's GPUs.
pub const MAJOR_LABEL: &str = "nvidia.com/gpu.compute.major";
pub const MINOR_LABEL: &str = "nvidia.com/gpu.compute.minor";
/// What the names of the labels the driver floor is on start with (the
/// runtime and driver versions, either generation).
pub const CUDA_LABELS: &str = "nvidia.com/cuda";
/// The key of a pod's required node affinity, where R4 writes.
pub(super) const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
