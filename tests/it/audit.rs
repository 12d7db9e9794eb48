//! `gpu-policy audit` against the fake API server, through the binary.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::fake_api::dra::{
    NVIDIA_DRIVER, allocated, claim_for_pod, gpu, p100_and_a100_slices, resource_slice, vfio,
};
use crate::support::fake_api::{FakeApi, install_crypto_provider};
use gpu_policy::policy::ClaimFacts;
use gpu_policy::settings::Settings;
use serde_json::{Value, json};

fn seed(api: &FakeApi) {
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml",
        "labels": {"gpu-policy.io/mode": "enforce"}}}));
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "scratch"}}));
    api.insert(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "half-card", "namespace": "ml"},
        "spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"limits": {"nvidia.com/gpu": "500m"}}}]}}));
    api.insert(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ml"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}));
    api.insert(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cuda-notebook", "namespace": "scratch"},
        "spec": {"containers": [{"name": "nb", "image": "nvidia/cuda:12.6.3-base-ubuntu24.04"}]}}));
}

async fn audit(kubeconfig: &Path, args: &[&str]) -> (i32, Value, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gpu-policy"));
    command.arg("audit").arg("--kubeconfig").arg(kubeconfig).args(args);
    let output: Output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        output.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&output.stderr).into_owned() + &stdout,
    )
}

fn names(reports: &Value) -> Vec<String> {
    reports
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{}/{}/{}",
                r["kind"].as_str().unwrap_or(""),
                r["namespace"].as_str().unwrap_or(""),
                r["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn audit_reports_opted_in_namespaces_and_exits_1_on_violations() {
    let api = FakeApi::start().await;
    seed(&api);
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(dir.path());

    let (code, reports, output) = audit(&kubeconfig, &["-o", "json"]).await;
    assert_eq!(code, 1, "{output}");
    assert_eq!(names(&reports), vec!["Pod/ml/half-card", "Deployment/ml/web"], "{output}");
    assert_eq!(reports[0]["violations"][0]["rule"], "bounded-requests");
    assert_eq!(reports[1]["allowed"], true);
    // The same element shape as check -o json.
    let mut keys: Vec<&str> =
        reports[1].as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
    keys.sort_unstable();
    assert_eq!(
        keys,
        vec![
            "allowed",
            "apiVersion",
            "ignored",
            "kind",
            "name",
            "namespace",
            "patch",
            "violations",
            "warnings"
        ]
    );

    // One namespace, not opted in: audited as enforce; a CUDA image without
    // a GPU request would be pinned, which is a change, not a violation.
    let (code, reports, output) = audit(&kubeconfig, &["-n", "scratch", "-o", "json"]).await;
    assert_eq!(code, 0, "{output}");
    assert_eq!(names(&reports), vec!["Pod/scratch/cuda-notebook"]);
    assert_eq!(reports[0]["patch"][0]["path"], "/spec/containers/0/env");

    let (code, reports, _) = audit(&kubeconfig, &["-A", "-o", "json"]).await;
    assert_eq!(code, 1);
    assert_eq!(names(&reports).len(), 3);

    let (code, _, output) = audit(&kubeconfig, &[]).await;
    assert_eq!(code, 1);
    assert!(output.contains("Pod ml/half-card: DENIED"), "{output}");
    assert!(output.contains("2 objects (running in the cluster)"), "{output}");

    let (code, _, output) = audit(&kubeconfig, &["-n", "missing"]).await;
    assert_eq!(code, 2, "{output}");
    assert!(output.contains("namespace \"missing\" not found"), "{output}");
}

#[tokio::test(flavor = "multi_thread")]
async fn audit_without_a_cluster_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n").expect("write");
    let (code, _, output) = audit(&kubeconfig, &[]).await;
    assert_eq!(code, 2, "{output}");
    assert!(output.contains("gpu-policy: no reachable cluster"), "{output}");
}

/// A `namePrefix` entry in `audit`: the kind is listed in the namespace, and
/// a pod is exempt only when its owner is one of the listed workloads, with
/// its UID.
#[tokio::test(flavor = "multi_thread")]
async fn audit_verifies_name_prefix_owners_by_listing_the_kind() {
    let api = FakeApi::start().await;
    let ns = "nvidia-dra-driver-gpu";
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns,
        "labels": {"gpu-policy.io/mode": "enforce"}}}));
    let replica_set = api.insert(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "mps-control-daemon-5f2c-7d9f8b6c4", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "mps", "image": "ubuntu:22.04",
                "securityContext": {"privileged": true}}]}}}}));
    let uid = replica_set["metadata"]["uid"].as_str().expect("uid").to_owned();
    let pod = |name: &str, owner: &str, uid: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                "uid": uid, "controller": true}]},
            "spec": {"containers": [{"name": "mps", "image": "ubuntu:22.04",
                "securityContext": {"privileged": true}}]}})
    };
    api.insert(pod("mps-ok", "mps-control-daemon-5f2c-7d9f8b6c4", &uid));
    api.insert(pod("mps-forged", "mps-control-daemon-5f2c-7d9f8b6c4", "not-the-uid"));
    api.insert(pod("mps-missing", "mps-control-daemon-0000-1111", &uid));
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(dir.path());
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "allowlist:\n- {{namespace: {ns}, kind: ReplicaSet, namePrefix: mps-control-daemon-}}\n"
        ),
    )
    .expect("config");
    let config = config.to_string_lossy().into_owned();

    let (code, reports, output) = audit(&kubeconfig, &["--config", &config, "-o", "json"]).await;
    assert_eq!(code, 1, "{output}");
    let verdicts: Vec<(String, bool)> = reports
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["kind"] == "Pod")
        .map(|r| (r["name"].as_str().unwrap_or("").to_owned(), r["allowed"] == true))
        .collect();
    assert_eq!(
        verdicts,
        vec![
            ("mps-forged".to_owned(), false),
            ("mps-missing".to_owned(), false),
            ("mps-ok".to_owned(), true),
        ],
        "{output}"
    );
}

/// DRA in `audit`: the claims and claim templates of audited namespaces
/// are reported (bounded-requests), and pods resolve their claims from the
/// cluster, DeviceClasses included. A cluster without resource.k8s.io/v1
/// is audited as before.
#[tokio::test(flavor = "multi_thread")]
async fn audit_lists_claims_and_resolves_pods_claims() {
    let api = FakeApi::start().await;
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml",
        "labels": {"gpu-policy.io/mode": "enforce"}}}));
    api.insert(json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "big.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}));
    api.insert(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "six", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "g", "exactly": {"deviceClassName": "big.example.com", "count": 6}}]}}}}));
    api.insert(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "every-gpu", "namespace": "ml"},
        "spec": {"devices": {"requests": [
            {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}]}}}));
    api.insert(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ten", "namespace": "ml"},
        "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "six"}],
            "containers": [
                {"name": "dra", "image": "x", "resources": {"claims": [{"name": "gpus"}]}},
                {"name": "plugin", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}));
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(dir.path());

    let (code, reports, output) = audit(&kubeconfig, &["-o", "json"]).await;
    assert_eq!(code, 1, "{output}");
    assert_eq!(
        names(&reports),
        vec!["Pod/ml/ten", "ResourceClaim/ml/every-gpu", "ResourceClaimTemplate/ml/six"],
        "{output}"
    );
    let verdicts: Vec<(bool, String)> = reports
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (r["allowed"] == true, r["violations"][0]["message"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    assert!(!verdicts[0].0, "{output}");
    assert!(verdicts[0].1.contains("6 GPUs through resource claims"), "{output}");
    assert!(!verdicts[1].0, "{output}");
    assert!(verdicts[1].1.contains("allocationMode: All"), "{output}");
    assert!(verdicts[2].0, "{output}");

    // Without resource.k8s.io/v1: the pod alone, its claim unresolved.
    api.unregister_group_version("resource.k8s.io", "v1");
    let (code, reports, output) = audit(&kubeconfig, &["-o", "json"]).await;
    assert_eq!(code, 0, "{output}");
    assert_eq!(names(&reports), vec!["Pod/ml/ten"], "{output}");
    assert!(reports[0]["warnings"].to_string().contains("unresolved"), "{output}");
}

/// `audit`'s snapshot, listed once, holds what the caches hold: the
/// ResourceSlices of the NVIDIA driver (not those of other drivers), and a
/// claim's allocation and the pod it was made for.
#[tokio::test(flavor = "multi_thread")]
async fn the_audit_snapshot_has_the_slices_and_the_allocations() {
    install_crypto_provider();
    let api = FakeApi::start().await;
    api.insert(resource_slice(
        "node-1-gpu",
        NVIDIA_DRIVER,
        "node-1",
        &[gpu("gpu-0", "9.0.0", "12.8.0", "570.124.6"), vfio("gpu-1")],
    ));
    api.insert(resource_slice(
        "node-1-rdma",
        "rdma.example.com",
        "node-1",
        &[gpu("nic-0", "9.0.0", "12.8.0", "570.124.6")],
    ));
    let claim = claim_for_pod("ml", "trainer-gpu-x7k2p", "trainer", "uid-trainer", "gpu");
    api.insert(allocated(claim, &[("node-1", "gpu-0")]));

    let snapshot = gpu_policy::cluster::snapshot(&api.client(), &Settings::default())
        .await
        .expect("the snapshot");
    assert_eq!(snapshot.dra.slices.keys().collect::<Vec<_>>(), ["node-1-gpu"]);
    let versions = snapshot.device_versions(NVIDIA_DRIVER, "node-1", "gpu-0");
    assert_eq!(versions.and_then(|v| v.driver_version).as_deref(), Some("570.124.6"));
    assert_eq!(
        snapshot
            .claims_made_for("ml", "uid-trainer")
            .and_then(|mut made| made.remove("gpu"))
            .as_deref(),
        Some("trainer-gpu-x7k2p")
    );
    let devices = snapshot.allocation("ml", "trainer-gpu-x7k2p");
    assert_eq!(devices.as_deref().map(|d| d[0].device.as_str()), Some("gpu-0"), "{devices:?}");
}

/// R4 in `audit`: a running pod whose claim, made for it from its template
/// (found by the pod's UID and the pod claim's name), was allocated a device
/// below what its image needs is reported; on a device that meets it, it is
/// not.
#[tokio::test(flavor = "multi_thread")]
async fn audit_reports_a_running_pod_whose_claim_got_a_device_below_its_needs() {
    let api = FakeApi::start().await;
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml",
        "labels": {"gpu-policy.io/mode": "enforce"}}}));
    api.insert(crate::dra_cluster::template("single-gpu", NVIDIA_DRIVER, 1));
    for slice in p100_and_a100_slices() {
        api.insert(slice);
    }
    // Running: the API server gave it its UID, the kubelet its status.
    api.insert(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "ml", "uid": "uid-trainer"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
            "nodeName": "node-1",
            "containers": [{"name": "ctr", "image": "nvcr.io/nvidia/pytorch:25.12-py3",
                "resources": {"claims": [{"name": "gpu"}]}}]},
        "status": {"phase": "Running"}}));
    let claim = claim_for_pod("ml", "trainer-gpu-x7k2p", "trainer", "uid-trainer", "gpu");
    api.insert(allocated(claim.clone(), &[("node-1", "gpu-0")]));
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(dir.path());
    let trainer = |reports: &Value| {
        reports
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["kind"] == "Pod" && r["name"] == "trainer")
            .cloned()
            .unwrap_or(Value::Null)
    };
    let compute_affinity = |report: &Value| -> Vec<String> {
        report["violations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["rule"] == "compute-affinity")
            .map(|v| v["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    };

    let (code, reports, output) = audit(&kubeconfig, &["-o", "json"]).await;
    assert_eq!(code, 1, "{output}");
    let report = trainer(&reports);
    assert_eq!(report["allowed"], false, "{output}");
    assert_eq!(
        compute_affinity(&report),
        ["gpu-policy: container \"ctr\" uses ResourceClaim \"trainer-gpu-x7k2p\", allocated a \
          device below what its image needs (compute capability >= 7.5): gpu-0 of pool node-1 has compute \
          capability 6.0; use a claim whose devices meet it"],
        "{output}"
    );

    // The same pod on the A100.
    api.insert(allocated(claim, &[("node-2", "gpu-0")]));
    let (code, reports, output) = audit(&kubeconfig, &["-o", "json"]).await;
    let report = trainer(&reports);
    assert_eq!(report["allowed"], true, "{output}");
    assert!(compute_affinity(&report).is_empty(), "{output}");
    assert_eq!(code, 0, "{output}");
}
