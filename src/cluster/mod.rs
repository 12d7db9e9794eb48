//! The cluster client: watch-backed, lean caches of what the rules read.
//!
//! Every cache is a kube-runtime watcher (LIST, then WATCH from the listed
//! resourceVersion, relisting on 410 Gone) folded into a [`ClusterSnapshot`]
//! that keeps only what a rule reads: a namespace's `gpu-policy.io/*`
//! annotations, a node's GPU allocatable and GFD compute capability, a
//! RuntimeClass's overhead and scheduling, an allowlisted workload's UID,
//! the requests of DRA claims and what makes a DeviceClass a GPU class
//! (`claims.rs`). managedFields and everything else are dropped on arrival, so 10,000
//! namespaces and 5,000 nodes stay small. [`Watches`] owns the watch tasks
//! and follows a reloaded configuration.
//!
//! Decisions never wait on the network: when the API server goes away, the
//! last known state keeps serving and the cache is marked stale (metric and
//! one log line per transition).

mod claims;
mod node_summary;
mod watches;
mod wire;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::Value;

use crate::admission::Workload;
use crate::policy::ClusterFacts;
use crate::policy::cluster::{ClusterSnapshot, NodeGpus, RuntimeClassInfo};
use crate::policy::compute_affinity::{MAJOR_LABEL, MINOR_LABEL};
use crate::policy::quantity::GpuCount;
use crate::settings::{AllowlistEntry, ComputeCapability, MODE_LABEL, Settings};
pub use claims::{DRA_GROUP, dra_gvk, is_not_served, list_claims};
pub use watches::Watches;

/// What a cache mirrors; also the `resource` label of the staleness metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Namespaces,
    Nodes,
    RuntimeClasses,
    AllowlistedWorkloads,
    ResourceClaims,
    ResourceClaimTemplates,
    DeviceClasses,
}

/// How many sources there are.
const SOURCES: usize = 7;

impl Source {
    pub const ALL: [Source; SOURCES] = [
        Source::Namespaces,
        Source::Nodes,
        Source::RuntimeClasses,
        Source::AllowlistedWorkloads,
        Source::ResourceClaims,
        Source::ResourceClaimTemplates,
        Source::DeviceClasses,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Source::Namespaces => "namespaces",
            Source::Nodes => "nodes",
            Source::RuntimeClasses => "runtimeclasses",
            Source::AllowlistedWorkloads => "allowlisted-workloads",
            Source::ResourceClaims => "resourceclaims",
            Source::ResourceClaimTemplates => "resourceclaimtemplates",
            Source::DeviceClasses => "deviceclasses",
        }
    }

    fn index(self) -> usize {
        match self {
            Source::Namespaces => 0,
            Source::Nodes => 1,
            Source::RuntimeClasses => 2,
            Source::AllowlistedWorkloads => 3,
            Source::ResourceClaims => 4,
            Source::ResourceClaimTemplates => 5,
            Source::DeviceClasses => 6,
        }
    }
}

/// The caches, shared by the watch tasks (writers) and the handlers
/// (readers).
///
/// A source is *synced* once every watch it started with has listed:
/// readiness waits for that, once. A watch started later (a reload added an
/// allowlist entry, or changed the GPU resource patterns) marks its source
/// *stale* until it has listed, without taking the server out of service:
/// meanwhile the rules read what was known before the reload.
#[derive(Debug, Default)]
pub struct ClusterCache {
    snapshot: RwLock<ClusterSnapshot>,
    synced: [AtomicBool; SOURCES],
    stale: [AtomicBool; SOURCES],
    /// Watches of each source that have not completed their first list.
    pending: [AtomicUsize; SOURCES],
    /// When each watch last failed.
    last_error: Mutex<[Option<Instant>; SOURCES]>,
    /// The settings whose GPU resource patterns the cached nodes were
    /// projected with (None before the first node list).
    node_projection: RwLock<Option<Arc<Settings>>>,
    /// Bumped by every write of the snapshot, under its write lock.
    generation: AtomicU64,
    /// The nodes summarised for the rules, as of some generation.
    summary: RwLock<Option<Arc<node_summary::NodeSummary>>>,
}

/// How often the API server is asked whether it answers, to tell when a
/// stale cache is current again: a resumed watch brings no event when
/// nothing changed meanwhile.
const PROBE_INTERVAL: Duration = Duration::from_secs(2);

impl ClusterCache {
    fn read(&self) -> RwLockReadGuard<'_, ClusterSnapshot> {
        // A writer panicking mid-update is impossible here (plain map
        // operations); recover the data rather than propagate poison.
        self.snapshot.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, ClusterSnapshot> {
        let snapshot = self.snapshot.write().unwrap_or_else(|e| e.into_inner());
        // While no reader holds the snapshot: see `node_summary`.
        self.generation.fetch_add(1, Ordering::AcqRel);
        snapshot
    }

    /// Every cache has completed its first full list.
    pub fn is_synced(&self) -> bool {
        self.synced.iter().all(|s| s.load(Ordering::Acquire))
    }

    /// The source's watches failed lately, or one of them has not listed
    /// yet: decisions use what was known before.
    pub fn is_stale(&self, source: Source) -> bool {
        self.stale[source.index()].load(Ordering::Acquire)
    }

    /// A copy of what is cached (for `audit` and tests).
    pub fn snapshot(&self) -> ClusterSnapshot {
        self.read().clone()
    }

    fn mark_synced(&self, source: Source) {
        self.synced[source.index()].store(true, Ordering::Release);
        self.mark_fresh(source);
    }

    fn mark_fresh(&self, source: Source) {
        if self.pending[source.index()].load(Ordering::Acquire) > 0 {
            return;
        }
        if self.stale[source.index()].swap(false, Ordering::AcqRel) {
            tracing::info!(resource = source.as_str(), "cluster cache is current again");
        }
    }

    /// A watch of `source` starts; it has to list before the source is
    /// synced (at start) or current (after a reload).
    fn watch_started(&self, source: Source) {
        self.pending[source.index()].fetch_add(1, Ordering::AcqRel);
        if self.synced[source.index()].load(Ordering::Acquire)
            && !self.stale[source.index()].swap(true, Ordering::AcqRel)
        {
            tracing::info!(
                resource = source.as_str(),
                "cluster cache is catching up with the reloaded configuration"
            );
        }
    }

    /// A watch of `source` listed for the first time.
    fn watch_listed(&self, source: Source) {
        if self.pending[source.index()].fetch_sub(1, Ordering::AcqRel) == 1 {
            self.mark_synced(source);
        }
    }

    /// A watch of `source` stopped before it listed.
    fn watch_stopped(&self, source: Source) {
        self.pending[source.index()].fetch_sub(1, Ordering::AcqRel);
    }

    /// The watches of `source` are being started or stopped: until
    /// [`ClusterCache::release`], none of them makes the source synced or
    /// current, whatever it lists. A source fed by several watches (one per
    /// allowlist entry) would otherwise count as listed as soon as the
    /// first one had listed, before the next one was even started.
    fn hold(&self, source: Source) {
        self.pending[source.index()].fetch_add(1, Ordering::AcqRel);
    }

    /// The watches of `source` are in place: it is synced (and current)
    /// once every one of them has listed, which may be now (an empty
    /// allowlist has no watch at all).
    fn release(&self, source: Source) {
        self.watch_listed(source);
    }

    /// The API server answered: every watch that has not failed for a probe
    /// interval has reconnected (kube-runtime retries within its backoff).
    fn api_answered(&self) {
        let now = Instant::now();
        let last_error = *self.last_error.lock().unwrap_or_else(|e| e.into_inner());
        for source in Source::ALL {
            let quiet = last_error[source.index()]
                .is_none_or(|at| now.duration_since(at) >= PROBE_INTERVAL);
            if quiet && self.synced[source.index()].load(Ordering::Acquire) {
                self.mark_fresh(source);
            }
        }
    }

    fn mark_stale(&self, source: Source, error: &watcher::Error) {
        self.last_error.lock().unwrap_or_else(|e| e.into_inner())[source.index()] =
            Some(Instant::now());
        if !self.stale[source.index()].swap(true, Ordering::AcqRel) {
            tracing::warn!(
                resource = source.as_str(),
                %error,
                "cluster cache is stale: decisions use the last known state"
            );
        }
    }

    /// The node table now holds projections made with `settings`' GPU
    /// resource patterns.
    fn nodes_projected_with(&self, settings: Arc<Settings>) {
        *self
            .node_projection
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(settings);
    }

    /// Whether the cached nodes carry `resource` (a GPU resource of the
    /// settings they were projected with).
    fn nodes_carry(&self, resource: &str) -> bool {
        self.node_projection
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|settings| settings.is_gpu_resource(resource))
    }
}

impl ClusterFacts for ClusterCache {
    fn runtime_class(&self, name: &str) -> Option<RuntimeClassInfo> {
        self.read().runtime_class(name)
    }

    fn workload_uid(&self, namespace: &str, kind: &str, name: &str) -> Option<String> {
        self.read().workload_uid(namespace, kind, name)
    }

    /// None ("nothing can be concluded") for a resource the cached nodes
    /// were not projected with: a pattern added at reload until the nodes
    /// are listed again.
    fn largest_allocatable(&self, resource: &str) -> Option<u64> {
        if !self.nodes_carry(resource) {
            return None;
        }
        self.node_summary().largest_allocatable(resource)
    }

    fn compute_capabilities(&self) -> Vec<ComputeCapability> {
        self.node_summary().compute_capabilities()
    }

    fn namespace_annotations(&self, namespace: &str) -> BTreeMap<String, String> {
        self.read().namespace_annotations(namespace)
    }
}

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

/// The group and version of the workload kinds an allowlist entry may name
/// and the watches can verify.
fn workload_gvk(kind: &str) -> Option<GroupVersionKind> {
    let workload = Workload::ALL
        .into_iter()
        .filter(|w| *w != Workload::PodTemplate)
        .find(|w| w.kind() == kind)?;
    Some(GroupVersionKind::gvk(workload.group(), "v1", kind))
}

/// How the workload table keys an allowlist entry.
fn workload_key(entry: &AllowlistEntry) -> (String, String, String) {
    (
        entry.namespace.clone(),
        entry.kind.clone(),
        entry.name.clone(),
    )
}

/// A namespace as the rules read it: its `gpu-policy.io/` annotations and
/// the mode label.
fn lean_namespace(namespace: &wire::Namespace) -> BTreeMap<String, String> {
    let mut kept: BTreeMap<String, String> = namespace
        .annotations()
        .iter()
        .filter(|(key, _)| key.starts_with("gpu-policy.io/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(mode) = namespace.labels().get(MODE_LABEL) {
        kept.insert(MODE_LABEL.to_owned(), mode.clone());
    }
    kept
}

/// A node as the rules read it: allocatable GPU resources and the GFD
/// compute capability labels.
fn lean_node(node: &wire::Node, settings: &Settings) -> NodeGpus {
    let allocatable = node
        .status
        .allocatable
        .iter()
        .filter(|(name, _)| settings.is_gpu_resource(name))
        .filter_map(|(name, quantity)| {
            let count = GpuCount::from_json(quantity).whole()?;
            Some((name.clone(), count))
        })
        .collect();
    let label = |key: &str| node.labels().get(key).and_then(|v| v.parse::<u32>().ok());
    let compute_capability = match (label(MAJOR_LABEL), label(MINOR_LABEL)) {
        (Some(major), minor) => Some(ComputeCapability::new(major, minor.unwrap_or(0))),
        (None, _) => None,
    };
    NodeGpus {
        allocatable,
        compute_capability,
    }
}

/// A RuntimeClass as the RuntimeClass admission plugin applies it.
fn lean_runtime_class(class: &RuntimeClass) -> RuntimeClassInfo {
    let to_map = |value: Option<Value>| match value {
        Some(Value::Object(map)) => Some(map),
        _ => None,
    };
    let pod_fixed_overhead = class
        .overhead
        .as_ref()
        .and_then(|overhead| overhead.pod_fixed.as_ref())
        .and_then(|fixed| to_map(serde_json::to_value(fixed).ok()));
    let scheduling = class.scheduling.as_ref();
    let node_selector = scheduling
        .and_then(|s| s.node_selector.as_ref())
        .and_then(|selector| to_map(serde_json::to_value(selector).ok()))
        .unwrap_or_default();
    let tolerations = scheduling
        .and_then(|s| s.tolerations.as_ref())
        .map(|list| {
            list.iter()
                .filter_map(|t| serde_json::to_value(t).ok())
                .collect()
        })
        .unwrap_or_default();
    RuntimeClassInfo {
        pod_fixed_overhead,
        node_selector,
        tolerations,
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

/// Lists the objects of one kind in a namespace as raw JSON.
pub async fn list_objects(
    client: &Client,
    namespace: &str,
    gvk: &GroupVersionKind,
) -> Result<Vec<Value>, kube::Error> {
    let resource = ApiResource::from_gvk(gvk);
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource);
    let mut objects = Vec::new();
    for mut object in api.list(&ListParams::default()).await? {
        // List items carry no apiVersion/kind.
        object.types = Some(kube::core::TypeMeta {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        });
        object.metadata.managed_fields = None;
        objects.push(serde_json::to_value(&object).unwrap_or(Value::Null));
    }
    Ok(objects)
}

/// Why the pods of a namespace could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum PodListError {
    #[error("cannot list the pods of {namespace}: {source}")]
    Api {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("listing the pods of {namespace} took more than {budget:?}")]
    TimedOut { namespace: String, budget: Duration },
}

/// The pods of a namespace as raw JSON, listed within `budget` (the
/// namespace guard's look at what already runs there).
pub async fn list_pods(
    client: &Client,
    namespace: &str,
    budget: Duration,
) -> Result<Vec<Value>, PodListError> {
    let gvk = GroupVersionKind::gvk("", "v1", "Pod");
    match tokio::time::timeout(budget, list_objects(client, namespace, &gvk)).await {
        Ok(Ok(pods)) => Ok(pods),
        Ok(Err(source)) => Err(PodListError::Api {
            namespace: namespace.to_owned(),
            source,
        }),
        Err(_) => Err(PodListError::TimedOut {
            namespace: namespace.to_owned(),
            budget,
        }),
    }
}
