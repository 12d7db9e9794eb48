//! The claims of `check`'s input: a kustomize build or a directory of
//! manifests holds the ResourceClaimTemplates and ResourceClaims beside the
//! workloads that use them, so `check` resolves a pod's claims from the same
//! objects.
//!
//! A device class hands out GPUs when its name is in `gpuDeviceClasses`,
//! or, for a DeviceClass of the input, when its `extendedResourceName` is a
//! GPU resource or one of its CEL selectors selects the driver
//! `gpu.nvidia.com` (judged by [`DeviceClassInfo`], as in the cluster).
//!
//! What the cluster writes is read too when the input holds it (objects
//! saved with `kubectl get -o yaml`): a ResourceClaim's allocation and the
//! Pod it was made for, the ResourceSlices of `gpu.nvidia.com` and the
//! extended resources DeviceClasses serve, by the readers the cluster view
//! uses, so `check` on a claim and its slice judges as the webhook does.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::allocation::{
    AllocatedDevice, DeviceVersions, KeptSlice, MadeFor, read_allocation, read_made_for, read_slice,
};
use super::{ClaimFacts, Resolved};
use crate::document::Document;
use crate::policy::dra::claims::{ClaimKind, parse_object};
use crate::policy::dra::tables::{
    DeviceClassInfo, find_device_versions, is_made_for, made_for_pod,
};
use crate::settings::Settings;

/// (namespace, name)
type Key = (String, String);

/// Claims and claim templates read from a set of objects.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InputClaims {
    /// The DeviceClasses of the input that hand out GPUs.
    gpu_classes: BTreeSet<String>,
    /// The `extendedResourceName`s of the input's DeviceClasses.
    extended_resources: BTreeSet<String>,
    /// (namespace, name) -> what was read.
    templates: BTreeMap<Key, Resolved>,
    claims: BTreeMap<Key, Resolved>,
    /// The ResourceClaims' `status.allocation`, where written.
    allocations: BTreeMap<Key, Vec<AllocatedDevice>>,
    /// The Pods the ResourceClaims were made for, where they say so.
    made_for: BTreeMap<Key, MadeFor>,
    /// The ResourceSlices of `gpu.nvidia.com`.
    slices: Vec<KeptSlice>,
}

impl InputClaims {
    /// Reads every ResourceClaimTemplate, ResourceClaim, DeviceClass and
    /// ResourceSlice of `objects`; objects that name no namespace are in
    /// `default_namespace`.
    pub fn collect(objects: &[&Value], default_namespace: &str, settings: &Settings) -> Self {
        let classes: Vec<(Option<&str>, DeviceClassInfo)> = objects
            .iter()
            .filter(|object| kind_of(object) == Some("DeviceClass"))
            .map(|object| {
                let name = object.pointer("/metadata/name").and_then(Value::as_str);
                (name, DeviceClassInfo::of(object))
            })
            .collect();
        let gpu_classes: BTreeSet<&str> = classes
            .iter()
            .filter(|(_, info)| info.hands_out_gpus(settings))
            .filter_map(|(name, _)| *name)
            .collect();
        let is_gpu_class =
            |class: &str| settings.is_gpu_device_class(class) || gpu_classes.contains(class);
        let mut found = InputClaims {
            gpu_classes: gpu_classes.iter().map(|c| (*c).to_owned()).collect(),
            extended_resources: classes
                .iter()
                .filter_map(|(_, info)| info.extended_resource_name.clone())
                .collect(),
            slices: objects
                .iter()
                .filter(|object| kind_of(object) == Some("ResourceSlice"))
                .filter_map(|object| read_slice(object))
                .collect(),
            ..InputClaims::default()
        };
        for object in objects {
            let Some(kind) = kind_of(object).and_then(ClaimKind::of_kind) else {
                continue;
            };
            let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
            let Some(name) = text("/metadata/name") else {
                continue;
            };
            let namespace = text("/metadata/namespace").unwrap_or(default_namespace);
            let key = (namespace.to_owned(), name.to_owned());
            let document = Document::from_value(object);
            let resolved = match parse_object(document.root(), kind, &is_gpu_class) {
                Ok(summary) => Resolved::Known(summary),
                Err(err) => Resolved::Unreadable(format!("{} {name:?}: {err}", kind.as_str())),
            };
            let table = match kind {
                ClaimKind::Template => &mut found.templates,
                ClaimKind::Claim => {
                    if let Some(devices) = read_allocation(object) {
                        found.allocations.insert(key.clone(), devices);
                    }
                    if let Some(made_for) = read_made_for(document.root()) {
                        found.made_for.insert(key.clone(), made_for);
                    }
                    &mut found.claims
                }
            };
            table.insert(key, resolved);
        }
        found
    }

    fn get(table: &BTreeMap<Key, Resolved>, namespace: &str, name: &str) -> Resolved {
        table
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
            .unwrap_or(Resolved::Unknown)
    }
}

impl ClaimFacts for InputClaims {
    fn resource_claim_template(&self, namespace: &str, name: &str) -> Resolved {
        Self::get(&self.templates, namespace, name)
    }

    fn resource_claim(&self, namespace: &str, name: &str) -> Resolved {
        Self::get(&self.claims, namespace, name)
    }

    fn is_gpu_device_class(&self, class: &str) -> bool {
        self.gpu_classes.contains(class)
    }

    fn allocation(&self, namespace: &str, name: &str) -> Option<Vec<AllocatedDevice>> {
        self.allocations
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    fn device_versions(&self, driver: &str, pool: &str, device: &str) -> Option<DeviceVersions> {
        find_device_versions(&self.slices, driver, pool, device)
    }

    fn claim_made_for(&self, namespace: &str, pod_uid: &str, pod_claim: &str) -> Option<String> {
        self.made_for
            .range((namespace.to_owned(), String::new())..)
            .take_while(|((ns, _), _)| ns == namespace)
            .find(|(_, made_for)| is_made_for(Some(made_for), pod_uid, pod_claim))
            .map(|((_, name), _)| name.clone())
    }

    fn claims_made_for(&self, namespace: &str, pod_uid: &str) -> Option<BTreeMap<String, String>> {
        Some(made_for_pod(
            self.made_for
                .range((namespace.to_owned(), String::new())..)
                .take_while(|((ns, _), _)| ns == namespace)
                .map(|((_, name), made_for)| (name.as_str(), made_for)),
            pod_uid,
        ))
    }

    fn serves_extended_resource(&self, resource: &str) -> bool {
        self.extended_resources.contains(resource)
    }
}

fn kind_of(object: &Value) -> Option<&str> {
    object.get("kind")?.as_str()
}

#[cfg(test)]
mod tests {
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
}
