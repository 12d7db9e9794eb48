//! Namespaces and Nodes as the caches decode them off the wire. A 5,000-node
//! list is mostly images, conditions and managedFields: serde skips every
//! field not named here without building it, so the typed k8s-openapi
//! objects never exist in memory.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// The metadata fields the caches and kube's watcher use.
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
    let annotations = wire.annotations.map(|all| {
        all.into_iter()
            .filter(|(key, _)| key.starts_with("gpu-policy.io/"))
            .collect()
    });
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
