//! R4's table tests.

use super::*;
use crate::cuda::ImageNeeds;
use crate::policy::RuleId;
use crate::policy::cluster::{ClusterSnapshot, NodeGpus};
use crate::policy::testing::{apply, evaluate_on_nodes, evaluate_pod, evaluate_pod_in};
use crate::settings::{MIN_COMPUTE_CAPABILITY_ANNOTATION, Settings};
use gpu_policy_test_support::pods::gpu_pod;
use rstest::rstest;
use serde_json::json;

const ID: RuleId = RuleId::ComputeAffinity;

pub(super) fn terms(pod: &Value) -> Value {
    pod["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"].clone()
}

pub(super) fn major_gt(value: &str) -> Value {
    json!({"key": MAJOR_LABEL, "operator": "Gt", "values": [value]})
}

pub(super) fn major_in(value: &str) -> Value {
    json!({"key": MAJOR_LABEL, "operator": "In", "values": [value]})
}

pub(super) fn minor_gt(value: &str) -> Value {
    json!({"key": MINOR_LABEL, "operator": "Gt", "values": [value]})
}

fn patched(pod: &Value) -> Value {
    apply(pod, &evaluate_pod(pod).patch)
}

#[rstest]
#[case(ComputeCapability::new(5, 0), vec![vec![major_gt("4")]])]
#[case(ComputeCapability::new(8, 0), vec![vec![major_gt("7")]])]
#[case(ComputeCapability::new(7, 5), vec![vec![major_gt("7")], vec![major_in("7"), minor_gt("4")]])]
#[case(ComputeCapability::new(8, 9), vec![vec![major_gt("8")], vec![major_in("8"), minor_gt("8")]])]
#[case(ComputeCapability::new(0, 0), vec![])]
#[case(ComputeCapability::new(0, 1), vec![vec![major_gt("0")], vec![major_in("0"), minor_gt("0")]])]
fn constraint_shapes(#[case] minimum: ComputeCapability, #[case] expected: Vec<Vec<Value>>) {
    assert_eq!(alternatives(minimum), expected);
}

#[test]
fn pod_without_affinity_gets_the_terms() {
    let pod = patched(&gpu_pod().image("nvidia/cuda:12.6.3-base-ubuntu24.04").json());
    assert_eq!(terms(&pod), json!([{"matchExpressions": [major_gt("4")]}]));
}

#[test]
fn two_alternatives_become_two_terms() {
    let pod = patched(&gpu_pod().image("nvidia/cuda:13.0.0-runtime-ubuntu24.04").json());
    assert_eq!(
        terms(&pod),
        json!([{"matchExpressions": [major_gt("7")]},
               {"matchExpressions": [major_in("7"), minor_gt("4")]}])
    );
}

#[test]
fn constraint_is_anded_into_every_existing_term() {
    let mut pod = gpu_pod().image("nvidia/cuda:13.0.0-runtime-ubuntu24.04").json();
    pod["spec"]["affinity"] = json!({
        "nodeAffinity": {
            REQUIRED: {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
            ]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}
            ],
        },
        "podAntiAffinity": {"futureField": true},
    });
    let zone = json!({"key": "zone", "operator": "In", "values": ["a"]});
    let fields = json!([{"key": "metadata.name", "operator": "In", "values": ["n1"]}]);
    let result = patched(&pod);
    assert_eq!(
        terms(&result),
        json!([
            {"matchExpressions": [zone, major_gt("7")]},
            {"matchExpressions": [zone, major_in("7"), minor_gt("4")]},
            {"matchFields": fields, "matchExpressions": [major_gt("7")]},
            {"matchFields": fields, "matchExpressions": [major_in("7"), minor_gt("4")]},
        ])
    );
    assert_eq!(
        result["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"],
        pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    );
    assert_eq!(result["spec"]["affinity"]["podAntiAffinity"], json!({"futureField": true}));
    // Re-evaluating the result adds nothing.
    assert!(evaluate_pod(&result).patch.is_empty());
}

#[test]
fn expressions_a_term_already_has_are_not_repeated() {
    let mut pod = gpu_pod().image("nvidia/cuda:13.0.0-runtime-ubuntu24.04").json();
    pod["spec"]["affinity"] = json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [
        {"matchExpressions": [major_in("7")]}]}}});
    assert_eq!(
        terms(&patched(&pod)),
        json!([{"matchExpressions": [major_in("7"), major_gt("7")]},
               {"matchExpressions": [major_in("7"), minor_gt("4")]}])
    );
}

#[rstest]
#[case(json!({"podAffinity": {}}))]
#[case(json!({"nodeAffinity": {}}))]
#[case(json!({"nodeAffinity": {REQUIRED: {}}}))]
#[case(json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": []}}}))]
#[case(json!({"nodeAffinity": null}))]
fn partial_affinity_is_completed(#[case] affinity: Value) {
    let mut pod = gpu_pod().image("nvidia/cuda:12.2.0-base").json();
    pod["spec"]["affinity"] = affinity;
    let result = patched(&pod);
    assert_eq!(terms(&result), json!([{"matchExpressions": [major_gt("4")]}]));
    assert!(evaluate_pod(&result).patch.is_empty());
}

#[test]
fn terms_already_constrained_are_kept() {
    let mut pod = gpu_pod().image("nvidia/cuda:12.2.0-base").json();
    pod["spec"]["affinity"] = json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [
        {"matchExpressions": [major_gt("4")]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
    ]}}});
    let result = patched(&pod);
    assert_eq!(
        terms(&result),
        json!([{"matchExpressions": [major_gt("4")]},
               {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}, major_gt("4")]}])
    );
}

#[rstest]
// the highest source wins
#[case("nvidia/cuda:12.2.0-base", &[], None, Some("require GPU compute capability >= 5.0 (image nvidia/cuda:12.2.0-base)"))]
#[case("nvidia/cuda:12.2.0-base", &[("gpu-policy.io/min-compute-capability", "8.0")], None,
       Some("require GPU compute capability >= 8.0 (namespace or cluster minimum)"))]
#[case("nvidia/cuda:12.2.0-base", &[], Some("8.6"), Some("require GPU compute capability >= 8.6 (pod annotation)"))]
#[case("nvidia/cuda:13.0.0-base", &[], Some("6.0"), Some("require GPU compute capability >= 7.5 (image nvidia/cuda:13.0.0-base)"))]
// no source: nothing injected
#[case("registry.example/app:1", &[], None, None)]
fn minimum_comes_from_the_highest_source(
    #[case] image: &str,
    #[case] namespace: &[(&str, &str)],
    #[case] pod_annotation: Option<&str>,
    #[case] summary: Option<&str>,
) {
    let mut pod = gpu_pod().image(image).json();
    if let Some(value) = pod_annotation {
        pod["metadata"] = json!({"annotations": {MIN_COMPUTE_CAPABILITY_ANNOTATION: value}});
    }
    let evaluation = evaluate_pod_in(&pod, namespace);
    let found = evaluation.changes.iter().find(|c| c.rule == ID).map(|c| c.summary.as_str());
    assert_eq!(found, summary);
}

#[rstest]
#[case("eight")]
#[case("4.0")]
fn looser_or_unreadable_pod_annotation_is_a_notice(#[case] value: &str) {
    let mut pod = gpu_pod().image("nvidia/cuda:12.2.0-base").json();
    pod["metadata"] = json!({"annotations": {MIN_COMPUTE_CAPABILITY_ANNOTATION: value}});
    let evaluation = evaluate_pod_in(&pod, &[(MIN_COMPUTE_CAPABILITY_ANNOTATION, "5.0")]);
    assert_eq!(evaluation.notices.len(), 1, "{:?}", evaluation.notices);
    assert!(evaluation.notices[0].message.contains("ignored"));
    let found = evaluation.changes.iter().find(|c| c.rule == ID).map(|c| c.summary.clone());
    assert_eq!(
        found.as_deref(),
        Some("require GPU compute capability >= 5.0 (namespace or cluster minimum)")
    );
}

#[test]
fn non_gpu_pods_and_non_gpu_images_do_not_count() {
    let cpu = json!({"spec": {"containers": [{"name": "c", "image": "nvidia/cuda:13.0.0-base"}]}});
    assert!(evaluate_pod(&cpu).changes.iter().all(|c| c.rule != ID));
    let sidecar_image = json!({"spec": {"containers": [
        {"name": "gpu", "image": "registry.example/app", "resources": {"limits": {"nvidia.com/gpu": 1}}},
        {"name": "side", "image": "nvidia/cuda:13.0.0-base"}]}});
    assert!(evaluate_pod(&sidecar_image).changes.iter().all(|c| c.rule != ID));
}

#[rstest]
#[case(json!("fast"))]
#[case(json!({"nodeAffinity": []}))]
#[case(json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": {}}}}))]
#[case(json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": 1}]}}}))]
fn malformed_affinity_is_a_violation(#[case] affinity: Value) {
    let mut pod = gpu_pod().image("nvidia/cuda:12.2.0-base").json();
    pod["spec"]["affinity"] = affinity;
    let evaluation = evaluate_pod(&pod);
    assert!(evaluation.violations.iter().any(|v| v.rule == ID && v.message.contains("malformed")));
}

#[rstest]
#[case(&[(6, 1), (7, 0)], true)]
#[case(&[(6, 1), (8, 0)], false)]
#[case(&[], false)]
fn warns_when_no_node_meets_the_minimum(#[case] nodes: &[(u32, u32)], #[case] warned: bool) {
    let cluster = ClusterSnapshot {
        nodes: nodes
            .iter()
            .enumerate()
            .map(|(i, (major, minor))| {
                (
                    format!("node-{i}"),
                    NodeGpus {
                        allocatable: [("nvidia.com/gpu".to_owned(), 1)].into_iter().collect(),
                        compute_capability: Some(ComputeCapability::new(*major, *minor)),
                        driver_labels: true,
                        product: None,
                    },
                )
            })
            .collect(),
        ..ClusterSnapshot::default()
    };
    let pod = gpu_pod().image("nvidia/cuda:13.0.0-runtime-ubuntu24.04").json();
    let evaluation = crate::policy::testing::evaluate_in_cluster(&pod, &cluster);
    let notice = evaluation.notices.iter().find(|n| n.message.contains("no node has"));
    assert_eq!(notice.is_some(), warned, "{:?}", evaluation.notices);
    if warned {
        assert_eq!(
            notice.map(|n| n.message.as_str()),
            Some(
                "gpu-policy: compute-affinity: no node has compute capability >= 7.5 (nodes have 6.1, 7.0); the pod will stay Pending"
            )
        );
    }
    // The constraint is injected either way.
    assert!(evaluation.changes.iter().any(|c| c.rule == ID));
}

fn driver_gt(key: &str, value: &str) -> Value {
    json!({"key": key, "operator": "Gt", "values": [value]})
}

#[test]
fn ngc_images_get_the_floor_of_their_cuda_version() {
    let evaluation = evaluate_pod(&gpu_pod().image("nvcr.io/nvidia/pytorch:25.12-py3").json());
    let summaries: Vec<&str> =
        evaluation.changes.iter().filter(|c| c.rule == ID).map(|c| c.summary.as_str()).collect();
    assert_eq!(
        summaries,
        vec!["require GPU compute capability >= 7.5 (image nvcr.io/nvidia/pytorch:25.12-py3)"]
    );
    let pod = patched(&gpu_pod().image("nvcr.io/nvidia/pytorch:24.05-py3").json());
    assert_eq!(terms(&pod), json!([{"matchExpressions": [major_gt("4")]}]));
}

/// The CUDA 13.0 vLLM image: compute 7.5 (two alternatives) times its
/// driver floor (CUDA 13.0, or a forward-compatible branch, on both label
/// generations: four alternatives), ANDed into each existing term.
#[test]
fn the_driver_floor_multiplies_into_every_term() {
    use crate::cuda::requirement::{
        DRIVER_MAJOR_LABEL, OLD_DRIVER_MAJOR_LABEL, OLD_RUNTIME_MAJOR_LABEL, RUNTIME_MAJOR_LABEL,
    };
    let mut pod = gpu_pod().image("vllm/vllm-openai:v0.11.0-cu130").json();
    let zone = json!({"key": "zone", "operator": "In", "values": ["a"]});
    pod["spec"]["affinity"] = json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [
        {"matchExpressions": [zone.clone()]}]}}});
    let evaluation = evaluate_pod(&pod);
    assert_eq!(
        summaries(&evaluation),
        vec![
            "require GPU compute capability >= 7.5 (image vllm/vllm-openai:v0.11.0-cu130)",
            "require a driver for CUDA 13.0 or branch 535, 550, 565, 570, 575 (same image)",
        ]
    );
    let result = apply(&pod, &evaluation.patch);
    let branches = ["535", "550", "565", "570", "575"];
    let drivers = [
        driver_gt(RUNTIME_MAJOR_LABEL, "12"),
        json!({"key": DRIVER_MAJOR_LABEL, "operator": "In", "values": branches}),
        driver_gt(OLD_RUNTIME_MAJOR_LABEL, "12"),
        json!({"key": OLD_DRIVER_MAJOR_LABEL, "operator": "In", "values": branches}),
    ];
    let mut expected = Vec::new();
    for compute in [vec![major_gt("7")], vec![major_in("7"), minor_gt("4")]] {
        for driver in &drivers {
            let mut expressions = vec![zone.clone()];
            expressions.extend(compute.clone());
            expressions.push(driver.clone());
            expected.push(json!({"matchExpressions": expressions}));
        }
    }
    assert_eq!(terms(&result), Value::Array(expected));
    // Re-evaluating the result adds nothing.
    assert!(evaluate_pod(&result).patch.is_empty());
}

#[rstest]
// The container turns the toolkit's check off: no driver floor.
#[case(json!([{"name": "NVIDIA_DISABLE_REQUIRE", "value": "true"}]), &[])]
// The container's own requirement replaces the image's.
#[case(json!([{"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=12.9"}]), &["require a driver for CUDA 12.9 (same image)"])]
// Unreadable, or a value from a reference: the image's stands.
#[case(json!([{"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda=>1"}]), &["require a driver for CUDA 12.8 or branch 470, 535, 550, 560, 565 (same image)"])]
#[case(json!([{"name": "NVIDIA_REQUIRE_CUDA", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]), &["require a driver for CUDA 12.8 or branch 470, 535, 550, 560, 565 (same image)"])]
fn the_container_env_overrides_the_image(#[case] env: Value, #[case] driver: &[&str]) {
    let mut pod = gpu_pod().image("vllm/vllm-openai:v0.10.2-cu128").json();
    pod["spec"]["containers"][0]["env"] = env;
    let mut expected =
        vec!["require GPU compute capability >= 5.0 (image vllm/vllm-openai:v0.10.2-cu128)"];
    expected.extend(driver);
    assert_eq!(summaries(&evaluate_pod(&pod)), expected);
}

fn summaries(evaluation: &crate::policy::Evaluation) -> Vec<&str> {
    evaluation.changes.iter().filter(|c| c.rule == ID).map(|c| c.summary.as_str()).collect()
}

struct Resolved;

impl crate::policy::ImageFacts for Resolved {
    fn image_needs(&self, image: &str) -> Option<ImageNeeds> {
        (image == "registry.example/in-house:1").then(|| {
            let env = ["CUDA_VERSION=13.1.0", "NVIDIA_REQUIRE_CUDA=cuda>=13.1"];
            ImageNeeds::from_image_config(env, []).unwrap_or_default()
        })
    }
}

#[test]
fn mode_off_ignores_images_but_not_the_annotation() {
    let settings = Settings::from_yaml("imageResolution: {mode: 'off'}", "c.yaml");
    let settings = settings.unwrap_or_default();
    let mut pod = gpu_pod().image("vllm/vllm-openai:v0.11.0-cu130").json();
    assert!(
        crate::policy::testing::evaluate_with(&pod, &settings).changes.iter().all(|c| c.rule != ID)
    );
    pod["metadata"] = json!({"annotations": {MIN_COMPUTE_CAPABILITY_ANNOTATION: "8.0"}});
    let evaluation = crate::policy::testing::evaluate_with(&pod, &settings);
    assert_eq!(
        summaries(&evaluation),
        vec!["require GPU compute capability >= 8.0 (pod annotation)"]
    );
}

/// An in-house image built FROM an NGC image: the registry answer
/// applies; an image it does not know falls back to the table.
#[test]
fn resolved_images_come_before_the_table() {
    use crate::policy::testing::evaluate_with_images;
    let pod = json!({"spec": {"containers": [
        {"name": "a", "image": "registry.example/in-house:1", "resources": {"limits": {"nvidia.com/gpu": 1}}},
        {"name": "b", "image": "nvidia/cuda:12.6.3-base-ubuntu24.04", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
    let evaluation = evaluate_with_images(&pod, &Resolved);
    assert_eq!(
        summaries(&evaluation),
        vec![
            "require GPU compute capability >= 7.5 (image registry.example/in-house:1)",
            "require a driver for CUDA 13.1 (same image)",
        ]
    );
    assert!(evaluate_pod(&pod).changes.iter().any(|c| c.summary
        == "require GPU compute capability >= 5.0 (image nvidia/cuda:12.6.3-base-ubuntu24.04)"));
}

/// A lookup that gave no answer: the table applies to that image, and a
/// notice says so once.
struct Unanswered;

impl crate::policy::ImageFacts for Unanswered {
    fn image_needs(&self, image: &str) -> Option<ImageNeeds> {
        Resolved.image_needs(image)
    }

    fn fallback(&self, image: &str) -> Option<&str> {
        (image != "registry.example/in-house:1").then_some("no registry answer in 1s")
    }
}

#[test]
fn an_unanswered_lookup_falls_back_to_the_table_with_a_notice() {
    use crate::policy::testing::evaluate_with_images;
    let image = "nvidia/cuda:12.6.3-base-ubuntu24.04";
    let pod = json!({"spec": {"containers": [
        {"name": "a", "image": image, "resources": {"limits": {"nvidia.com/gpu": 1}}},
        {"name": "b", "image": image, "resources": {"limits": {"nvidia.com/gpu": 1}}},
        {"name": "c", "image": "registry.example/in-house:1", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
    let evaluation = evaluate_with_images(&pod, &Unanswered);
    let fallbacks = evaluation.notice_bodies(NoticeKind::ImageTableFallback);
    assert_eq!(
        fallbacks,
        vec![format!("compute-affinity: table used for {image}: no registry answer in 1s")]
    );
    assert_eq!(
        summaries(&evaluation)[0],
        "require GPU compute capability >= 7.5 (image registry.example/in-house:1)"
    );
    // Without registry answers, no notice.
    assert!(evaluate_pod(&pod).notices.is_empty());
}

/// A malformed affinity denies the pod only when the table or a minimum
/// asks for a constraint: never because of what a registry said.
#[test]
fn a_registry_answer_never_denies() {
    use crate::policy::testing::evaluate_with_images;
    let malformed = json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": "zone-a"}}});
    let mut pod = gpu_pod().image("registry.example/in-house:1").json();
    pod["spec"]["affinity"] = malformed.clone();
    let evaluation = evaluate_with_images(&pod, &Resolved);
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);
    assert!(evaluation.notices.iter().any(
        |n| n.kind == NoticeKind::ImageTableFallback && n.message.body().contains("malformed")
    ));
    let mut table_pod = gpu_pod().image("nvidia/cuda:13.0.2-base-ubuntu24.04").json();
    table_pod["spec"]["affinity"] = malformed;
    assert_eq!(evaluate_with_images(&table_pod, &Resolved).violations.len(), 1);
}

/// The terms, each multiplied by the constraint's alternatives, are bounded
/// in bytes: terms that would pass [`MAX_WRITTEN_TERMS_BYTES`] deny the pod
/// (it could never be stored) rather than make a patch that large; a pod
/// just below is constrained.
#[rstest]
#[case(10, true)]
#[case(-10, false)]
fn terms_multiplied_past_what_a_pod_holds_are_a_violation(
    #[case] beyond: isize,
    #[case] denied: bool,
) {
    // CUDA 13: two alternatives, so each term is written twice.
    let term = json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]});
    let fit = MAX_WRITTEN_TERMS_BYTES / (2 * json_len(&term));
    let count = fit.saturating_add_signed(beyond);
    let mut pod = gpu_pod().image("nvidia/cuda:13.0.0-runtime-ubuntu24.04").json();
    pod["spec"]["affinity"] = json!({"nodeAffinity": {REQUIRED: {
        "nodeSelectorTerms": vec![term; count]}}});
    let evaluation = evaluate_pod(&pod);
    let violations: Vec<String> = evaluation
        .violations
        .iter()
        .filter(|v| v.rule == ID)
        .map(|v| v.message.to_string())
        .collect();
    if denied {
        assert_eq!(
            violations,
            vec![format!(
                "gpu-policy: the {count} required node selector terms, each multiplied by the 2 \
                 alternatives of the compute capability >= 7.5 constraint, would be more than a \
                 pod can hold; merge the terms"
            )]
        );
        assert!(!evaluation.changes.iter().any(|c| c.rule == ID));
    } else {
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(terms(&patched(&pod)).as_array().map(Vec::len), Some(2 * count));
    }
}

/// A fleet of nodes, named by their place.
fn fleet(nodes: Vec<NodeGpus>) -> ClusterSnapshot {
    ClusterSnapshot {
        nodes: nodes.into_iter().enumerate().map(|(i, node)| (format!("node-{i}"), node)).collect(),
        ..ClusterSnapshot::default()
    }
}

const GPUS: &[(&str, u64)] = &[("nvidia.com/gpu", 4)];

/// A GPU node as GFD labels it, or as it is without GFD.
fn gfd() -> NodeGpus {
    NodeGpus::of(GPUS, Some((8, 0))).with_driver_labels()
}

fn bare() -> NodeGpus {
    NodeGpus::of(GPUS, None)
}

/// The CUDA 13.0 vLLM image: a compute floor (7.5) and a driver floor.
const VLLM: &str = "vllm/vllm-openai:v0.11.0-cu130";
const VLLM_COMPUTE: &str =
    "require GPU compute capability >= 7.5 (image vllm/vllm-openai:v0.11.0-cu130)";
const VLLM_DRIVER: &str =
    "require a driver for CUDA 13.0 or branch 535, 550, 565, 570, 575 (same image)";
const VLLM_DRIVER_ALONE: &str = "require a driver for CUDA 13.0 or branch 535, 550, 565, 570, 575 \
     (image vllm/vllm-openai:v0.11.0-cu130)";

fn unenforced(evaluation: &crate::policy::Evaluation) -> Vec<&str> {
    evaluation.notice_bodies(NoticeKind::UnenforcedFloor)
}

/// Which parts of the affinity each fleet gets. A part is left out only
/// when nodes offer GPUs and none of them carries its labels: no GPU node
/// known (none yet, scaled to zero) concludes nothing.
#[rstest]
#[case::gfd_everywhere(vec![gfd(), gfd()], &[VLLM_COMPUTE, VLLM_DRIVER])]
#[case::gfd_nowhere(vec![bare(), bare()], &[])]
#[case::mixed(vec![bare(), gfd()], &[VLLM_COMPUTE, VLLM_DRIVER])]
#[case::no_nodes(vec![], &[VLLM_COMPUTE, VLLM_DRIVER])]
#[case::no_gpu_nodes(vec![NodeGpus::of(&[], None)], &[VLLM_COMPUTE, VLLM_DRIVER])]
#[case::none_allocatable(vec![NodeGpus::of(&[("nvidia.com/gpu", 0)], None)], &[VLLM_COMPUTE, VLLM_DRIVER])]
#[case::labels_off_the_gpu_nodes(vec![bare(), NodeGpus::of(&[], Some((8, 0))).with_driver_labels()], &[])]
#[case::compute_labels_only(vec![NodeGpus::of(GPUS, Some((8, 0)))], &[VLLM_COMPUTE])]
#[case::driver_labels_only(vec![bare().with_driver_labels()], &[VLLM_DRIVER_ALONE])]
#[case::mig_nodes(vec![NodeGpus::of(&[("nvidia.com/mig-1g.5gb", 7)], None)], &[])]
fn parts_follow_the_labels_of_the_gpu_nodes(
    #[case] nodes: Vec<NodeGpus>,
    #[case] expected: &[&str],
) {
    let cluster = fleet(nodes);
    let pod = gpu_pod().image(VLLM).json();
    let evaluation = evaluate_on_nodes(&pod, &cluster, &Settings::default());
    assert_eq!(summaries(&evaluation), expected);
    // The webhook's path (the cluster answers) says the same.
    let in_cluster = crate::policy::testing::evaluate_in_cluster(&pod, &cluster);
    assert_eq!(summaries(&in_cluster), expected);
    assert_eq!(unenforced(&in_cluster), unenforced(&evaluation));
    let result = apply(&pod, &evaluation.patch);
    let written = terms(&result);
    let keys: Vec<&str> = written
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|term| term["matchExpressions"].as_array().into_iter().flatten())
        .filter_map(|e| e["key"].as_str())
        .collect();
    let compute = expected.contains(&VLLM_COMPUTE);
    let driver = expected.iter().any(|s| s.starts_with("require a driver"));
    assert_eq!(keys.contains(&MAJOR_LABEL), compute, "{keys:?}");
    assert_eq!(keys.iter().any(|k| k.starts_with("nvidia.com/cuda.")), driver, "{keys:?}");
    if expected.is_empty() {
        assert!(result["spec"]["affinity"].is_null(), "{result}");
    }
    // One warning for what was left out, none when nothing was.
    let left_out = usize::from(!compute) + usize::from(!driver);
    assert_eq!(
        unenforced(&evaluation).len(),
        usize::from(left_out > 0),
        "{:?}",
        evaluation.notices
    );
    // Re-evaluating the result adds nothing.
    assert!(evaluate_on_nodes(&result, &cluster, &Settings::default()).patch.is_empty());
}

#[rstest]
#[case(vec![bare()], "compute capability >= 7.5 and a driver for CUDA 13.0 or branch 535, 550, 565, 570, 575 are not required; deploy GPU Feature Discovery, or set nvidia.com/gpu.compute.* and nvidia.com/cuda.* on the GPU nodes")]
#[case(vec![NodeGpus::of(GPUS, Some((8, 0)))], "a driver for CUDA 13.0 or branch 535, 550, 565, 570, 575 is not required; deploy GPU Feature Discovery, or set nvidia.com/cuda.* on the GPU nodes")]
#[case(vec![bare().with_driver_labels()], "compute capability >= 7.5 is not required; deploy GPU Feature Discovery, or set nvidia.com/gpu.compute.* on the GPU nodes")]
fn the_warning_names_the_floors_left_out_and_the_remedy(
    #[case] nodes: Vec<NodeGpus>,
    #[case] rest: &str,
) {
    let evaluation =
        evaluate_on_nodes(&gpu_pod().image(VLLM).json(), &fleet(nodes), &Settings::default());
    assert_eq!(
        unenforced(&evaluation),
        vec![format!(
            "compute-affinity: no GPU node carries GPU Feature Discovery's labels, so {rest}"
        )]
    );
}

/// Many GPU containers, each with its floors: one warning for the pod.
#[test]
fn one_warning_per_pod() {
    let pod = json!({"spec": {"containers": [
        {"name": "a", "image": VLLM, "resources": {"limits": {"nvidia.com/gpu": 1}}},
        {"name": "b", "image": "nvidia/cuda:12.6.3-base-ubuntu24.04", "resources": {"limits": {"nvidia.com/gpu": 1}}},
        {"name": "c", "image": VLLM, "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
    let evaluation = evaluate_on_nodes(&pod, &fleet(vec![bare()]), &Settings::default());
    assert_eq!(unenforced(&evaluation).len(), 1, "{:?}", evaluation.notices);
    assert!(evaluation.patch.iter().all(|op| !op.path().to_string().contains("affinity")));
}

/// The author's own required terms are left as they are.
#[test]
fn the_authors_terms_are_kept_when_nothing_is_added() {
    let mut pod = gpu_pod().image(VLLM).json();
    let zone = json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]});
    pod["spec"]["affinity"] = json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [zone]}}});
    let evaluation = evaluate_on_nodes(&pod, &fleet(vec![bare()]), &Settings::default());
    assert_eq!(terms(&apply(&pod, &evaluation.patch)), json!([zone]));
}

/// A pod constrained while the nodes were labelled keeps its constraint
/// when evaluated again on an unlabelled fleet: nothing is removed.
#[test]
fn a_constrained_pod_is_left_as_it_is() {
    let pod = gpu_pod().image(VLLM).json();
    let labelled = evaluate_on_nodes(&pod, &fleet(vec![gfd()]), &Settings::default());
    let constrained = apply(&pod, &labelled.patch);
    let again = evaluate_on_nodes(&constrained, &fleet(vec![bare()]), &Settings::default());
    assert!(again.patch.is_empty(), "{:?}", again.patch);
}

/// `computeAffinity.whenNodesUnlabelled: require`: the constraint as on a
/// labelled fleet, and a warning that no node meets it.
#[test]
fn require_writes_the_floors_and_says_no_node_meets_them() {
    let settings = Settings::from_yaml("computeAffinity: {whenNodesUnlabelled: require}", "c.yaml")
        .unwrap_or_else(|e| panic!("{e}"));
    let pod = gpu_pod().image(VLLM).json();
    let evaluation = evaluate_on_nodes(&pod, &fleet(vec![bare()]), &settings);
    let labelled = evaluate_on_nodes(&pod, &fleet(vec![gfd()]), &settings);
    assert_eq!(evaluation.patch, labelled.patch);
    assert_eq!(summaries(&evaluation), vec![VLLM_COMPUTE, VLLM_DRIVER]);
    assert!(unenforced(&evaluation).is_empty());
    assert_eq!(
        evaluation.notice_bodies(NoticeKind::UnmetComputeCapability),
        vec![
            "compute-affinity: no GPU node carries GPU Feature Discovery's labels, so no node \
             meets compute capability >= 7.5 and a driver for CUDA 13.0 or branch 535, 550, \
             565, 570, 575 (computeAffinity.whenNodesUnlabelled: require) and the pod will stay \
             Pending; deploy GPU Feature Discovery, or set nvidia.com/gpu.compute.* and \
             nvidia.com/cuda.* on the GPU nodes"
        ]
    );
}

/// A minimum of 0.0 and no driver floor ask nothing of the labels: no
/// warning.
#[test]
fn nothing_asked_nothing_said() {
    let evaluation = evaluate_on_nodes(
        &gpu_pod().image("registry.example/in-house:1").json(),
        &fleet(vec![bare()]),
        &Settings::default(),
    );
    assert!(evaluation.notices.is_empty(), "{:?}", evaluation.notices);
    assert!(evaluation.changes.iter().all(|c| c.rule != ID));
}
