//! The cluster caches against the fake API server: first list, watch
//! events, 410 relists, an API server that goes away, lean contents.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::support::fake_api::{FakeApi, eventually, install_crypto_provider, watching};
use gpu_policy::cluster::{self, ClusterCache, Source, Watches};
use gpu_policy::cuda::ComputeCapability;
use gpu_policy::policy::cluster::GpuNodeLabels;
use gpu_policy::policy::{ClusterFacts, NodeFacts};
use gpu_policy::settings::{AllowlistEntry, Config, Settings};
use serde_json::{Value, json};

mod name_prefix;

const WAIT: Duration = Duration::from_secs(15);

fn namespace(name: &str, annotations: Value, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": name, "annotations": annotations, "labels": labels,
                        "managedFields": [{"manager": "kubectl", "operation": "Update"}]}})
}

fn node(name: &str, gpus: &str, major: &str, minor: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "labels": {
               "nvidia.com/gpu.compute.major": major, "nvidia.com/gpu.compute.minor": minor,
               "nvidia.com/gpu.product": format!("NVIDIA-{}", name.to_uppercase()),
               "kubernetes.io/hostname": name}},
           "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": gpus},
                      "capacity": {"nvidia.com/gpu": gpus}}})
}

fn runtime_class() -> Value {
    json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
           "metadata": {"name": "nvidia"}, "handler": "nvidia",
           "overhead": {"podFixed": {"cpu": "100m"}},
           "scheduling": {"nodeSelector": {"nvidia.com/gpu.present": "true"},
                          "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}})
}

fn exporter(uid: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
           "metadata": {"name": "nvidia-gpu-exporter", "namespace": "kube-system", "uid": uid},
           "spec": {"selector": {"matchLabels": {"app": "e"}},
                    "template": {"metadata": {"labels": {"app": "e"}},
                                 "spec": {"containers": [{"name": "e", "image": "x"}]}}}})
}

async fn started(api: &FakeApi) -> Arc<ClusterCache> {
    watching(api, &Settings::default()).await.0
}

async fn seeded() -> FakeApi {
    let api = FakeApi::start().await;
    api.insert(namespace(
        "ml",
        json!({"gpu-policy.io/max-gpus-per-pod": "2", "team": "vision"}),
        json!({"gpu-policy.io/mode": "enforce", "other": "x"}),
    ));
    api.insert(namespace("kube-system", json!({}), json!({})));
    api.insert(node("a100", "8", "8", "0"));
    api.insert(node("t4", "4", "7", "5"));
    api.insert(node("cpu-only", "0", "", ""));
    api.insert(runtime_class());
    api.insert(exporter("uid-1"));
    api
}

#[tokio::test(flavor = "multi_thread")]
async fn caches_hold_what_the_rules_read_and_nothing_else() {
    let api = seeded().await;
    let cache = started(&api).await;

    let expected: BTreeMap<String, String> =
        [("gpu-policy.io/max-gpus-per-pod", "2"), ("gpu-policy.io/mode", "enforce")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
    assert_eq!(cache.namespace_annotations("ml"), expected);
    assert_eq!(cache.largest_allocatable("nvidia.com/gpu"), Some(8));
    assert_eq!(cache.largest_allocatable("nvidia.com/mig-1g.5gb"), Some(0));
    assert_eq!(
        cache.compute_capabilities(),
        vec![ComputeCapability::new(7, 5), ComputeCapability::new(8, 0)]
    );
    // The CPU node offers no GPU and is not counted; the GPU nodes carry
    // GFD's compute labels, not its driver labels.
    let labels = |gpu_nodes, with_compute| GpuNodeLabels {
        gpu_nodes,
        with_compute,
        with_driver: 0,
        with_product: gpu_nodes,
    };
    assert_eq!(cache.gpu_node_labels(), labels(2, 2));
    // The products of the nodes that offer GPUs: not the CPU node's.
    assert_eq!(cache.gpu_products(), ["NVIDIA-A100", "NVIDIA-T4"]);
    let class = cache.runtime_class("nvidia").unwrap_or_default();
    assert_eq!(class.pod_fixed_overhead, json!({"cpu": "100m"}).as_object().cloned());
    assert_eq!(
        class.node_selector,
        json!({"nvidia.com/gpu.present": "true"}).as_object().cloned().unwrap_or_default()
    );
    assert_eq!(class.tolerations.len(), 1);
    assert_eq!(cache.runtime_class("kata"), None);
    assert_eq!(
        cache.workload_uid("kube-system", "DaemonSet", "nvidia-gpu-exporter"),
        Some("uid-1".to_owned())
    );
    // Only the allowlisted workloads are watched, each by name.
    let requests = api.requests();
    assert!(
        requests
            .iter()
            .any(|(_, path)| path.contains("/apis/apps/v1/namespaces/kube-system/daemonsets")
                && path.contains("metadata.name%3Dnvidia-gpu-exporter")),
        "{requests:#?}"
    );
    assert!(
        !requests.iter().any(|(_, path)| path.starts_with("/apis/apps/v1/daemonsets")),
        "{requests:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_events_update_the_caches() {
    let api = seeded().await;
    let cache = started(&api).await;

    api.insert(node("h100", "16", "9", "0"));
    eventually("the new node", WAIT, || cache.largest_allocatable("nvidia.com/gpu") == Some(16))
        .await;
    api.remove("v1", "Node", None, "h100");
    eventually("the node deleted", WAIT, || cache.largest_allocatable("nvidia.com/gpu") == Some(8))
        .await;
    api.insert(namespace("ml", json!({"gpu-policy.io/max-gpus-per-pod": "1"}), json!({})));
    eventually("the annotation changed", WAIT, || {
        cache.namespace_annotations("ml").get("gpu-policy.io/max-gpus-per-pod")
            == Some(&"1".to_owned())
    })
    .await;
    api.remove("node.k8s.io/v1", "RuntimeClass", None, "nvidia");
    eventually("the runtime class deleted", WAIT, || cache.runtime_class("nvidia").is_none()).await;
    // A forged exporter: same name, recreated with another UID.
    api.remove("apps/v1", "DaemonSet", Some("kube-system"), "nvidia-gpu-exporter");
    eventually("the exporter deleted", WAIT, || {
        cache.workload_uid("kube-system", "DaemonSet", "nvidia-gpu-exporter").is_none()
    })
    .await;
    api.insert(exporter("uid-2"));
    eventually("the exporter recreated", WAIT, || {
        cache.workload_uid("kube-system", "DaemonSet", "nvidia-gpu-exporter")
            == Some("uid-2".to_owned())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_410_relist_drops_what_was_deleted_meanwhile() {
    let api = seeded().await;
    let cache = started(&api).await;
    // The LISTs of nodes (not their WATCHes).
    let node_lists = || {
        api.requests()
            .iter()
            .filter(|(method, path)| {
                method == "GET" && path.starts_with("/api/v1/nodes") && !path.contains("watch=")
            })
            .count()
    };
    let lists_before = node_lists();

    // A node goes away while nobody watches (the API server is away, so no
    // open watch can see it deleted), and history is compacted meanwhile:
    // the watch resumes from a resourceVersion that is gone (410), and only
    // a relist can tell.
    api.stop().await;
    api.remove("v1", "Node", None, "a100");
    api.compact();
    api.restart().await;
    eventually("the relist", Duration::from_secs(40), || {
        cache.largest_allocatable("nvidia.com/gpu") == Some(4)
    })
    .await;
    assert!(node_lists() > lists_before, "{:#?}", api.requests());
    assert_eq!(cache.compute_capabilities(), vec![ComputeCapability::new(7, 5)]);
    let labels = cache.gpu_node_labels();
    assert_eq!((labels.gpu_nodes, labels.with_compute), (1, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_api_server_that_goes_away_leaves_the_last_known_state() {
    let api = seeded().await;
    let cache = started(&api).await;

    api.stop().await;
    eventually("the cache marked stale", WAIT, || cache.is_stale(Source::Namespaces)).await;
    // Decisions go on from what was known.
    assert_eq!(cache.largest_allocatable("nvidia.com/gpu"), Some(8));
    assert_eq!(
        cache.namespace_annotations("ml").get("gpu-policy.io/max-gpus-per-pod"),
        Some(&"2".to_owned())
    );
    api.restart().await;
    api.insert(node("h100", "16", "9", "0"));
    eventually("fresh again", Duration::from_secs(40), || {
        !cache.is_stale(Source::Namespaces)
            && cache.largest_allocatable("nvidia.com/gpu") == Some(16)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_audit_snapshot_reads_the_same_as_the_caches() {
    let api = seeded().await;
    install_crypto_provider();
    let snapshot = cluster::snapshot(&api.client(), &Settings::default()).await;
    let snapshot = match snapshot {
        Ok(snapshot) => snapshot,
        Err(error) => panic!("snapshot: {error}"),
    };
    let cache = started(&api).await;
    assert_eq!(snapshot, cache.snapshot());
}

#[tokio::test(flavor = "multi_thread")]
async fn forbidden_lists_keep_the_cache_unsynced_until_allowed() {
    let api = seeded().await;
    install_crypto_provider();
    // RBAC not granted yet: the first node lists are forbidden.
    api.fail_next("GET", "/api/v1/nodes", 403, 2);
    let cache = Arc::new(ClusterCache::default());
    Watches::start(api.client(), &Settings::default(), Arc::clone(&cache));
    eventually("the forbidden list seen", WAIT, || {
        api.count_requests("GET", &["/api/v1/nodes"]) >= 1
    })
    .await;
    // Retries back off from 800 ms: the error shows before the next try.
    eventually("the cache marked stale", WAIT, || cache.is_stale(Source::Nodes)).await;
    assert!(!cache.is_synced());
    eventually("synced once allowed", Duration::from_secs(30), || cache.is_synced()).await;
    assert_eq!(cache.largest_allocatable("nvidia.com/gpu"), Some(8));
}

// ---------------------------------------------------------------------------
// A reloaded configuration reaches the watches.

fn dcgm_exporter(uid: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
           "metadata": {"name": "dcgm-exporter", "namespace": "gpu-ops", "uid": uid},
           "spec": {"selector": {"matchLabels": {"app": "d"}},
                    "template": {"metadata": {"labels": {"app": "d"}},
                                 "spec": {"containers": [{"name": "d", "image": "x"}]}}}})
}

/// The default settings changed by `change`.
fn settings_with(change: impl FnOnce(&mut Config)) -> Settings {
    let mut config = Config::default();
    change(&mut config);
    Settings::from_config(config).unwrap_or_else(|error| panic!("{error}"))
}

fn with_dcgm(config: &mut Config) {
    config.allowlist.push(AllowlistEntry::exact("gpu-ops", "DaemonSet", "dcgm-exporter"));
}

const DCGM_LIST: &str = "/apis/apps/v1/namespaces/gpu-ops/daemonsets";

fn dcgm_uid(cache: &ClusterCache) -> Option<String> {
    cache.workload_uid("gpu-ops", "DaemonSet", "dcgm-exporter")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allowlist_entry_added_at_reload_is_watched_even_once_rbac_allows_it() {
    let api = seeded().await;
    api.insert(dcgm_exporter("dcgm-uid"));
    install_crypto_provider();
    let cache = Arc::new(ClusterCache::default());
    let watches = Watches::start(api.client(), &Settings::default(), Arc::clone(&cache));
    eventually("the first full list", WAIT, || cache.is_synced()).await;
    assert_eq!(dcgm_uid(&cache), None);
    let exporter_requests =
        || api.count_requests("GET", &["kube-system/daemonsets", "nvidia-gpu-exporter"]);
    // Listed, then watching.
    eventually("the exporter watched", WAIT, || {
        api.count_requests("GET", &["nvidia-gpu-exporter", "watch=true"]) >= 1
    })
    .await;
    let before = exporter_requests();

    // The Role does not grant the new entry yet.
    api.fail_next("GET", DCGM_LIST, 403, 2);
    watches.apply(&settings_with(with_dcgm)).await;
    // Still ready; the source says it is not current.
    assert!(cache.is_synced());
    assert!(cache.is_stale(Source::AllowlistedWorkloads));
    eventually("the forbidden list retried", WAIT, || api.count_requests("GET", &[DCGM_LIST]) >= 2)
        .await;
    assert_eq!(dcgm_uid(&cache), None);
    assert!(cache.is_stale(Source::AllowlistedWorkloads));
    eventually("the entry watched once allowed", Duration::from_secs(40), || {
        dcgm_uid(&cache) == Some("dcgm-uid".to_owned())
    })
    .await;
    eventually("current again", WAIT, || !cache.is_stale(Source::AllowlistedWorkloads)).await;
    // The unchanged entries kept their watch: no new request for them.
    assert_eq!(exporter_requests(), before);
    assert_eq!(
        cache.workload_uid("kube-system", "DaemonSet", "nvidia-gpu-exporter"),
        Some("uid-1".to_owned())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn removing_an_allowlist_entry_stops_its_watch() {
    let api = seeded().await;
    api.insert(dcgm_exporter("dcgm-uid"));
    install_crypto_provider();
    let cache = Arc::new(ClusterCache::default());
    let watches = Watches::start(api.client(), &settings_with(with_dcgm), Arc::clone(&cache));
    eventually("the first full list", WAIT, || cache.is_synced()).await;
    assert_eq!(dcgm_uid(&cache), Some("dcgm-uid".to_owned()));

    watches.apply(&Settings::default()).await;
    // Forgotten as soon as the reload is applied: its pods are pinned again.
    assert_eq!(dcgm_uid(&cache), None);
    assert!(!cache.is_stale(Source::AllowlistedWorkloads));

    // Nobody watches it any more: after every watch is cut and the others
    // came back, a recreated dcgm-exporter stays unknown.
    api.clear_requests();
    api.drop_watches();
    api.insert(dcgm_exporter("dcgm-uid-2"));
    api.insert(exporter("uid-2"));
    eventually("the kept entries watched again", WAIT, || {
        cache.workload_uid("kube-system", "DaemonSet", "nvidia-gpu-exporter")
            == Some("uid-2".to_owned())
    })
    .await;
    assert_eq!(dcgm_uid(&cache), None);
    assert_eq!(api.count_requests("GET", &[DCGM_LIST]), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gpu_resource_pattern_added_at_reload_lists_the_nodes_again() {
    let api = seeded().await;
    api.insert(json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "vgpu-host"},
        "status": {"allocatable": {"nvidia.com/gpu": "0", "nvidia.com/vgpu": "4"}}}));
    install_crypto_provider();
    let cache = Arc::new(ClusterCache::default());
    let watches = Watches::start(api.client(), &Settings::default(), Arc::clone(&cache));
    eventually("the first full list", WAIT, || cache.is_synced()).await;
    // Not a GPU resource: the nodes were projected without it, so nothing
    // is known of it (not "no node offers it").
    assert_eq!(cache.largest_allocatable("nvidia.com/vgpu"), None);
    // Listed, then watching.
    eventually("the nodes watched", WAIT, || {
        api.count_requests("GET", &["/api/v1/nodes", "watch=true"]) >= 1
    })
    .await;
    let node_lists = api.count_requests("GET", &["/api/v1/nodes"]);

    let unchanged = settings_with(with_dcgm);
    watches.apply(&unchanged).await;
    assert_eq!(api.count_requests("GET", &["/api/v1/nodes"]), node_lists);

    let vgpu = settings_with(|config| {
        with_dcgm(config);
        config.gpu_resources.push("nvidia.com/vgpu".to_owned());
    });
    watches.apply(&vgpu).await;
    eventually("the nodes projected with the new pattern", WAIT, || {
        cache.largest_allocatable("nvidia.com/vgpu") == Some(4)
    })
    .await;
    assert!(api.count_requests("GET", &["/api/v1/nodes"]) > node_lists);
    assert_eq!(cache.largest_allocatable("nvidia.com/gpu"), Some(8));
    eventually("current again", WAIT, || !cache.is_stale(Source::Nodes)).await;
    // New nodes keep coming through the restarted watch.
    api.insert(json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "vgpu-big"},
        "status": {"allocatable": {"nvidia.com/vgpu": "16"}}}));
    eventually("the new node", WAIT, || cache.largest_allocatable("nvidia.com/vgpu") == Some(16))
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_entry_removed_before_it_was_granted_no_longer_holds_readiness() {
    let api = seeded().await;
    api.insert(dcgm_exporter("dcgm-uid"));
    install_crypto_provider();
    api.fail_next("GET", DCGM_LIST, 403, 1000);
    let cache = Arc::new(ClusterCache::default());
    let watches = Watches::start(api.client(), &settings_with(with_dcgm), Arc::clone(&cache));
    eventually("the forbidden list seen", WAIT, || api.count_requests("GET", &[DCGM_LIST]) >= 1)
        .await;
    eventually("the other entries listed", WAIT, || {
        cache.workload_uid("kube-system", "DaemonSet", "nvidia-gpu-exporter").is_some()
    })
    .await;
    assert!(!cache.is_synced());

    watches.apply(&Settings::default()).await;
    assert!(cache.is_synced());
    assert_eq!(dcgm_uid(&cache), None);
    eventually("current", WAIT, || !cache.is_stale(Source::AllowlistedWorkloads)).await;
}
