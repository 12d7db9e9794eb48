//! The cluster client: watch-backed, lean caches of what the rules read.
//!
//! Every cache is a kube-runtime watcher (LIST, then WATCH from the listed
//! resourceVersion, relisting on 410 Gone) folded into a [`ClusterSnapshot`]
//! that keeps only what a rule reads: a namespace's `gpu-policy.io/*`
//! annotations, a node's GPU allocatable and GFD compute capability, a
//! RuntimeClass's overhead and scheduling, an allowlisted workload's UID.
//! managedFields and everything else are dropped on arrival, so 10,000
//! namespaces and 5,000 nodes stay small.
//!
//! Decisions never wait on the network: when the API server goes away, the
//! last known state keeps serving and the cache is marked stale (metric and
//! one log line per transition).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::policy::ClusterFacts;
use crate::policy::cluster::{ClusterSnapshot, NodeGpus, RuntimeClassInfo};
use crate::policy::compute_affinity::{MAJOR_LABEL, MINOR_LABEL};
use crate::policy::quantity::GpuCount;
use crate::settings::{ComputeCapability, MODE_LABEL, Settings};

/// What a cache mirrors; also the `resource` label of the staleness metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Namespaces,
    Nodes,
    RuntimeClasses,
    AllowlistedWorkloads,
}

impl Source {
    pub const ALL: [Source; 4] = [
        Source::Namespaces,
        Source::Nodes,
        Source::RuntimeClasses,
        Source::AllowlistedWorkloads,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Source::Namespaces => "namespaces",
            Source::Nodes => "nodes",
            Source::RuntimeClasses => "runtimeclasses",
            Source::AllowlistedWorkloads => "allowlisted-workloads",
        }
    }

    fn index(self) -> usize {
        match self {
            Source::Namespaces => 0,
            Source::Nodes => 1,
            Source::RuntimeClasses => 2,
            Source::AllowlistedWorkloads => 3,
        }
    }
}

/// The caches, shared by the watch tasks (writers) and the handlers
/// (readers).
#[derive(Debug, Default)]
pub struct ClusterCache {
    snapshot: RwLock<ClusterSnapshot>,
    synced: [AtomicBool; 4],
    stale: [AtomicBool; 4],
    /// When each watch last failed.
    last_error: Mutex<[Option<Instant>; 4]>,
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
        self.snapshot.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Every cache has completed its first full list.
    pub fn is_synced(&self) -> bool {
        self.synced.iter().all(|s| s.load(Ordering::Acquire))
    }

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
        if self.stale[source.index()].swap(false, Ordering::AcqRel) {
            tracing::info!(resource = source.as_str(), "cluster cache is current again");
        }
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
}

impl ClusterFacts for ClusterCache {
    fn runtime_class(&self, name: &str) -> Option<RuntimeClassInfo> {
        self.read().runtime_class(name)
    }

    fn workload_uid(&self, namespace: &str, kind: &str, name: &str) -> Option<String> {
        self.read().workload_uid(namespace, kind, name)
    }

    fn largest_allocatable(&self, resource: &str) -> Option<u64> {
        self.read().largest_allocatable(resource)
    }

    fn compute_capabilities(&self) -> Vec<ComputeCapability> {
        self.read().compute_capabilities()
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

/// Starts the watch tasks that fill `cache`. They run until the process
/// ends, reconnecting with backoff.
pub fn spawn_watches(client: Client, settings: &Settings, cache: Arc<ClusterCache>) {
    let gpu_resources = settings.clone();
    tokio::spawn(mirror(
        Api::<wire::Namespace>::all(client.clone()),
        Arc::clone(&cache),
        Source::Namespaces,
        |snapshot| &mut snapshot.namespaces,
        |namespace: &wire::Namespace| Some(lean_namespace(namespace)),
    ));
    tokio::spawn(mirror(
        Api::<wire::Node>::all(client.clone()),
        Arc::clone(&cache),
        Source::Nodes,
        |snapshot| &mut snapshot.nodes,
        move |node: &wire::Node| Some(lean_node(node, &gpu_resources)),
    ));
    tokio::spawn(mirror(
        Api::<RuntimeClass>::all(client.clone()),
        Arc::clone(&cache),
        Source::RuntimeClasses,
        |snapshot| &mut snapshot.runtime_classes,
        |class: &RuntimeClass| Some(lean_runtime_class(class)),
    ));
    tokio::spawn(mirror_allowlisted(
        client.clone(),
        settings.clone(),
        Arc::clone(&cache),
    ));
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(PROBE_INTERVAL);
        loop {
            ticker.tick().await;
            if let Ok(Ok(_)) =
                tokio::time::timeout(PROBE_INTERVAL, client.apiserver_version()).await
            {
                cache.api_answered();
            }
        }
    });
}

/// Folds one watcher into one table of the snapshot. A relist (Init ..
/// InitDone) replaces the table whole, so objects deleted while the watch
/// was down disappear.
async fn mirror<K, V>(
    api: Api<K>,
    cache: Arc<ClusterCache>,
    source: Source,
    table: fn(&mut ClusterSnapshot) -> &mut BTreeMap<String, V>,
    lean: impl Fn(&K) -> Option<V> + Send + 'static,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    V: Send + 'static,
{
    let events = watcher(api);
    fold(
        events,
        &cache,
        source,
        table,
        Owns::Table,
        |object: &K| Some((object.name_any(), lean(object)?)),
        || cache.mark_synced(source),
    )
    .await;
}

fn watcher<K>(api: Api<K>) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher::watcher(api, watcher::Config::default()).default_backoff()
}

/// Which entries of a table a watch owns: all of it, or one key (the
/// per-name watches of allowlisted workloads share one table).
enum Owns<Key> {
    Table,
    Key(Key),
}

async fn fold<K, Key, V>(
    events: impl Stream<Item = Result<Event<K>, watcher::Error>> + Send,
    cache: &ClusterCache,
    source: Source,
    table: fn(&mut ClusterSnapshot) -> &mut BTreeMap<Key, V>,
    owns: Owns<Key>,
    entry: impl Fn(&K) -> Option<(Key, V)>,
    mut on_first_sync: impl FnMut(),
) where
    Key: Ord,
{
    let mut events = std::pin::pin!(events);
    let mut relisted: Option<BTreeMap<Key, V>> = None;
    let mut synced = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => relisted = Some(BTreeMap::new()),
            Ok(Event::InitApply(object)) => {
                if let (Some(new), Some((key, value))) = (relisted.as_mut(), entry(&object)) {
                    new.insert(key, value);
                }
            }
            Ok(Event::InitDone) => {
                if let Some(new) = relisted.take() {
                    let mut snapshot = cache.write();
                    let table = table(&mut snapshot);
                    match &owns {
                        Owns::Table => *table = new,
                        Owns::Key(key) => {
                            table.remove(key);
                            table.extend(new);
                        }
                    }
                }
                if !synced {
                    synced = true;
                    on_first_sync();
                }
                cache.mark_fresh(source);
            }
            Ok(Event::Apply(object)) => {
                if let Some((key, value)) = entry(&object) {
                    table(&mut cache.write()).insert(key, value);
                }
                cache.mark_fresh(source);
            }
            Ok(Event::Delete(object)) => {
                if let Some((key, _)) = entry(&object) {
                    table(&mut cache.write()).remove(&key);
                }
                cache.mark_fresh(source);
            }
            Err(error) => cache.mark_stale(source, &error),
        }
    }
}

/// The group and version of the workload kinds an allowlist entry may name.
fn workload_gvk(kind: &str) -> Option<GroupVersionKind> {
    let (group, version) = match kind {
        "DaemonSet" | "Deployment" | "StatefulSet" | "ReplicaSet" => ("apps", "v1"),
        "Job" | "CronJob" => ("batch", "v1"),
        "ReplicationController" => ("", "v1"),
        _ => return None,
    };
    Some(GroupVersionKind::gvk(group, version, kind))
}

/// Watches exactly the allowlisted workloads (one metadata-only watch per
/// entry, by name), keeping their UIDs.
async fn mirror_allowlisted(client: Client, settings: Settings, cache: Arc<ClusterCache>) {
    let mut watches = Vec::new();
    let entries = &settings.config().allowlist;
    let pending = Arc::new(AtomicUsize::new(entries.len()));
    for entry in entries {
        let Some(gvk) = workload_gvk(&entry.kind) else {
            tracing::warn!(
                entry = %entry,
                "allowlist entry names a kind that cannot be verified; it exempts nothing"
            );
            pending.fetch_sub(1, Ordering::AcqRel);
            continue;
        };
        let resource = ApiResource::from_gvk(&gvk);
        let api = Api::<PartialObjectMeta<DynamicObject>>::namespaced_with(
            client.clone(),
            &entry.namespace,
            &resource,
        );
        let config = watcher::Config::default().fields(&format!("metadata.name={}", entry.name));
        let key = (
            entry.namespace.clone(),
            entry.kind.clone(),
            entry.name.clone(),
        );
        let events = watcher::watcher(api, config).default_backoff();
        let cache = Arc::clone(&cache);
        let pending = Arc::clone(&pending);
        watches.push(async move {
            let entry_key = key.clone();
            fold(
                events,
                &cache,
                Source::AllowlistedWorkloads,
                |snapshot| &mut snapshot.workloads,
                Owns::Key(key),
                |object: &PartialObjectMeta<DynamicObject>| {
                    Some((entry_key.clone(), object.uid()?))
                },
                || {
                    if pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                        cache.mark_synced(Source::AllowlistedWorkloads);
                    }
                },
            )
            .await;
        });
    }
    if pending.load(Ordering::Acquire) == 0 {
        cache.mark_synced(Source::AllowlistedWorkloads);
    }
    futures::future::join_all(watches).await;
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
    let list = kube::api::ListParams::default();
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
        if let Some(uid) = api.get_opt(&entry.name).await?.and_then(|o| o.uid()) {
            snapshot.workloads.insert(
                (
                    entry.namespace.clone(),
                    entry.kind.clone(),
                    entry.name.clone(),
                ),
                uid,
            );
        }
    }
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
    for mut object in api.list(&kube::api::ListParams::default()).await? {
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

/// Namespaces and Nodes as the caches decode them off the wire. A 5,000-node
/// list is mostly images, conditions and managedFields: serde skips every
/// field not named here without building it, so the typed k8s-openapi
/// objects never exist in memory.
mod wire {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde::{Deserialize, Deserializer};
    use serde_json::Value;

    /// The metadata fields the caches and kube's watcher use.
    fn lean_metadata<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire {
            name: Option<String>,
            namespace: Option<String>,
            uid: Option<String>,
            resource_version: Option<String>,
            labels: Option<BTreeMap<String, String>>,
            annotations: Option<BTreeMap<String, String>>,
        }
        let wire = Wire::deserialize(deserializer)?;
        // Only the policy's own annotations are ever read.
        let annotations = wire.annotations.map(|all| {
            all.into_iter()
                .filter(|(key, _)| key.starts_with("gpu-policy.io/"))
                .collect()
        });
        Ok(ObjectMeta {
            name: wire.name,
            namespace: wire.namespace,
            uid: wire.uid,
            resource_version: wire.resource_version,
            labels: wire.labels,
            annotations,
            ..ObjectMeta::default()
        })
    }

    #[derive(Debug, Clone, Deserialize)]
    pub struct Namespace {
        #[serde(deserialize_with = "lean_metadata", default)]
        pub metadata: ObjectMeta,
    }

    #[derive(Debug, Clone, Default, Deserialize)]
    pub struct NodeStatus {
        #[serde(default)]
        pub allocatable: BTreeMap<String, Value>,
    }

    #[derive(Debug, Clone, Deserialize)]
    pub struct Node {
        #[serde(deserialize_with = "lean_metadata", default)]
        pub metadata: ObjectMeta,
        #[serde(default)]
        pub status: NodeStatus,
    }

    macro_rules! cluster_resource {
        ($type:ident, $kind:literal, $plural:literal) => {
            impl k8s_openapi::Resource for $type {
                const API_VERSION: &'static str = "v1";
                const GROUP: &'static str = "";
                const KIND: &'static str = $kind;
                const VERSION: &'static str = "v1";
                const URL_PATH_SEGMENT: &'static str = $plural;
                type Scope = k8s_openapi::ClusterResourceScope;
            }

            impl k8s_openapi::Metadata for $type {
                type Ty = ObjectMeta;

                fn metadata(&self) -> &ObjectMeta {
                    &self.metadata
                }

                fn metadata_mut(&mut self) -> &mut ObjectMeta {
                    &mut self.metadata
                }
            }
        };
    }

    cluster_resource!(Namespace, "Namespace", "namespaces");
    cluster_resource!(Node, "Node", "nodes");
}
