//! What the rules ask of all nodes at once: the most one node can allocate
//! of a GPU resource, and the compute capabilities present. Read on every
//! admission of a GPU workload, computed once per change of the caches:
//! scanning 5,000 nodes per request cost about 90 µs of CPU, more than the
//! rest of the admission (`scripts/scale.sh`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::ClusterCache;
use crate::policy::cluster::NodeGpus;
use crate::settings::ComputeCapability;

/// The nodes' table reduced to the answers the rules need, as of one
/// generation of the snapshot.
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
    fn of(nodes: &BTreeMap<String, NodeGpus>, generation: u64) -> Self {
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
    pub(super) fn largest_allocatable(&self, resource: &str) -> Option<u64> {
        let largest = self.largest.as_ref()?;
        Some(largest.get(resource).copied().unwrap_or(0))
    }

    pub(super) fn compute_capabilities(&self) -> Vec<ComputeCapability> {
        self.compute_capabilities.clone()
    }
}

impl ClusterCache {
    /// The summary of the nodes as cached now, made again after any write.
    ///
    /// Writers bump the generation while they hold the snapshot's write
    /// lock; the generation read here under the read lock is that of the
    /// data summarised, so a summary made from older data is never taken
    /// for a newer one.
    pub(super) fn node_summary(&self) -> Arc<NodeSummary> {
        let snapshot = self.read();
        let generation = self.generation.load(Ordering::Acquire);
        let current = |summary: &Option<Arc<NodeSummary>>| {
            summary
                .as_ref()
                .filter(|summary| summary.generation == generation)
                .map(Arc::clone)
        };
        let cached = self.summary.read().unwrap_or_else(|e| e.into_inner());
        if let Some(summary) = current(&cached) {
            return summary;
        }
        drop(cached);
        let mut cached = self.summary.write().unwrap_or_else(|e| e.into_inner());
        // Another reader may have made it meanwhile.
        if let Some(summary) = current(&cached) {
            return summary;
        }
        let summary = Arc::new(NodeSummary::of(&snapshot.nodes, generation));
        *cached = Some(Arc::clone(&summary));
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ClusterFacts;
    use crate::policy::cluster::ClusterSnapshot;

    fn node(gpus: &[(&str, u64)], capability: Option<(u32, u32)>) -> NodeGpus {
        NodeGpus {
            allocatable: gpus.iter().map(|(r, n)| ((*r).to_owned(), *n)).collect(),
            compute_capability: capability
                .map(|(major, minor)| ComputeCapability::new(major, minor)),
        }
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

    #[test]
    fn every_write_makes_the_summary_again() {
        let cache = ClusterCache::default();
        assert_eq!(
            cache.node_summary().largest_allocatable("nvidia.com/gpu"),
            None
        );
        cache
            .write()
            .nodes
            .insert("a".to_owned(), node(&[("nvidia.com/gpu", 8)], Some((8, 0))));
        assert_eq!(
            cache.node_summary().largest_allocatable("nvidia.com/gpu"),
            Some(8)
        );
        let first = cache.node_summary();
        assert!(
            Arc::ptr_eq(&first, &cache.node_summary()),
            "made once per write"
        );
        cache.write().nodes.insert(
            "b".to_owned(),
            node(&[("nvidia.com/gpu", 16)], Some((9, 0))),
        );
        assert_eq!(
            cache.node_summary().largest_allocatable("nvidia.com/gpu"),
            Some(16)
        );
        assert_eq!(cache.node_summary().compute_capabilities().len(), 2);
        cache.write().nodes.clear();
        assert_eq!(
            cache.node_summary().largest_allocatable("nvidia.com/gpu"),
            None
        );
    }
}
