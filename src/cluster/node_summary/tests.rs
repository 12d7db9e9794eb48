use super::*;
use crate::policy::cluster::ClusterSnapshot;
use crate::policy::{ClusterFacts, NodeFacts};

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
        ("a", node(&[("nvidia.com/gpu", 8)], Some((8, 0))).with_product("NVIDIA-H100")),
        ("b", node(&[("nvidia.com/gpu", 4), ("nvidia.com/mig-1g.5gb", 7)], Some((7, 5)))),
        ("c", node(&[("nvidia.com/gpu", 16)], Some((8, 0))).with_product("NVIDIA-A10")),
        ("d", node(&[("nvidia.com/gpu", 1)], None).with_product("NVIDIA-H100")),
        ("cpu", node(&[], None).with_product("NVIDIA-IDLE")),
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
    assert_eq!(summary.compute_capabilities(), snapshot.compute_capabilities());
    assert_eq!(summary.compute_capabilities().len(), 2);
    assert_eq!(summary.gpu_node_labels(), snapshot.gpu_node_labels());
    assert_eq!(summary.gpu_products(), snapshot.gpu_products());
    // Sorted, each once, and only of nodes that offer GPUs.
    assert_eq!(summary.gpu_products(), ["NVIDIA-A10", "NVIDIA-H100"]);
}

/// GPU nodes are those that offer a GPU resource; the labels are
/// counted among them only.
#[test]
fn the_summary_counts_the_gpu_nodes_and_their_labels() {
    let labels = |nodes: Vec<NodeGpus>| {
        let nodes: BTreeMap<String, NodeGpus> =
            nodes.into_iter().enumerate().map(|(i, node)| (format!("node-{i}"), node)).collect();
        NodeSummary::of(&nodes, 0).gpu_node_labels()
    };
    let gpus = [("nvidia.com/gpu", 4)];
    let counts = |gpu_nodes, with_compute, with_driver| GpuNodeLabels {
        gpu_nodes,
        with_compute,
        with_driver,
        with_product: 0,
    };
    assert_eq!(labels(vec![]), counts(0, 0, 0));
    // GFD not deployed: GPU nodes, no labels.
    let unlabelled = labels(vec![node(&gpus, None), node(&[], None)]);
    assert_eq!(unlabelled, counts(1, 0, 0));
    assert!(unlabelled.compute_unlabelled() && unlabelled.driver_unlabelled());
    // Labels on a node without GPUs, or with none allocatable, do not count.
    let elsewhere = labels(vec![
        node(&gpus, None),
        node(&[], Some((8, 0))).with_driver_labels(),
        node(&[("nvidia.com/gpu", 0)], Some((8, 0))).with_driver_labels(),
    ]);
    assert_eq!(elsewhere, counts(1, 0, 0));
    // A mixed fleet: some GPU nodes labelled.
    let mixed = labels(vec![
        node(&gpus, None),
        node(&gpus, Some((8, 0))).with_driver_labels(),
        node(&[("nvidia.com/mig-1g.5gb", 7)], Some((8, 0))),
    ]);
    assert_eq!(mixed, counts(3, 2, 1));
    assert!(!mixed.compute_unlabelled() && !mixed.driver_unlabelled());
    // Compute labels set by hand, no driver labels.
    let compute_only = labels(vec![node(&gpus, Some((7, 5)))]);
    assert!(!compute_only.compute_unlabelled() && compute_only.driver_unlabelled());
}
