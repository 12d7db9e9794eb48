//! Dynamic Resource Allocation as the policy reads it: [`ClaimFacts`], where
//! a pod's claims resolve, and [`Resolved`], what is known of one claim.

pub mod allocation;
pub mod claims;
pub mod floor;
pub mod owner;
pub mod products;
pub mod resolution;
pub mod tables;

use std::collections::BTreeMap;

use allocation::{AllocatedDevice, DeviceVersions};
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

/// Where a pod's claims are resolved: the cluster, or the other objects of the input of `check`.
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

    /// The devices allocated to the ResourceClaim `namespace/name`; None if unallocated or unknown.
    fn allocation(&self, _namespace: &str, _name: &str) -> Option<Vec<AllocatedDevice>> {
        None
    }

    /// What the ResourceSlices say of a `gpu.nvidia.com` device; None when no known slice has it.
    fn device_versions(&self, _driver: &str, _pool: &str, _device: &str) -> Option<DeviceVersions> {
        None
    }

    /// The ResourceClaims made for the pod whose UID is `pod_uid` from its
    /// templates (the claims of a running pod): pod claim -> claim name (of
    /// two, the first by name). None where no claim is known here.
    fn claims_made_for(
        &self,
        _namespace: &str,
        _pod_uid: &str,
    ) -> Option<BTreeMap<String, String>> {
        None
    }

    /// Whether a DeviceClass known here serves the extended resource
    /// `resource` (`spec.extendedResourceName`): a container's limit of it
    /// may be met by a claim the scheduler makes.
    fn serves_extended_resource(&self, _resource: &str) -> bool {
        false
    }
}
