//! The cluster client: watch-backed, lean caches of what the rules read,
//! and the one-shot reads of `audit`, `doctor` and the request path.
//!
//! docs/architecture.md, "Where cluster facts enter". When the API server
//! goes away, the last known state keeps serving and the cache is marked
//! stale (metric and one log line per transition).

mod api_status;
mod cache;
mod dra_watches;
mod install_read;
mod inventory_read;
mod lean;
mod list;
mod names;
mod node_summary;
mod objects;
mod report_writer;
mod watch;
mod watches;

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::PartialObjectMeta;
use kube::{Client, ResourceExt};

use crate::policy::cluster::ClusterSnapshot;
use crate::settings::Settings;
use lean::{
    Namespace, Node, lean_namespace, lean_node, lean_runtime_class, workload_gvk, workload_key,
};

pub use cache::{ClusterCache, Source};
pub use dra_watches::{DRA_GROUP, DRA_VERSIONS, claims_in_pages, dra_gvk, served_dra_version};
pub use install_read::{CONFIG_KEY, install_config};
pub use inventory_read::{InventoryOptions, read_inventory};
pub use lean::{NodeManifestError, lean_node_of_manifest};
pub use list::{Paged, Pages, list_objects, list_pages, pods_in_pages};
pub use names::{is_dns_label, is_dns_subdomain};
pub use objects::{MAX_OBJECT_BYTES, ObjectReadError, claim_text, pod_text};
pub use report_writer::{Cleanup, ReportsError, Written, report_api, write_reports};
pub use watches::Watches;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connection {
    /// `--no-cluster`: the static configuration only.
    Disabled,
    /// `--kubeconfig FILE`.
    Kubeconfig(PathBuf),
    /// In-cluster service account, else `KUBECONFIG` / `~/.kube/config`.
    Default,
}

/// One line.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot read kubeconfig {}: {source}", .path.display())]
    ReadKubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("kubeconfig {}: {source}", .path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cluster client: {0}")]
    Client(#[source] kube::Error),
}

/// Builds a client and checks that the API server answers. `Ok(None)` when
/// there is no cluster to use (disabled, no configuration, unreachable):
/// the caller runs on the static configuration and says so once.
pub async fn connect(connection: &Connection) -> Result<Option<Client>, ConnectError> {
    let config = match connection {
        Connection::Disabled => return Ok(None),
        Connection::Kubeconfig(path) => {
            let path_buf = || path.to_path_buf();
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .map_err(|source| ConnectError::ReadKubeconfig { path: path_buf(), source })?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .map_err(|source| ConnectError::Kubeconfig { path: path_buf(), source })?
        }
        Connection::Default => match kube::Config::infer().await {
            Ok(config) => config,
            Err(error) => {
                tracing::info!(%error, "no cluster configuration found");
                return Ok(None);
            }
        },
    };
    let client = Client::try_from(config).map_err(ConnectError::Client)?;
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
    let namespaces = Api::<Namespace>::all(client.clone()).list(&list).await?;
    snapshot.namespaces.extend(namespaces.iter().map(|ns| (ns.name_any(), lean_namespace(ns))));
    let nodes = Api::<Node>::all(client.clone()).list(&list).await?;
    snapshot.nodes.extend(nodes.iter().map(|node| (node.name_any(), lean_node(node, settings))));
    let classes = Api::<RuntimeClass>::all(client.clone()).list(&list).await?;
    let class = |class: &RuntimeClass| (class.name_any(), lean_runtime_class(class));
    snapshot.runtime_classes.extend(classes.iter().map(class));
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
    dra_watches::snapshot_into(client, settings, &mut snapshot).await?;
    Ok(snapshot)
}
