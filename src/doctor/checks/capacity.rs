//! `no-gpu-capacity`: a node that looks like a GPU node advertises no
//! `nvidia.com/gpu`, the most common trouble on GPU clusters. What makes a
//! GPU node, and the causes told apart (first match wins), are in
//! docs/operations.md, "What it reads" and "The findings".
//!
//! A Ready plugin with no RuntimeClass that advertises nothing is what an
//! old plugin (`--fail-on-init-error=false`) does when its container does
//! not run under the NVIDIA runtime: it finds no GPU and says so in its log.

use std::collections::BTreeMap;

use super::gpu_nodes::{GPU_RESOURCE, OnNodes, gpu_signs, has_gpu_capacity, mig_capacity, nodes};
use crate::doctor::finding::{Finding, FindingId, Severity, Subject};
use crate::doctor::inventory::{Component, ComponentPod, Inventory};

/// Why a GPU node advertises no GPU, in the order they are told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cause {
    MigStrategy,
    DevicePluginMissing,
    DevicePluginUnread,
    DevicePluginNotOnNode,
    DevicePluginNotReady,
    RuntimeNotDefault,
    DevicePluginFindsNoGpu,
}

impl Cause {
    /// Its stable word, the likely cause in words, and the fix.
    fn words(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Cause::MigStrategy => (
                "mig-strategy",
                "the GPUs are in MIG mode and the device plugin's mixed strategy advertises them as nvidia.com/mig-* instead",
                "request the MIG resource (nvidia.com/mig-<profile>), or set the device plugin's MIG strategy to single to advertise nvidia.com/gpu",
            ),
            Cause::DevicePluginMissing => (
                "device-plugin-missing",
                "no NVIDIA device plugin is deployed",
                "install the device plugin (helm install nvdp nvdp/nvidia-device-plugin -n nvidia-device-plugin --create-namespace) or the GPU Operator",
            ),
            Cause::DevicePluginUnread => (
                "device-plugin-unread",
                "the device plugin's DaemonSets or pods could not be read, so the cause is not known",
                "grant list on daemonsets.apps and pods and run doctor again, or check the device-plugin pod on the node and containerd's default runtime",
            ),
            Cause::DevicePluginNotOnNode => (
                "device-plugin-not-on-node",
                "no device-plugin pod runs on the node",
                "make the device plugin's DaemonSet select the node: its nodeSelector and affinity must match the node's labels and its tolerations the node's taints",
            ),
            Cause::DevicePluginNotReady => (
                "device-plugin-not-ready",
                "the device-plugin pod on the node is not ready",
                "read the pod's log (kubectl logs -n NS POD); if it cannot load NVML, run nvidia-ctk runtime configure --runtime=containerd --set-as-default on the node and restart containerd, or set runtimeClassName: nvidia on the device plugin's DaemonSet",
            ),
            Cause::RuntimeNotDefault => (
                "runtime-not-default",
                "nvidia is not the container runtime's default and the device plugin uses no RuntimeClass, so it sees no GPU",
                "on the node, run nvidia-ctk runtime configure --runtime=containerd --set-as-default and restart containerd, or set runtimeClassName: nvidia on the device plugin's DaemonSet",
            ),
            Cause::DevicePluginFindsNoGpu => (
                "device-plugin-finds-no-gpu",
                "the device plugin runs but finds no GPU",
                "read the device-plugin pod's log (kubectl logs -n NS POD) and check the driver on the node (nvidia-smi)",
            ),
        }
    }
}

/// The cause of one node, and the facts that show it.
fn cause_of(inventory: &Inventory, pods: &[&ComponentPod], mig: &[String]) -> (Cause, Vec<String>) {
    if !mig.is_empty() {
        return (Cause::MigStrategy, vec![format!("capacity {}", mig.join(", "))]);
    }
    // Without the DaemonSets, or their pods, what runs on the node is unknown.
    let (Some(daemon_sets), Some(_)) =
        (inventory.daemon_sets.items(), inventory.component_pods.items())
    else {
        return (Cause::DevicePluginUnread, Vec::new());
    };
    let plugins: Vec<String> = daemon_sets
        .iter()
        .filter(|ds| ds.component == Component::DevicePlugin)
        .map(|ds| ds.key())
        .collect();
    if plugins.is_empty() {
        return (
            Cause::DevicePluginMissing,
            vec![format!("no DaemonSet {}", Component::DevicePlugin.looked_for())],
        );
    }
    let Some(pod) = pods.iter().find(|pod| pod.component == Component::DevicePlugin) else {
        return (
            Cause::DevicePluginNotOnNode,
            vec![format!("no pod of DaemonSet {} on it", plugins.join(", "))],
        );
    };
    let runtime = match &pod.runtime_class {
        Some(class) => format!("with RuntimeClass {class}"),
        None => "without a RuntimeClass".to_owned(),
    };
    let pod_name = format!("{}/{}", pod.namespace, pod.name);
    if !pod.ready {
        return (
            Cause::DevicePluginNotReady,
            vec![format!("device-plugin pod {pod_name} is not ready, runs {runtime}")],
        );
    }
    let seen = vec![format!("device-plugin pod {pod_name} is ready, runs {runtime}")];
    match pod.runtime_class {
        None => (Cause::RuntimeNotDefault, seen),
        Some(_) => (Cause::DevicePluginFindsNoGpu, seen),
    }
}

/// One finding per cause, naming the nodes it explains.
pub fn check(inventory: &Inventory) -> Vec<Finding> {
    // Cause -> (nodes, evidence lines).
    let mut by_cause: BTreeMap<Cause, (Vec<Subject>, Vec<String>)> = BTreeMap::new();
    let on_nodes = OnNodes::of(inventory);
    for node in nodes(inventory) {
        if has_gpu_capacity(node) || on_nodes.has_dra_slices(&node.name) {
            continue;
        }
        let pods = on_nodes.pods(&node.name);
        let signs = gpu_signs(node, pods);
        if signs.is_empty() {
            continue;
        }
        let mig = mig_capacity(node);
        let (cause, facts) = cause_of(inventory, pods, &mig);
        let (subjects, evidence) = by_cause.entry(cause).or_default();
        subjects.push(Subject::node(&node.name));
        let mut line =
            format!("{}: {}; no {GPU_RESOURCE} in capacity", node.name, signs.join(", "));
        for fact in facts {
            line.push_str("; ");
            line.push_str(&fact);
        }
        evidence.push(line);
    }
    by_cause
        .into_iter()
        .map(|(cause, (subjects, evidence))| {
            let looks = match subjects.len() {
                1 => "1 node looks like a GPU node but advertises".to_owned(),
                n => format!("{n} nodes look like GPU nodes but advertise"),
            };
            let (word, likely, fix) = cause.words();
            let summary = format!("{looks} no {GPU_RESOURCE}: {likely}");
            // MIG devices are GPUs still, requested by their own names.
            let severity = match cause {
                Cause::MigStrategy => Severity::Warning,
                _ => Severity::Error,
            };
            Finding::new(
                FindingId::NoGpuCapacity,
                severity,
                summary,
                subjects,
                evidence,
                fix.to_owned(),
            )
            .with_cause(word)
        })
        .collect()
}
