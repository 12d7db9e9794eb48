//! Dynamic Resource Allocation objects as the cluster writes them, to
//! insert into the fake API server (or to give `check`): the ResourceSlice
//! a DRA driver publishes for a node, its devices with the NVIDIA driver's
//! version attributes, and a ResourceClaim the resource claim controller
//! made for a pod, then allocated by the scheduler.

use serde_json::{Value, json};

/// The NVIDIA DRA driver's name for its GPU devices.
pub const NVIDIA_DRIVER: &str = "gpu.nvidia.com";

/// The version attributes the NVIDIA DRA driver publishes of a GPU.
fn versions(compute_capability: &str, cuda_driver: &str, driver: &str) -> Value {
    json!({
        "cudaComputeCapability": {"version": compute_capability},
        "cudaDriverVersion": {"version": cuda_driver},
        "driverVersion": {"version": driver},
    })
}

/// A full GPU (`type: gpu`) and the versions it publishes.
pub fn gpu(name: &str, compute_capability: &str, cuda_driver: &str, driver: &str) -> Value {
    let mut attributes = versions(compute_capability, cuda_driver, driver);
    attributes["type"] = json!({"string": "gpu"});
    json!({"name": name, "attributes": attributes})
}

/// A MIG device (`type: mig`): it publishes its GPU's versions.
pub fn mig(name: &str, compute_capability: &str, cuda_driver: &str, driver: &str) -> Value {
    let mut attributes = versions(compute_capability, cuda_driver, driver);
    attributes["type"] = json!({"string": "mig"});
    attributes["profile"] = json!({"string": "1g.10gb"});
    json!({"name": name, "attributes": attributes})
}

/// A GPU for VFIO passthrough (`type: vfio`): it publishes no versions.
pub fn vfio(name: &str) -> Value {
    json!({"name": name, "attributes": {"type": {"string": "vfio"}}})
}

/// The ResourceSlice `name` of `driver`, for the node and pool `pool`
/// (one slice in the pool).
pub fn resource_slice(name: &str, driver: &str, pool: &str, devices: &[Value]) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": driver, "nodeName": pool,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "devices": devices}})
}

/// The ResourceClaim `namespace/name` created on its own, for pods to
/// reference (`resourceClaimName`), possibly several: one request `gpu` of
/// `gpu.nvidia.com`; not allocated yet.
pub fn shared_claim(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}})
}

/// The ResourceClaim `namespace/name` made for the pod `pod` (UID
/// `pod_uid`) from its pod claim `pod_claim`: owned by the pod, annotated
/// with the pod claim's name, one request `gpu` of `gpu.nvidia.com`; not
/// allocated yet.
/// A claim's spec of 8 GPUs of the `gpu.nvidia.com` class: a pod's
/// `maxPerPod` (8) in one claim.
pub fn eight_gpus() -> Value {
    json!({"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 8}}]}})
}

/// A ResourceClaimTemplate of [`eight_gpus`].
pub fn eight_gpu_template(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace}, "spec": {"spec": eight_gpus()}})
}

pub fn claim_for_pod(
    namespace: &str,
    name: &str,
    pod: &str,
    pod_uid: &str,
    pod_claim: &str,
) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace,
            "annotations": {"resource.kubernetes.io/pod-claim-name": pod_claim},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": pod_uid,
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}})
}

/// `claim`, allocated by the scheduler the devices `(pool, device)` of
/// `gpu.nvidia.com` for its request `gpu`.
pub fn allocated(mut claim: Value, devices: &[(&str, &str)]) -> Value {
    let results: Vec<Value> = devices
        .iter()
        .map(|(pool, device)| {
            json!({"request": "gpu", "driver": NVIDIA_DRIVER, "pool": pool, "device": device})
        })
        .collect();
    claim["status"] = json!({"allocation": {"devices": {"results": results}}});
    claim
}

/// The slices of two nodes: a P100 (compute capability 6.0) as `gpu-0` of
/// pool `node-1`, an A100 (8.0) as `gpu-0` of pool `node-2`, on the same
/// driver (CUDA 13.0): below and above what a CUDA 13 image needs.
pub fn p100_and_a100_slices() -> [Value; 2] {
    [
        resource_slice(
            "node-1-gpu.nvidia.com",
            NVIDIA_DRIVER,
            "node-1",
            &[gpu("gpu-0", "6.0.0", "13.0.0", "580.95.05")],
        ),
        resource_slice(
            "node-2-gpu.nvidia.com",
            NVIDIA_DRIVER,
            "node-2",
            &[gpu("gpu-0", "8.0.0", "13.0.0", "580.95.05")],
        ),
    ]
}
