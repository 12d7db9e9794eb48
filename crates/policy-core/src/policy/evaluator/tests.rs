use serde_json::json;

use crate::cuda::ComputeCapability;
use crate::policy::NoticeKind;
use crate::policy::cluster::{ClusterSnapshot, NodeGpus};
use crate::policy::testing::evaluate_in_cluster;

#[test]
fn notices_keep_their_kind_and_the_order_the_rules_run_in() {
    let node = NodeGpus {
        allocatable: [("nvidia.com/gpu".to_owned(), 8)].into_iter().collect(),
        compute_capability: Some(ComputeCapability::new(6, 1)),
        driver_labels: true,
        product: None,
    };
    let cluster = ClusterSnapshot {
        nodes: [("node-0".to_owned(), node)].into_iter().collect(),
        ..ClusterSnapshot::default()
    };
    let pod = json!({
        "metadata": {
            "namespace": "kube-system",
            "annotations": {"gpu-policy.io/min-compute-capability": "junk"},
            "ownerReferences": [{"kind": "DaemonSet", "name": "nvidia-gpu-exporter",
                                 "uid": "u-1", "controller": true}],
        },
        "spec": {"containers": [{"name": "c", "image": "nvidia/cuda:13.0.0-runtime-ubuntu24.04",
                                 "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
    });
    let evaluation = evaluate_in_cluster(&pod, &cluster);
    let kinds: Vec<NoticeKind> = evaluation.notices.iter().map(|n| n.kind).collect();
    assert_eq!(
        kinds,
        vec![
            NoticeKind::UnverifiedOwner,
            NoticeKind::MissingRuntimeClass,
            NoticeKind::IgnoredAnnotation,
            NoticeKind::UnmetComputeCapability,
        ],
        "{:?}",
        evaluation.notices
    );
    assert!(evaluation.notices.iter().all(|n| n.message.starts_with("gpu-policy: ")));
}
