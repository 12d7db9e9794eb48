//! `namePrefix` allowlist entries in cluster mode: the NVIDIA DRA driver's
//! MPS control daemons, whose ReplicaSets have generated names, are
//! verified by the UID of a ReplicaSet watched in the driver's namespace.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::{WAIT, seeded, settings_with};
use crate::support::fake_api::{FakeApi, eventually, watching};
use gpu_policy::admission::ObjectKind;
use gpu_policy::cluster::{ClusterCache, Source, Watches};
use gpu_policy::document::Document;
use gpu_policy::policy::{ClusterFacts, Evaluator};
use gpu_policy::settings::{AllowlistEntry, Config, Settings};
use serde_json::{Value, json};

const DRA: &str = "nvidia-dra-driver-gpu";
const PREFIX: &str = "mps-control-daemon-";
const DAEMON: &str = "mps-control-daemon-5f2c-7d9f8b6c4";
const DRA_REPLICASETS: &str = "/apis/apps/v1/namespaces/nvidia-dra-driver-gpu/replicasets";

fn mps_entry(config: &mut Config) {
    config.allowlist.push(AllowlistEntry {
        name: String::new(),
        name_prefix: Some(PREFIX.to_owned()),
        ..AllowlistEntry::exact(DRA, "ReplicaSet", "")
    });
}

/// A ReplicaSet as the Deployment controller creates it; returns its UID.
fn replica_set(api: &FakeApi, namespace: &str, name: &str) -> String {
    let object = api.insert(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": "mps"}},
            "template": {"metadata": {"labels": {"app": "mps"}},
                "spec": {"containers": [{"name": "mps", "image": "x"}]}}}}));
    object["metadata"]["uid"].as_str().unwrap_or_else(|| panic!("no uid: {object}")).to_owned()
}

/// An MPS control daemon's pod: privileged, every card visible, no GPU
/// request; owned by the ReplicaSet `owner` with `uid`.
fn daemon_pod(namespace: &str, owner: &str, uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{owner}-x7k2p"), "namespace": namespace,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": owner, "uid": uid, "controller": true}]},
        "spec": {"containers": [{"name": "mps-control-daemon", "image": "x",
            "securityContext": {"privileged": true},
            "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}})
}

/// Whether the webhook, reading `cache`, lets the pod keep every card: it
/// is allowlisted, gets no patch (no void pin) and no violation (R6 would
/// deny the privileged container).
fn exempt(settings: &Settings, cache: &ClusterCache, pod: &Value) -> bool {
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let namespace_settings = settings.for_namespace(&BTreeMap::new());
    let evaluator = Evaluator {
        settings,
        namespace: &namespace_settings,
        cluster: Some(cache),
        nodes: None,
        claims: None,
        images: None,
        claim_owner: None,
    };
    let document = Document::from_value(pod);
    let subject = ObjectKind::Pod
        .created(document.root(), namespace)
        .unwrap_or_else(|| panic!("not evaluated: {pod}"));
    let evaluation = evaluator.evaluate(&subject).unwrap_or_else(|error| panic!("{error}"));
    let exempt = evaluation.allowlisted.is_some();
    assert_eq!(
        exempt,
        evaluation.patch.is_empty() && evaluation.violations.is_empty(),
        "{evaluation:#?}"
    );
    exempt
}

async fn started(api: &FakeApi, settings: &Settings) -> (Arc<ClusterCache>, Watches) {
    watching(api, settings).await
}

#[tokio::test(flavor = "multi_thread")]
async fn mps_control_daemons_are_verified_by_the_uid_of_their_replica_set() {
    let api = seeded().await;
    let uid = replica_set(&api, DRA, DAEMON);
    let elsewhere = replica_set(&api, "ml", DAEMON);
    let controller = replica_set(&api, DRA, "nvidia-dra-driver-gpu-controller-6b9c5d");
    let settings = settings_with(mps_entry);
    let (cache, _watches) = started(&api, &settings).await;

    assert!(exempt(&settings, &cache, &daemon_pod(DRA, DAEMON, &uid)));
    // The watch keeps the names with the prefix, in its namespace only.
    assert_eq!(cache.workload_uid(DRA, "ReplicaSet", DAEMON), Some(uid.clone()));
    assert_eq!(
        cache.workload_uid(DRA, "ReplicaSet", "nvidia-dra-driver-gpu-controller-6b9c5d"),
        None
    );
    assert_eq!(cache.workload_uid("ml", "ReplicaSet", DAEMON), None);
    // A pod naming the right owner with another UID (here: that of the
    // same-name ReplicaSet of another namespace) is not exempt.
    assert!(!exempt(&settings, &cache, &daemon_pod(DRA, DAEMON, &elsewhere)));
    assert!(!exempt(&settings, &cache, &daemon_pod(DRA, DAEMON, "forged-uid")));
    // Nor is the pod of that other ReplicaSet, in its own namespace.
    assert!(!exempt(&settings, &cache, &daemon_pod("ml", DAEMON, &elsewhere)));
    // Nor a ReplicaSet of the driver's namespace outside the prefix.
    let outside = daemon_pod(DRA, "nvidia-dra-driver-gpu-controller-6b9c5d", &controller);
    assert!(!exempt(&settings, &cache, &outside));

    // A daemon started later (a new shared claim) is exempt once watched.
    let later = "mps-control-daemon-9e1d-5d4c8b7f6";
    let later_uid = replica_set(&api, DRA, later);
    let later_pod = daemon_pod(DRA, later, &later_uid);
    eventually("the new ReplicaSet watched", WAIT, || exempt(&settings, &cache, &later_pod)).await;
    // Deleted, it exempts nothing any more.
    api.remove("apps/v1", "ReplicaSet", Some(DRA), later);
    eventually("the deleted ReplicaSet forgotten", WAIT, || {
        cache.workload_uid(DRA, "ReplicaSet", later).is_none()
    })
    .await;
    assert!(!exempt(&settings, &cache, &later_pod));
    assert!(exempt(&settings, &cache, &daemon_pod(DRA, DAEMON, &uid)));

    // One watch of the kind in the namespace, selecting no name; nothing
    // of another namespace or cluster-wide.
    let requests = api.requests();
    assert!(
        requests.iter().any(|(_, path)| path.starts_with(DRA_REPLICASETS)
            && path.contains("watch=true")
            && !path.contains("fieldSelector")),
        "{requests:#?}"
    );
    assert!(
        !requests.iter().any(|(_, path)| path.contains("/namespaces/ml/replicasets")
            || path.starts_with("/apis/apps/v1/replicasets")),
        "{requests:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prefix_entry_added_and_removed_at_reload() {
    let api = seeded().await;
    let uid = replica_set(&api, DRA, DAEMON);
    let pod = daemon_pod(DRA, DAEMON, &uid);
    let (cache, watches) = started(&api, &Settings::default()).await;
    assert_eq!(api.count_requests("GET", &[DRA_REPLICASETS]), 0);

    // The Role does not grant it yet: stale until it has listed.
    api.fail_next("GET", DRA_REPLICASETS, 403, 2);
    let with_mps = settings_with(mps_entry);
    watches.apply(&with_mps).await;
    assert!(cache.is_synced());
    assert!(cache.is_stale(Source::AllowlistedWorkloads));
    assert!(!exempt(&with_mps, &cache, &pod));
    eventually("the entry watched once allowed", Duration::from_secs(40), || {
        exempt(&with_mps, &cache, &pod)
    })
    .await;
    eventually("current again", WAIT, || !cache.is_stale(Source::AllowlistedWorkloads)).await;
    assert!(api.count_requests("GET", &[DRA_REPLICASETS]) >= 3);

    // A named entry for one of its ReplicaSets outlives the prefix entry.
    let named = settings_with(|config| {
        config.allowlist.push(AllowlistEntry::exact(DRA, "ReplicaSet", DAEMON));
    });
    let both = settings_with(|config| {
        mps_entry(config);
        config.allowlist.push(AllowlistEntry::exact(DRA, "ReplicaSet", DAEMON));
    });
    let other = "mps-control-daemon-0a0b-6f7c8d9e0";
    let other_uid = replica_set(&api, DRA, other);
    let other_pod = daemon_pod(DRA, other, &other_uid);
    watches.apply(&both).await;
    eventually("both watched", WAIT, || {
        exempt(&both, &cache, &other_pod) && !cache.is_stale(Source::AllowlistedWorkloads)
    })
    .await;
    watches.apply(&named).await;
    assert_eq!(cache.workload_uid(DRA, "ReplicaSet", other), None);
    assert_eq!(cache.workload_uid(DRA, "ReplicaSet", DAEMON), Some(uid.clone()));
    assert!(exempt(&named, &cache, &pod));

    // Removed: forgotten at once, and nobody watches the kind any more.
    watches.apply(&Settings::default()).await;
    assert_eq!(cache.workload_uid(DRA, "ReplicaSet", DAEMON), None);
    assert!(!exempt(&with_mps, &cache, &pod));
    api.clear_requests();
    api.drop_watches();
    replica_set(&api, DRA, "mps-control-daemon-1c2d-3e4f5a6b7");
    eventually("the kept entries watched again", WAIT, || {
        api.count_requests("GET", &["kube-system/daemonsets"]) >= 1
    })
    .await;
    assert_eq!(api.count_requests("GET", &[DRA_REPLICASETS]), 0);
    assert_eq!(cache.workload_uid(DRA, "ReplicaSet", "mps-control-daemon-1c2d-3e4f5a6b7"), None);
}
