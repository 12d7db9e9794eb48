//! What the caches and `audit`'s snapshot keep of a Namespace, a Node, a
//! RuntimeClass, and which workloads an allowlist entry can name.
//!
//! Namespaces and Nodes are decoded off the wire into the few fields kept
//! ([`Namespace`], [`Node`]): a 5,000-node list is mostly images,
//! conditions and managedFields, which serde skips without building them,
//! so the typed k8s-openapi objects never exist in memory.

use std::collections::BTreeMap;

use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::GroupVersionKind;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::admission::Workload;
use crate::cuda::ComputeCapability;
use crate::cuda::requirement::{DRIVER_MAJOR_LABEL, OLD_DRIVER_MAJOR_LABEL};
use crate::policy::cluster::{NodeGpus, RuntimeClassInfo};
use crate::policy::quantity::GpuCount;
use crate::policy::rules::compute_affinity::{MAJOR_LABEL, MINOR_LABEL};
use crate::settings::{AllowlistEntry, MODE_LABEL, PRODUCT_LABEL, Settings};

fn lean_metadata<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Wire {
        name: Option<String>,
        namespace: Option<String>,
        uid: Option<String>,
        resource_version: Option<String>,
        labels: Option<BTreeMap<String, String>>,
        annotations: Option<BTreeMap<String, String>>,
    }
    let wire = Wire::deserialize(deserializer)?;
    // Only the policy's own annotations are ever read.
    let annotations = wire
        .annotations
        .map(|all| all.into_iter().filter(|(key, _)| key.starts_with("gpu-policy.io/")).collect());
    Ok(ObjectMeta {
        name: wire.name,
        namespace: wire.namespace,
        uid: wire.uid,
        resource_version: wire.resource_version,
        labels: wire.labels,
        annotations,
        ..ObjectMeta::default()
    })
}

#[derive(Debug, Clone, Deserialize)]
pub struct Namespace {
    #[serde(deserialize_with = "lean_metadata", default)]
    pub metadata: ObjectMeta,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeStatus {
    #[serde(default)]
    pub allocatable: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Node {
    #[serde(deserialize_with = "lean_metadata", default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: NodeStatus,
}

macro_rules! cluster_resource {
    ($type:ident, $kind:literal, $plural:literal) => {
        impl k8s_openapi::Resource for $type {
            const API_VERSION: &'static str = "v1";
            const GROUP: &'static str = "";
            const KIND: &'static str = $kind;
            const VERSION: &'static str = "v1";
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = k8s_openapi::ClusterResourceScope;
        }

        impl k8s_openapi::Metadata for $type {
            type Ty = ObjectMeta;

            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

cluster_resource!(Namespace, "Namespace", "namespaces");
cluster_resource!(Node, "Node", "nodes");

/// The group and version of the workload kinds an allowlist entry may name
/// and the watches can verify.
pub(super) fn workload_gvk(kind: &str) -> Option<GroupVersionKind> {
    let workload = Workload::ALL
        .into_iter()
        .filter(|w| *w != Workload::PodTemplate)
        .find(|w| w.kind() == kind)?;
    Some(GroupVersionKind::gvk(workload.group(), "v1", kind))
}

pub(super) fn workload_key(entry: &AllowlistEntry) -> (String, String, String) {
    (entry.namespace.clone(), entry.kind.clone(), entry.name.clone())
}

/// A namespace as the rules read it: its `gpu-policy.io/` annotations and
/// the mode label.
pub(super) fn lean_namespace(namespace: &Namespace) -> BTreeMap<String, String> {
    // `lean_metadata` kept the `gpu-policy.io/` annotations only.
    let mut kept = namespace.annotations().clone();
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
    let driver_labels =
        [DRIVER_MAJOR_LABEL, OLD_DRIVER_MAJOR_LABEL].iter().any(|key| label(key).is_some());
    // A label value is at most 63 characters; a Node of a manifest may hold anything.
    let product = node
        .labels()
        .get(PRODUCT_LABEL)
        .filter(|product| !product.is_empty() && product.len() <= 63)
        .cloned();
    NodeGpus { allocatable, compute_capability, driver_labels, product }
}

#[derive(Debug, thiserror::Error)]
pub enum NodeManifestError {
    #[error("not a Node ({0})")]
    NotNode(String),
    #[error("not a readable Node: {0}")]
    Unreadable(#[source] serde_json::Error),
    #[error("a Node without metadata.name")]
    NoName,
}

/// A Node of a manifest (`kubectl get nodes -o yaml`, for `check --nodes`)
/// as the caches keep it: its name and `lean_node`.
pub fn lean_node_of_manifest(
    object: &Value,
    settings: &Settings,
) -> Result<(String, NodeGpus), NodeManifestError> {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != "Node" {
        let kind = if kind.is_empty() { "no kind" } else { kind };
        return Err(NodeManifestError::NotNode(kind.to_owned()));
    }
    let node = Node::deserialize(object).map_err(NodeManifestError::Unreadable)?;
    let name = node.name_any();
    if name.is_empty() {
        return Err(NodeManifestError::NoName);
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
        .map(|list| list.iter().filter_map(|t| serde_json::to_value(t).ok()).collect())
        .unwrap_or_default();
    RuntimeClassInfo { pod_fixed_overhead, node_selector, tolerations }
}

#[cfg(test)]
mod tests;
