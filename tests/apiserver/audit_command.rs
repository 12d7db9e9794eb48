//! `gpu-policy audit`: what was created before a namespace opted in is
//! reported, read from the real API server.

use crate::support::control_plane::{ControlPlane, MODE_LABEL, NVIDIA_RUNTIME_CLASS};
use crate::support::gpu_pod;
use crate::support::process;

/// A CUDA image without a GPU: it would see every card.
const CPU_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: preprocess\n  \
                       namespace: legacy\nspec:\n  containers:\n  - name: app\n    \
                       image: nvidia/cuda:12.6.3-base-ubuntu24.04\n";

#[tokio::test]
async fn audit_reports_pods_created_before_the_namespace_opted_in() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    cluster.apply(NVIDIA_RUNTIME_CLASS);
    // No webhook, and a namespace that has not opted in yet: stored as sent.
    cluster.namespace("legacy", None);
    cluster.create(CPU_POD).success();
    cluster.create(&gpu_pod().name("train").namespace("legacy").manifest()).success();
    cluster.kubectl(&["label", "namespace", "legacy", &format!("{MODE_LABEL}=enforce")]).success();

    let kubeconfig = cluster.kubeconfig.display().to_string();
    let run =
        process::gpu_policy(&["audit", "-A", "--kubeconfig", &kubeconfig, "-o", "json"], None);
    assert_eq!(run.code, 0, "nothing violates, changes only: {run:?}");
    let reports = run.json();
    let report = |name: &str| {
        reports
            .iter()
            .find(|r| r["namespace"] == "legacy" && r["name"] == name)
            .unwrap_or_else(|| panic!("no report of legacy/{name}: {reports:?}"))
    };
    // What the webhook would have done had the namespace opted in first.
    let pin = report("preprocess")["patch"].to_string();
    assert!(pin.contains("NVIDIA_VISIBLE_DEVICES") && pin.contains("void"), "{pin}");
    let runtime_class = report("train")["patch"].to_string();
    assert!(runtime_class.contains("/spec/runtimeClassName"), "{runtime_class}");

    // The text output names both.
    let text = process::gpu_policy(&["audit", "-n", "legacy", "--kubeconfig", &kubeconfig], None);
    assert!(text.stdout.contains("Pod legacy/preprocess"), "{text:?}");
    assert!(text.stdout.contains("Pod legacy/train"), "{text:?}");
}
