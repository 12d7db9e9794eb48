//! What makes a node a GPU node, read from its labels, capacity and the
//! pods and slices on it; shared by the checks of nodes.

use std::collections::{BTreeMap, BTreeSet};

use crate::cuda::requirement::{DRIVER_MAJOR_LABEL, OLD_DRIVER_MAJOR_LABEL};
use crate::doctor::inventory::{Component, ComponentPod, Inventory, Node};
use crate::policy::rules::compute_affinity::MAJOR_LABEL;

/// The resource the device plugin advertises whole GPUs as.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// What it advertises shared GPUs as with `renameByDefault`.
pub const SHARED_GPU_RESOURCE: &str = "nvidia.com/gpu.shared";
/// MIG devices under the `mixed` strategy: `nvidia.com/mig-1g.5gb`.
pub const MIG_RESOURCE_PREFIX: &str = "nvidia.com/mig-";
/// GFD's (and the GPU Operator's) label of a node with a GPU.
pub const GPU_PRESENT_LABEL: &str = "nvidia.com/gpu.present";
/// GFD's count of the node's GPUs.
pub const GPU_COUNT_LABEL: &str = "nvidia.com/gpu.count";
/// The GPU Operator's label of a node whose runtime it configures.
pub const DEPLOY_TOOLKIT_LABEL: &str = "nvidia.com/gpu.deploy.container-toolkit";
/// The GPU Operator's label of a node it deploys the device plugin to.
pub const DEPLOY_DEVICE_PLUGIN_LABEL: &str = "nvidia.com/gpu.deploy.device-plugin";
/// Node Feature Discovery's PCI labels: `feature.node.kubernetes.io/pci-10de.present`
/// or, with the device class, `pci-0302_10de.present` (0x10de: NVIDIA).
const NFD_PCI_PREFIX: &str = "feature.node.kubernetes.io/pci-";
const NVIDIA_PCI_VENDOR: &str = "10de";

/// Whether a check reads the node label `key`: the reader keeps only
/// these (a GFD-labelled node has some thirty `nvidia.com/` labels, six of
/// which are read).
pub fn is_read_label(key: &str) -> bool {
    [
        GPU_PRESENT_LABEL,
        GPU_COUNT_LABEL,
        DEPLOY_DEVICE_PLUGIN_LABEL,
        DEPLOY_TOOLKIT_LABEL,
        MAJOR_LABEL,
        DRIVER_MAJOR_LABEL,
        OLD_DRIVER_MAJOR_LABEL,
    ]
    .contains(&key)
        || (key.starts_with(NFD_PCI_PREFIX) && key.contains(NVIDIA_PCI_VENDOR))
}

/// Why a node looks like a GPU node: the labels that say so, else the
/// device plugin's pod on it; empty when nothing does.
pub fn gpu_signs(node: &Node, pods: &[&ComponentPod]) -> Vec<String> {
    let mut signs: Vec<String> = node
        .labels
        .iter()
        .filter(|(key, value)| {
            let is_true = value.as_str() == "true";
            ([GPU_PRESENT_LABEL, DEPLOY_DEVICE_PLUGIN_LABEL].contains(&key.as_str()) && is_true)
                || key.as_str() == GPU_COUNT_LABEL
                || (key.starts_with(NFD_PCI_PREFIX)
                    && key.contains(NVIDIA_PCI_VENDOR)
                    && key.ends_with(".present")
                    && is_true)
        })
        .map(|(key, value)| format!("label {key}={value}"))
        .collect();
    if !signs.is_empty() {
        return signs;
    }
    signs.extend(
        pods.iter()
            .filter(|pod| pod.component == Component::DevicePlugin)
            .map(|pod| format!("device-plugin pod {}/{}", pod.namespace, pod.name)),
    );
    signs
}

/// Whether the node advertises whole or shared GPUs.
pub fn has_gpu_capacity(node: &Node) -> bool {
    [GPU_RESOURCE, SHARED_GPU_RESOURCE]
        .iter()
        .any(|resource| node.capacity.get(*resource).is_some_and(|n| *n > 0))
}

/// The MIG resources the node advertises (`nvidia.com/mig-1g.5gb=7`).
pub fn mig_capacity(node: &Node) -> Vec<String> {
    node.capacity
        .iter()
        .filter(|(name, n)| name.starts_with(MIG_RESOURCE_PREFIX) && **n > 0)
        .map(|(name, n)| format!("{name}={n}"))
        .collect()
}

/// Whether the node advertises GPUs of any kind: whole, shared or MIG.
pub fn has_any_gpu_capacity(node: &Node) -> bool {
    has_gpu_capacity(node) || !mig_capacity(node).is_empty()
}

/// The GFD labels R4's floors select on that the node lacks (of the driver's
/// CUDA version, either of its two names).
pub fn missing_gfd_labels(node: &Node) -> Vec<&'static str> {
    let mut missing = Vec::new();
    if !node.labels.contains_key(MAJOR_LABEL) {
        missing.push(MAJOR_LABEL);
    }
    if !node.labels.contains_key(DRIVER_MAJOR_LABEL)
        && !node.labels.contains_key(OLD_DRIVER_MAJOR_LABEL)
    {
        missing.push(DRIVER_MAJOR_LABEL);
    }
    missing
}

/// The component pods and the NVIDIA DRA slices by node, gathered once
/// rather than searched for each node (quadratic in the fleet).
pub struct OnNodes<'i> {
    pods: BTreeMap<&'i str, Vec<&'i ComponentPod>>,
    sliced: BTreeSet<&'i str>,
}

impl<'i> OnNodes<'i> {
    pub fn of(inventory: &'i Inventory) -> Self {
        let mut pods: BTreeMap<&'i str, Vec<&'i ComponentPod>> = BTreeMap::new();
        for pod in inventory.component_pods.items().into_iter().flatten() {
            if let Some(node) = pod.node.as_deref() {
                pods.entry(node).or_default().push(pod);
            }
        }
        let sliced = inventory
            .dra
            .items()
            .into_iter()
            .flat_map(|dra| dra.slices.iter())
            .filter_map(|slice| slice.node.as_deref())
            .collect();
        Self { pods, sliced }
    }

    pub fn pods(&self, node: &str) -> &[&'i ComponentPod] {
        self.pods.get(node).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Whether the NVIDIA DRA driver publishes a slice for `node`: its
    /// GPUs come through claims, not capacity.
    pub fn has_dra_slices(&self, node: &str) -> bool {
        self.sliced.contains(node)
    }
}

pub fn nodes(inventory: &Inventory) -> &[Node] {
    inventory.nodes.items().map(Vec::as_slice).unwrap_or(&[])
}

/// The nodes that have, or look like they have, GPUs.
pub fn gpu_nodes<'i>(inventory: &'i Inventory, on_nodes: &OnNodes<'_>) -> Vec<&'i Node> {
    nodes(inventory)
        .iter()
        .filter(|node| {
            has_any_gpu_capacity(node) || !gpu_signs(node, on_nodes.pods(&node.name)).is_empty()
        })
        .collect()
}
