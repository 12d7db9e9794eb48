//! [`Watches`], the one owner of the watch tasks that fill a
//! [`ClusterCache`]: it starts and stops them as the configuration changes.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use tokio::task::JoinHandle;

use super::api_status;
use super::cache::{ClusterCache, PROBE_INTERVAL, Source};
use super::dra_watches;
use super::lean::{Namespace, Node, lean_namespace, lean_node, lean_runtime_class, workload_gvk};
use super::watch::{FirstList, Owns, by_name, fold, mirror};

use crate::settings::{AllowlistEntry, Settings};

type WorkloadKey = (String, String, String);

/// An allowlist entry as [`Watches`] keys its watch: the entry as it is
/// written (`ns/Kind/name`, or `ns/Kind/prefix*` for a `namePrefix` entry).
type EntryKey = String;

struct Allowlisted {
    entry: AllowlistEntry,
    /// None for an entry whose kind cannot be verified (it exempts nothing).
    task: Option<JoinHandle<()>>,
}

/// What depends on the configuration follows it through
/// [`Watches::apply`]. The tasks run until the process ends; dropping a
/// handle does not stop them.
#[derive(Clone)]
pub struct Watches {
    running: Arc<tokio::sync::Mutex<Running>>,
}

struct Running {
    client: Client,
    cache: Arc<ClusterCache>,
    gpu_resources: Vec<String>,
    nodes: JoinHandle<()>,
    allowlisted: BTreeMap<EntryKey, Allowlisted>,
}

impl Watches {
    pub fn start(client: Client, settings: &Settings, cache: Arc<ClusterCache>) -> Watches {
        // Each source is held until all its watches are started: a watch
        // that lists at once must not make the source synced while the
        // other watches of that source have not been started yet.
        for source in Source::ALL {
            cache.hold(source);
        }
        tokio::spawn(mirror(
            Api::<Namespace>::all(client.clone()),
            FirstList::new(&cache, Source::Namespaces),
            |snapshot| &mut snapshot.namespaces,
            by_name(|namespace: &Namespace| Some(lean_namespace(namespace))),
            || {},
        ));
        tokio::spawn(mirror(
            Api::<RuntimeClass>::all(client.clone()),
            FirstList::new(&cache, Source::RuntimeClasses),
            |snapshot| &mut snapshot.runtime_classes,
            by_name(|class: &RuntimeClass| Some(lean_runtime_class(class))),
            || {},
        ));
        let nodes = spawn_nodes(&client, settings, &cache);
        dra_watches::spawn(&client, settings, &cache);
        let allowlisted = entries(settings)
            .into_iter()
            .map(|(key, entry)| {
                let task = spawn_allowlisted(&client, entry, &cache);
                let entry = entry.clone();
                (key, Allowlisted { entry, task })
            })
            .collect();
        for source in Source::ALL {
            cache.release(source);
        }
        let probe_client = client.clone();
        let probe_cache = Arc::clone(&cache);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(PROBE_INTERVAL);
            loop {
                ticker.tick().await;
                if let Ok(Ok(_)) =
                    tokio::time::timeout(PROBE_INTERVAL, probe_client.apiserver_version()).await
                {
                    probe_cache.api_answered();
                }
            }
        });
        Watches {
            running: Arc::new(tokio::sync::Mutex::new(Running {
                client,
                cache,
                gpu_resources: settings.config().gpu_resources.clone(),
                nodes,
                allowlisted,
            })),
        }
    }

    /// Until a new watch has listed, its source is stale and the rules read
    /// what was known before: an added entry exempts nothing yet, and the
    /// capacity of a new GPU resource is unknown rather than zero.
    pub async fn apply(&self, settings: &Settings) {
        let mut running = self.running.lock().await;
        let running = &mut *running;
        // Until every added watch is started and every removed one stopped,
        // no single watch speaks for its source (see `ClusterCache::hold`).
        running.cache.hold(Source::AllowlistedWorkloads);
        running.cache.hold(Source::Nodes);
        let wanted = entries(settings);
        let removed: Vec<EntryKey> =
            running.allowlisted.keys().filter(|key| !wanted.contains_key(*key)).cloned().collect();
        for key in removed {
            let Some(Allowlisted { entry, task }) = running.allowlisted.remove(&key) else {
                continue;
            };
            if let Some(task) = task {
                // Awaited, so the task writes nothing after its keys are gone.
                task.abort();
                let _ = task.await;
            }
            // Its workloads are forgotten, but for those another entry
            // still names (that entry's watch keeps them).
            running.cache.write().workloads.retain(|(namespace, kind, name), _| {
                !entry.matches(namespace, kind, name)
                    || wanted.values().any(|kept| kept.matches(namespace, kind, name))
            });
            tracing::info!(entry = %entry, "allowlist entry removed: its watch is stopped");
        }
        for (key, entry) in wanted {
            if running.allowlisted.contains_key(&key) {
                continue;
            }
            let task = spawn_allowlisted(&running.client, entry, &running.cache);
            if task.is_some() {
                tracing::info!(entry = %entry, "allowlist entry added: watching it");
            }
            let entry = entry.clone();
            running.allowlisted.insert(key, Allowlisted { entry, task });
        }
        if settings.config().gpu_resources != running.gpu_resources {
            running.nodes.abort();
            let _ = (&mut running.nodes).await;
            running.nodes = spawn_nodes(&running.client, settings, &running.cache);
            running.gpu_resources = settings.config().gpu_resources.clone();
            tracing::info!(
                gpu_resources = ?running.gpu_resources,
                "GPU resource patterns changed: listing the nodes again"
            );
        }
        dra_watches::follow_settings(&running.cache, settings);
        // A stopped watch that had not listed no longer holds its source:
        // current now if every remaining watch has listed.
        running.cache.release(Source::AllowlistedWorkloads);
        running.cache.release(Source::Nodes);
    }
}

/// An entry written twice is watched once.
fn entries(settings: &Settings) -> BTreeMap<EntryKey, &AllowlistEntry> {
    settings.config().allowlist.iter().map(|entry| (entry.to_string(), entry)).collect()
}

fn spawn_nodes(client: &Client, settings: &Settings, cache: &Arc<ClusterCache>) -> JoinHandle<()> {
    let projection = Arc::new(settings.clone());
    let lean_projection = Arc::clone(&projection);
    let listed_cache = Arc::clone(cache);
    tokio::spawn(mirror(
        Api::<Node>::all(client.clone()),
        FirstList::new(cache, Source::Nodes),
        |snapshot| &mut snapshot.nodes,
        by_name(move |node: &Node| Some(lean_node(node, &lean_projection))),
        // The first list replaced the table whole: every node now carries
        // these patterns.
        move || listed_cache.nodes_projected_with(Arc::clone(&projection)),
    ))
}

/// The UIDs of an allowlist entry's workloads (metadata only). Kubernetes
/// selects no names by prefix: for a `namePrefix` entry the kind is watched
/// in the namespace and other names dropped on arrival. None when the kind
/// cannot be verified.
fn spawn_allowlisted(
    client: &Client,
    entry: &AllowlistEntry,
    cache: &Arc<ClusterCache>,
) -> Option<JoinHandle<()>> {
    let Some(gvk) = workload_gvk(&entry.kind) else {
        tracing::warn!(
            entry = %entry,
            "allowlist entry names a kind that cannot be verified; it exempts nothing"
        );
        return None;
    };
    let api = Api::<PartialObjectMeta<DynamicObject>>::namespaced_with(
        client.clone(),
        &entry.namespace,
        &ApiResource::from_gvk(&gvk),
    );
    let config = match entry.name_prefix {
        Some(_) => watcher::Config::default(),
        None => watcher::Config::default().fields(&format!("metadata.name={}", entry.name)),
    };
    let events = report_forbidden(watcher::watcher(api, config).default_backoff(), entry, &gvk);
    let mut first_list = FirstList::new(cache, Source::AllowlistedWorkloads);
    let cache = Arc::clone(cache);
    let owned = entry.clone();
    let kept = entry.clone();
    Some(tokio::spawn(async move {
        fold(
            events,
            &cache,
            Source::AllowlistedWorkloads,
            |snapshot| &mut snapshot.workloads,
            Owns::Keys(Box::new(move |(namespace, kind, name): &WorkloadKey| {
                owned.matches(namespace, kind, name)
            })),
            |object: &PartialObjectMeta<DynamicObject>| {
                let name = object.name_any();
                if !kept.matches(&kept.namespace, &kept.kind, &name) {
                    return None;
                }
                let key = (kept.namespace.clone(), kept.kind.clone(), name);
                Some((key, object.uid()?))
            },
            || first_list.done(),
        )
        .await;
    }))
}

/// Says once per failure streak which RBAC rule is missing when the API
/// server forbids the watch of an allowlisted workload (an entry added to
/// the config without the Role that grants it). The watch keeps retrying
/// with backoff (30 s at most) and works as soon as the rule exists.
fn report_forbidden<K, S>(
    events: S,
    entry: &AllowlistEntry,
    gvk: &GroupVersionKind,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + use<K, S>
where
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Send,
{
    let resource = ApiResource::from_gvk(gvk).plural;
    // RBAC cannot grant names by prefix: a namePrefix entry needs the kind
    // in its namespace.
    let names = match entry.name_prefix {
        Some(_) => String::new(),
        None => format!("resourceNames [{}], ", entry.name),
    };
    let rule = format!(
        "Role in namespace {}: apiGroups [\"{}\"], resources [{resource}], {names}\
         verbs [list, watch]",
        entry.namespace, gvk.group
    );
    let entry = entry.to_string();
    let mut reported = false;
    events.inspect(move |event| match event {
        Err(error) if is_forbidden(error) => {
            if !std::mem::replace(&mut reported, true) {
                tracing::error!(
                    entry = entry.as_str(),
                    missing_rule = rule.as_str(),
                    %error,
                    "forbidden to watch an allowlisted workload: its pods get no exemption \
                     until the RBAC grants it (the chart and `gpu-policy manifests --config` \
                     derive that Role from the allowlist); retrying"
                );
            }
        }
        Err(_) => {}
        Ok(_) => {
            if std::mem::replace(&mut reported, false) {
                tracing::info!(
                    entry = entry.as_str(),
                    "allowlisted workload watched: the RBAC grants it now"
                );
            }
        }
    })
}

fn is_forbidden(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(error)
        | watcher::Error::WatchStartFailed(error)
        | watcher::Error::WatchFailed(error) => api_status::is_forbidden(error),
        watcher::Error::WatchError(status) => status.code == 403,
        watcher::Error::NoResourceVersion => false,
    }
}
