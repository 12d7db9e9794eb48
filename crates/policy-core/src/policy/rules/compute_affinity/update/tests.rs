//! A pod's update: what the webhook wrote at creation made again where a
//! re-apply undid it (R1, R3, R4), nothing new written into a pod created
//! before gpu-policy, and the images changed in place checked against the
//! GPUs the pod has.

use rstest::rstest;
use serde_json::{Value, json};

use super::REQUIRED;
use crate::policy::RuleId;
use crate::policy::cluster::{ClusterSnapshot, NodeGpus, RuntimeClassInfo};
use crate::policy::rules::compute_affinity::{MAJOR_LABEL, MINOR_LABEL};
use crate::policy::testing::{apply, evaluate_in_cluster, evaluate_update_in, messages_of};
use crate::policy::{ClusterFacts, Evaluation};
use crate::settings::Settings;

const CUDA_12: &str = "nvcr.io/nvidia/cuda:12.6.3-base-ubuntu24.04";
const CUDA_13: &str = "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04";

/// A pod as its author wrote it: a GPU container with the author's zone
/// affinity, a sidecar whose author asked for every card.
fn authored(image: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "ml", "uid": "uid-1"},
        "spec": {
            "containers": [
                {"name": "train", "image": image,
                 "resources": {"limits": {"nvidia.com/gpu": 1}}},
                {"name": "sidecar", "image": "busybox",
                 "env": [{"name": "A", "value": "1"},
                         {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                         {"name": "B", "value": "2"}]},
            ],
            "affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
        },
    })
}

/// A cluster with the `nvidia` RuntimeClass and one GPU node of `cc`.
fn cluster(cc: (u32, u32)) -> ClusterSnapshot {
    ClusterSnapshot {
        runtime_classes: [("nvidia".to_owned(), RuntimeClassInfo::default())].into(),
        nodes: [(
            "gpu-node".to_owned(),
            NodeGpus::of(&[("nvidia.com/gpu", 4)], Some(cc)).with_driver_labels(),
        )]
        .into(),
        ..ClusterSnapshot::default()
    }
}

/// The pod as the webhook stored it at creation.
fn created(pod: &Value, cluster: &ClusterSnapshot) -> Value {
    let evaluation = evaluate_in_cluster(pod, cluster);
    assert!(!evaluation.patch.is_empty(), "the pod is mutated at creation");
    apply(pod, &evaluation.patch)
}

fn update(new: &Value, old: &Value, cluster: &dyn ClusterFacts) -> Evaluation {
    evaluate_update_in(new, old, &Settings::default(), Some(cluster))
}

/// What a second `kubectl apply` of the author's file sends: the stored
/// pod with the author's values of the fields the webhook changed.
fn reapplied(stored: &Value, author: &Value) -> Value {
    let mut new = stored.clone();
    new["spec"]["affinity"] = author["spec"]["affinity"].clone();
    let env = new["spec"]["containers"][1]["env"]
        .as_array_mut()
        .unwrap_or_else(|| panic!("the sidecar has env: {stored}"));
    let last = env.len() - 1;
    env[last] = json!({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"});
    new
}

#[test]
fn a_reapply_is_made_the_stored_pod_again() {
    let cluster = cluster((8, 0));
    let author = authored(CUDA_12);
    let stored = created(&author, &cluster);
    assert_eq!(stored["spec"]["runtimeClassName"], "nvidia");
    let new = reapplied(&stored, &author);
    assert_ne!(new, stored);
    let evaluation = update(&new, &stored, &cluster);
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);
    assert_eq!(apply(&new, &evaluation.patch), stored);
    let rules: Vec<RuleId> = evaluation.changed_rules().iter().collect();
    assert_eq!(rules, [RuleId::VisibleDevices, RuleId::ComputeAffinity]);
    // The same file again, or nothing changed: nothing to do.
    assert!(update(&stored, &stored, &cluster).patch.is_empty());
}

#[test]
fn a_reapply_that_drops_the_runtime_class_gets_it_back() {
    let cluster = cluster((8, 0));
    let stored = created(&authored(CUDA_12), &cluster);
    let mut new = stored.clone();
    new["spec"].as_object_mut().map(|spec| spec.remove("runtimeClassName"));
    let evaluation = update(&new, &stored, &cluster);
    assert_eq!(apply(&new, &evaluation.patch), stored);
}

/// A pod the webhook never mutated (created before its namespace opted
/// in) gets nothing on update: any change to its spec would be refused.
#[test]
fn a_pod_created_before_gpu_policy_gets_nothing_new() {
    let cluster = cluster((8, 0));
    let old = authored(CUDA_12);
    let mut new = old.clone();
    new["spec"]["containers"][0]["image"] = json!("nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04");
    let evaluation = update(&new, &old, &cluster);
    assert!(evaluation.patch.is_empty(), "{:?}", evaluation.patch);
}

/// The author changed their own affinity too: not the webhook's to undo
/// (the API server refuses the change of a pod that is not gated).
#[test]
fn an_authors_own_affinity_change_is_not_undone() {
    let cluster = cluster((8, 0));
    let author = authored(CUDA_12);
    let stored = created(&author, &cluster);
    let mut new = reapplied(&stored, &author);
    new["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"][0]["matchExpressions"]
        [0]["values"] = json!(["b"]);
    let evaluation = update(&new, &stored, &cluster);
    assert!(
        !evaluation.changed_rules().contains(RuleId::ComputeAffinity),
        "{:?}",
        evaluation.changes
    );
}

fn bound(pod: &Value, node: &str) -> Value {
    let mut pod = pod.clone();
    pod["spec"]["nodeName"] = json!(node);
    pod
}

fn with_image(pod: &Value, image: &str) -> Value {
    let mut pod = pod.clone();
    pod["spec"]["containers"][0]["image"] = json!(image);
    pod
}

/// `kubectl set image` on a bound pod: CUDA 13 needs compute capability
/// 7.5, which a 6.0 node does not have.
#[rstest]
#[case::below((6, 0), true)]
#[case::at_the_floor((7, 5), false)]
#[case::above((8, 0), false)]
fn an_image_changed_in_place_is_held_to_the_bound_nodes_gpus(
    #[case] node: (u32, u32),
    #[case] denied: bool,
) {
    // Created for a CUDA 12 image on a cluster whose nodes all have `node`.
    let cluster = cluster(node);
    let stored = bound(&created(&authored(CUDA_12), &cluster), "gpu-node");
    let evaluation = update(&with_image(&stored, CUDA_13), &stored, &cluster);
    let messages = messages_of(&evaluation, RuleId::ComputeAffinity);
    if denied {
        assert_eq!(messages.len(), 1, "{messages:?}");
        for needle in ["\"train\"", CUDA_13, "7.5", "node gpu-node", "6.0"] {
            assert!(messages[0].contains(needle), "{needle}: {}", messages[0]);
        }
    } else {
        assert!(messages.is_empty(), "{messages:?}");
    }
}

/// An unbound pod carries the affinity written for its old image (>= 5.0):
/// it may land on the 6.0 node, where the new image cannot run; on a fleet
/// of 8.0 nodes alone it can.
#[test]
fn an_image_changed_in_place_is_held_to_the_nodes_the_unbound_pods_affinity_admits() {
    let mut cluster = cluster((8, 0));
    cluster.nodes.insert(
        "old-node".to_owned(),
        NodeGpus::of(&[("nvidia.com/gpu", 4)], Some((6, 0))).with_driver_labels(),
    );
    let stored = created(&authored(CUDA_12), &cluster);
    let evaluation = update(&with_image(&stored, CUDA_13), &stored, &cluster);
    let messages = messages_of(&evaluation, RuleId::ComputeAffinity);
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0].contains("node affinity admits has 6.0"), "{}", messages[0]);
    let new_fleet = self::cluster((8, 0));
    let stored = created(&authored(CUDA_12), &new_fleet);
    let evaluation = update(&with_image(&stored, CUDA_13), &stored, &new_fleet);
    assert!(messages_of(&evaluation, RuleId::ComputeAffinity).is_empty());
    // A CUDA 12 image the terms admit passes.
    let same_floor = with_image(&stored, "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04");
    assert!(
        messages_of(&update(&same_floor, &stored, &cluster), RuleId::ComputeAffinity).is_empty()
    );
}

/// With no GPU node carrying GFD's labels the floor was not written at
/// creation, and is not asked of an image changed later.
#[test]
fn nothing_is_concluded_where_no_gpu_node_has_labels() {
    let mut cluster = cluster((8, 0));
    for node in cluster.nodes.values_mut() {
        node.compute_capability = None;
    }
    let stored = created(&authored(CUDA_12), &cluster);
    let evaluation = update(&with_image(&stored, CUDA_13), &stored, &cluster);
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);
    let bound = bound(&stored, "gpu-node");
    let evaluation = update(&with_image(&bound, CUDA_13), &bound, &cluster);
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);
}

#[rstest]
#[case::gt(json!([{"key": MAJOR_LABEL, "operator": "Gt", "values": ["6"]}]), Some((7, 0)))]
#[case::in_and_minor(json!([
    {"key": MAJOR_LABEL, "operator": "In", "values": ["7"]},
    {"key": MINOR_LABEL, "operator": "Gt", "values": ["4"]}]), Some((7, 5)))]
#[case::open(json!([{"key": "zone", "operator": "In", "values": ["a"]}]), None)]
#[case::huge(json!([{"key": MAJOR_LABEL, "operator": "Gt", "values": ["4294967295"]}]), None)]
fn what_a_term_admits(#[case] expressions: Value, #[case] floor: Option<(u32, u32)>) {
    let term = json!({"matchExpressions": expressions});
    let term = crate::document::Document::from_value(&term);
    assert_eq!(
        super::term_floor(term.root()),
        floor.map(|(major, minor)| crate::cuda::ComputeCapability::new(major, minor))
    );
}
