//! R4 on a cluster whose GPU nodes carry no GPU Feature Discovery labels
//! (docs/policy.md, "R4 compute-affinity"): a node advertises
//! `nvidia.com/gpu: 4` without GFD's labels, so an affinity on
//! `nvidia.com/gpu.compute.major` is one no node can meet. A GPU pod in an
//! enforce namespace is stored without it, warned, and the audit log says
//! the floor was not enforced; once the node is labelled, the next pod gets
//! the affinity again, from the webhook's node cache, without a restart.
//!
//! No kubelet runs: the Node is created with kubectl, and its capacity
//! written through the status subresource as the kubelet writes it.

use serde_json::Value;

use crate::support::control_plane::{ControlPlane, Webhook, WebhookOptions};
use crate::support::gpu_pod;
use crate::support::process::Run;

const NAMESPACE: &str = "ml";
const NODE: &str = "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-1\n  labels:\n    \
    kubernetes.io/hostname: gpu-1\n";
/// What the NVIDIA device plugin makes the kubelet advertise.
const GPU_STATUS: &str =
    r#"{"status":{"capacity":{"nvidia.com/gpu":"4"},"allocatable":{"nvidia.com/gpu":"4"}}}"#;

/// The required node affinity of a pod (null when none).
fn required(pod: &Value) -> &Value {
    pod.pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution")
        .unwrap_or(&Value::Null)
}

/// The object of a write that went through, or null.
fn written(run: &Run) -> Value {
    if run.code == 0 { run.value() } else { Value::Null }
}

/// The audit annotation `key` the webhook gave the creation of pod `name`,
/// once the audit log holds it.
fn audit_annotation(cluster: &ControlPlane, name: &str, key: &str) -> Option<String> {
    let suffix = format!("/{key}");
    let mut found = None;
    cluster.eventually("the audit log holds the pod's creation", || {
        let events = cluster.audit_events();
        let Some(event) = events.iter().find(|event| {
            let target = &event["objectRef"];
            event["verb"] == "create"
                && event["stage"] == "ResponseComplete"
                && target["resource"] == "pods"
                && target["subresource"].is_null()
                && target["name"] == name
        }) else {
            return false;
        };
        found = event["annotations"]
            .as_object()
            .into_iter()
            .flatten()
            .find(|(k, _)| k.contains("gpu-policy.io/") && k.ends_with(&suffix))
            .and_then(|(_, v)| v.as_str().map(str::to_owned));
        true
    });
    found
}

#[tokio::test]
async fn no_compute_affinity_on_a_fleet_without_gfd_labels_until_the_labels_come() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let webhook = Webhook::install(&cluster, WebhookOptions::default()).await;
    cluster.namespace(NAMESPACE, Some("enforce"));
    webhook.wait_effective(&cluster, NAMESPACE);

    // No node offers a GPU yet (scale from zero): the floor is written.
    let probe = written(&cluster.dry_run(&gpu_pod().name("probe").namespace(NAMESPACE).manifest()));
    assert!(required(&probe).is_object(), "{probe}");

    cluster.create(NODE).success();
    cluster
        .kubectl(&[
            "patch",
            "node",
            "gpu-1",
            "--subresource=status",
            "--type=merge",
            "-p",
            GPU_STATUS,
        ])
        .success();
    cluster.eventually("the webhook's node cache sees the GPU node", || {
        let run = cluster.dry_run(&gpu_pod().name("probe").namespace(NAMESPACE).manifest());
        run.code == 0 && required(&run.value()).is_null()
    });

    let created = cluster.create(&gpu_pod().name("train-1").namespace(NAMESPACE).manifest());
    let warnings: Vec<&str> =
        created.stderr.lines().filter(|line| line.starts_with("Warning: ")).collect();
    let stored = written(&created);
    assert_eq!(stored["metadata"]["name"], "train-1", "{}", created.stderr);
    assert!(required(&stored).is_null(), "{stored}");
    // The other changes are made as ever.
    assert_eq!(stored["spec"]["runtimeClassName"], "nvidia", "{stored}");
    assert!(
        warnings.iter().any(|w| w.starts_with(
            "Warning: gpu-policy: compute-affinity: no GPU node carries GPU Feature Discovery's labels"
        )),
        "{warnings:?}"
    );
    assert_eq!(
        audit_annotation(&cluster, "train-1", "unenforced-floor").as_deref(),
        Some(
            "compute-affinity: no GPU node carries GPU Feature Discovery's labels, so compute \
             capability >= 5.0 is not required; deploy GPU Feature Discovery, or set \
             nvidia.com/gpu.compute.* on the GPU nodes"
        )
    );

    // GFD labels the node: the next pod gets the floor.
    cluster
        .kubectl(&[
            "label",
            "node",
            "gpu-1",
            "nvidia.com/gpu.compute.major=8",
            "nvidia.com/gpu.compute.minor=0",
        ])
        .success();
    cluster.eventually("the webhook's node cache sees the labels", || {
        let run = cluster.dry_run(&gpu_pod().name("probe").namespace(NAMESPACE).manifest());
        run.code == 0 && required(&run.value()).is_object()
    });
    let created = cluster.create(&gpu_pod().name("train-2").namespace(NAMESPACE).manifest());
    let stored = written(&created);
    assert_eq!(
        required(&stored)["nodeSelectorTerms"],
        serde_json::json!([{"matchExpressions": [
            {"key": "nvidia.com/gpu.compute.major", "operator": "Gt", "values": ["4"]}]}]),
        "{stored}"
    );
    assert!(!created.stderr.contains("GPU Feature Discovery"), "{}", created.stderr);
    assert_eq!(audit_annotation(&cluster, "train-2", "unenforced-floor"), None);
}
