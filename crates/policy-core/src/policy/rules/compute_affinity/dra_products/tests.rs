use rstest::rstest;
use serde_json::{Value, json};

use crate::policy::dra::products::selector;
use crate::policy::testing::{evaluate_with_claims_in, messages_of};
use crate::policy::{Evaluation, NoticeKind, RuleId};
use crate::settings::{Config, DraComputeAffinity, GPU_PRODUCTS_ANNOTATION, Settings};

const H100: &str = "NVIDIA-H100*";

/// `source`: `{"resourceClaimTemplateName": ...}` or `{"resourceClaimName": ...}`; container
/// `ctr` of `image` holds the pod claim `gpu`.
fn pod(source: Value, image: &str) -> Value {
    let mut pod_claim = json!({"name": "gpu"});
    if let (Some(into), Some(from)) = (pod_claim.as_object_mut(), source.as_object()) {
        into.extend(from.clone());
    }
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pod1", "namespace": "team-a"},
        "spec": {
            "resourceClaims": [pod_claim],
            "containers": [{"name": "ctr", "image": image,
                            "resources": {"claims": [{"name": "gpu"}]}}]}})
}

fn on_shared_claim(image: &str) -> Value {
    pod(json!({"resourceClaimName": "shared-gpu"}), image)
}

/// The node's ResourceSlice: `h100` (the driver's form of its name), `a100`, and `vfio` that
/// publishes no product.
fn slice() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpu.nvidia.com"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "h100", "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"},
                    "cudaComputeCapability": {"version": "9.0.0"}}},
                {"name": "a100", "attributes": {"productName": {"string": "NVIDIA A100-SXM4-40GB"},
                    "cudaComputeCapability": {"version": "8.0.0"}}},
                {"name": "vfio", "attributes": {"type": {"string": "vfio"}}}]}})
}

/// A ResourceClaim named `name` with one GPU request, allocated `devices` of the pool `node-1`
/// (none: not allocated).
fn claim(name: &str, devices: Option<&[&str]>, selectors: Value) -> Value {
    let mut claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "count": 4, "selectors": selectors}}]}}});
    if let Some(devices) = devices {
        let results: Vec<Value> = devices
            .iter()
            .map(|device| {
                json!({"request": "gpu", "driver": "gpu.nvidia.com",
                "pool": "node-1", "device": device})
            })
            .collect();
        claim["status"] = json!({"allocation": {"devices": {"results": results}}});
    }
    claim
}

fn shared(devices: Option<&[&str]>) -> Vec<Value> {
    vec![claim("shared-gpu", devices, json!([])), slice()]
}

fn evaluate(pod: &Value, objects: &[Value], products: Option<&str>) -> Evaluation {
    let annotations: Vec<(&str, &str)> =
        products.map(|p| (GPU_PRODUCTS_ANNOTATION, p)).into_iter().collect();
    evaluate_with_claims_in(pod, objects, &Settings::default(), &annotations)
}

fn product_notices(evaluation: &Evaluation) -> Vec<String> {
    evaluation
        .notices
        .iter()
        .filter(|n| n.kind == NoticeKind::UnguaranteedClaimProducts)
        .map(|n| n.message.to_string())
        .collect()
}

#[test]
fn a_shared_claim_allocated_another_product_is_a_violation() {
    let evaluation =
        evaluate(&on_shared_claim("busybox"), &shared(Some(&["h100", "a100", "vfio"])), Some(H100));
    assert_eq!(
        messages_of(&evaluation, RuleId::ComputeAffinity),
        vec![
            "gpu-policy: container \"ctr\" uses ResourceClaim \"shared-gpu\", allocated a GPU of a \
             product namespace \"team-a\" does not allow (NVIDIA-H100*): a100 of pool node-1 is \
             \"NVIDIA A100-SXM4-40GB\"; use a claim whose devices are of those products"
                .to_owned()
        ]
    );
}

#[rstest]
#[case::allowed_in_the_drivers_form(&["h100"])]
#[case::no_product_published(&["vfio"])]
#[case::nothing_of_the_gpu_driver(&[])]
fn a_shared_claim_of_allowed_devices_passes(#[case] devices: &[&str]) {
    let evaluation = evaluate(&on_shared_claim("busybox"), &shared(Some(devices)), Some(H100));
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);
}

#[test]
fn a_namespace_allowing_any_product_checks_nothing() {
    let evaluation = evaluate(&on_shared_claim("busybox"), &shared(Some(&["a100"])), None);
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);
    assert!(product_notices(&evaluation).is_empty());
}

#[test]
fn with_node_labels_for_the_floors_the_products_are_still_checked() {
    let config =
        Config { dra_compute_affinity: DraComputeAffinity::NodeLabels, ..Config::default() };
    let settings = Settings::from_config(config).unwrap_or_else(|e| panic!("{e}"));
    let evaluation = evaluate_with_claims_in(
        &on_shared_claim("nvcr.io/nvidia/pytorch:25.12-py3"),
        &shared(Some(&["a100"])),
        &settings,
        &[(GPU_PRODUCTS_ANNOTATION, H100)],
    );
    assert_eq!(evaluation.violations.len(), 1, "{:?}", evaluation.violations);
}

#[test]
fn many_devices_outside_are_counted_past_three() {
    let objects = vec![
        claim("shared-gpu", Some(&["a100", "a100", "a100", "a100", "a100"]), json!([])),
        slice(),
    ];
    let messages = messages_of(
        &evaluate(&on_shared_claim("busybox"), &objects, Some(H100)),
        RuleId::ComputeAffinity,
    );
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0].contains("-40GB\", 2 more; use"), "{messages:?}");
}

#[test]
fn an_unallocated_shared_claim_without_the_selector_gets_a_notice() {
    let evaluation = evaluate(&on_shared_claim("busybox"), &shared(None), Some(H100));
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);
    assert_eq!(
        product_notices(&evaluation),
        vec![
            "gpu-policy: ResourceClaim \"shared-gpu\" (container \"ctr\") may get a GPU of a \
             product namespace \"team-a\" does not allow (NVIDIA-H100*): not every GPU request \
             carries the products' selector; create the claim again to get it"
                .to_owned()
        ]
    );
    // Made in the namespace, it carries the selector: no notice.
    let settings = Settings::default();
    let annotations = [(GPU_PRODUCTS_ANNOTATION.to_owned(), H100.to_owned())].into();
    let products = settings.for_namespace(&annotations).gpu_products;
    let text = selector(&products).unwrap_or_else(|| panic!("none")).expect("short");
    let objects = vec![claim("shared-gpu", None, json!([{"cel": {"expression": text}}])), slice()];
    let evaluation = evaluate(&on_shared_claim("busybox"), &objects, Some(H100));
    assert!(product_notices(&evaluation).is_empty(), "{:?}", evaluation.notices);
}

#[test]
fn audit_judges_the_claims_made_for_a_running_pod_too() {
    let mut running = pod(json!({"resourceClaimTemplateName": "single-gpu"}), "busybox");
    running["metadata"]["uid"] = json!("uid-1");
    let mut made = claim("pod1-gpu-x7k2p", Some(&["a100"]), json!([]));
    made["metadata"]["annotations"] = json!({"resource.kubernetes.io/pod-claim-name": "gpu"});
    made["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod",
        "name": "pod1", "uid": "uid-1", "controller": true}]);
    let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "single-gpu", "namespace": "team-a"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}});
    let evaluation = evaluate(&running, &[made, template, slice()], Some(H100));
    let messages = messages_of(&evaluation, RuleId::ComputeAffinity);
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0].contains("ResourceClaim \"pod1-gpu-x7k2p\""), "{messages:?}");
}
