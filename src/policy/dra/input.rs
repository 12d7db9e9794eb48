//! The claims of `check`'s input: a kustomize build or a directory of
//! manifests holds the ResourceClaimTemplates and ResourceClaims beside the
//! workloads that use them, so `check` resolves a pod's claims from the same
//! objects.
//!
//! A device class hands out GPUs when its name is in `gpuDeviceClasses`,
//! or, for a DeviceClass of the input, when its `extendedResourceName` is a
//! GPU resource or one of its CEL selectors selects the driver
//! `gpu.nvidia.com` (judged by [`DeviceClassInfo`], as in the cluster).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{ClaimFacts, Resolved};
use crate::policy::dra::claims::{ClaimKind, parse_object};
use crate::policy::dra::tables::DeviceClassInfo;
use crate::settings::Settings;

/// Claims and claim templates read from a set of objects.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InputClaims {
    /// The DeviceClasses of the input that hand out GPUs.
    gpu_classes: BTreeSet<String>,
    /// (namespace, name) -> what was read.
    templates: BTreeMap<(String, String), Resolved>,
    claims: BTreeMap<(String, String), Resolved>,
}

impl InputClaims {
    /// Reads every ResourceClaimTemplate, ResourceClaim and DeviceClass of
    /// `objects`; objects that name no namespace are in `default_namespace`.
    pub fn collect(objects: &[&Value], default_namespace: &str, settings: &Settings) -> Self {
        let gpu_classes: BTreeSet<&str> = objects
            .iter()
            .filter(|object| kind_of(object) == Some("DeviceClass"))
            .filter(|object| DeviceClassInfo::of(object).hands_out_gpus(settings))
            .filter_map(|object| object.pointer("/metadata/name")?.as_str())
            .collect();
        let is_gpu_class =
            |class: &str| settings.is_gpu_device_class(class) || gpu_classes.contains(class);
        let mut found = InputClaims {
            gpu_classes: gpu_classes.iter().map(|c| (*c).to_owned()).collect(),
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
            let resolved = match parse_object(object, kind, &is_gpu_class) {
                Ok(summary) => Resolved::Known(summary),
                Err(err) => Resolved::Unreadable(format!("{} {name:?}: {err}", kind.as_str())),
            };
            let table = match kind {
                ClaimKind::Template => &mut found.templates,
                ClaimKind::Claim => &mut found.claims,
            };
            table.insert((namespace.to_owned(), name.to_owned()), resolved);
        }
        found
    }

    fn get(table: &BTreeMap<(String, String), Resolved>, namespace: &str, name: &str) -> Resolved {
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
