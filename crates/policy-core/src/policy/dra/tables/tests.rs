use super::*;
use crate::policy::dra::allocation::{POD_CLAIM_NAME_ANNOTATION, read_slice};
use crate::policy::dra::claims::DraCount;
use crate::settings::Config;
use serde_json::json;

fn key(namespace: &str, name: &str) -> ClaimKey {
    (namespace.to_owned(), name.to_owned())
}

fn template(class: &str, count: u64) -> Value {
    json!({"kind": "ResourceClaimTemplate", "metadata": {"name": "t", "namespace": "ml"},
               "spec": {"spec": {"devices": {"requests": [
                   {"name": "gpu", "exactly": {"deviceClassName": class, "count": count}}]}}}})
}

fn gpu_total(resolved: Resolved) -> Option<DraCount> {
    match resolved {
        Resolved::Known(summary) => summary.gpu_total(),
        other => panic!("not known: {other:?}"),
    }
}

#[test]
fn a_device_class_that_arrives_after_the_claim_counts() {
    let mut tables = ClaimTables::default();
    tables.templates.insert(
        key("ml", "t"),
        KeptClaim::of("t", &template("h100.example.com", 3), ClaimKind::Template),
    );
    assert_eq!(gpu_total(tables.resource_claim_template("ml", "t")), None);
    tables.device_classes.insert(
        "h100.example.com".to_owned(),
        DeviceClassInfo::of(&json!({"spec": {"selectors": [{"cel": {"expression":
                "device.driver == \"gpu.nvidia.com\""}}]}})),
    );
    assert_eq!(gpu_total(tables.resource_claim_template("ml", "t")), Some(DraCount::Exactly(3)));
    assert!(tables.is_gpu_device_class("h100.example.com"));
    assert_eq!(tables.resource_claim("ml", "t"), Resolved::Unknown);
}

#[test]
fn gpu_classes_follow_the_settings_in_force() {
    let mut tables = ClaimTables::default();
    tables.claims.insert(
            key("ml", "c"),
            KeptClaim::of(
                "c",
                &json!({"metadata": {"name": "c"}, "spec": {"devices": {"requests": [
                    {"name": "g", "exactly": {"deviceClassName": "ext.example.com"}},
                    {"name": "h", "exactly": {"deviceClassName": "named.example.com", "count": 2}}]}}}),
                ClaimKind::Claim,
            ),
        );
    tables.device_classes.insert(
        "ext.example.com".to_owned(),
        DeviceClassInfo::of(&json!({"spec": {"extendedResourceName": "example.com/accel"}})),
    );
    assert_eq!(gpu_total(tables.resource_claim("ml", "c")), None);
    let mut config = Config::default();
    config.gpu_resources.push("example.com/accel".to_owned());
    config.gpu_device_classes.push("named.example.com".to_owned());
    let settings = Settings::from_config(config).unwrap_or_default();
    tables.settings = GpuSettings::new(Arc::new(settings));
    assert_eq!(gpu_total(tables.resource_claim("ml", "c")), Some(DraCount::Exactly(3)));
}

#[test]
fn a_malformed_claim_is_kept_as_unreadable() {
    let mut bad = template("gpu.nvidia.com", 1);
    bad["spec"]["spec"]["devices"]["requests"] = json!("all");
    let mut tables = ClaimTables::default();
    tables.templates.insert(key("ml", "t"), KeptClaim::of("t", &bad, ClaimKind::Template));
    assert_eq!(
        tables.resource_claim_template("ml", "t"),
        Resolved::Unreadable(
            "ResourceClaimTemplate \"t\": spec.spec.devices.requests: must be a list, not a string"
                .to_owned()
        )
    );
}

/// A ResourceClaim made from the pod claim `gpu` of the pod with UID
/// `uid`, allocated `gpu-0` of the pool `node-1`.
fn allocated_claim(name: &str, uid: &str) -> Value {
    json!({"kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ml",
                "annotations": {POD_CLAIM_NAME_ANNOTATION: "gpu"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "trainer",
                                     "uid": uid, "controller": true}]},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0"}]}}}})
}

/// The slice of `node-1`: a full GPU, a MIG device and a VFIO device
/// (which publishes no versions).
fn node_slice() -> Value {
    let versions = json!({
            "cudaComputeCapability": {"version": "9.0.0"},
            "cudaDriverVersion": {"version": "12.8.0"},
            "driverVersion": {"version": "570.124.6"}});
    let mut mig = versions.clone();
    mig["type"] = json!({"string": "mig"});
    json!({"kind": "ResourceSlice", "metadata": {"name": "node-1-gpu.nvidia.com-x7k2p"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": "node-1",
                "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": "gpu-0", "attributes": versions},
                    {"name": "gpu-1-mig-1g10gb-0", "attributes": mig},
                    {"name": "gpu-2", "attributes": {"type": {"string": "vfio"}}}]}})
}

fn with_slice(tables: &mut ClaimTables, slice: &Value) {
    let name = slice["metadata"]["name"].as_str().unwrap_or_default();
    if let Some(kept) = read_slice(slice) {
        tables.slices.insert(name.to_owned(), kept);
    }
}

#[test]
fn an_allocated_claim_says_its_devices_and_its_pod() {
    let mut tables = ClaimTables::default();
    for (name, uid) in [("trainer-gpu-abcde", "uid-1"), ("other-gpu-fghij", "uid-2")] {
        let claim = allocated_claim(name, uid);
        tables.claims.insert(key("ml", name), KeptClaim::of(name, &claim, ClaimKind::Claim));
    }
    let mut pending = allocated_claim("pending", "uid-3");
    pending["status"] = json!({});
    tables
        .claims
        .insert(key("ml", "pending"), KeptClaim::of("pending", &pending, ClaimKind::Claim));
    let devices = tables.allocation("ml", "trainer-gpu-abcde");
    assert_eq!(devices.as_deref().map(|d| d[0].device.as_str()), Some("gpu-0"), "{devices:?}");
    assert_eq!(tables.allocation("ml", "pending"), None);
    assert_eq!(tables.allocation("ml", "missing"), None);
    assert_eq!(tables.allocation("other", "trainer-gpu-abcde"), None);

    let made = |namespace: &str, uid: &str| tables.claims_made_for(namespace, uid);
    let one = |pod_claim: &str, claim: &str| {
        Some(BTreeMap::from([(pod_claim.to_owned(), claim.to_owned())]))
    };
    assert_eq!(made("ml", "uid-1"), one("gpu", "trainer-gpu-abcde"));
    assert_eq!(made("ml", "uid-2"), one("gpu", "other-gpu-fghij"));
    // Another pod's UID, another namespace.
    assert_eq!(made("ml", "uid-9"), Some(BTreeMap::new()));
    assert_eq!(made("m", "uid-1"), Some(BTreeMap::new()));
    assert_eq!(made("mlx", "uid-1"), Some(BTreeMap::new()));
}

#[test]
fn templates_keep_no_owner_or_allocation() {
    let mut object = template("gpu.nvidia.com", 1);
    object["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod",
            "name": "p", "uid": "u", "controller": true}]);
    let kept = KeptClaim::of("t", &object, ClaimKind::Template);
    assert_eq!((kept.made_for, kept.allocation), (None, None));
}

#[test]
fn device_versions_come_from_the_nvidia_slices() {
    let mut tables = ClaimTables::default();
    with_slice(&mut tables, &node_slice());
    let mut other = node_slice();
    other["metadata"]["name"] = json!("node-1-rdma");
    other["spec"]["driver"] = json!("rdma.example.com");
    with_slice(&mut tables, &other);
    assert_eq!(tables.slices.len(), 1, "the slice of another driver is not kept");

    let full = tables.device_versions(GPU_DRIVER, "node-1", "gpu-0");
    assert_eq!(full.as_ref().and_then(|v| v.compute_capability.as_deref()), Some("9.0.0"));
    assert_eq!(full.as_ref().and_then(|v| v.driver_version.as_deref()), Some("570.124.6"));
    let mig = tables.device_versions(GPU_DRIVER, "node-1", "gpu-1-mig-1g10gb-0");
    assert_eq!(mig, full, "a MIG device publishes its GPU's versions");
    assert_eq!(
        tables.device_versions(GPU_DRIVER, "node-1", "gpu-2"),
        Some(DeviceVersions::default()),
        "a VFIO device is known and publishes none"
    );
    assert_eq!(tables.device_versions(GPU_DRIVER, "node-2", "gpu-0"), None);
    assert_eq!(tables.device_versions(GPU_DRIVER, "node-1", "gpu-7"), None);
    assert_eq!(tables.device_versions("rdma.example.com", "node-1", "gpu-0"), None);
}

#[test]
fn a_device_class_serves_its_extended_resource_whatever_its_name() {
    let mut tables = ClaimTables::default();
    tables.device_classes.insert(
        "ext.example.com".to_owned(),
        DeviceClassInfo::of(&json!({"spec": {"extendedResourceName": "nvidia.com/gpu"}})),
    );
    tables
        .device_classes
        .insert("plain.example.com".to_owned(), DeviceClassInfo::of(&json!({"spec": {}})));
    assert!(tables.serves_extended_resource("nvidia.com/gpu"));
    assert!(!tables.serves_extended_resource("example.com/accel"));
}

#[test]
fn selectors_of_other_drivers_are_no_gpu_classes() {
    let imex = DeviceClassInfo::of(&json!({"spec": {"selectors": [{"cel": {"expression":
            "device.driver == 'compute-domain.nvidia.com'"}}]}}));
    assert!(!imex.hands_out_gpus(&Settings::default()));
    let single = DeviceClassInfo::of(&json!({"spec": {"selectors": [{"cel": {"expression":
            "device.driver=='gpu.nvidia.com'"}}]}}));
    assert!(single.hands_out_gpus(&Settings::default()));
}

// The tables of check's input.

fn input_template(namespace: Option<&str>, name: &str, class: &str) -> Value {
    let mut object = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": class, "count": 2}}]}}}});
    if let Some(namespace) = namespace {
        object["metadata"]["namespace"] = json!(namespace);
    }
    object
}

#[test]
fn templates_and_claims_are_found_by_namespace_and_name() {
    let objects = [
        input_template(Some("ml"), "two", "gpu.nvidia.com"),
        input_template(None, "two", "rdma.example.com"),
        json!({"kind": "ResourceClaim", "metadata": {"name": "shared", "namespace": "ml"},
                   "spec": {"devices": {"requests": [{"name": "g", "deviceClassName": "mig.nvidia.com"}]}}}),
    ];
    let refs: Vec<&Value> = objects.iter().collect();
    let input = ClaimTables::collect(&refs, "default", &Settings::default());
    assert_eq!(gpu_total(input.resource_claim_template("ml", "two")), Some(DraCount::Exactly(2)));
    assert_eq!(gpu_total(input.resource_claim_template("default", "two")), None);
    assert_eq!(gpu_total(input.resource_claim("ml", "shared")), Some(DraCount::Exactly(1)));
    assert_eq!(input.resource_claim("ml", "two"), Resolved::Unknown);
    assert_eq!(input.resource_claim_template("other", "two"), Resolved::Unknown);
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
        input_template(Some("ml"), "by-selector", "big-gpus.example.com"),
        input_template(Some("ml"), "by-resource", "ext.example.com"),
        input_template(Some("ml"), "imex", "imex.example.com"),
    ];
    let refs: Vec<&Value> = objects.iter().collect();
    let input = ClaimTables::collect(&refs, "default", &Settings::default());
    let gpus = |name| gpu_total(input.resource_claim_template("ml", name));
    assert_eq!(gpus("by-selector"), Some(DraCount::Exactly(2)));
    assert_eq!(gpus("by-resource"), Some(DraCount::Exactly(2)));
    assert_eq!(gpus("imex"), None);
}

/// Of two objects of one kind and name the later wins, as applying the
/// input would leave them; a DeviceClass needs a name, a slice does not.
#[test]
fn the_later_of_two_objects_of_one_name_wins() {
    let class = |name: Option<&str>, resource: &str| {
        let mut class = json!({"kind": "DeviceClass", "metadata": {},
                                "spec": {"extendedResourceName": resource}});
        if let Some(name) = name {
            class["metadata"]["name"] = json!(name);
        }
        class
    };
    let slice = |name: Option<&str>, device: &str| {
        let mut slice = json!({"kind": "ResourceSlice", "metadata": {},
            "spec": {"driver": "gpu.nvidia.com", "pool": {"name": "node-1"},
                     "devices": [{"name": device}]}});
        if let Some(name) = name {
            slice["metadata"]["name"] = json!(name);
        }
        slice
    };
    let objects = [
        class(Some("twice.example.com"), "nvidia.com/gpu"),
        class(Some("twice.example.com"), "example.com/fpga"),
        class(None, "example.com/nameless"),
        slice(Some("node-1-gpus"), "gpu-0"),
        slice(Some("node-1-gpus"), "gpu-1"),
        slice(None, "gpu-2"),
    ];
    let refs: Vec<&Value> = objects.iter().collect();
    let input = ClaimTables::collect(&refs, "default", &Settings::default());
    assert!(!input.is_gpu_class("twice.example.com"));
    assert_eq!(input.device_classes.len(), 1);
    let devices: Vec<&str> = input
        .slices
        .values()
        .flat_map(|slice| &slice.devices)
        .map(|device| device.name.as_str())
        .collect();
    assert_eq!(devices, ["gpu-2", "gpu-1"]);
}

/// A claim of `ml` made from the pod claim `gpu` of the pod `uid`,
/// allocated `device` of the pool `node-1`.
fn allocated_input_claim(name: &str, uid: &str, device: &str) -> Value {
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
        allocated_input_claim("trainer-gpu-abcde", "uid-1", "gpu-1-mig-1g10gb-0"),
        allocated_input_claim("other-gpu-fghij", "uid-2", "gpu-2"),
        slice("node-1-gpu", "gpu.nvidia.com"),
        slice("node-1-rdma", "rdma.example.com"),
        json!({"kind": "DeviceClass", "metadata": {"name": "ext.example.com"},
                   "spec": {"extendedResourceName": "example.com/accel"}}),
    ];
    let refs: Vec<&Value> = objects.iter().collect();
    let input = ClaimTables::collect(&refs, "default", &Settings::default());

    let devices = input.allocation("ml", "trainer-gpu-abcde");
    assert_eq!(
        devices.as_deref().map(|d| d[0].device.as_str()),
        Some("gpu-1-mig-1g10gb-0"),
        "{devices:?}"
    );
    assert_eq!(input.allocation("ml", "missing"), None);

    let made = |namespace: &str, uid: &str| input.claims_made_for(namespace, uid);
    assert_eq!(
        made("ml", "uid-1"),
        Some(BTreeMap::from([("gpu".to_owned(), "trainer-gpu-abcde".to_owned())]))
    );
    assert_eq!(made("ml", "uid-3"), Some(BTreeMap::new()));
    assert_eq!(made("default", "uid-1"), Some(BTreeMap::new()));

    let mig = input.device_versions("gpu.nvidia.com", "node-1", "gpu-1-mig-1g10gb-0");
    assert_eq!(mig.as_ref().and_then(|v| v.cuda_driver_version.as_deref()), Some("13.0.0"));
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
    assert_eq!(input.device_versions("gpu.nvidia.com", "node-2", "gpu-0"), None);

    // Not a GPU resource by default, still served by the class.
    assert!(input.serves_extended_resource("example.com/accel"));
    assert!(!input.is_gpu_device_class("ext.example.com"));
    assert!(!input.serves_extended_resource("nvidia.com/gpu"));
}

#[test]
fn a_malformed_template_is_unreadable_with_the_field_named() {
    let mut bad = input_template(Some("ml"), "bad", "gpu.nvidia.com");
    bad["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = json!("two");
    let input = ClaimTables::collect(&[&bad], "default", &Settings::default());
    assert_eq!(
        input.resource_claim_template("ml", "bad"),
        Resolved::Unreadable(
            "ResourceClaimTemplate \"bad\": spec.spec.devices.requests[0].exactly.count: \
                 must be a whole number above 0, not a string"
                .to_owned()
        )
    );
}
