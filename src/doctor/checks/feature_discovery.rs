//! `gfd-missing` and `gfd-labels-missing`: nodes that advertise GPUs
//! without the GPU Feature Discovery labels R4's floors select on.
//! docs/operations.md, "The findings", says when each is reported and what
//! gpu-policy does meanwhile.

use super::gpu_nodes::{has_any_gpu_capacity, missing_gfd_labels, nodes};
use crate::doctor::finding::{Finding, FindingId, Severity, Subject, count};
use crate::doctor::inventory::{Component, Inventory};

pub fn check(inventory: &Inventory) -> Vec<Finding> {
    let gpu_nodes: Vec<_> =
        nodes(inventory).iter().filter(|node| has_any_gpu_capacity(node)).collect();
    let unlabelled: Vec<_> = gpu_nodes
        .iter()
        .map(|node| (node, missing_gfd_labels(node)))
        .filter(|(_, missing)| !missing.is_empty())
        .collect();
    if unlabelled.is_empty() {
        return Vec::new();
    }
    let none_labelled = unlabelled.len() == gpu_nodes.len();
    let mut evidence: Vec<String> = Vec::new();
    let gfd: Option<Vec<String>> = inventory.daemon_sets.items().map(|sets| {
        sets.iter()
            .filter(|ds| ds.component == Component::FeatureDiscovery)
            .map(|ds| format!("{} ({} of {} ready)", ds.key(), ds.ready, ds.desired))
            .collect()
    });
    let id = match &gfd {
        Some(found) if found.is_empty() => {
            evidence.push(format!("no DaemonSet {}", Component::FeatureDiscovery.looked_for()));
            FindingId::GfdMissing
        }
        Some(found) => {
            evidence.push(format!("GPU Feature Discovery DaemonSet {}", found.join(", ")));
            FindingId::GfdLabelsMissing
        }
        None => {
            evidence.push("the DaemonSets could not be read".to_owned());
            FindingId::GfdLabelsMissing
        }
    };
    evidence.extend(
        unlabelled
            .iter()
            .map(|(node, missing)| format!("{}: no {}", node.name, missing.join(", "))),
    );
    let effect = if none_labelled {
        "no GPU node carries them, so gpu-policy enforces no compute or driver floor and warns GPU pods (computeAffinity.whenNodesUnlabelled: skip, the default; with require, GPU pods with a floor stay Pending)"
    } else {
        "GPU pods with a compute or driver floor are never scheduled onto these nodes"
    };
    let summary = format!(
        "{} GPUs without GPU Feature Discovery's compute and driver labels: {effect}",
        count(unlabelled.len(), "node advertises", "nodes advertise")
    );
    let fix = match id {
        FindingId::GfdMissing => {
            "deploy GPU Feature Discovery: helm upgrade -i nvdp nvdp/nvidia-device-plugin -n nvidia-device-plugin --set gfd.enabled=true, or the GPU Operator"
        }
        _ => {
            "make GPU Feature Discovery's DaemonSet run on these nodes (its nodeSelector, affinity and tolerations) and read its pods' logs"
        }
    };
    let subjects = unlabelled.iter().map(|(node, _)| Subject::node(&node.name)).collect();
    vec![Finding::new(id, Severity::Warning, summary, subjects, evidence, fix.to_owned())]
}
