use crate::policy::RuleId;
use crate::policy::testing::{evaluate_pod_in, violation_messages};
use rstest::rstest;
use serde_json::{Value, json};

const ID: RuleId = RuleId::BoundedRequests;

fn messages(pod: &Value) -> Vec<String> {
    violation_messages(pod, ID)
}

fn with_resources(resources: Value) -> Value {
    json!({"spec": {"containers": [{"name": "train", "resources": resources}]}})
}

#[rstest]
#[case(json!({"limits": {"nvidia.com/gpu": 1}}))]
#[case(json!({"limits": {"nvidia.com/gpu": "2"}}))]
#[case(json!({"limits": {"nvidia.com/gpu": "2000m"}, "requests": {"nvidia.com/gpu": "2"}}))]
#[case(json!({"limits": {"nvidia.com/gpu": "1e0"}, "requests": {"nvidia.com/gpu": 1}}))]
#[case(json!({"limits": {"nvidia.com/gpu": "8"}}))]
#[case(json!({"limits": {"nvidia.com/gpu": 0}}))]
#[case(json!({"requests": {"nvidia.com/gpu": "0"}}))]
#[case(json!({"limits": {"nvidia.com/mig-1g.5gb": "1"}, "requests": {"nvidia.com/mig-1g.5gb": "1"}}))]
#[case(json!({"requests": {"cpu": "500m"}, "limits": {"nvidia.com/gpu": 1}}))]
#[case(json!({}))]
fn bounded_requests_pass(#[case] resources: Value) {
    assert_eq!(messages(&with_resources(resources)), Vec::<String>::new());
}

#[rstest]
#[case(json!({"requests": {"nvidia.com/gpu": 1}}),
           "gpu-policy: container \"train\" must set limits.nvidia.com/gpu: a GPU request needs an equal limit")]
#[case(json!({"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}),
           "gpu-policy: container \"train\": requests.nvidia.com/gpu differs from limits.nvidia.com/gpu; GPUs cannot be overcommitted, set them equal")]
#[case(json!({"limits": {"nvidia.com/gpu": "500m"}}),
           "gpu-policy: container \"train\": limits.nvidia.com/gpu is not a whole number; GPUs are whole devices: use an integer such as \"1\"")]
#[case(json!({"limits": {"nvidia.com/gpu": "-1"}}),
           "gpu-policy: container \"train\": limits.nvidia.com/gpu is negative; GPUs are whole devices: use an integer such as \"1\"")]
#[case(json!({"limits": {"nvidia.com/gpu": "abc"}}),
           "gpu-policy: container \"train\": limits.nvidia.com/gpu is not a Kubernetes quantity; GPUs are whole devices: use an integer such as \"1\"")]
#[case(json!({"limits": {"nvidia.com/gpu": 1.5}}),
           "gpu-policy: container \"train\": limits.nvidia.com/gpu is not a whole number; GPUs are whole devices: use an integer such as \"1\"")]
#[case(json!({"limits": {"nvidia.com/gpu": 9}}),
           "gpu-policy: container \"train\" must not ask for more than 8 nvidia.com/gpu per container; split the work or lower the limit")]
fn unbounded_requests_are_denied(#[case] resources: Value, #[case] expected: &str) {
    let found = messages(&with_resources(resources));
    assert!(found.iter().any(|m| m == expected), "{found:#?}");
}

#[test]
fn containers_are_aggregated_per_problem() {
    let pod = json!({"spec": {"containers": [
        {"name": "a", "resources": {"requests": {"nvidia.com/gpu": 1}}},
        {"name": "b", "resources": {"requests": {"nvidia.com/gpu": 1}}},
        {"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}},
    ]}});
    let found = messages(&pod);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].starts_with("gpu-policy: containers \"a\", \"b\" must set limits.nvidia.com/gpu")
    );
}

#[test]
fn pod_total_counts_sidecars() {
    let pod = json!({"spec": {
        "initContainers": [{"name": "s", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": 4}}}],
        "containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 5}}}],
    }});
    assert_eq!(
        messages(&pod),
        vec![
            "gpu-policy: the pod needs 9 nvidia.com/gpu (init and sidecar containers included), above the maximum of 8 per pod here"
        ]
    );
}

#[test]
fn plain_init_containers_do_not_add_up() {
    let pod = json!({"spec": {
        "initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": 8}}}],
        "containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 8}}}],
    }});
    assert!(messages(&pod).is_empty());
}

#[rstest]
#[case("2", 3, 1)]
#[case("4", 3, 0)]
#[case("16", 9, 1)]
#[case("lots", 9, 1)]
fn namespace_annotation_lowers_the_pod_maximum(
    #[case] annotation: &str,
    #[case] gpus: u64,
    #[case] expected: usize,
) {
    let pod = json!({"spec": {"containers": [
        {"name": "a", "resources": {"limits": {"nvidia.com/gpu": gpus.min(8)}}},
        {"name": "b", "resources": {"limits": {"nvidia.com/gpu": gpus.saturating_sub(8)}}},
    ]}});
    let evaluation = evaluate_pod_in(&pod, &[("gpu-policy.io/max-gpus-per-pod", annotation)]);
    let found = evaluation.violations.iter().filter(|v| v.rule == ID).count();
    assert_eq!(found, expected, "{:?}", evaluation.violations);
}

#[test]
fn allowlisted_pods_are_still_bounded() {
    let pod = json!({"metadata": {"namespace": "kube-system", "ownerReferences": [
            {"kind": "DaemonSet", "name": "nvidia-gpu-exporter", "controller": true}]},
            "spec": {"containers": [{"name": "e", "resources": {"requests": {"nvidia.com/gpu": 1}}}]}});
    assert_eq!(messages(&pod).len(), 1);
}

#[rstest]
#[case(&[4, 8], 8, 0)]
#[case(&[4, 8], 9, 1)]
#[case(&[0], 1, 1)]
#[case(&[], 9, 1)]
fn pods_bigger_than_any_node_can_never_schedule(
    #[case] nodes: &[u64],
    #[case] gpus: u64,
    #[case] expected: usize,
) {
    use crate::policy::cluster::{ClusterSnapshot, NodeGpus};
    let cluster = ClusterSnapshot {
        nodes: nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                (
                    format!("node-{i}"),
                    NodeGpus {
                        allocatable: [("nvidia.com/gpu".to_owned(), *n)].into_iter().collect(),
                        compute_capability: None,
                        driver_labels: false,
                        product: None,
                    },
                )
            })
            .collect(),
        ..ClusterSnapshot::default()
    };
    let pod = json!({"spec": {"containers": [
        {"name": "a", "resources": {"limits": {"nvidia.com/gpu": gpus.min(8)}}},
        {"name": "b", "resources": {"limits": {"nvidia.com/gpu": gpus.saturating_sub(8)}}},
    ]}});
    let evaluation = crate::policy::testing::evaluate_in_cluster(&pod, &cluster);
    let found: Vec<&str> = evaluation
        .violations
        .iter()
        .filter(|v| v.message.contains("can never be scheduled"))
        .map(|v| v.message.as_str())
        .collect();
    // No node known at all: nothing can be concluded.
    let expected = if nodes.is_empty() { 0 } else { expected };
    assert_eq!(found.len(), expected, "{found:?}");
}
