use super::*;
use crate::policy::testing::leaked;
use serde_json::json;

#[test]
fn an_allocated_claim_names_its_devices() {
    let claim = json!({"status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0"},
        {"request": "broken", "driver": 7},
    ]}}}});
    assert_eq!(
        read_allocation(&claim),
        Some(vec![AllocatedDevice {
            request: "gpu".to_owned(),
            driver: "gpu.nvidia.com".to_owned(),
            pool: "node-1".to_owned(),
            device: "gpu-0".to_owned(),
        }])
    );
    assert_eq!(read_allocation(&json!({"status": {}})), None);
    let many: Vec<Value> = (0..1000)
        .map(|i| json!({"request": "r", "driver": "d", "pool": "p", "device": format!("d{i}")}))
        .collect();
    let claim = json!({"status": {"allocation": {"devices": {"results": many}}}});
    assert_eq!(read_allocation(&claim).map(|d| d.len()), Some(MAX_RESULTS));
}

#[test]
fn a_claim_made_for_a_pod_names_it() {
    let claim = json!({"metadata": {
    "annotations": {POD_CLAIM_NAME_ANNOTATION: "single-gpu"},
    "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u-0", "controller": true},
        {"apiVersion": "v1", "kind": "Pod", "name": "pod1", "uid": "u-1", "controller": true},
    ]}});
    assert_eq!(
        read_made_for(leaked(&claim)),
        Some(MadeFor {
            pod: "pod1".to_owned(),
            pod_uid: "u-1".to_owned(),
            pod_claim: Some("single-gpu".to_owned()),
        })
    );
    let not_controller = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "pod1", "uid": "u-1"}]}});
    assert_eq!(read_made_for(leaked(&not_controller)), None);
}

#[test]
fn only_slices_of_the_nvidia_driver_are_kept() {
    let slice = json!({"spec": {"driver": "gpu.nvidia.com", "pool": {"name": "node-1"},
    "devices": [
        {"name": "gpu-0", "attributes": {
            "cudaComputeCapability": {"version": "8.0.0"},
            "cudaDriverVersion": {"version": "13.0.0"},
            "driverVersion": {"version": "580.126.20"},
            "productName": {"string": "NVIDIA A100-SXM4-40GB"},
            "type": {"string": "gpu"}}},
        {"name": "gpu-1", "attributes": {"type": {"string": "vfio"}}},
        {"name": "gpu-2", "basic": {"attributes": {
            "productName": {"string": format!("NVIDIA {}", "X".repeat(60))}}}},
        {"name": "gpu-3", "attributes": {"productName": {"version": "1.0.0"}}},
    ]}});
    let kept = read_slice(&slice);
    assert_eq!(kept.as_ref().map(|s| s.pool.as_str()), Some("node-1"), "{kept:?}");
    let devices = kept.map(|s| s.devices).unwrap_or_default();
    assert_eq!(
        devices[0].versions,
        DeviceVersions {
            compute_capability: Some("8.0.0".to_owned()),
            cuda_driver_version: Some("13.0.0".to_owned()),
            driver_version: Some("580.126.20".to_owned()),
            product_name: Some("NVIDIA A100-SXM4-40GB".to_owned()),
        }
    );
    assert_eq!(devices[1].versions, DeviceVersions::default());
    // Longer than a label value, or not a string: not kept.
    assert_eq!(devices[2].versions, DeviceVersions::default());
    assert_eq!(devices[3].versions, DeviceVersions::default());
    let other =
        json!({"spec": {"driver": "rdma.example.com", "pool": {"name": "n"}, "devices": []}});
    assert_eq!(read_slice(&other), None);
}
