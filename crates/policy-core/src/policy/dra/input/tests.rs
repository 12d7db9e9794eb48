use super::*;
use crate::policy::dra::claims::DraCount;
use serde_json::json;

fn template(namespace: Option<&str>, name: &str, class: &str) -> Value {
    let mut object = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": class, "count": 2}}]}}}});
    if let Some(namespace) = namespace {
        object["metadata"]["namespace"] = json!(namespace);
    }
    object
}

fn gpu_total(resolved: Resolved) -> Option<DraCount> {
    match resolved {
        Resolved::Known(summary) => summary.gpu_total(),
        other => panic!("not known: {other:?}"),
    }
}

#[test]
fn templates_and_claims_are_found_by_namespace_and_name() {
    let objects = [
        template(Some("ml"), "two", "gpu.nvidia.com"),
        template(None, "two", "rdma.example.com"),
        json!({"kind": "ResourceClaim", "metadata": {"name": "shared", "namespace": "ml"},
                   "spec": {"devices": {"requests": [{"name": "g", "deviceClassName": "mig.nvidia.com"}]}}}),
    ];
    let refs: Vec<&Value> = objects.iter().collect();
    let input = InputClaims::collect(&refs, "default", &Settings::default());
    assert_eq!(
        gpu_total(input.resource_claim_template("ml", "two")),
        Some(DraCount::Exactly(2))
    );
    assert_eq!(
        gpu_total(input.resource_claim_template("default", "two")),
        None
    );
    assert_eq!(
        gpu_total(input.resource_claim("ml", "shared")),
        Some(DraCount::Exactly(1))
    );
    assert_eq!(input.resource_claim("ml", "two"), Resolved::Unknown);
    assert_eq!(
        input.resource_claim_template("other", "two"),
        Resolved::Unknown
    );
}

#[test]
fn device_classes_of_the_input_count_by_selector_or_extended_resource() {
    let objects = [
        json!({"kind": "DeviceClass", "metadata": {"name": "big-gpus.example.com"},
                   "spec": {"selectors": [{"cel": {"expression":
                       "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].productName.contains('H100')"}}]}}),
        json!({"kind": "DeviceClass", "metadata": {"name": "ext.example.com"},
                   "spec": {"extendedResourceName": "nvidia.com/gpu"}}),
        json!({"kind": "DeviceClass", "metadata": {"name": "imex.example.com"},
                   "spec": {"selectors": [{"cel": {"expression": "device.driver == \"compute-domain.nvidia.com\""}}]}}),
        template(Some("ml"), "by-selector", "big-gpus.example.com"),
        template(Some("ml"), "by-resource", "ext.example.com"),
        template(Some("ml"), "imex", "imex.example.com"),
    ];
    let refs: Vec<&Value> = objects.iter().collect();
    let input = InputClaims::collect(&refs, "default", &Settings::default());
    let gpus = |name| gpu_total(input.resource_claim_template("ml", name));
    assert_eq!(gpus("by-selector"), Some(DraCount::Exactly(2)));
    assert_eq!(gpus("by-resource"), Some(DraCount::Exactly(2)));
    assert_eq!(gpus("imex"), None);
}

/// A claim of `ml` made from the pod claim `gpu` of the pod `uid`,
/// allocated `device` of the pool `node-1`.
fn allocated_claim(name: &str, uid: &str, device: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ml",
                "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "trainer",
                                     "uid": uid, "controller": true}]},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": device}]}}}})
}

fn slice(name: &str, driver: &str) -> Value {
    let versions = json!({
            "cudaComputeCapability": {"version": "8.0.0"},
            "cudaDriverVersion": {"version": "13.0.0"},
            "driverVersion": {"version": "580.126.20"}});
    let mut mig = versions.clone();
    mig["type"] = json!({"string": "mig"});
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": "node-1", "pool": {"name": "node-1"},
                "devices": [
                    {"name": "gpu-0", "attributes": versions},
                    {"name": "gpu-1-mig-1g10gb-0", "attributes": mig},
                    {"name": "gpu-2", "attributes": {"type": {"string": "vfio"}}}]}})
}

#[test]
fn what_the_cluster_wrote_is_read_from_the_input() {
    let objects = [
        allocated_claim("trainer-gpu-abcde", "uid-1", "gpu-1-mig-1g10gb-0"),
        allocated_claim("other-gpu-fghij", "uid-2", "gpu-2"),
        slice("node-1-gpu", "gpu.nvidia.com"),
        slice("node-1-rdma", "rdma.example.com"),
        json!({"kind": "DeviceClass", "metadata": {"name": "ext.example.com"},
                   "spec": {"extendedResourceName": "example.com/accel"}}),
    ];
    let refs: Vec<&Value> = objects.iter().collect();
    let input = InputClaims::collect(&refs, "default", &Settings::default());

    let devices = input.allocation("ml", "trainer-gpu-abcde");
    assert_eq!(
        devices.as_deref().map(|d| d[0].device.as_str()),
        Some("gpu-1-mig-1g10gb-0"),
        "{devices:?}"
    );
    assert_eq!(input.allocation("ml", "missing"), None);

    assert_eq!(
        input.claim_made_for("ml", "uid-1", "gpu").as_deref(),
        Some("trainer-gpu-abcde")
    );
    assert_eq!(input.claim_made_for("ml", "uid-3", "gpu"), None);
    assert_eq!(input.claim_made_for("ml", "uid-1", "other"), None);
    assert_eq!(input.claim_made_for("default", "uid-1", "gpu"), None);

    let mig = input.device_versions("gpu.nvidia.com", "node-1", "gpu-1-mig-1g10gb-0");
    assert_eq!(
        mig.as_ref().and_then(|v| v.cuda_driver_version.as_deref()),
        Some("13.0.0")
    );
    assert_eq!(
        input.device_versions("gpu.nvidia.com", "node-1", "gpu-2"),
        Some(DeviceVersions::default()),
        "a VFIO device publishes no versions"
    );
    assert_eq!(
        input.device_versions("rdma.example.com", "node-1", "gpu-0"),
        None,
        "the slice of another driver is ignored"
    );
    assert_eq!(
        input.device_versions("gpu.nvidia.com", "node-2", "gpu-0"),
        None
    );

    // Not a GPU resource by default, still served by the class.
    assert!(input.serves_extended_resource("example.com/accel"));
    assert!(!input.is_gpu_device_class("ext.example.com"));
    assert!(!input.serves_extended_resource("nvidia.com/gpu"));
}

#[test]
fn a_malformed_template_is_unreadable_with_the_field_named() {
    let mut bad = template(Some("ml"), "bad", "gpu.nvidia.com");
    bad["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = json!("two");
    let input = InputClaims::collect(&[&bad], "default", &Settings::default());
    assert_eq!(
        input.resource_claim_template("ml", "bad"),
        Resolved::Unreadable(
            "ResourceClaimTemplate \"bad\": spec.spec.devices.requests[0].exactly.count: \
                 must be a whole number above 0, not a string"
                .to_owned()
        )
    );
}
