//! The objects of the API server as the rules read them: what the caches
//! and `audit`'s snapshot keep of a Namespace, a Node, a RuntimeClass, and
//! which workloads an allowlist entry can name. Everything else is dropped.

use std::collections::BTreeMap;

use k8s_openapi::api::node::v1::RuntimeClass;
use kube::ResourceExt;
use kube::api::GroupVersionKind;
use serde::Deserialize;
use serde_json::Value;

use super::wire::{Namespace, Node};
use crate::admission::Workload;
use crate::cuda::ComputeCapability;
use crate::cuda::requirement::{DRIVER_MAJOR_LABEL, OLD_DRIVER_MAJOR_LABEL};
use crate::policy::cluster::{NodeGpus, RuntimeClassInfo};
use crate::policy::quantity::GpuCount;
use crate::policy::rules::compute_affinity::{MAJOR_LABEL, MINOR_LABEL};
use crate::settings::{AllowlistEntry, MODE_LABEL, Settings};

/// The group and version of the workload kinds an allowlist entry may name
/// and the watches can verify.
pub(super) fn workload_gvk(kind: &str) -> Option<GroupVersionKind> {
    let workload = Workload::ALL
        .into_iter()
        .filter(|w| *w != Workload::PodTemplate)
        .find(|w| w.kind() == kind)?;
    Some(GroupVersionKind::gvk(workload.group(), "v1", kind))
}

/// How the workload table keys an allowlist entry.
pub(super) fn workload_key(entry: &AllowlistEntry) -> (String, String, String) {
    (
        entry.namespace.clone(),
        entry.kind.clone(),
        entry.name.clone(),
    )
}

/// A namespace as the rules read it: its `gpu-policy.io/` annotations and
/// the mode label.
pub(super) fn lean_namespace(namespace: &Namespace) -> BTreeMap<String, String> {
    let mut kept: BTreeMap<String, String> = namespace
        .annotations()
        .iter()
        .filter(|(key, _)| key.starts_with("gpu-policy.io/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(mode) = namespace.labels().get(MODE_LABEL) {
        kept.insert(MODE_LABEL.to_owned(), mode.clone());
    }
    kept
}

/// A node as the rules read it: allocatable GPU resources, the GFD
/// compute capability labels, and whether it carries GFD's driver version
/// labels.
pub(super) fn lean_node(node: &Node, settings: &Settings) -> NodeGpus {
    let allocatable = node
        .status
        .allocatable
        .iter()
        .filter(|(name, _)| settings.is_gpu_resource(name))
        .filter_map(|(name, quantity)| {
            let count = GpuCount::from_value(quantity).whole()?;
            Some((name.clone(), count))
        })
        .collect();
    let label = |key: &str| node.labels().get(key).and_then(|v| v.parse::<u32>().ok());
    let compute_capability = match (label(MAJOR_LABEL), label(MINOR_LABEL)) {
        (Some(major), minor) => Some(ComputeCapability::new(major, minor.unwrap_or(0))),
        (None, _) => None,
    };
    // The driver floor's expressions compare these as numbers, on either
    // generation's names.
    let driver_labels = [DRIVER_MAJOR_LABEL, OLD_DRIVER_MAJOR_LABEL]
        .iter()
        .any(|key| label(key).is_some());
    NodeGpus {
        allocatable,
        compute_capability,
        driver_labels,
    }
}

/// A Node of a manifest (`kubectl get nodes -o yaml`, for `check --nodes`)
/// as the caches keep it: its name and `lean_node`. Err says why it is
/// not a Node.
pub fn lean_node_of_manifest(
    object: &Value,
    settings: &Settings,
) -> Result<(String, NodeGpus), String> {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != "Node" {
        let kind = if kind.is_empty() { "no kind" } else { kind };
        return Err(format!("not a Node ({kind})"));
    }
    let node = Node::deserialize(object).map_err(|err| format!("not a readable Node: {err}"))?;
    let name = node.name_any();
    if name.is_empty() {
        return Err("a Node without metadata.name".to_owned());
    }
    Ok((name, lean_node(&node, settings)))
}

/// A RuntimeClass as the RuntimeClass admission plugin applies it.
pub(super) fn lean_runtime_class(class: &RuntimeClass) -> RuntimeClassInfo {
    let to_map = |value: Option<Value>| match value {
        Some(Value::Object(map)) => Some(map),
        _ => None,
    };
    let pod_fixed_overhead = class
        .overhead
        .as_ref()
        .and_then(|overhead| overhead.pod_fixed.as_ref())
        .and_then(|fixed| to_map(serde_json::to_value(fixed).ok()));
    let scheduling = class.scheduling.as_ref();
    let node_selector = scheduling
        .and_then(|s| s.node_selector.as_ref())
        .and_then(|selector| to_map(serde_json::to_value(selector).ok()))
        .unwrap_or_default();
    let tolerations = scheduling
        .and_then(|s| s.tolerations.as_ref())
        .map(|list| {
            list.iter()
                .filter_map(|t| serde_json::to_value(t).ok())
                .collect()
        })
        .unwrap_or_default();
    RuntimeClassInfo {
        pod_fixed_overhead,
        node_selector,
        tolerations,
    }
}

#[cfg(test)]
mod tests;
