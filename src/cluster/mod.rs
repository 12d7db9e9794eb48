//! The cluster client: watch-backed, lean caches of what the rules read.
//!
//! Every cache is a kube-runtime watcher (LIST, then WATCH from the listed
//! resourceVersion, relisting on 410 Gone) folded into a [`ClusterSnapshot`]
//! that keeps only what a rule reads: a namespace's `gpu-policy.io/*`
//! annotations, a node's GPU allocatable and GFD compute capability, a
//! RuntimeClass's overhead and scheduling, an allowlisted workload's UID,
//! the requests of DRA claims (and, of a ResourceClaim, the devices
//! allocated to it and the Pod it was made for), what makes a DeviceClass
//! a GPU class, and the version attributes of the devices the ResourceSlices
//! of `gpu.nvidia.com` publish.
//! managedFields and everything else are dropped on arrival, so 10,000
//! namespaces and 5,000 nodes stay small. [`Watches`] owns the watch tasks
//! and follows a reloaded configuration.
//!
//! Decisions never wait on the network: when the API server goes away, the
//! last known state keeps serving and the cache is marked stale (metric and
//! one log line per transition).
//!
//! The children, each depending only on those listed before it:
//!
//! - `wire.rs`: the few fields decoded from Namespaces and Nodes;
//! - `lean.rs`: what the rules read of a Namespace, a Node (also of a Node
//!   in a manifest, for `check --nodes`), a RuntimeClass, and the workload
//!   kinds an allowlist entry may name;
//! - `node_summary.rs`: the nodes reduced to what the rules ask of all of
//!   them at once;
//! - `cache.rs`: [`ClusterCache`], its [`Source`]s and their sync and
//!   staleness, and the facts the rules read from it;
//! - `names.rs`: the names an object may have, checked before a name from
//!   a review goes into a request's path;
//! - `list.rs`: lists of a namespace's objects, whole (audit) or a
//!   bounded number of pages (the namespace guard);
//! - `watch.rs`: the machinery shared by the watches, folding a watcher
//!   into one table of the cache;
//! - `claims.rs`: the DRA watches (ResourceSlices among them), lists and
//!   the `resource.k8s.io/v1` probe;
//! - `objects.rs`: one object read by name, as text: the Pod a
//!   ResourceClaim is made for, and the claims and templates it names;
//! - `watches.rs`: [`Watches`], which starts and stops every watch;
//! - `reports.rs`: `audit --write-reports` and `doctor --write-report`:
//!   the report API served, the reports applied, the stale ones deleted;
//! - `inventory_lists.rs`, `install_read.rs`, `inventory.rs`: `doctor`'s
//!   one read of the cluster, into a `doctor::Inventory` (the bounded
//!   lists; gpu-policy's install; the GPU stack, then the install), every
//!   list paged and bounded.
//!
//! This file connects to the API server ([`connect`]) and lists everything
//! once for `audit` ([`snapshot`]); no child uses it.

mod cache;
mod claims;
mod install_read;
mod inventory;
mod inventory_lists;
mod lean;
mod list;
mod names;
mod node_summary;
mod objects;
mod reports;
mod watch;
mod watches;
mod wire;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::PartialObjectMeta;
use kube::{Client, ResourceExt};

use crate::policy::cluster::ClusterSnapshot;
use crate::settings::Settings;
use lean::{lean_namespace, lean_node, lean_runtime_class, workload_gvk, workload_key};

pub use cache::{ClusterCache, Source};
pub use claims::{
    DRA_GROUP, DRA_VERSIONS, claims_in_pages, dra_gvk, is_not_served, served_dra_version,
};
pub use install_read::{CONFIG_KEY, install_config};
pub use inventory::{InventoryOptions, read_inventory};
pub use lean::lean_node_of_manifest;
pub use list::{Paged, Pages, list_objects, list_pages, pods_in_pages};
pub use names::{is_dns_label, is_dns_subdomain};
pub use objects::{MAX_OBJECT_BYTES, claim_text, pod_text};
pub use reports::{Cleanup, ReportsError, Written, report_api, write_reports};
pub use watches::Watches;

/// How `serve` finds the API server.
#[derive(Debug, Clone, Copy)]
pub enum Connection<'a> {
    /// `--no-cluster`: the static configuration only.
    Disabled,
    /// `--kubeconfig FILE`.
    Kubeconfig(&'a Path),
    /// In-cluster service account, else `KUBECONFIG` / `~/.kube/config`.
    Default,
}

/// Builds a client and checks that the API server answers. `Ok(None)` when
/// there is no cluster to use (disabled, no configuration, unreachable):
/// the caller runs on the static configuration and says so once.
pub async fn connect(connection: Connection<'_>) -> Result<Option<Client>, String> {
    let config = match connection {
        Connection::Disabled => return Ok(None),
        Connection::Kubeconfig(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("cannot read kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?
        }
        Connection::Default => match kube::Config::infer().await {
            Ok(config) => config,
            Err(error) => {
                tracing::info!(%error, "no cluster configuration found");
                return Ok(None);
            }
        },
    };
    let client = Client::try_from(config).map_err(|e| format!("cluster client: {e}"))?;
    match tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()).await {
        Ok(Ok(version)) => {
            tracing::info!(version = %version.git_version, "connected to the API server");
            Ok(Some(client))
        }
        Ok(Err(error)) => {
            tracing::warn!(%error, "the API server does not answer");
            Ok(None)
        }
        Err(_) => {
            tracing::warn!("the API server did not answer within 10 s");
            Ok(None)
        }
    }
}

/// One-shot reads of everything the rules ask about, for `audit`: the same
/// lean data as the watch caches, listed once.
pub async fn snapshot(
    client: &Client,
    settings: &Settings,
) -> Result<ClusterSnapshot, kube::Error> {
    let list = ListParams::default();
    let mut snapshot = ClusterSnapshot::default();
    for namespace in Api::<wire::Namespace>::all(client.clone())
        .list(&list)
        .await?
    {
        snapshot
            .namespaces
            .insert(namespace.name_any(), lean_namespace(&namespace));
    }
    for node in Api::<wire::Node>::all(client.clone()).list(&list).await? {
        snapshot
            .nodes
            .insert(node.name_any(), lean_node(&node, settings));
    }
    for class in Api::<RuntimeClass>::all(client.clone()).list(&list).await? {
        snapshot
            .runtime_classes
            .insert(class.name_any(), lean_runtime_class(&class));
    }
    for entry in &settings.config().allowlist {
        let Some(gvk) = workload_gvk(&entry.kind) else {
            continue;
        };
        let api = Api::<PartialObjectMeta<DynamicObject>>::namespaced_with(
            client.clone(),
            &entry.namespace,
            &ApiResource::from_gvk(&gvk),
        );
        if entry.name_prefix.is_some() {
            // One list of the kind in the namespace: the workloads whose
            // generated names the prefix matches, each by its own name.
            for object in api.list(&list).await? {
                let name = object.name_any();
                let matches = entry.matches(&entry.namespace, &entry.kind, &name);
                if let (true, Some(uid)) = (matches, object.uid()) {
                    let key = (entry.namespace.clone(), entry.kind.clone(), name);
                    snapshot.workloads.insert(key, uid);
                }
            }
        } else if let Some(uid) = api.get_opt(&entry.name).await?.and_then(|o| o.uid()) {
            snapshot.workloads.insert(workload_key(entry), uid);
        }
    }
    claims::snapshot_into(client, settings, &mut snapshot).await?;
    Ok(snapshot)
}
