//! The Dynamic Resource Allocation objects of a cluster view, kept lean: the
//! requests of each ResourceClaim and ResourceClaimTemplate as written
//! ([`ClaimSpec`]: per request, its device classes, counts, `All` and
//! `adminAccess`), and what decides whether a DeviceClass hands out GPUs.
//!
//! Which device classes are GPU classes is decided when a claim is read,
//! with the settings in force, never when it is kept: a DeviceClass that
//! arrives after a claim, or a `gpuDeviceClasses` entry added at reload,
//! still counts.
//!
//! A device class hands out GPUs when its name is in `gpuDeviceClasses`,
//! when its `extendedResourceName` is a GPU resource, or when one of its CEL
//! selectors selects the driver `gpu.nvidia.com` ([`DeviceClassInfo`]; the
//! DeviceClasses of `check`'s input are judged by the same code).
//!
//! Of a ResourceClaim it also keeps what the cluster wrote on it: the
//! devices allocated (`status.allocation`) and the Pod it was made for (its
//! controller owner and `resource.kubernetes.io/pod-claim-name`), read by
//! [`allocation`](super::allocation); and, of the ResourceSlices of the
//! NVIDIA DRA driver, each device's version attributes, so a claim's
//! devices can be judged against a pod's CUDA floors.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::allocation::{
    AllocatedDevice, DeviceVersions, KeptSlice, MadeFor, read_allocation, read_made_for,
};
use super::{ClaimFacts, Resolved};
use crate::document::Document;
use crate::policy::dra::claims::{ClaimKind, ClaimSpec, read_object};
use crate::settings::Settings;

pub use super::allocation::GPU_DRIVER;

/// What decides whether a DeviceClass hands out GPUs, whatever the
/// settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceClassInfo {
    /// A CEL selector compares `device.driver` with `gpu.nvidia.com`.
    pub selects_gpu_driver: bool,
    /// `spec.extendedResourceName`.
    pub extended_resource_name: Option<String>,
}

impl DeviceClassInfo {
    /// Reads a DeviceClass object.
    pub fn of(class: &Value) -> Self {
        let wanted = [
            format!("device.driver==\"{GPU_DRIVER}\""),
            format!("device.driver=='{GPU_DRIVER}'"),
        ];
        let selects_gpu_driver = class
            .pointer("/spec/selectors")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|selector| selector.pointer("/cel/expression")?.as_str())
            .any(|expression| {
                let compact: String = expression.chars().filter(|c| !c.is_whitespace()).collect();
                wanted.iter().any(|w| compact.contains(w.as_str()))
            });
        let extended_resource_name = class
            .pointer("/spec/extendedResourceName")
            .and_then(Value::as_str)
            .map(str::to_owned);
        DeviceClassInfo {
            selects_gpu_driver,
            extended_resource_name,
        }
    }

    /// Whether the class hands out GPUs under `settings` (its name is
    /// checked against `gpuDeviceClasses` by the caller).
    pub fn hands_out_gpus(&self, settings: &Settings) -> bool {
        self.selects_gpu_driver
            || self
                .extended_resource_name
                .as_deref()
                .is_some_and(|name| settings.is_gpu_resource(name))
    }
}

/// The requests of a ResourceClaim or ResourceClaimTemplate as kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptSpec {
    /// Its requests as written.
    Read(ClaimSpec),
    /// Its requests have the wrong shape: why, on one line.
    Unreadable(String),
}

/// A ResourceClaim or ResourceClaimTemplate as kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptClaim {
    pub spec: KeptSpec,
    /// The Pod a ResourceClaim was made for (None for templates, and for
    /// claims no Pod controls).
    pub made_for: Option<MadeFor>,
    /// The devices allocated to a ResourceClaim (None for templates, and
    /// until the scheduler allocates it).
    pub allocation: Option<Vec<AllocatedDevice>>,
}

impl KeptClaim {
    /// Reads the ResourceClaim or ResourceClaimTemplate `name`: the whole
    /// object (at least its `spec`; for a claim, with its `metadata` and
    /// `status` when they are to be known).
    pub fn of(name: &str, object: &Value, kind: ClaimKind) -> Self {
        let document = Document::from_value(object);
        let spec = match read_object(document.root(), kind) {
            Ok(spec) => KeptSpec::Read(spec),
            Err(err) => KeptSpec::Unreadable(format!("{} {name:?}: {err}", kind.as_str())),
        };
        let (made_for, allocation) = match kind {
            ClaimKind::Claim => (read_made_for(document.root()), read_allocation(object)),
            ClaimKind::Template => (None, None),
        };
        KeptClaim {
            spec,
            made_for,
            allocation,
        }
    }
}

/// The settings GPU classes are judged with (`gpuDeviceClasses`, the GPU
/// resource patterns), shared with the configuration in force. Two are
/// equal when their configurations are.
#[derive(Debug, Clone, Default)]
pub struct GpuSettings(Arc<Settings>);

impl GpuSettings {
    pub fn new(settings: Arc<Settings>) -> Self {
        GpuSettings(settings)
    }
}

impl PartialEq for GpuSettings {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.config() == other.0.config()
    }
}

/// (namespace, name)
pub type ClaimKey = (String, String);

/// The claims, claim templates, device classes and NVIDIA ResourceSlices a
/// cluster view holds.
///
/// Memory: a claim or template costs its namespace and name plus, per
/// request, its name and per alternative its class name, a count, a flag
/// and its CEL selectors (at most 16 KiB a claim, none in most): about 350
/// bytes for a one-request claim without selectors. A ResourceClaim made
/// for a pod adds its pod's name and UID and the pod claim's name (about
/// 150 bytes), and once allocated, per device, its request, driver, pool
/// and device names (about 200 bytes; at most 32 devices). A DeviceClass
/// costs its name, a flag and its extended resource name. A ResourceSlice
/// of `gpu.nvidia.com` (one per node, usually) costs its name, its pool and
/// per device its name and three version texts: about 200 bytes a device
/// (at most 128 a slice), so 1,000 nodes of 8 GPUs keep about 1.6 MB;
/// slices of other drivers are not kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimTables {
    pub templates: BTreeMap<ClaimKey, KeptClaim>,
    pub claims: BTreeMap<ClaimKey, KeptClaim>,
    pub device_classes: BTreeMap<String, DeviceClassInfo>,
    /// The ResourceSlices of `gpu.nvidia.com`, by slice name.
    pub slices: BTreeMap<String, KeptSlice>,
    /// What GPU classes are judged with when a claim is read.
    pub settings: GpuSettings,
}

impl ClaimTables {
    /// Whether `class` hands out GPUs: by name (`gpuDeviceClasses`), or by
    /// what the DeviceClass of that name says.
    pub fn is_gpu_class(&self, class: &str) -> bool {
        let settings = &self.settings.0;
        settings.is_gpu_device_class(class)
            || self
                .device_classes
                .get(class)
                .is_some_and(|info| info.hands_out_gpus(settings))
    }

    fn resolve(
        &self,
        table: &BTreeMap<ClaimKey, KeptClaim>,
        namespace: &str,
        name: &str,
    ) -> Resolved {
        match table.get(&(namespace.to_owned(), name.to_owned())) {
            None => Resolved::Unknown,
            Some(kept) => match &kept.spec {
                KeptSpec::Unreadable(reason) => Resolved::Unreadable(reason.clone()),
                KeptSpec::Read(spec) => {
                    Resolved::Known(spec.summary(&|class| self.is_gpu_class(class)))
                }
            },
        }
    }

    /// The ResourceClaims of `namespace`, in name order: one range of the
    /// table, whose keys sort by namespace first.
    fn claims_in<'a>(
        &'a self,
        namespace: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a KeptClaim)> + 'a {
        self.claims
            .range((namespace.to_owned(), String::new())..)
            .take_while(move |((ns, _), _)| ns == namespace)
            .map(|((_, name), claim)| (name.as_str(), claim))
    }
}

/// What a ResourceSlice says of a device: found by driver, pool and device
/// name across the kept slices (only `gpu.nvidia.com` is kept). A pool may
/// span several slices, so every slice of the pool is looked at.
pub fn find_device_versions<'a>(
    slices: impl IntoIterator<Item = &'a KeptSlice>,
    driver: &str,
    pool: &str,
    device: &str,
) -> Option<DeviceVersions> {
    if driver != GPU_DRIVER {
        return None;
    }
    slices
        .into_iter()
        .filter(|slice| slice.pool == pool)
        .flat_map(|slice| &slice.devices)
        .find(|kept| kept.name == device)
        .map(|kept| kept.versions.clone())
}

/// Pod claim -> claim name, of the claims (in name order, with the pod
/// each was made for) made for the pod `pod_uid`: of two made from one pod
/// claim, the first.
pub fn made_for_pod<'a>(
    claims: impl IntoIterator<Item = (&'a str, &'a MadeFor)>,
    pod_uid: &str,
) -> BTreeMap<String, String> {
    let mut made = BTreeMap::new();
    for (name, made_for) in claims {
        if made_for.pod_uid != pod_uid {
            continue;
        }
        if let Some(pod_claim) = &made_for.pod_claim {
            made.entry(pod_claim.clone())
                .or_insert_with(|| name.to_owned());
        }
    }
    made
}

/// Whether `made_for` is the pod `pod_uid`'s claim made from its pod claim
/// `pod_claim`.
pub fn is_made_for(made_for: Option<&MadeFor>, pod_uid: &str, pod_claim: &str) -> bool {
    made_for.is_some_and(|made_for| {
        made_for.pod_uid == pod_uid && made_for.pod_claim.as_deref() == Some(pod_claim)
    })
}

impl ClaimFacts for ClaimTables {
    fn resource_claim_template(&self, namespace: &str, name: &str) -> Resolved {
        self.resolve(&self.templates, namespace, name)
    }

    fn resource_claim(&self, namespace: &str, name: &str) -> Resolved {
        self.resolve(&self.claims, namespace, name)
    }

    fn is_gpu_device_class(&self, class: &str) -> bool {
        self.is_gpu_class(class)
    }

    fn allocation(&self, namespace: &str, name: &str) -> Option<Vec<AllocatedDevice>> {
        self.claims
            .get(&(namespace.to_owned(), name.to_owned()))?
            .allocation
            .clone()
    }

    fn device_versions(&self, driver: &str, pool: &str, device: &str) -> Option<DeviceVersions> {
        find_device_versions(self.slices.values(), driver, pool, device)
    }

    fn claim_made_for(&self, namespace: &str, pod_uid: &str, pod_claim: &str) -> Option<String> {
        self.claims_in(namespace)
            .find(|(_, claim)| is_made_for(claim.made_for.as_ref(), pod_uid, pod_claim))
            .map(|(name, _)| name.to_owned())
    }

    fn claims_made_for(&self, namespace: &str, pod_uid: &str) -> Option<BTreeMap<String, String>> {
        Some(made_for_pod(
            self.claims_in(namespace)
                .filter_map(|(name, claim)| Some((name, claim.made_for.as_ref()?))),
            pod_uid,
        ))
    }

    /// Whatever the settings say of the class: a container's limit of the
    /// resource may be met by a claim of it.
    fn serves_extended_resource(&self, resource: &str) -> bool {
        self.device_classes
            .values()
            .any(|class| class.extended_resource_name.as_deref() == Some(resource))
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(
            gpu_total(tables.resource_claim_template("ml", "t")),
            Some(DraCount::Exactly(3))
        );
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
        config
            .gpu_device_classes
            .push("named.example.com".to_owned());
        let settings = Settings::from_config(config).unwrap_or_default();
        tables.settings = GpuSettings::new(Arc::new(settings));
        assert_eq!(
            gpu_total(tables.resource_claim("ml", "c")),
            Some(DraCount::Exactly(3))
        );
    }

    #[test]
    fn a_malformed_claim_is_kept_as_unreadable() {
        let mut bad = template("gpu.nvidia.com", 1);
        bad["spec"]["spec"]["devices"]["requests"] = json!("all");
        let mut tables = ClaimTables::default();
        tables.templates.insert(
            key("ml", "t"),
            KeptClaim::of("t", &bad, ClaimKind::Template),
        );
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
            tables.claims.insert(
                key("ml", name),
                KeptClaim::of(name, &claim, ClaimKind::Claim),
            );
        }
        let mut pending = allocated_claim("pending", "uid-3");
        pending["status"] = json!({});
        tables.claims.insert(
            key("ml", "pending"),
            KeptClaim::of("pending", &pending, ClaimKind::Claim),
        );
        let devices = tables.allocation("ml", "trainer-gpu-abcde");
        assert_eq!(
            devices.as_deref().map(|d| d[0].device.as_str()),
            Some("gpu-0"),
            "{devices:?}"
        );
        assert_eq!(tables.allocation("ml", "pending"), None);
        assert_eq!(tables.allocation("ml", "missing"), None);
        assert_eq!(tables.allocation("other", "trainer-gpu-abcde"), None);

        assert_eq!(
            tables.claim_made_for("ml", "uid-1", "gpu").as_deref(),
            Some("trainer-gpu-abcde")
        );
        assert_eq!(
            tables.claim_made_for("ml", "uid-2", "gpu").as_deref(),
            Some("other-gpu-fghij")
        );
        // Another pod's UID, another pod claim, another namespace.
        assert_eq!(tables.claim_made_for("ml", "uid-9", "gpu"), None);
        assert_eq!(tables.claim_made_for("ml", "uid-1", "mig"), None);
        assert_eq!(tables.claim_made_for("m", "uid-1", "gpu"), None);
        assert_eq!(tables.claim_made_for("mlx", "uid-1", "gpu"), None);
        // All of a pod's at once: what each pod claim would find.
        for (namespace, uid) in [
            ("ml", "uid-1"),
            ("ml", "uid-2"),
            ("ml", "uid-9"),
            ("m", "uid-1"),
        ] {
            let each: BTreeMap<String, String> = ["gpu", "mig"]
                .into_iter()
                .filter_map(|claim| {
                    let name = tables.claim_made_for(namespace, uid, claim)?;
                    Some((claim.to_owned(), name))
                })
                .collect();
            assert_eq!(tables.claims_made_for(namespace, uid), Some(each), "{uid}");
        }
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
        assert_eq!(
            tables.slices.len(),
            1,
            "the slice of another driver is not kept"
        );

        let full = tables.device_versions(GPU_DRIVER, "node-1", "gpu-0");
        assert_eq!(
            full.as_ref().and_then(|v| v.compute_capability.as_deref()),
            Some("9.0.0")
        );
        assert_eq!(
            full.as_ref().and_then(|v| v.driver_version.as_deref()),
            Some("570.124.6")
        );
        let mig = tables.device_versions(GPU_DRIVER, "node-1", "gpu-1-mig-1g10gb-0");
        assert_eq!(mig, full, "a MIG device publishes its GPU's versions");
        assert_eq!(
            tables.device_versions(GPU_DRIVER, "node-1", "gpu-2"),
            Some(DeviceVersions::default()),
            "a VFIO device is known and publishes none"
        );
        assert_eq!(tables.device_versions(GPU_DRIVER, "node-2", "gpu-0"), None);
        assert_eq!(tables.device_versions(GPU_DRIVER, "node-1", "gpu-7"), None);
        assert_eq!(
            tables.device_versions("rdma.example.com", "node-1", "gpu-0"),
            None
        );
    }

    #[test]
    fn a_device_class_serves_its_extended_resource_whatever_its_name() {
        let mut tables = ClaimTables::default();
        tables.device_classes.insert(
            "ext.example.com".to_owned(),
            DeviceClassInfo::of(&json!({"spec": {"extendedResourceName": "nvidia.com/gpu"}})),
        );
        tables.device_classes.insert(
            "plain.example.com".to_owned(),
            DeviceClassInfo::of(&json!({"spec": {}})),
        );
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
}
