//! [`diagnose`]: the findings of every check, the notes of what could not be
//! looked at, and the summary. Pure: the same inventory, the same diagnosis.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::Serialize;

use super::checks::gpu_nodes::{OnNodes, gpu_nodes, nodes};
use super::checks::{check_notes, findings};
use super::finding::{Finding, Note};
use super::inventory::{ConfigSource, Inventory, Seen};
use crate::admission::Mode;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnosis {
    pub summary: Summary,
    pub findings: Vec<Finding>,
    pub notes: Vec<Note>,
}

impl Diagnosis {
    /// Nothing found (notes are not findings).
    pub fn healthy(&self) -> bool {
        self.findings.is_empty()
    }
}

/// The counts the output opens with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub nodes: usize,
    /// Nodes with GPU capacity, or that look like GPU nodes.
    pub gpu_nodes: usize,
    /// The opted-in namespaces by mode (`enforce`, `warn`, `audit`), each
    /// list sorted; a mode without namespaces is listed empty.
    pub opted_in: BTreeMap<&'static str, Vec<String>>,
}

pub fn diagnose(inventory: &Inventory) -> Diagnosis {
    let gpu_nodes = gpu_nodes(inventory, &OnNodes::of(inventory)).len();
    let mut opted_in: BTreeMap<&'static str, Vec<String>> =
        Mode::ALL.iter().map(|mode| (mode.as_str(), Vec::new())).collect();
    for namespace in inventory.namespaces.items().into_iter().flatten() {
        if let Ok(mode) = Mode::from_str(&namespace.mode) {
            opted_in.entry(mode.as_str()).or_default().push(namespace.namespace.clone());
        }
    }
    for names in opted_in.values_mut() {
        names.sort();
    }
    let mut notes = unread(inventory);
    notes.extend(check_notes(inventory));
    Diagnosis {
        summary: Summary { nodes: nodes(inventory).len(), gpu_nodes, opted_in },
        findings: findings(inventory),
        notes,
    }
}

/// What could not be read, and what its checks therefore skipped.
fn unread(inventory: &Inventory) -> Vec<Note> {
    let mut notes = Vec::new();
    let mut part = |state: Option<(&'static str, String)>| {
        if let Some((kind, message)) = state {
            notes.push(Note { kind, message });
        }
    };
    part(seen_note(&inventory.nodes, "nodes", "every check of nodes"));
    part(seen_note(
        &inventory.runtime_classes,
        "runtimeclasses.node.k8s.io",
        "the RuntimeClass checks",
    ));
    part(seen_note(&inventory.daemon_sets, "daemonsets.apps", "the device plugin and GFD checks"));
    part(seen_note(&inventory.component_pods, "pods", "the device-plugin pods on each node"));
    part(seen_note(
        &inventory.dra,
        "deviceclasses and resourceslices.resource.k8s.io",
        "the DRA checks",
    ));
    part(seen_note(&inventory.namespaces, "namespaces", "the opted-in namespaces"));
    match &inventory.install.webhooks {
        Seen::NotServed => part(Some((
            "not-installed",
            format!(
                "gpu-policy's webhook configurations ({}) do not exist: the checks of its install were skipped",
                crate::install::NAME
            ),
        ))),
        other => part(seen_note(
            other,
            "mutatingwebhookconfigurations and validatingwebhookconfigurations",
            "the caBundle check",
        )),
    }
    part(seen_note(&inventory.install.deployment, "deployments.apps", "the replicas check"));
    for target in &inventory.install.allowlist {
        part(seen_note(&target.exists, "daemonsets.apps", "the check of an allowlist entry"));
    }
    if let ConfigSource::Invalid { config_map, error } = &inventory.config.source {
        part(Some((
            "config",
            format!(
                "ConfigMap {config_map} does not load ({error}): the checks use the default configuration, and the server refuses it too"
            ),
        )));
    }
    if inventory.config.source == ConfigSource::Defaults {
        part(Some((
            "config",
            format!(
                "no --config and no readable ConfigMap {ns}/{name}: the checks use the default configuration",
                ns = inventory.install.namespace,
                name = crate::install::NAME
            ),
        )));
    }
    notes.dedup();
    notes
}

/// The note of one part read in part or not at all.
fn seen_note<T>(seen: &Seen<T>, what: &str, skipped: &str) -> Option<(&'static str, String)> {
    match seen {
        Seen::Complete(_) | Seen::NotServed => None,
        Seen::Truncated(_) => Some((
            "truncated",
            format!("only the first pages of {what} were read; saw part of the cluster: {skipped}"),
        )),
        Seen::Forbidden { rbac } => Some((
            "forbidden",
            format!("cannot read {what} (forbidden); skipped: {skipped}; grant {rbac}"),
        )),
    }
}
