//! What `check` and `test` know of the fleet's nodes without a cluster: Nodes read from manifests
//! (`check --nodes`), and the GPU products the nodes carry, listed by name (`check
//! --node-products`, a test file's `nodeProducts`), which the globs of `gpuProducts` and
//! `gpu-policy.io/gpu-products` expand against.

use crate::cuda::ComputeCapability;
use crate::policy::cluster::{ClusterSnapshot, GpuNodeLabels, NodeFacts, NodeGpus};
use crate::settings::ProductPattern;

/// The Nodes as the webhook's cache keeps them, and the products listed, added to those the Nodes'
/// GPU nodes carry.
pub struct KnownNodes {
    nodes: Option<ClusterSnapshot>,
    products: Vec<String>,
}

impl KnownNodes {
    /// None when neither is given: then no node is known.
    pub fn of(nodes: Option<ClusterSnapshot>, products: Vec<String>) -> Option<Self> {
        (nodes.is_some() || !products.is_empty()).then_some(KnownNodes { nodes, products })
    }
}

/// Products as the nodes' GFD labels name them: each a label value, no glob; sorted, each once.
/// Err: why, on one line.
pub fn node_products(listed: &[String]) -> Result<Vec<String>, String> {
    let mut products = Vec::new();
    for product in listed.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        let pattern = ProductPattern::parse(product)?;
        if pattern.is_glob() {
            return Err(format!("{product:?} is a glob; list the products the nodes carry"));
        }
        products.push(product.to_owned());
    }
    products.sort_unstable();
    products.dedup();
    Ok(products)
}

impl NodeFacts for KnownNodes {
    fn compute_capabilities(&self) -> Vec<ComputeCapability> {
        self.nodes.as_ref().map(NodeFacts::compute_capabilities).unwrap_or_default()
    }

    fn gpu_node_labels(&self) -> GpuNodeLabels {
        self.nodes.as_ref().map(NodeFacts::gpu_node_labels).unwrap_or_default()
    }

    fn gpu_products(&self) -> Vec<String> {
        let mut products = self.nodes.as_ref().map(NodeFacts::gpu_products).unwrap_or_default();
        products.extend(self.products.iter().cloned());
        products.sort_unstable();
        products.dedup();
        products
    }

    fn node(&self, name: &str) -> Option<NodeGpus> {
        self.nodes.as_ref()?.node(name)
    }
}
