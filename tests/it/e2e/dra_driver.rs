//! `serve --kubeconfig` with the NVIDIA DRA driver's allowlist entries: its
//! MPS control daemons, allowlisted by `namePrefix`, keep their cards, and
//! a forged owner does not.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::{Instant, sleep};

use crate::support::fake_api::FakeApi;
use crate::support::server::{
    ENFORCE, MUTATE, Options, POLL, Server, WARN, patch_of, write_atomically,
};
use crate::support::workloads::pod_of_workload;

const DRA: &str = "nvidia-dra-driver-gpu";

/// The MPS control daemon's ReplicaSet as the Deployment controller makes
/// it: privileged, every card visible, no GPU request.
fn mps_replica_set(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": DRA},
        "spec": {"selector": {"matchLabels": {"app": "mps"}},
            "template": {"metadata": {"labels": {"app": "mps"}},
                "spec": {"containers": [{"name": "mps-control-daemon", "image": "x",
                    "securityContext": {"privileged": true},
                    "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}}}})
}

#[tokio::test(flavor = "multi_thread")]
async fn mps_control_daemons_allowlisted_by_name_prefix_keep_their_cards() {
    let api = FakeApi::start().await;
    for name in ["kube-system", DRA] {
        api.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}));
    }
    let scratch = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(scratch.path());
    let config = scratch.path().join("config.yaml");
    write_atomically(
        &config,
        format!(
            "allowlist:\n\
             - {{namespace: {DRA}, kind: DaemonSet, name: nvidia-dra-driver-gpu-kubelet-plugin}}\n\
             - {{namespace: {DRA}, kind: Deployment, namePrefix: mps-control-daemon-}}\n\
             - {{namespace: {DRA}, kind: ReplicaSet, namePrefix: mps-control-daemon-}}\n"
        )
        .as_bytes(),
    );
    // The Role of a hand-edited ConfigMap does not grant the kind yet.
    api.fail_next("GET", "/apis/apps/v1/namespaces/nvidia-dra-driver-gpu/replicasets", 403, 2);
    let server = Server::start(
        Options { config: Some(config), kubeconfig: Some(kubeconfig), ..Options::default() },
        None,
    )
    .await;
    let log = server.log();
    let line = log
        .lines()
        .find(|l| {
            l.contains("forbidden to watch an allowlisted workload")
                && l.contains("nvidia-dra-driver-gpu/ReplicaSet/mps-control-daemon-*")
        })
        .unwrap_or_else(|| panic!("no forbidden line; log:\n{log}"));
    assert!(
        line.contains(
            "Role in namespace nvidia-dra-driver-gpu: apiGroups [\\\"apps\\\"], \
             resources [replicasets], verbs [list, watch]"
        ),
        "{line}"
    );
    let mut connection = server.connect().await;

    // A daemon started after the server: exempt once its ReplicaSet is seen.
    let replica_set = api.insert(mps_replica_set("mps-control-daemon-5f2c-7d9f8b6c4"));
    let uid = replica_set["metadata"]["uid"].as_str().expect("uid");
    let daemon = pod_of_workload(&replica_set, "x7k2p", uid).expect("a pod");
    let forged = pod_of_workload(&replica_set, "f0rg3", "forged-uid").expect("a pod");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response = connection.admit(ENFORCE, &daemon).await;
        if response["allowed"] == true {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the MPS control daemon is still denied: {response}\nlog:\n{}",
            server.log()
        );
        sleep(POLL).await;
    }
    // Its cards stay visible: no void pin.
    let response = connection.admit(MUTATE, &daemon).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(patch_of(&response).is_none(), "{response}");

    // The same owner name with another UID: not exempt, so its privileged
    // container is denied.
    let denied = connection.admit(ENFORCE, &forged).await;
    assert_eq!(denied["allowed"], false, "{denied}");
    let warned = connection.admit(WARN, &forged).await;
    let warnings = warned["warnings"].to_string();
    assert!(
        warnings.contains("allowlist: owner UID is not that of nvidia-dra-driver-gpu/ReplicaSet/"),
        "{warnings}"
    );
}
