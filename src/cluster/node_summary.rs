//! What the rules ask of all nodes at once: the most one node can allocate
//! of a GPU resource, and the compute capabilities present. Read on every
//! admission of a GPU workload, computed once per change of the caches:
//! scanning 5,000 nodes per request cost about 90 µs of CPU, more than the
//! rest of the admission (`scripts/scale.sh`).

use std::collections::BTreeMap;

use crate::cuda::ComputeCapability;
use crate::policy::cluster::NodeGpus;

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
        }
    }

    /// As [`crate::policy::ClusterFacts::largest_allocatable`]: Some(0)
    /// when nodes are known and none offers the resource.
    /// The generation of the snapshot whose nodes were summarised.
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    pub(super) fn largest_allocatable(&self, resource: &str) -> Option<u64> {
        let largest = self.largest.as_ref()?;
        Some(largest.get(resource).copied().unwrap_or(0))
    }

    pub(super) fn compute_capabilities(&self) -> Vec<ComputeCapability> {
        self.compute_capabilities.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ClusterFacts;
    use crate::policy::cluster::ClusterSnapshot;

    fn node(gpus: &[(&str, u64)], capability: Option<(u32, u32)>) -> NodeGpus {
        NodeGpus::of(gpus, capability)
    }

    #[test]
    fn the_summary_answers_as_a_scan_of_the_nodes() {
        let mut snapshot = ClusterSnapshot::default();
        let empty = NodeSummary::of(&snapshot.nodes, 0);
        assert_eq!(empty.largest_allocatable("nvidia.com/gpu"), None);
        assert_eq!(empty.compute_capabilities(), Vec::new());
        snapshot.nodes = [
            ("a", node(&[("nvidia.com/gpu", 8)], Some((8, 0)))),
            (
                "b",
                node(
                    &[("nvidia.com/gpu", 4), ("nvidia.com/mig-1g.5gb", 7)],
                    Some((7, 5)),
                ),
            ),
            ("c", node(&[("nvidia.com/gpu", 16)], Some((8, 0)))),
            ("cpu", node(&[], None)),
        ]
        .into_iter()
        .map(|(name, gpus)| (name.to_owned(), gpus))
        .collect();
        let summary = NodeSummary::of(&snapshot.nodes, 1);
        for resource in ["nvidia.com/gpu", "nvidia.com/mig-1g.5gb", "nvidia.com/vgpu"] {
            assert_eq!(
                summary.largest_allocatable(resource),
                snapshot.largest_allocatable(resource),
                "{resource}"
            );
        }
        assert_eq!(summary.largest_allocatable("nvidia.com/vgpu"), Some(0));
        assert_eq!(
            summary.compute_capabilities(),
            snapshot.compute_capabilities()
        );
        assert_eq!(summary.compute_capabilities().len(), 2);
    }
}
