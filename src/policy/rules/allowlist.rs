//! R5 `allowlist`: workloads that must see every card without requesting one.
//!
//! Reads:
//! - pods: `metadata.namespace` (or the request's namespace) and the
//!   `metadata.ownerReferences` entry with `controller: true` (`kind`, `name`,
//!   `uid`);
//! - workload templates: the workload's own namespace, `kind` and
//!   `metadata.name`.
//!
//! Allows: an exemption when namespace, kind and name equal a configured
//! `{namespace, kind, name}` entry, or namespace and kind equal and the name
//! starts with a `{namespace, kind, namePrefix}` entry's prefix (for names
//! with a generated suffix). Labels never allowlist (anyone can set them),
//! and the same name in another namespace does not match. Allowlisted
//! pods skip R1, R6 and the reserved-runtime-class check of R3; R2 still
//! applies.

pub use super::rule::{AllowlistInput, Exemption};
use super::rule::{ApiServer, Coverage};
use crate::policy::cluster::ClusterFacts;
use crate::policy::message::{Notice, NoticeKind};
use crate::policy::subject::{Identity, Owner};
use crate::settings::AllowlistEntry;

/// No policy of its own: the policies of the rules it exempts from test
/// the allowlist in their CEL (`admission_policy::cel_text::allowlisted`).
pub const API_SERVER: ApiServer = ApiServer::InOtherPolicies(Coverage {
    enforced: "by the controller owner reference's kind and name, and the workload's own \
        kind and name (or `namePrefix`), in the entry's namespace: in the policies of R1, the \
        reserved class of R3, and R6",
    webhook_only: "owner UID verification: the policy cannot read the owner, so anyone who \
        can create pods in an allowlisted namespace can write an owner reference to the \
        exporter and get its exemption. Keep allowlisted namespaces (by default \
        `kube-system`) closed to ordinary users, or run the webhook beside the policies",
});

/// The allowlist stage: the entry that exempts the object. With a cluster
/// to read, a pod's owner must be the one the entry names
/// ([`verify_owner`]).
pub fn exempt<'a>(input: &AllowlistInput<'a>) -> Exemption<'a> {
    let entry = matching_entry(
        input.identity,
        input.namespace,
        &input.settings.config().allowlist,
    );
    if let (Some(entry), Identity::Pod { owner: Some(owner) }, Some(cluster)) =
        (entry, input.identity, input.cluster)
        && let Err(notice) = verify_owner(entry, owner, cluster)
    {
        return Exemption {
            entry: None,
            notices: vec![notice],
        };
    }
    Exemption {
        entry,
        notices: Vec::new(),
    }
}

/// The configured entry that exempts this object, if any.
pub fn matching_entry<'e>(
    identity: Identity<'_>,
    namespace: &str,
    entries: &'e [AllowlistEntry],
) -> Option<&'e AllowlistEntry> {
    let (kind, name) = match identity {
        Identity::Pod { owner: Some(owner) } => (owner.kind, owner.name),
        Identity::Pod { owner: None } => return None,
        Identity::Workload { kind, name } => (kind, name),
    };
    entries
        .iter()
        .find(|entry| entry.matches(namespace, kind, name))
}

/// With a cluster to ask: the owner a pod names must exist in the pod's
/// namespace with the referenced UID, or anyone could write an owner
/// reference to the exporter and get its exemption. `Err` says why not.
pub fn verify_owner(
    entry: &AllowlistEntry,
    owner: Owner<'_>,
    cluster: &dyn ClusterFacts,
) -> Result<(), Notice> {
    // The owner's own name: for a name entry it is the entry's name, for a
    // namePrefix entry the workload that matched it.
    let existing = cluster.workload_uid(&entry.namespace, &entry.kind, owner.name);
    let named = format!("{}/{}/{}", entry.namespace, entry.kind, owner.name);
    let reason = match (existing.as_deref(), owner.uid) {
        (Some(uid), Some(referenced)) if uid == referenced => return Ok(()),
        (None, _) => format!("owner {named} does not exist"),
        _ => format!("owner UID is not that of {named}"),
    };
    Err(Notice::new(
        NoticeKind::UnverifiedOwner,
        format!("allowlist: {reason}; no exemption"),
    ))
}

#[cfg(test)]
mod tests {
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
        let identity = Identity::Pod {
            owner: controller_owner(leaked(&pod)),
        };
        assert_eq!(entry_name(identity, namespace).as_deref(), expected);
    }

    #[test]
    fn labels_alone_never_allowlist() {
        let pod = json!({"metadata": {"name": "nvidia-gpu-exporter",
            "labels": {"app": "nvidia-gpu-exporter", "app.kubernetes.io/name": "nvidia-gpu-exporter"}}});
        let identity = Identity::Pod {
            owner: controller_owner(leaked(&pod)),
        };
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
    #[case(
        "StatefulSet",
        "mps-control-daemon-8c1f0a2e",
        "nvidia-dra-driver-gpu",
        None
    )]
    #[case(
        "ReplicaSet",
        "nvidia-dra-driver-gpu-controller-6d7f9c5b4",
        "nvidia-dra-driver-gpu",
        None
    )]
    fn dra_driver_pods_match_name_and_prefix_entries(
        #[case] kind: &str,
        #[case] name: &str,
        #[case] namespace: &str,
        #[case] expected: Option<&str>,
    ) {
        let entries = dra_driver_allowlist();
        let owner = Owner {
            kind,
            name,
            uid: Some("u-1"),
        };
        let found = matching_entry(Identity::Pod { owner: Some(owner) }, namespace, &entries);
        assert_eq!(found.map(|e| e.to_string()).as_deref(), expected);
    }

    #[rstest]
    #[case("mps-control-daemon-8c1f0a2e", true)]
    #[case("mps-control-daemon", false)]
    fn dra_driver_workloads_match_by_their_own_name(#[case] name: &str, #[case] allowed: bool) {
        let entries = dra_driver_allowlist();
        let identity = Identity::Workload {
            kind: "Deployment",
            name,
        };
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
                (
                    "nvidia-dra-driver-gpu".into(),
                    "ReplicaSet".into(),
                    name.into(),
                ),
                uid.to_owned(),
            );
        }
        let entries = dra_driver_allowlist();
        let owner = Owner {
            kind: "ReplicaSet",
            name,
            uid: Some("u-1"),
        };
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
                (
                    "kube-system".into(),
                    "DaemonSet".into(),
                    "nvidia-gpu-exporter".into(),
                ),
                uid.to_owned(),
            );
        }
        let mut pod = exporter_pod("kube-system", true);
        pod["spec"] = json!({"containers": [{"name": "e", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]});
        let evaluation = crate::policy::testing::evaluate_in_cluster(&pod, &cluster);
        assert_eq!(evaluation.allowlisted.is_some(), exempt);
        assert_eq!(
            evaluation.changes.is_empty(),
            exempt,
            "{:?}",
            evaluation.changes
        );
        assert_eq!(
            evaluation
                .notices
                .iter()
                .any(|n| n.message.contains("no exemption")),
            !exempt,
            "{:?}",
            evaluation.notices
        );
    }
}
