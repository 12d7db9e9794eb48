//! The GPU products of R4: the requirement written (`product_affinity.rs`) and the pods pinned to
//! products the namespace does not allow (`products.rs`).

use rstest::rstest;
use serde_json::{Value, json};

use super::super::REQUIRED;
use super::super::tests::{major_gt, major_in, minor_gt, terms};
use crate::policy::cluster::{ClusterSnapshot, NodeFacts, NodeGpus};
use crate::policy::message::NoticeKind;
use crate::policy::testing::{
    apply, claim_template, evaluate_on_nodes_in, evaluate_update, evaluate_update_in,
    evaluate_with_claims, messages_of,
};
use crate::policy::{Evaluation, RuleId};
use crate::settings::{GPU_PRODUCTS_ANNOTATION, PRODUCT_LABEL, Settings};
use gpu_policy_test_support::pods::gpu_pod;

const ID: RuleId = RuleId::ComputeAffinity;
const H100: &str = "NVIDIA-H100-80GB-HBM3";
const H100_NVL: &str = "NVIDIA-H100-NVL";
const A10: &str = "NVIDIA-A10";
const L4: &str = "NVIDIA-L4";
const SOURCE: &str = "namespace annotation gpu-policy.io/gpu-products";
/// An image with no compute or driver floor: the products alone are written.
const NO_FLOOR: &str = "registry.example/in-house:1";
/// CUDA 13: a compute floor of two alternatives, no driver floor.
const CUDA_13: &str = "nvidia/cuda:13.0.0-runtime-ubuntu24.04";

/// A GPU node labelled by GFD, of `product`.
fn node(product: &str) -> NodeGpus {
    NodeGpus::of(&[("nvidia.com/gpu", 4)], Some((9, 0))).with_driver_labels().with_product(product)
}

/// A GPU node labelled by GFD, without the product label.
fn unlabelled() -> NodeGpus {
    NodeGpus::of(&[("nvidia.com/gpu", 4)], Some((9, 0))).with_driver_labels()
}

fn fleet(nodes: Vec<NodeGpus>) -> ClusterSnapshot {
    ClusterSnapshot {
        nodes: nodes.into_iter().enumerate().map(|(i, node)| (format!("node-{i}"), node)).collect(),
        ..ClusterSnapshot::default()
    }
}

fn of(products: &[&str]) -> Vec<NodeGpus> {
    products.iter().map(|product| node(product)).collect()
}

/// The pod in a namespace annotated with `products`, on `nodes` (None: no node known).
fn evaluate(pod: &Value, nodes: Option<&ClusterSnapshot>, products: &str) -> Evaluation {
    evaluate_with(pod, nodes, &Settings::default(), products)
}

fn evaluate_with(
    pod: &Value,
    nodes: Option<&ClusterSnapshot>,
    settings: &Settings,
    products: &str,
) -> Evaluation {
    let annotations: &[(&str, &str)] =
        if products.is_empty() { &[] } else { &[(GPU_PRODUCTS_ANNOTATION, products)] };
    evaluate_on_nodes_in(pod, nodes.map(|n| n as &dyn NodeFacts), settings, annotations)
}

fn settings(yaml: &str) -> Settings {
    Settings::from_yaml(yaml, "config.yaml").unwrap_or_else(|e| panic!("{e}"))
}

fn product_in(values: &[&str]) -> Value {
    json!({"key": PRODUCT_LABEL, "operator": "In", "values": values})
}

fn zone(zone: &str) -> Value {
    json!({"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]})
}

fn with_terms(mut pod: Value, terms: Value) -> Value {
    pod["spec"]["affinity"] = json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": terms}}});
    pod
}

fn summaries(evaluation: &Evaluation) -> Vec<&str> {
    evaluation.changes.iter().filter(|c| c.rule == ID).map(|c| c.summary.as_str()).collect()
}

fn violations(evaluation: &Evaluation) -> Vec<String> {
    messages_of(evaluation, ID)
}

/// What is written, by the namespace's list and what the nodes carry: the nodes' products the
/// list allows and its products without a glob, sorted; nothing where that is none.
#[rstest]
#[case::glob_expanded("NVIDIA-H100*", Some(of(&[A10, H100_NVL, H100])), Some(vec![H100, H100_NVL]))]
#[case::glob_and_literal("NVIDIA-H100*,NVIDIA-L4", Some(of(&[H100, A10])), Some(vec![H100, L4]))]
#[case::literals_without_nodes("NVIDIA-L4,NVIDIA-H100*", None, Some(vec![L4]))]
#[case::literal_on_unlabelled_nodes(H100, Some(vec![unlabelled()]), Some(vec![H100]))]
#[case::literal_no_node_carries(H100, Some(of(&[A10])), Some(vec![H100]))]
#[case::no_gpu_node_yet(H100, Some(vec![]), Some(vec![H100]))]
#[case::glob_without_nodes("NVIDIA-H100*", None, None)]
#[case::glob_on_unlabelled_nodes("NVIDIA-H100*", Some(vec![unlabelled()]), None)]
#[case::glob_matching_no_node("NVIDIA-H100*", Some(of(&[A10, L4])), None)]
fn the_products_written(
    #[case] products: &str,
    #[case] nodes: Option<Vec<NodeGpus>>,
    #[case] expected: Option<Vec<&str>>,
) {
    let cluster = nodes.map(fleet);
    let pod = gpu_pod().image(NO_FLOOR).json();
    let evaluation = evaluate(&pod, cluster.as_ref(), products);
    let result = apply(&pod, &evaluation.patch);
    match expected {
        Some(values) => {
            assert_eq!(terms(&result), json!([{"matchExpressions": [product_in(&values)]}]));
            assert_eq!(
                summaries(&evaluation),
                vec![format!("require GPU product in [{}] ({SOURCE})", values.join(", "))]
            );
            // Evaluated again (reinvocation, or the validating webhook): nothing more.
            let again = evaluate(&result, cluster.as_ref(), products);
            assert!(again.patch.is_empty(), "{:?}", again.patch);
            assert!(violations(&again).is_empty(), "{:?}", again.violations);
        }
        None => {
            assert!(result["spec"]["affinity"].is_null(), "{result}");
            assert!(summaries(&evaluation).is_empty());
        }
    }
}

/// Any product allowed: nothing written, nothing said.
#[test]
fn no_list_no_products() {
    let cluster = fleet(of(&[H100, A10]));
    let pod = gpu_pod().image(NO_FLOOR).json();
    let evaluation = evaluate(&pod, Some(&cluster), "");
    assert!(summaries(&evaluation).is_empty(), "{:?}", evaluation.changes);
    assert!(apply(&pod, &evaluation.patch)["spec"]["affinity"].is_null());
    assert!(evaluation.notices.is_empty(), "{:?}", evaluation.notices);
}

/// What the pod is told when the products cannot be written, or where it will wait.
#[rstest]
#[case::no_allowed_product_on_the_nodes(
    "NVIDIA-H100*", Some(of(&[L4, A10])), "",
    None,
    Some("gpu-policy: no GPU node carries a GPU product this namespace allows: it allows \
          NVIDIA-H100* (namespace annotation gpu-policy.io/gpu-products), the GPU nodes carry \
          NVIDIA-A10, NVIDIA-L4; allow one of the products the nodes carry, or add nodes of an \
          allowed product"))]
#[case::globs_without_nodes(
    "NVIDIA-H100*", None, "",
    Some((NoticeKind::UnenforcedFloor,
          "compute-affinity: no node is known to expand the GPU products NVIDIA-H100* \
           (namespace annotation gpu-policy.io/gpu-products) against, so no GPU product is \
           required; deploy GPU Feature Discovery on the GPU nodes, or name the products \
           without globs (gpu-policy check expands globs against --nodes or --node-products)")),
    None)]
#[case::globs_on_unlabelled_nodes(
    "NVIDIA-H100*", Some(vec![unlabelled()]), "",
    Some((NoticeKind::UnenforcedFloor,
          "compute-affinity: no GPU node carries GPU Feature Discovery's nvidia.com/gpu.product \
           to expand the GPU products NVIDIA-H100* (namespace annotation \
           gpu-policy.io/gpu-products) against, so no GPU product is required; deploy GPU \
           Feature Discovery on the GPU nodes, or name the products without globs (gpu-policy \
           check expands globs against --nodes or --node-products)")),
    None)]
#[case::globs_on_unlabelled_nodes_required(
    "NVIDIA-H100*", Some(vec![unlabelled()]), "computeAffinity: {whenNodesUnlabelled: require}",
    None,
    Some("gpu-policy: no GPU node carries GPU Feature Discovery's nvidia.com/gpu.product to \
          expand the GPU products NVIDIA-H100* (namespace annotation gpu-policy.io/gpu-products) \
          against, so the GPU product constraint cannot be written \
          (computeAffinity.whenNodesUnlabelled: require); deploy GPU Feature Discovery on the \
          GPU nodes, or name the products without globs (gpu-policy check expands globs \
          against --nodes or --node-products)"))]
#[case::globs_without_nodes_required(
    "NVIDIA-H100*",
    None,
    "computeAffinity: {whenNodesUnlabelled: require}",
    None,
    Some(
        "gpu-policy: no node is known to expand the GPU products NVIDIA-H100* (namespace \
          annotation gpu-policy.io/gpu-products) against, so the GPU product constraint cannot \
          be written (computeAffinity.whenNodesUnlabelled: require); deploy GPU Feature \
          Discovery on the GPU nodes, or name the products without globs (gpu-policy check \
          expands globs against --nodes or --node-products)"
    )
)]
#[case::literal_on_unlabelled_nodes(
    H100, Some(vec![unlabelled()]), "",
    Some((NoticeKind::UnmetComputeCapability,
          "compute-affinity: no GPU node carries GPU Feature Discovery's nvidia.com/gpu.product, \
           so no node meets GPU product in [NVIDIA-H100-80GB-HBM3] and the pod will stay Pending \
           until GPU Feature Discovery labels the nodes")),
    None)]
#[case::literal_no_node_carries(
    H100, Some(of(&[A10])), "",
    Some((NoticeKind::UnmetComputeCapability,
          "compute-affinity: no GPU node carries an allowed GPU product (the nodes carry \
           NVIDIA-A10), so no node meets GPU product in [NVIDIA-H100-80GB-HBM3]; the pod will \
           stay Pending")),
    None)]
#[case::allowed_product_on_a_node("NVIDIA-H100*", Some(of(&[H100, A10])), "", None, None)]
#[case::literal_without_nodes(H100, None, "", None, None)]
fn what_the_pod_is_told(
    #[case] products: &str,
    #[case] nodes: Option<Vec<NodeGpus>>,
    #[case] config: &str,
    #[case] notice: Option<(NoticeKind, &str)>,
    #[case] violation: Option<&str>,
) {
    let cluster = nodes.map(fleet);
    let settings = if config.is_empty() { Settings::default() } else { settings(config) };
    let evaluation =
        evaluate_with(&gpu_pod().image(NO_FLOOR).json(), cluster.as_ref(), &settings, products);
    let notices: Vec<(NoticeKind, &str)> =
        evaluation.notices.iter().map(|n| (n.kind, n.message.body())).collect();
    assert_eq!(notices, notice.into_iter().collect::<Vec<_>>());
    assert_eq!(
        violations(&evaluation),
        violation.into_iter().map(str::to_owned).collect::<Vec<_>>()
    );
}

/// With floors, the products are ANDed into every alternative of the compute floor: one
/// affinity, written once, summarised part by part.
#[test]
fn the_products_join_every_alternative_of_the_floors() {
    let pod = gpu_pod().image(CUDA_13).json();
    let evaluation = evaluate(&pod, None, H100);
    let result = apply(&pod, &evaluation.patch);
    let product = product_in(&[H100]);
    assert_eq!(
        terms(&result),
        json!([{"matchExpressions": [major_gt("7"), product]},
               {"matchExpressions": [major_in("7"), minor_gt("4"), product]}])
    );
    assert_eq!(
        summaries(&evaluation),
        vec![
            "require GPU compute capability >= 7.5 (image nvidia/cuda:13.0.0-runtime-ubuntu24.04)",
            "require GPU product in [NVIDIA-H100-80GB-HBM3] (namespace annotation \
             gpu-policy.io/gpu-products)",
        ]
    );
    // One operation writes the affinity.
    let affinity_operations =
        evaluation.patch.iter().filter(|op| op.path().to_string().contains("affinity")).count();
    assert_eq!(affinity_operations, 1, "{:?}", evaluation.patch);
    assert!(evaluate(&result, None, H100).patch.is_empty());
}

/// The author's terms, each multiplied by the floor's alternatives, each with the products.
#[test]
fn several_terms_each_get_the_products() {
    let pod = with_terms(
        gpu_pod().image(CUDA_13).json(),
        json!([{"matchExpressions": [zone("a")]}, {"matchExpressions": [zone("b")]}]),
    );
    let cluster = fleet(of(&[H100, H100_NVL, A10]));
    let evaluation = evaluate(&pod, Some(&cluster), "NVIDIA-H100*");
    let result = apply(&pod, &evaluation.patch);
    let product = product_in(&[H100, H100_NVL]);
    assert_eq!(
        terms(&result),
        json!([
            {"matchExpressions": [zone("a"), major_gt("7"), product]},
            {"matchExpressions": [zone("a"), major_in("7"), minor_gt("4"), product]},
            {"matchExpressions": [zone("b"), major_gt("7"), product]},
            {"matchExpressions": [zone("b"), major_in("7"), minor_gt("4"), product]},
        ])
    );
    assert!(evaluate(&result, Some(&cluster), "NVIDIA-H100*").patch.is_empty());
}

/// Without floors, the products are ANDed into each of the author's terms.
#[test]
fn the_products_alone_join_every_term() {
    let pod = with_terms(
        gpu_pod().image(NO_FLOOR).json(),
        json!([{"matchExpressions": [zone("a")]}, {"matchExpressions": [zone("b")]}]),
    );
    let evaluation = evaluate(&pod, None, H100);
    let result = apply(&pod, &evaluation.patch);
    let product = product_in(&[H100]);
    assert_eq!(
        terms(&result),
        json!([{"matchExpressions": [zone("a"), product]},
               {"matchExpressions": [zone("b"), product]}])
    );
    assert!(evaluate(&result, None, H100).patch.is_empty());
}

/// A term that already asks for products is ANDed with the namespace's (the scheduler admits
/// what both allow); the very same requirement is not written twice.
#[rstest]
#[case::wider(vec![H100, A10], true)]
#[case::same(vec![H100], false)]
fn an_authors_product_requirement(#[case] authors: Vec<&str>, #[case] added: bool) {
    let own = product_in(&authors);
    let pod = with_terms(gpu_pod().image(NO_FLOOR).json(), json!([{"matchExpressions": [own]}]));
    let evaluation = evaluate(&pod, None, H100);
    assert!(violations(&evaluation).is_empty(), "{:?}", evaluation.violations);
    let result = apply(&pod, &evaluation.patch);
    let expected = if added { json!([own, product_in(&[H100])]) } else { json!([own]) };
    assert_eq!(terms(&result), json!([{"matchExpressions": expected}]));
    assert_eq!(summaries(&evaluation).is_empty(), !added);
}

/// Where the list comes from, in the summary; the annotation only narrows `gpuProducts`.
#[rstest]
#[case::config("", vec!["NVIDIA-A100-SXM4-80GB", H100], "gpuProducts")]
#[case::both("NVIDIA-A100*", vec!["NVIDIA-A100-SXM4-80GB"], "gpuProducts and namespace annotation gpu-policy.io/gpu-products")]
fn the_source_is_named(#[case] annotation: &str, #[case] written: Vec<&str>, #[case] source: &str) {
    let settings = settings("gpuProducts: [\"NVIDIA-H100*\", \"NVIDIA-A100*\"]");
    let cluster = fleet(of(&[H100, "NVIDIA-A100-SXM4-80GB", A10]));
    let pod = gpu_pod().image(NO_FLOOR).json();
    let evaluation = evaluate_with(&pod, Some(&cluster), &settings, annotation);
    assert_eq!(
        summaries(&evaluation),
        vec![format!("require GPU product in [{}] ({source})", written.join(", "))]
    );
    assert_eq!(
        terms(&apply(&pod, &evaluation.patch)),
        json!([{"matchExpressions": [product_in(&written)]}])
    );
}

/// A GPU pod that can only land on products the namespace does not allow is denied, with both
/// lists; one way to an allowed product keeps it.
#[rstest]
#[case::selector_elsewhere(
    json!({A10_KEY: A10}), Value::Null,
    Some("gpu-policy: the pod asks for GPU product NVIDIA-A10 \
          (spec.nodeSelector[nvidia.com/gpu.product]), which this namespace does not allow: it \
          allows NVIDIA-H100* (namespace annotation gpu-policy.io/gpu-products); ask for an \
          allowed product, or leave nvidia.com/gpu.product out and the allowed products are \
          required for you"))]
#[case::selector_allowed(json!({A10_KEY: H100}), Value::Null, None)]
#[case::every_term_elsewhere(
    json!({}),
    json!([{"matchExpressions": [product_in(&[A10])]},
           {"matchExpressions": [zone("a"), product_in(&[L4, A10])]}]),
    Some("gpu-policy: the pod asks for GPU products NVIDIA-A10, NVIDIA-L4 (every required node \
          affinity term), which this namespace does not allow: it allows NVIDIA-H100* (namespace \
          annotation gpu-policy.io/gpu-products); ask for an allowed product, or leave \
          nvidia.com/gpu.product out and the allowed products are required for you"))]
#[case::both_elsewhere(
    json!({A10_KEY: L4}),
    json!([{"matchExpressions": [product_in(&[A10])]}]),
    Some("gpu-policy: the pod asks for GPU products NVIDIA-A10, NVIDIA-L4 \
          (spec.nodeSelector[nvidia.com/gpu.product] and every required node affinity term), \
          which this namespace does not allow: it allows NVIDIA-H100* (namespace annotation \
          gpu-policy.io/gpu-products); ask for an allowed product, or leave \
          nvidia.com/gpu.product out and the allowed products are required for you"))]
#[case::one_term_allowed(
    json!({}),
    json!([{"matchExpressions": [product_in(&[A10])]}, {"matchExpressions": [product_in(&[H100])]}]),
    None)]
#[case::one_term_silent(
    json!({}),
    json!([{"matchExpressions": [product_in(&[A10])]}, {"matchExpressions": [zone("a")]}]),
    None)]
#[case::some_value_allowed(json!({}), json!([{"matchExpressions": [product_in(&[A10, H100])]}]), None)]
#[case::not_in(
    json!({}),
    json!([{"matchExpressions": [{"key": PRODUCT_LABEL, "operator": "NotIn", "values": [H100]}]}]),
    None)]
fn pods_pinned_elsewhere(
    #[case] selector: Value,
    #[case] terms: Value,
    #[case] denied: Option<&str>,
) {
    let mut pod = gpu_pod().image(NO_FLOOR).json();
    if selector.as_object().is_some_and(|s| !s.is_empty()) {
        pod["spec"]["nodeSelector"] = selector;
    }
    if !terms.is_null() {
        pod = with_terms(pod, terms);
    }
    let cluster = fleet(of(&[H100, A10, L4]));
    let evaluation = evaluate(&pod, Some(&cluster), "NVIDIA-H100*");
    let expected: Vec<String> = denied.into_iter().map(str::to_owned).collect();
    assert_eq!(violations(&evaluation), expected);
    // The validating webhook sees the pod with R4's requirement ANDed in: the same answer.
    let mutated = apply(&pod, &evaluation.patch);
    assert_eq!(violations(&evaluate(&mutated, Some(&cluster), "NVIDIA-H100*")), expected);
}

const A10_KEY: &str = PRODUCT_LABEL;

/// A pod that asks for no GPU is neither judged nor changed, wherever it is pinned.
#[test]
fn a_pod_without_gpus_is_not_judged() {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"nodeSelector": {PRODUCT_LABEL: A10},
                 "containers": [{"name": "web", "image": "nginx:1.27"}]}});
    pod = with_terms(pod, json!([{"matchExpressions": [product_in(&[A10])]}]));
    let evaluation = evaluate(&pod, Some(&fleet(of(&[H100, A10]))), "NVIDIA-H100*");
    assert!(violations(&evaluation).is_empty(), "{:?}", evaluation.violations);
    assert!(summaries(&evaluation).is_empty());
}

/// A pod whose GPUs come through a DRA claim gets no product node affinity from R4 (its claims
/// carry the products); pinned by node selector to a product the namespace does not allow, it is
/// still denied, as any GPU pod.
#[test]
fn a_dra_pod_gets_no_product_affinity() {
    let settings = settings("gpuProducts: [\"NVIDIA-H100-80GB-HBM3\"]");
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pod1", "namespace": "default"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
            "containers": [{"name": "ctr", "image": NO_FLOOR,
                            "resources": {"claims": [{"name": "gpu"}]}}]}});
    let objects = [claim_template("single-gpu", "gpu.nvidia.com")];
    let evaluation = evaluate_with_claims(&pod, &objects, &settings);
    assert!(violations(&evaluation).is_empty(), "{:?}", evaluation.violations);
    let result = apply(&pod, &evaluation.patch);
    assert!(result["spec"]["affinity"].is_null(), "{result}");

    pod["spec"]["nodeSelector"] = json!({PRODUCT_LABEL: A10});
    let evaluation = evaluate_with_claims(&pod, &objects, &settings);
    assert_eq!(violations(&evaluation).len(), 1, "{:?}", evaluation.violations);
    assert!(violations(&evaluation)[0].contains("NVIDIA-A10"), "{:?}", evaluation.violations);
}

/// A re-apply of a pod (the author's spec, without what R4 wrote) gets the terms written at
/// creation back, products included.
#[test]
fn an_update_keeps_the_products_written_at_creation() {
    let author = gpu_pod().image(NO_FLOOR).json();
    let created = apply(&author, &evaluate(&author, None, H100).patch);
    assert_eq!(terms(&created), json!([{"matchExpressions": [product_in(&[H100])]}]));
    let evaluation = evaluate_update(&author, &created);
    let restored = apply(&author, &evaluation.patch);
    assert_eq!(terms(&restored), terms(&created));
    assert!(violations(&evaluation).is_empty(), "{:?}", evaluation.violations);
}

/// A pod created before its namespace was restricted is not denied, nor changed, on update: the
/// products are written at creation only.
#[test]
fn an_update_is_not_judged_by_a_later_restriction() {
    let settings = settings("gpuProducts: [\"NVIDIA-H100*\"]");
    let old = with_terms(
        gpu_pod().image(NO_FLOOR).json(),
        json!([{"matchExpressions": [product_in(&[A10])]}]),
    );
    let mut new = old.clone();
    new["spec"]["containers"][0]["image"] = json!("registry.example/in-house:2");
    let cluster = fleet(of(&[H100, A10]));
    let evaluation = evaluate_update_in(&new, &old, &settings, None);
    assert!(violations(&evaluation).is_empty(), "{:?}", evaluation.violations);
    assert!(summaries(&evaluation).is_empty(), "{:?}", evaluation.changes);
    // The same pod created now is denied.
    let created = evaluate_with(&old, Some(&cluster), &settings, "");
    assert_eq!(violations(&created).len(), 1, "{:?}", created.violations);
}
