//! `runtime-class-missing` and `runtime-handler-unknown`: the RuntimeClass
//! gpu-policy injects into GPU pods. docs/operations.md, "The findings",
//! says what each reads and the signs of another way to put GPUs into
//! containers, on which the check keeps quiet.

use super::gpu_nodes::{DEPLOY_TOOLKIT_LABEL, OnNodes, gpu_nodes};
use crate::doctor::finding::{Finding, FindingId, Note, Severity, Subject, count};
use crate::doctor::inventory::{Inventory, Node};

/// Why no RuntimeClass is needed, if a node says so.
fn another_way(on_nodes: &OnNodes<'_>, gpu_nodes: &[&Node]) -> Option<String> {
    if let Some(node) = gpu_nodes
        .iter()
        .find(|node| node.labels.get(DEPLOY_TOOLKIT_LABEL).map(String::as_str) == Some("true"))
    {
        return Some(format!(
            "node {} is labelled {DEPLOY_TOOLKIT_LABEL}=true: the GPU Operator configures its runtime (CDI, or nvidia as the default)",
            node.name
        ));
    }
    gpu_nodes
        .iter()
        .all(|node| on_nodes.has_dra_slices(&node.name))
        .then(|| "every GPU node's GPUs are published by the NVIDIA DRA driver, which injects them through CDI".to_owned())
}

pub fn check(inventory: &Inventory) -> Vec<Finding> {
    let wanted = inventory.config.runtime_class_name.as_str();
    let Some(classes) = inventory.runtime_classes.items() else {
        return Vec::new();
    };
    let on_nodes = OnNodes::of(inventory);
    let gpu_nodes = gpu_nodes(inventory, &on_nodes);
    if wanted.is_empty() || gpu_nodes.is_empty() {
        return Vec::new();
    }
    let Some(class) = classes.iter().find(|class| class.name == wanted) else {
        if another_way(&on_nodes, &gpu_nodes).is_some() {
            return Vec::new();
        }
        let names: Vec<String> = classes.iter().map(|c| c.name.clone()).collect();
        let evidence = vec![
            format!("runtimeClassName is {wanted:?} ({})", config_source(inventory)),
            match names.is_empty() {
                true => "no RuntimeClass exists".to_owned(),
                false => format!("RuntimeClasses: {}", names.join(", ")),
            },
            format!(
                "{} GPUs, none labelled {DEPLOY_TOOLKIT_LABEL}=true",
                count(gpu_nodes.len(), "node has", "nodes have")
            ),
        ];
        return vec![Finding::new(
            FindingId::RuntimeClassMissing,
            Severity::Warning,
            format!(
                "RuntimeClass {wanted} does not exist: gpu-policy injects no RuntimeClass and warns every GPU pod, which runs with the node's default runtime"
            ),
            vec![Subject::cluster("node.k8s.io/v1", "RuntimeClass", wanted)],
            evidence,
            format!(
                "create RuntimeClass {wanted} with handler nvidia (the GPU Operator and the device plugin's chart create it), or set runtimeClassName: \"\" in gpu-policy's config if nvidia is the nodes' default runtime or CDI injects the GPUs"
            ),
        )];
    };
    let without: Vec<(&Node, &Vec<String>)> = gpu_nodes
        .iter()
        .filter_map(|node| {
            let handlers = node.runtime_handlers.as_ref()?;
            (!handlers.is_empty() && !handlers.contains(&class.handler))
                .then_some((*node, handlers))
        })
        .collect();
    if without.is_empty() {
        return Vec::new();
    }
    let evidence = without
        .iter()
        .map(|(node, handlers)| format!("{} reports handlers {}", node.name, handlers.join(", ")))
        .collect();
    vec![Finding::new(
        FindingId::RuntimeHandlerUnknown,
        Severity::Error,
        format!(
            "RuntimeClass {} names handler {}, which {} not report: GPU pods fail to start there",
            class.name,
            class.handler,
            count(without.len(), "GPU node does", "GPU nodes do")
        ),
        without.iter().map(|(node, _)| Subject::node(&node.name)).collect(),
        evidence,
        format!(
            "on those nodes, run nvidia-ctk runtime configure --runtime=containerd and restart containerd (it adds the {} handler), or give the RuntimeClass a handler the nodes report",
            class.handler
        ),
    )]
}

/// The note the check leaves when another way is seen.
pub fn notes(inventory: &Inventory) -> Vec<Note> {
    let wanted = inventory.config.runtime_class_name.as_str();
    let Some(classes) = inventory.runtime_classes.items() else {
        return Vec::new();
    };
    let on_nodes = OnNodes::of(inventory);
    let gpu_nodes = gpu_nodes(inventory, &on_nodes);
    if wanted.is_empty() || gpu_nodes.is_empty() || classes.iter().any(|c| c.name == wanted) {
        return Vec::new();
    }
    another_way(&on_nodes, &gpu_nodes)
        .map(|why| Note {
            kind: "runtime",
            message: format!(
                "RuntimeClass {wanted} does not exist, and {why}; if GPU pods run without it, set runtimeClassName: \"\" in gpu-policy's config so that it stops warning them"
            ),
        })
        .into_iter()
        .collect()
}

/// Where the configuration was read, for evidence.
pub fn config_source(inventory: &Inventory) -> String {
    use crate::doctor::inventory::ConfigSource;
    match &inventory.config.source {
        ConfigSource::File(path) => format!("config {path}"),
        ConfigSource::ConfigMap(key) => format!("ConfigMap {key}"),
        ConfigSource::Defaults | ConfigSource::Invalid { .. } => "the default".to_owned(),
    }
}
