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

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::{ClaimFacts, Resolved};
use crate::policy::dra::claims::{ClaimKind, ClaimSpec, read_object};
use crate::settings::Settings;

/// The NVIDIA DRA driver's name for its GPU devices.
pub const GPU_DRIVER: &str = "gpu.nvidia.com";

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

/// A ResourceClaim or ResourceClaimTemplate as kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptClaim {
    /// Its requests as written.
    Read(ClaimSpec),
    /// Its requests have the wrong shape: why, on one line.
    Unreadable(String),
}

impl KeptClaim {
    /// Reads the ResourceClaim or ResourceClaimTemplate `name` (the object,
    /// or at least its `spec`).
    pub fn of(name: &str, object: &Value, kind: ClaimKind) -> Self {
        match read_object(object, kind) {
            Ok(spec) => KeptClaim::Read(spec),
            Err(err) => KeptClaim::Unreadable(format!("{} {name:?}: {err}", kind.as_str())),
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

/// The claims, claim templates and device classes a cluster view holds.
///
/// Memory: a claim or template costs its namespace and name plus, per
/// request, its name and per alternative its class name, a count and a
/// flag: about 250 bytes for a one-request claim. A DeviceClass costs its
/// name, a flag and its extended resource name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimTables {
    pub templates: BTreeMap<ClaimKey, KeptClaim>,
    pub claims: BTreeMap<ClaimKey, KeptClaim>,
    pub device_classes: BTreeMap<String, DeviceClassInfo>,
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
            Some(KeptClaim::Unreadable(reason)) => Resolved::Unreadable(reason.clone()),
            Some(KeptClaim::Read(spec)) => {
                Resolved::Known(spec.summary(&|class| self.is_gpu_class(class)))
            }
        }
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;
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
