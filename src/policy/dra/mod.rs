//! Dynamic Resource Allocation, as the policy reads it: the device requests
//! of a claim ([`claims`]), the claims and device classes a cluster view
//! keeps ([`tables`]), which containers of a pod hold GPUs through their
//! claims ([`resolution`]), and the claims of `check`'s input ([`input`]).

pub mod claims;
pub mod input;
pub mod resolution;
pub mod tables;

use claims::ClaimSummary;

/// What is known of one ResourceClaim or ResourceClaimTemplate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// Found and read; its requests say whether (and how many) GPUs.
    Known(ClaimSummary),
    /// Not found (it may be created later).
    Unknown,
    /// Found, but its requests have the wrong shape: why, on one line.
    Unreadable(String),
}

/// Where a pod's claims are resolved: the cluster, or the other objects of
/// the input of `check`.
pub trait ClaimFacts: Send + Sync {
    /// The ResourceClaimTemplate `namespace/name`.
    fn resource_claim_template(&self, namespace: &str, name: &str) -> Resolved;

    /// The ResourceClaim `namespace/name`.
    fn resource_claim(&self, namespace: &str, name: &str) -> Resolved;

    /// Whether a DeviceClass known here hands out GPUs (beyond the names of
    /// `gpuDeviceClasses`, which the policy checks itself).
    fn is_gpu_device_class(&self, _class: &str) -> bool {
        false
    }
}
