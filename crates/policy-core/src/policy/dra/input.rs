//! The claims of `check`'s input: a kustomize build or a directory of
//! manifests holds the ResourceClaimTemplates, ResourceClaims, DeviceClasses
//! and ResourceSlices beside the workloads that use them. They are read by
//! the cluster view's readers ([`DeviceClassInfo`], [`read_allocation`],
//! [`read_made_for`], [`read_slice`]), so `check` on a claim and its slice
//! judges as the webhook does.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::allocation::{
    AllocatedDevice, DeviceVersions, KeptSlice, MadeFor, read_allocation, read_made_for, read_slice,
};
use super::{ClaimFacts, Resolved};
use crate::document::Document;
use crate::policy::dra::claims::{ClaimKind, parse_object};
use crate::policy::dra::tables::{DeviceClassInfo, find_device_versions, made_for_pod};
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
mod tests;
