//! `gpu-policy doctor`'s one read of the cluster (docs/operations.md,
//! "What it reads"), into a [`doctor::Inventory`](Inventory): the GPU stack
//! here, gpu-policy's own install in `install_read.rs`. 403 is
//! [`Seen::Forbidden`], 404 [`Seen::NotServed`]; other errors fail the read.

use std::collections::BTreeMap;

use kube::Client;
use kube::api::{GroupVersionKind, ListParams};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use super::dra_watches::{dra_gvk, served_dra_version};
use super::install_read::read_install;
use super::list::{INVENTORY_PAGES, Meta, Wire, WithLabels, list_seen};
use crate::doctor::checks::gpu_nodes::is_read_label;
use crate::doctor::inventory::{
    Component, ComponentPod, DaemonSet, Dra, Inventory, Node, OptedIn, PolicyConfig, RuntimeClass,
    Seen, Slice,
};
use crate::policy::dra::allocation::{GPU_DRIVER, device_attributes};
use crate::policy::quantity::GpuCount;
use crate::settings::{MODE_LABEL, Settings};

/// The most DaemonSets of one component whose pods are listed.
const MAX_COMPONENT_DAEMON_SETS: usize = 10;

#[derive(Debug, Clone)]
pub struct InventoryOptions<'a> {
    pub namespace: &'a str,
    pub settings: &'a Settings,
    pub config: PolicyConfig,
    /// Unix seconds: the serving certificate is verified at this time.
    pub now: i64,
}

pub async fn read_inventory(
    client: &Client,
    options: InventoryOptions<'_>,
) -> Result<Inventory, kube::Error> {
    let nodes = read_nodes(client).await?;
    let runtime_classes = read_runtime_classes(client).await?;
    let (daemon_sets, selectors) = read_daemon_sets(client).await?;
    let component_pods = read_component_pods(client, &selectors).await?;
    let dra = read_dra(client, options.settings).await?;
    let namespaces = read_namespaces(client).await?;
    let install = read_install(client, options.namespace, options.settings, options.now).await?;
    Ok(Inventory {
        nodes,
        runtime_classes,
        daemon_sets,
        component_pods,
        dra,
        namespaces,
        install,
        config: options.config,
    })
}

async fn read_nodes(client: &Client) -> Result<Seen<Vec<Node>>, kube::Error> {
    #[derive(Deserialize)]
    struct Handler {
        #[serde(default)]
        name: String,
    }
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct Status {
        #[serde(default)]
        capacity: BTreeMap<String, Value>,
        runtime_handlers: Option<Vec<Handler>>,
    }
    let keep = |node: Wire<IgnoredAny, Status, WithLabels>| {
        let labels =
            node.metadata.labels.into_iter().filter(|(key, _)| is_read_label(key)).collect();
        let capacity = node
            .status
            .capacity
            .iter()
            .filter(|(name, _)| name.starts_with("nvidia.com/"))
            .filter_map(|(name, quantity)| match GpuCount::from_value(quantity) {
                GpuCount::Whole(n) => Some((name.clone(), n)),
                GpuCount::Invalid(_) => None,
            })
            .collect();
        let runtime_handlers = node
            .status
            .runtime_handlers
            .map(|handlers| handlers.into_iter().map(|h| h.name).collect());
        Some(Node { name: node.metadata.name, labels, capacity, runtime_handlers })
    };
    let gvk = GroupVersionKind::gvk("", "v1", "Node");
    let params = ListParams::default();
    list_seen(client, &gvk, None, params, INVENTORY_PAGES.nodes, "list nodes", keep).await
}

async fn read_runtime_classes(client: &Client) -> Result<Seen<Vec<RuntimeClass>>, kube::Error> {
    #[derive(Deserialize)]
    struct Class {
        #[serde(default)]
        metadata: Meta,
        #[serde(default)]
        handler: String,
    }
    let gvk = GroupVersionKind::gvk("node.k8s.io", "v1", "RuntimeClass");
    let keep =
        |class: Class| Some(RuntimeClass { name: class.metadata.name, handler: class.handler });
    let rbac = "list runtimeclasses.node.k8s.io";
    let params = ListParams::default();
    list_seen(client, &gvk, None, params, INVENTORY_PAGES.small, rbac, keep).await
}

struct PodSelector {
    namespace: String,
    component: Component,
    labels: String,
}

async fn read_daemon_sets(
    client: &Client,
) -> Result<(Seen<Vec<DaemonSet>>, PodSelectors), kube::Error> {
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct Selector {
        #[serde(default)]
        match_labels: BTreeMap<String, String>,
    }
    #[derive(Deserialize, Default)]
    struct Spec {
        #[serde(default)]
        selector: Selector,
    }
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct Status {
        #[serde(default)]
        desired_number_scheduled: i64,
        #[serde(default)]
        number_ready: i64,
    }
    let mut selectors = Vec::new();
    let mut dropped = false;
    let keep = |wire: Wire<Spec, Status, WithLabels>| {
        let component = Component::of_daemon_set(&wire.metadata.name, &wire.metadata.labels)?;
        let labels: Vec<String> = wire
            .spec
            .selector
            .match_labels
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        let listed = selectors.iter().filter(|s: &&PodSelector| s.component == component).count();
        if !labels.is_empty() && listed < MAX_COMPONENT_DAEMON_SETS {
            selectors.push(PodSelector {
                namespace: wire.metadata.namespace.clone(),
                component,
                labels: labels.join(","),
            });
        } else if !labels.is_empty() {
            // Its pods are not read: what is read of the pods is in part.
            dropped = true;
        }
        Some(DaemonSet {
            namespace: wire.metadata.namespace,
            name: wire.metadata.name,
            component,
            desired: wire.status.desired_number_scheduled,
            ready: wire.status.number_ready,
        })
    };
    let gvk = GroupVersionKind::gvk("apps", "v1", "DaemonSet");
    let pages = INVENTORY_PAGES.daemon_sets;
    let params = ListParams::default();
    let rbac = "list daemonsets.apps";
    let daemon_sets = list_seen(client, &gvk, None, params, pages, rbac, keep).await?;
    Ok((daemon_sets, PodSelectors { selectors, dropped }))
}

/// The selectors of the pods of the components' DaemonSets, and whether
/// some DaemonSet's were left out past [`MAX_COMPONENT_DAEMON_SETS`].
struct PodSelectors {
    selectors: Vec<PodSelector>,
    dropped: bool,
}

async fn read_component_pods(
    client: &Client,
    selectors: &PodSelectors,
) -> Result<Seen<Vec<ComponentPod>>, kube::Error> {
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        node_name: Option<String>,
        runtime_class_name: Option<String>,
    }
    #[derive(Deserialize)]
    struct Condition {
        #[serde(rename = "type", default)]
        kind: String,
        #[serde(default)]
        status: String,
    }
    #[derive(Deserialize, Default)]
    struct Status {
        #[serde(default)]
        conditions: Vec<Condition>,
    }
    let gvk = GroupVersionKind::gvk("", "v1", "Pod");
    let mut pods = Vec::new();
    // Pods of DaemonSets left out are pods not read.
    let mut truncated = selectors.dropped;
    for selector in &selectors.selectors {
        let keep = |pod: Wire<Spec, Status>| {
            let ready =
                pod.status.conditions.iter().any(|c| c.kind == "Ready" && c.status == "True");
            Some(ComponentPod {
                namespace: pod.metadata.namespace,
                name: pod.metadata.name,
                component: selector.component,
                node: pod.spec.node_name,
                ready,
                runtime_class: pod.spec.runtime_class_name,
            })
        };
        let params = ListParams::default().labels(&selector.labels);
        let namespace = Some(selector.namespace.as_str());
        let pages = INVENTORY_PAGES.pods;
        match list_seen(client, &gvk, namespace, params, pages, "list pods", keep).await? {
            Seen::Complete(more) => pods.extend(more),
            Seen::Truncated(more) => {
                pods.extend(more);
                truncated = true;
            }
            other @ (Seen::Forbidden { .. } | Seen::NotServed) => return Ok(other),
        }
    }
    Ok(match truncated {
        false => Seen::Complete(pods),
        true => Seen::Truncated(pods),
    })
}

/// The attribute names the floors read, as a slice may write them:
/// unqualified, or qualified by the driver's domain.
fn has_attribute(attributes: Option<&Value>, name: &str) -> bool {
    attributes.is_some_and(|attributes| {
        attributes.get(name).is_some() || attributes.get(format!("{GPU_DRIVER}/{name}")).is_some()
    })
}

async fn read_dra(client: &Client, settings: &Settings) -> Result<Seen<Dra>, kube::Error> {
    let Some(version) = served_dra_version(client).await? else {
        return Ok(Seen::NotServed);
    };
    let wanted = &settings.config().gpu_device_classes;
    let keep = |class: Wire| wanted.contains(&class.metadata.name).then_some(class.metadata.name);
    let gvk = dra_gvk(version, "DeviceClass");
    let params = ListParams::default();
    let rbac = "list deviceclasses.resource.k8s.io";
    let classes =
        match list_seen(client, &gvk, None, params, INVENTORY_PAGES.small, rbac, keep).await? {
            Seen::Complete(classes) | Seen::Truncated(classes) => classes,
            Seen::Forbidden { rbac } => return Ok(Seen::Forbidden { rbac }),
            Seen::NotServed => return Ok(Seen::NotServed),
        };
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        node_name: Option<String>,
        #[serde(default)]
        devices: Vec<Value>,
    }
    let keep = |slice: Wire<Spec>| {
        let mut kept =
            Slice { name: slice.metadata.name, node: slice.spec.node_name, ..Slice::default() };
        for device in &slice.spec.devices {
            let attributes = device_attributes(device);
            kept.devices += 1;
            if !has_attribute(attributes, "cudaComputeCapability") {
                kept.without_compute_capability += 1;
            }
            if !has_attribute(attributes, "cudaDriverVersion") {
                kept.without_driver_version += 1;
            }
        }
        Some(kept)
    };
    let params = ListParams::default().fields(&format!("spec.driver={GPU_DRIVER}"));
    let gvk = dra_gvk(version, "ResourceSlice");
    let rbac = "list resourceslices.resource.k8s.io";
    let slices = list_seen(client, &gvk, None, params, INVENTORY_PAGES.slices, rbac, keep).await?;
    Ok(slices.map(|slices| Dra { gpu_device_classes: classes, slices }))
}

async fn read_namespaces(client: &Client) -> Result<Seen<Vec<OptedIn>>, kube::Error> {
    let keep = |namespace: Wire<IgnoredAny, IgnoredAny, WithLabels>| {
        let mode = namespace.metadata.labels.get(MODE_LABEL)?.clone();
        Some(OptedIn { namespace: namespace.metadata.name, mode })
    };
    let gvk = GroupVersionKind::gvk("", "v1", "Namespace");
    let params = ListParams::default().labels(MODE_LABEL);
    let pages = INVENTORY_PAGES.namespaces;
    list_seen(client, &gvk, None, params, pages, "list namespaces", keep).await
}
