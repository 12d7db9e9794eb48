//! `daemonset-not-ready` (docs/operations.md, "The findings"). That no
//! DaemonSet is found at all is said by the checks it matters to:
//! `no-gpu-capacity` (cause `device-plugin-missing`) and `gfd-missing`.

use crate::doctor::finding::{Finding, FindingId, Severity, Subject};
use std::collections::BTreeMap;

use crate::doctor::inventory::{Component, ComponentPod, Inventory};

pub fn check(inventory: &Inventory) -> Vec<Finding> {
    let Some(sets) = inventory.daemon_sets.items() else {
        return Vec::new();
    };
    // Gathered once rather than searched for each DaemonSet.
    let mut not_ready: BTreeMap<(&str, Component), Vec<&ComponentPod>> = BTreeMap::new();
    for pod in inventory.component_pods.items().into_iter().flatten() {
        if !pod.ready {
            not_ready.entry((pod.namespace.as_str(), pod.component)).or_default().push(pod);
        }
    }
    sets.iter()
        .filter(|ds| ds.ready < ds.desired)
        .map(|ds| {
            let (severity, effect) = match ds.component {
                Component::DevicePlugin => (
                    Severity::Error,
                    "the nodes of the missing pods advertise no GPUs",
                ),
                Component::FeatureDiscovery => (
                    Severity::Warning,
                    "the GPU labels of the nodes of the missing pods are not kept up to date",
                ),
            };
            let pods: Vec<String> = not_ready
                .get(&(ds.namespace.as_str(), ds.component))
                .into_iter()
                .flatten()
                .map(|pod| match &pod.node {
                    Some(node) => format!("pod {}/{} on {node} is not ready", pod.namespace, pod.name),
                    None => format!("pod {}/{} is not scheduled", pod.namespace, pod.name),
                })
                .collect();
            let mut evidence = vec![format!(
                "desiredNumberScheduled {}, numberReady {}",
                ds.desired, ds.ready
            )];
            evidence.extend(pods);
            Finding::new(
                FindingId::DaemonSetNotReady,
                severity,
                format!(
                    "{} DaemonSet {} has {} of {} pods ready: {effect}",
                    capitalised(ds.component.title()),
                    ds.key(),
                    ds.ready,
                    ds.desired
                ),
                vec![Subject::namespaced(
                    "apps/v1",
                    "DaemonSet",
                    (&ds.namespace, &ds.name),
                )],
                evidence,
                format!(
                    "kubectl -n {} get pods -o wide, then describe or read the log of the pods that are not ready",
                    ds.namespace
                ),
            )
        })
        .collect()
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
