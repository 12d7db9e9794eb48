use super::*;
use crate::policy::cluster::NodeGpus;

fn node(gpus: &[(&str, u64)], capability: Option<(u32, u32)>) -> NodeGpus {
    NodeGpus::of(gpus, capability)
}

#[test]
fn every_write_makes_the_summary_again() {
    let cache = ClusterCache::default();
    assert_eq!(cache.node_summary().largest_allocatable("nvidia.com/gpu"), None);
    cache.write().nodes.insert("a".to_owned(), node(&[("nvidia.com/gpu", 8)], Some((8, 0))));
    assert_eq!(cache.node_summary().largest_allocatable("nvidia.com/gpu"), Some(8));
    let first = cache.node_summary();
    assert!(Arc::ptr_eq(&first, &cache.node_summary()), "made once per write");
    cache.write().nodes.insert("b".to_owned(), node(&[("nvidia.com/gpu", 16)], Some((9, 0))));
    assert_eq!(cache.node_summary().largest_allocatable("nvidia.com/gpu"), Some(16));
    assert_eq!(cache.node_summary().compute_capabilities().len(), 2);
    assert_eq!(cache.gpu_node_labels().with_driver, 0);
    cache
        .write()
        .nodes
        .insert("b".to_owned(), node(&[("nvidia.com/gpu", 16)], Some((9, 0))).with_driver_labels());
    assert_eq!(cache.gpu_node_labels().with_driver, 1);
    cache.write().nodes.clear();
    assert_eq!(cache.node_summary().largest_allocatable("nvidia.com/gpu"), None);
}
