//! What the rules ask of all nodes at once: the most one node can allocate
//! of a GPU resource, the compute capabilities present, and how many GPU
//! nodes carry GFD's labels. Read on every
//! admission of a GPU workload, computed once per change of the caches:
//! scanning 5,000 nodes per request cost about 90 µs of CPU, more than the
//! rest of the admission (`scripts/scale.sh`).

use std::collections::BTreeMap;

use crate::cuda::ComputeCapability;
use crate::policy::cluster::{GpuNodeLabels, NodeGpus, gpu_products_of};

/// The nodes' table reduced to the answers the rules need, as of one
/// generation of the snapshot (the cache makes it again when that
/// generation is past).
#[derive(Debug)]
pub(super) struct NodeSummary {
    generation: u64,
    /// The largest allocatable of each resource a node offers; None when
    /// no node is known.
    largest: Option<BTreeMap<String, u64>>,
    /// Sorted, without duplicates.
    compute_capabilities: Vec<ComputeCapability>,
    labels: GpuNodeLabels,
    /// The GPU nodes' products, sorted, without duplicates.
    products: Vec<String>,
}

impl NodeSummary {
    pub(super) fn of(nodes: &BTreeMap<String, NodeGpus>, generation: u64) -> Self {
        let mut largest: BTreeMap<String, u64> = BTreeMap::new();
        let mut compute_capabilities = Vec::new();
        for node in nodes.values() {
            for (resource, &count) in &node.allocatable {
                match largest.get_mut(resource) {
                    Some(most) => *most = (*most).max(count),
                    None => {
                        largest.insert(resource.clone(), count);
                    }
                }
            }
            compute_capabilities.extend(node.compute_capability);
        }
        compute_capabilities.sort_unstable();
        compute_capabilities.dedup();
        NodeSummary {
            generation,
            largest: (!nodes.is_empty()).then_some(largest),
            compute_capabilities,
            labels: GpuNodeLabels::of(nodes.values()),
            products: gpu_products_of(nodes.values()),
        }
    }

    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// As [`crate::policy::ClusterFacts::largest_allocatable`]: Some(0)
    /// when nodes are known and none offers the resource.
    pub(super) fn largest_allocatable(&self, resource: &str) -> Option<u64> {
        let largest = self.largest.as_ref()?;
        Some(largest.get(resource).copied().unwrap_or(0))
    }

    pub(super) fn compute_capabilities(&self) -> Vec<ComputeCapability> {
        self.compute_capabilities.clone()
    }

    pub(super) fn gpu_node_labels(&self) -> GpuNodeLabels {
        self.labels
    }

    pub(super) fn gpu_products(&self) -> Vec<String> {
        self.products.clone()
    }
}

#[cfg(test)]
mod tests;
