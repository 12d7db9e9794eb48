//! What the rules may know of the cluster, when the webhook can read it: questions asked of
//! in-memory data (the watch caches, or a test table), never of the network. Without a cluster
//! (`check`, `serve --no-cluster`) the rules use the static configuration alone.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::dra::allocation::{AllocatedDevice, DeviceVersions};
use super::dra::tables::ClaimTables;
use super::dra::{ClaimFacts, Resolved};
use crate::cuda::ComputeCapability;

/// What of a RuntimeClass the built-in RuntimeClass admission plugin applies to pods naming it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuntimeClassInfo {
    /// `overhead.podFixed`.
    pub pod_fixed_overhead: Option<Map<String, Value>>,
    /// `scheduling.nodeSelector`.
    pub node_selector: Map<String, Value>,
    /// `scheduling.tolerations`.
    pub tolerations: Vec<Value>,
}

/// Questions R4 asks of the nodes, answered by the cluster or the Nodes of `check --nodes`.
pub trait NodeFacts: Send + Sync {
    /// The compute capabilities of the GPU nodes, from the GFD labels.
    fn compute_capabilities(&self) -> Vec<ComputeCapability>;

    /// How many nodes offer a GPU resource, and how many of those carry GFD's labels.
    fn gpu_node_labels(&self) -> GpuNodeLabels;

    /// The GPU products (GFD's `nvidia.com/gpu.product`) of the nodes that offer a GPU resource,
    /// sorted, each once: what the globs of `gpuProducts` expand to.
    fn gpu_products(&self) -> Vec<String>;

    /// What the rules read of the node of that name; None when it is not known.
    fn node(&self, name: &str) -> Option<NodeGpus>;
}

/// Questions the rules ask of the cluster.
pub trait ClusterFacts: ClaimFacts + NodeFacts + Send + Sync {
    /// The RuntimeClass of that name, or None when it does not exist.
    fn runtime_class(&self, name: &str) -> Option<RuntimeClassInfo>;

    /// The UID of the workload `namespace/kind/name` if it exists; asked of allowlisted ones only.
    fn workload_uid(&self, namespace: &str, kind: &str, name: &str) -> Option<String>;

    /// The most any single node can allocate of a resource: None when no node is known yet (nothing
    /// can be concluded), Some(0) when nodes are known and none offers it.
    fn largest_allocatable(&self, resource: &str) -> Option<u64>;

    /// The annotations of a namespace (empty when unknown).
    fn namespace_annotations(&self, namespace: &str) -> BTreeMap<String, String>;
}

/// A cluster described by plain data, for `check --cluster-state` style simulations and tests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterSnapshot {
    pub runtime_classes: BTreeMap<String, RuntimeClassInfo>,
    /// (namespace, kind, name) -> uid
    pub workloads: BTreeMap<(String, String, String), String>,
    /// node name -> what the rules read of it.
    pub nodes: BTreeMap<String, NodeGpus>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// ResourceClaims, claim templates, DeviceClasses and `gpu.nvidia.com` ResourceSlices, lean.
    pub dra: ClaimTables,
}

/// What the rules read of a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeGpus {
    /// `status.allocatable` entries of GPU resources, as counts.
    pub allocatable: BTreeMap<String, u64>,
    /// From `nvidia.com/gpu.compute.major` / `.minor`.
    pub compute_capability: Option<ComputeCapability>,
    /// Carries GFD's driver version label, of either generation
    /// (`nvidia.com/cuda.driver-version.major`, `nvidia.com/cuda.driver.major`).
    pub driver_labels: bool,
    /// GFD's `nvidia.com/gpu.product`.
    pub product: Option<String>,
}

impl NodeGpus {
    /// Offers some GPU resource: a configured one, allocatable above 0.
    pub fn offers_gpus(&self) -> bool {
        self.allocatable.values().any(|&count| count > 0)
    }
}

/// The nodes offering a GPU resource, and how many carry the labels R4's node affinity names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GpuNodeLabels {
    /// Nodes that offer a GPU resource ([`NodeGpus::offers_gpus`]).
    pub gpu_nodes: u64,
    /// Of those, the ones with GFD's compute capability labels.
    pub with_compute: u64,
    /// Of those, the ones with GFD's driver version labels.
    pub with_driver: u64,
    /// Of those, the ones with GFD's product label.
    pub with_product: u64,
}

impl GpuNodeLabels {
    /// The counts of `nodes`.
    pub fn of<'a>(nodes: impl IntoIterator<Item = &'a NodeGpus>) -> Self {
        let mut counts = Self::default();
        for node in nodes.into_iter().filter(|node| node.offers_gpus()) {
            counts.gpu_nodes += 1;
            counts.with_compute += u64::from(node.compute_capability.is_some());
            counts.with_driver += u64::from(node.driver_labels);
            counts.with_product += u64::from(node.product.is_some());
        }
        counts
    }

    /// GPU nodes are known and none carries the compute capability labels.
    pub fn compute_unlabelled(&self) -> bool {
        self.gpu_nodes > 0 && self.with_compute == 0
    }

    /// GPU nodes are known and none carries the driver version labels.
    pub fn driver_unlabelled(&self) -> bool {
        self.gpu_nodes > 0 && self.with_driver == 0
    }

    /// GPU nodes are known and none carries the product label.
    pub fn product_unlabelled(&self) -> bool {
        self.gpu_nodes > 0 && self.with_product == 0
    }
}

/// The products of the nodes that offer GPUs, sorted, each once.
pub fn gpu_products_of<'a>(nodes: impl IntoIterator<Item = &'a NodeGpus>) -> Vec<String> {
    let mut products: Vec<String> = nodes
        .into_iter()
        .filter(|node| node.offers_gpus())
        .filter_map(|node| node.product.clone())
        .collect();
    products.sort_unstable();
    products.dedup();
    products
}

#[cfg(any(test, feature = "testing"))]
impl NodeGpus {
    /// A node for tests: its GPU allocatable and compute capability.
    pub fn of(gpus: &[(&str, u64)], capability: Option<(u32, u32)>) -> Self {
        NodeGpus {
            allocatable: gpus.iter().map(|(r, n)| ((*r).to_owned(), *n)).collect(),
            compute_capability: capability
                .map(|(major, minor)| ComputeCapability::new(major, minor)),
            driver_labels: false,
            product: None,
        }
    }

    /// The same node, with GFD's product label.
    pub fn with_product(mut self, product: &str) -> Self {
        self.product = Some(product.to_owned());
        self
    }

    /// The same node, with GFD's driver version labels.
    pub fn with_driver_labels(mut self) -> Self {
        self.driver_labels = true;
        self
    }
}

/// Claims resolve from the snapshot's DRA tables.
impl ClaimFacts for ClusterSnapshot {
    fn resource_claim_template(&self, namespace: &str, name: &str) -> Resolved {
        self.dra.resource_claim_template(namespace, name)
    }

    fn resource_claim(&self, namespace: &str, name: &str) -> Resolved {
        self.dra.resource_claim(namespace, name)
    }

    fn is_gpu_device_class(&self, class: &str) -> bool {
        self.dra.is_gpu_device_class(class)
    }

    fn allocation(&self, namespace: &str, name: &str) -> Option<Vec<AllocatedDevice>> {
        self.dra.allocation(namespace, name)
    }

    fn device_versions(&self, driver: &str, pool: &str, device: &str) -> Option<DeviceVersions> {
        self.dra.device_versions(driver, pool, device)
    }

    fn claims_made_for(&self, namespace: &str, pod_uid: &str) -> Option<BTreeMap<String, String>> {
        self.dra.claims_made_for(namespace, pod_uid)
    }

    fn serves_extended_resource(&self, resource: &str) -> bool {
        self.dra.serves_extended_resource(resource)
    }
}

impl ClusterFacts for ClusterSnapshot {
    fn runtime_class(&self, name: &str) -> Option<RuntimeClassInfo> {
        self.runtime_classes.get(name).cloned()
    }

    fn workload_uid(&self, namespace: &str, kind: &str, name: &str) -> Option<String> {
        self.workloads.get(&(namespace.to_owned(), kind.to_owned(), name.to_owned())).cloned()
    }

    fn largest_allocatable(&self, resource: &str) -> Option<u64> {
        if self.nodes.is_empty() {
            return None;
        }
        self.nodes.values().map(|node| node.allocatable.get(resource).copied().unwrap_or(0)).max()
    }

    fn namespace_annotations(&self, namespace: &str) -> BTreeMap<String, String> {
        self.namespaces.get(namespace).cloned().unwrap_or_default()
    }
}

impl NodeFacts for ClusterSnapshot {
    fn compute_capabilities(&self) -> Vec<ComputeCapability> {
        let mut found: Vec<ComputeCapability> =
            self.nodes.values().filter_map(|node| node.compute_capability).collect();
        found.sort_unstable();
        found.dedup();
        found
    }

    fn gpu_node_labels(&self) -> GpuNodeLabels {
        GpuNodeLabels::of(self.nodes.values())
    }

    fn gpu_products(&self) -> Vec<String> {
        gpu_products_of(self.nodes.values())
    }

    fn node(&self, name: &str) -> Option<NodeGpus> {
        self.nodes.get(name).cloned()
    }
}
