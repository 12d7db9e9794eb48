use super::*;
use crate::policy::subject::controller_owner;
use crate::policy::testing::leaked;
use crate::settings::{AllowlistEntry, Config};
use rstest::rstest;
use serde_json::{Value, json};

fn exporter_pod(namespace_of_owner: &str, controller: bool) -> Value {
    json!({"metadata": {
        "namespace": namespace_of_owner,
        "labels": {"app": "nvidia-gpu-exporter"},
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nvidia-gpu-exporter",
             "uid": "u-1", "controller": controller}
        ]
    }})
}

fn entry_name(identity: Identity<'_>, namespace: &str) -> Option<String> {
    matching_entry(identity, namespace, &Config::default().allowlist).map(|e| e.to_string())
}

#[rstest]
#[case("kube-system", true, Some("kube-system/DaemonSet/nvidia-gpu-exporter"))]
// same name elsewhere does not match
#[case("default", true, None)]
// an owner reference that is not the controller does not count
#[case("kube-system", false, None)]
fn pods_match_by_controller_owner(
    #[case] namespace: &str,
    #[case] controller: bool,
    #[case] expected: Option<&str>,
) {
    let pod = exporter_pod(namespace, controller);
    let identity = Identity::Pod { owner: controller_owner(leaked(&pod)) };
    assert_eq!(entry_name(identity, namespace).as_deref(), expected);
}

#[test]
fn labels_alone_never_allowlist() {
    let pod = json!({"metadata": {"name": "nvidia-gpu-exporter",
            "labels": {"app": "nvidia-gpu-exporter", "app.kubernetes.io/name": "nvidia-gpu-exporter"}}});
    let identity = Identity::Pod { owner: controller_owner(leaked(&pod)) };
    assert_eq!(entry_name(identity, "kube-system"), None);
}

#[rstest]
#[case("DaemonSet", "nvidia-gpu-exporter", "kube-system", true)]
#[case("DaemonSet", "nvidia-device-plugin-daemonset", "kube-system", true)]
#[case("DaemonSet", "gpu-feature-discovery", "kube-system", true)]
#[case("Deployment", "nvidia-gpu-exporter", "kube-system", false)]
#[case("DaemonSet", "nvidia-gpu-exporter", "monitoring", false)]
#[case("DaemonSet", "dcgm-exporter", "kube-system", false)]
fn workloads_match_by_their_own_identity(
    #[case] kind: &str,
    #[case] name: &str,
    #[case] namespace: &str,
    #[case] allowed: bool,
) {
    let identity = Identity::Workload { kind, name };
    assert_eq!(entry_name(identity, namespace).is_some(), allowed);
}

fn dra_driver_allowlist() -> Vec<AllowlistEntry> {
    let prefix = |kind: &str| AllowlistEntry {
        name: String::new(),
        name_prefix: Some("mps-control-daemon-".into()),
        ..AllowlistEntry::exact("nvidia-dra-driver-gpu", kind, "")
    };
    vec![
        AllowlistEntry::exact(
            "nvidia-dra-driver-gpu",
            "DaemonSet",
            "nvidia-dra-driver-gpu-kubelet-plugin",
        ),
        prefix("Deployment"),
        prefix("ReplicaSet"),
    ]
}

#[rstest]
// the kubelet plugin's pods, through their DaemonSet
#[case(
    "DaemonSet",
    "nvidia-dra-driver-gpu-kubelet-plugin",
    "nvidia-dra-driver-gpu",
    Some("nvidia-dra-driver-gpu/DaemonSet/nvidia-dra-driver-gpu-kubelet-plugin")
)]
// an MPS control daemon's pods, through the ReplicaSet of its Deployment
#[case(
    "ReplicaSet",
    "mps-control-daemon-8c1f0a2e-6d7f9c5b4",
    "nvidia-dra-driver-gpu",
    Some("nvidia-dra-driver-gpu/ReplicaSet/mps-control-daemon-*")
)]
// a prefix entry stays in its namespace and kind
#[case("ReplicaSet", "mps-control-daemon-8c1f0a2e-6d7f9c5b4", "ml", None)]
#[case("StatefulSet", "mps-control-daemon-8c1f0a2e", "nvidia-dra-driver-gpu", None)]
#[case("ReplicaSet", "nvidia-dra-driver-gpu-controller-6d7f9c5b4", "nvidia-dra-driver-gpu", None)]
fn dra_driver_pods_match_name_and_prefix_entries(
    #[case] kind: &str,
    #[case] name: &str,
    #[case] namespace: &str,
    #[case] expected: Option<&str>,
) {
    let entries = dra_driver_allowlist();
    let owner = Owner { kind, name, uid: Some("u-1") };
    let found = matching_entry(Identity::Pod { owner: Some(owner) }, namespace, &entries);
    assert_eq!(found.map(|e| e.to_string()).as_deref(), expected);
}

#[rstest]
#[case("mps-control-daemon-8c1f0a2e", true)]
#[case("mps-control-daemon", false)]
fn dra_driver_workloads_match_by_their_own_name(#[case] name: &str, #[case] allowed: bool) {
    let entries = dra_driver_allowlist();
    let identity = Identity::Workload { kind: "Deployment", name };
    let found = matching_entry(identity, "nvidia-dra-driver-gpu", &entries);
    assert_eq!(found.is_some(), allowed);
}

#[rstest]
// the ReplicaSet that matched the prefix exists with the referenced UID
#[case("mps-control-daemon-1-abc", Some("u-1"), None)]
#[case(
    "mps-control-daemon-1-abc",
    Some("u-2"),
    Some("owner UID is not that of nvidia-dra-driver-gpu/ReplicaSet/mps-control-daemon-1-abc")
)]
#[case(
    "mps-control-daemon-1-abc",
    None,
    Some("owner nvidia-dra-driver-gpu/ReplicaSet/mps-control-daemon-1-abc does not exist")
)]
fn prefix_entries_verify_the_owner_by_its_own_name(
    #[case] name: &str,
    #[case] uid: Option<&str>,
    #[case] refused: Option<&str>,
) {
    use crate::policy::cluster::ClusterSnapshot;
    let mut cluster = ClusterSnapshot::default();
    if let Some(uid) = uid {
        cluster.workloads.insert(
            ("nvidia-dra-driver-gpu".into(), "ReplicaSet".into(), name.into()),
            uid.to_owned(),
        );
    }
    let entries = dra_driver_allowlist();
    let owner = Owner { kind: "ReplicaSet", name, uid: Some("u-1") };
    let result = verify_owner(&entries[2], owner, &cluster);
    assert_eq!(
        result.err().map(|n| n.message.body().to_owned()),
        refused.map(|r| format!("allowlist: {r}; no exemption"))
    );
}

#[rstest]
// the owner exists with the referenced UID: exempt
#[case(Some("u-1"), true)]
// a forged reference: same name, other UID
#[case(Some("u-2"), false)]
// the owner does not exist
#[case(None, false)]
fn with_a_cluster_the_owner_must_exist(#[case] uid: Option<&str>, #[case] exempt: bool) {
    use crate::policy::cluster::ClusterSnapshot;
    let mut cluster = ClusterSnapshot::default();
    if let Some(uid) = uid {
        cluster.workloads.insert(
            ("kube-system".into(), "DaemonSet".into(), "nvidia-gpu-exporter".into()),
            uid.to_owned(),
        );
    }
    let mut pod = exporter_pod("kube-system", true);
    pod["spec"] = json!({"containers": [{"name": "e", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]});
    let evaluation = crate::policy::testing::evaluate_in_cluster(&pod, &cluster);
    assert_eq!(evaluation.allowlisted.is_some(), exempt);
    assert_eq!(evaluation.changes.is_empty(), exempt, "{:?}", evaluation.changes);
    assert_eq!(
        evaluation.notices.iter().any(|n| n.message.contains("no exemption")),
        !exempt,
        "{:?}",
        evaluation.notices
    );
}
