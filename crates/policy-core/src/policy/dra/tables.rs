//! The Dynamic Resource Allocation objects of a cluster view, kept lean: each ResourceClaim's and
//! ResourceClaimTemplate's requests as written ([`ClaimSpec`]), a claim's allocation and owner Pod
//! ([`allocation`](super::allocation)), the NVIDIA ResourceSlices' device versions and products, and what
//! decides whether a DeviceClass hands out GPUs.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::allocation::{
    AllocatedDevice, DeviceVersions, KeptSlice, MadeFor, read_allocation, read_made_for, read_slice,
};
use super::{ClaimFacts, Resolved};
use crate::document::Document;
use crate::policy::dra::claims::{ClaimKind, ClaimSpec, read_object};
use crate::settings::Settings;

pub use super::allocation::GPU_DRIVER;

/// What decides whether a DeviceClass hands out GPUs: its name is in `gpuDeviceClasses`, its
/// `extendedResourceName` is a GPU resource, or one of its CEL selectors selects the driver
/// `gpu.nvidia.com`. Decided when a claim is read, with the settings in force, so a DeviceClass
/// that arrives after a claim, or a `gpuDeviceClasses` entry added at reload, still counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceClassInfo {
    /// A CEL selector compares `device.driver` with `gpu.nvidia.com`.
    pub selects_gpu_driver: bool,
    /// `spec.extendedResourceName`.
    pub extended_resource_name: Option<String>,
}

impl DeviceClassInfo {
    pub fn of(class: &Value) -> Self {
        let wanted =
            [format!("device.driver==\"{GPU_DRIVER}\""), format!("device.driver=='{GPU_DRIVER}'")];
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
        let extended_resource_name =
            class.pointer("/spec/extendedResourceName").and_then(Value::as_str).map(str::to_owned);
        DeviceClassInfo { selects_gpu_driver, extended_resource_name }
    }

    /// Whether the class hands out GPUs under `settings` (the caller checks `gpuDeviceClasses`).
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
    /// The Pod a ResourceClaim was made for (None for templates, and for claims no Pod controls).
    pub made_for: Option<MadeFor>,
    /// The devices allocated to a ResourceClaim (None for templates, and until allocation).
    pub allocation: Option<Vec<AllocatedDevice>>,
}

impl KeptClaim {
    /// Reads the claim or claim template `name` (`spec`; of a claim, `metadata` and `status`).
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
        KeptClaim { spec, made_for, allocation }
    }
}

/// The settings GPU classes are judged with (`gpuDeviceClasses`, the GPU resource patterns), shared
/// with the configuration in force. Two are equal when their configurations are.
#[derive(Debug, Clone, Default)]
pub struct GpuSettings(Arc<Settings>);

impl GpuSettings {
    pub fn new(settings: Arc<Settings>) -> Self {
        GpuSettings(settings)
    }
}

/// A copy of `settings`: build it once, share it where many tables are read with the same settings.
impl From<&Settings> for GpuSettings {
    fn from(settings: &Settings) -> Self {
        GpuSettings(Arc::new(settings.clone()))
    }
}

impl PartialEq for GpuSettings {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.config() == other.0.config()
    }
}

/// (namespace, name)
pub type ClaimKey = (String, String);

/// The claims, claim templates, device classes and NVIDIA ResourceSlices a cluster view holds.
///
/// Memory: about 350 bytes for a one-request claim without selectors (at most 16 KiB of selectors a
/// claim), 150 more for its owner Pod, 200 a device allocated (at most 32). A slice of
/// `gpu.nvidia.com` costs about 250 bytes a device with its product name (at most 128 a slice):
/// 1,000 nodes of 8 GPUs keep about 2 MB. Slices of other drivers are not kept.
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
    /// Whether `class` hands out GPUs: by name (`gpuDeviceClasses`), or as its DeviceClass says.
    pub fn is_gpu_class(&self, class: &str) -> bool {
        let settings = &self.settings.0;
        settings.is_gpu_device_class(class)
            || self.device_classes.get(class).is_some_and(|info| info.hands_out_gpus(settings))
    }

    /// The tables of `check`'s input (a kustomize build or a directory of manifests): its
    /// ResourceClaimTemplates, ResourceClaims, DeviceClasses and ResourceSlices, read as the
    /// cluster view reads them, so `check` on a claim and its slice judges as the webhook does.
    /// Objects that name no namespace are in `default_namespace`. Of two objects of one kind and
    /// name the later wins, as applying the input would leave them; a DeviceClass without a name is
    /// not kept, a ResourceSlice without one is (the API server names it).
    pub fn collect(
        objects: &[&Value],
        default_namespace: &str,
        settings: impl Into<GpuSettings>,
    ) -> Self {
        let mut tables = ClaimTables { settings: settings.into(), ..ClaimTables::default() };
        for (index, object) in objects.iter().enumerate() {
            let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
            let name = text("/metadata/name");
            match (text("/kind"), name) {
                (Some("DeviceClass"), Some(name)) => {
                    let class = DeviceClassInfo::of(object);
                    tables.device_classes.insert(name.to_owned(), class);
                }
                (Some("ResourceSlice"), _) => {
                    // `#` begins no object name: a slice without one is kept too.
                    let name = name.map_or_else(|| format!("#{index}"), str::to_owned);
                    if let Some(slice) = read_slice(object) {
                        tables.slices.insert(name, slice);
                    }
                }
                (Some(kind), Some(name)) => {
                    let Some(kind) = ClaimKind::of_kind(kind) else {
                        continue;
                    };
                    let namespace = text("/metadata/namespace").unwrap_or(default_namespace);
                    let table = match kind {
                        ClaimKind::Template => &mut tables.templates,
                        ClaimKind::Claim => &mut tables.claims,
                    };
                    let key = (namespace.to_owned(), name.to_owned());
                    table.insert(key, KeptClaim::of(name, object, kind));
                }
                _ => {}
            }
        }
        tables
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

    /// The ResourceClaims of `namespace`, in name order.
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

/// What a ResourceSlice says of a device, by driver, pool and device name.
/// A pool may span several slices, so every slice of the pool is looked at.
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

/// Pod claim -> claim name, of the claims (in name order, with the pod each was made for) made for
/// the pod `pod_uid`: of two made from one pod claim, the first.
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
            made.entry(pod_claim.clone()).or_insert_with(|| name.to_owned());
        }
    }
    made
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
        self.claims.get(&(namespace.to_owned(), name.to_owned()))?.allocation.clone()
    }

    fn device_versions(&self, driver: &str, pool: &str, device: &str) -> Option<DeviceVersions> {
        find_device_versions(self.slices.values(), driver, pool, device)
    }

    fn claims_made_for(&self, namespace: &str, pod_uid: &str) -> Option<BTreeMap<String, String>> {
        Some(made_for_pod(
            self.claims_in(namespace)
                .filter_map(|(name, claim)| Some((name, claim.made_for.as_ref()?))),
            pod_uid,
        ))
    }

    /// Whatever the settings say of the class: a limit of the resource may be met by its claim.
    fn serves_extended_resource(&self, resource: &str) -> bool {
        self.device_classes
            .values()
            .any(|class| class.extended_resource_name.as_deref() == Some(resource))
    }
}

#[cfg(test)]
mod tests;
