use json_patch::PatchOperation;
use serde_json::{Value, json};

use crate::policy::Evaluation;
use crate::policy::RuleId;
use crate::policy::dra::floor::GpuNeeds;
use crate::policy::testing::{apply, evaluate_with_claims, messages_of};
use crate::settings::{Config, DraComputeAffinity, GPU_NEEDS_ANNOTATION, Settings};

/// The DRA driver's quickstart `gpu-test1`, its image an NGC CUDA 13.1 one.
const PYTORCH: &str = "nvcr.io/nvidia/pytorch:25.12-py3";

fn template() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "single-gpu", "namespace": "gpu-test1"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}})
}

/// `source`: `{"resourceClaimTemplateName": ...}` or `{"resourceClaimName": ...}`.
fn pod(source: Value, image: &str) -> Value {
    let mut pod_claim = json!({"name": "gpu"});
    if let (Some(into), Some(from)) = (pod_claim.as_object_mut(), source.as_object()) {
        into.extend(from.clone());
    }
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pod1", "namespace": "gpu-test1"},
        "spec": {
            "resourceClaims": [pod_claim],
            "containers": [{"name": "ctr", "image": image,
                            "resources": {"claims": [{"name": "gpu"}]}}]}})
}

fn with_mode(mode: DraComputeAffinity) -> Settings {
    let config = Config { dra_compute_affinity: mode, ..Config::default() };
    Settings::from_config(config).unwrap_or_default()
}

fn templated(image: &str) -> Value {
    pod(json!({"resourceClaimTemplateName": "single-gpu"}), image)
}

fn summaries(evaluation: &Evaluation) -> Vec<&str> {
    evaluation
        .changes
        .iter()
        .filter(|c| c.rule == RuleId::ComputeAffinity)
        .map(|c| c.summary.as_str())
        .collect()
}

fn affinity_of(pod: &Value) -> Option<&Value> {
    pod.pointer("/spec/affinity")
}

fn cuda_13_needs() -> GpuNeeds {
    let pod = apply(
        &templated(PYTORCH),
        &evaluate_with_claims(&templated(PYTORCH), &[template()], &Settings::default()).patch,
    );
    let text = pod
        .pointer(&format!("/metadata/annotations/{}", GPU_NEEDS_ANNOTATION.replace('/', "~1")))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    GpuNeeds::from_annotation(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn a_dra_pod_records_its_needs_instead_of_node_affinity() {
    let pod = templated(PYTORCH);
    let evaluation = evaluate_with_claims(&pod, &[template()], &Settings::default());
    let patched = apply(&pod, &evaluation.patch);
    assert_eq!(affinity_of(&patched), None, "{patched}");
    let annotations = &patched["metadata"]["annotations"];
    let needs = GpuNeeds::from_annotation(annotations[GPU_NEEDS_ANNOTATION].as_str().unwrap_or(""));
    let needs = needs.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(needs.to_string(), "compute capability >= 7.5");
    assert_eq!(needs.images, vec![PYTORCH.to_owned()]);
    assert_eq!(annotations["gpu-policy.io/mutations"], "compute-affinity");
    let summaries = summaries(&evaluation);
    assert_eq!(summaries.len(), 2, "{summaries:?}");
    assert!(
        summaries[0].starts_with("require compute capability >= 7.5 of the GPUs of the claims made for the pod (image nvcr.io/nvidia/pytorch:25.12-py3)"),
        "{}",
        summaries[0]
    );
    assert_eq!(
        summaries[1],
        format!(
            "give the claims made for pod1 from single-gpu: request \"gpu\" the selector {}",
            needs.selector()
        )
    );
    // Evaluating the mutated pod adds nothing.
    let again = evaluate_with_claims(&patched, &[template()], &Settings::default());
    assert_eq!(again.patch, Vec::<PatchOperation>::new());
    assert!(again.changes.is_empty(), "{:?}", again.changes);
}

#[test]
fn a_cuda_image_records_its_driver_floor_too() {
    // The image's own requirement, as its config (or the container) says it.
    let mut pod = templated("nvidia/cuda:13.0.0-runtime-ubuntu24.04");
    pod["spec"]["containers"][0]["env"] = json!([{"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=13.0 brand=tesla,driver>=535,driver<536"}]);
    let evaluation = evaluate_with_claims(&pod, &[template()], &Settings::default());
    let patched = apply(&pod, &evaluation.patch);
    let text = patched["metadata"]["annotations"][GPU_NEEDS_ANNOTATION].as_str();
    let needs = text.map(GpuNeeds::from_annotation).and_then(Result::ok);
    let needs = needs.unwrap_or_else(|| panic!("{patched}"));
    assert_eq!(
        needs.to_string(),
        "compute capability >= 7.5 and a driver for CUDA 13.0 or branch 535"
    );
    assert!(needs.selector().contains("cudaDriverVersion.compareTo(semver(\"13.0.0\")) >= 0"));
}

#[test]
fn node_labels_and_both_keep_the_node_affinity() {
    let pod = templated(PYTORCH);
    let labels =
        evaluate_with_claims(&pod, &[template()], &with_mode(DraComputeAffinity::NodeLabels));
    let patched = apply(&pod, &labels.patch);
    assert!(affinity_of(&patched).is_some(), "{patched}");
    assert_eq!(patched.pointer("/metadata/annotations/gpu-policy.io~1gpu-needs"), None);
    let both = evaluate_with_claims(&pod, &[template()], &with_mode(DraComputeAffinity::Both));
    let patched = apply(&pod, &both.patch);
    assert!(affinity_of(&patched).is_some(), "{patched}");
    assert!(patched.pointer("/metadata/annotations/gpu-policy.io~1gpu-needs").is_some());
    let again = evaluate_with_claims(&patched, &[template()], &with_mode(DraComputeAffinity::Both));
    assert!(again.patch.is_empty(), "{:?}", again.patch);
}

#[test]
fn a_pod_with_both_kinds_gets_both() {
    let mut pod = templated("nvcr.io/nvidia/pytorch:24.01-py3");
    if let Some(containers) = pod["spec"]["containers"].as_array_mut() {
        containers.push(json!({"name": "plugin", "image": "nvidia/cuda:13.0.0-runtime-ubuntu24.04",
                "resources": {"limits": {"nvidia.com/gpu": 1}}}))
    }
    let evaluation = evaluate_with_claims(&pod, &[template()], &Settings::default());
    let patched = apply(&pod, &evaluation.patch);
    // The node affinity is the device-plugin container's; the claims' needs
    // are the DRA container's (24.01 is CUDA 12.3: compute 5.0).
    let affinity = affinity_of(&patched).map(ToString::to_string).unwrap_or_default();
    assert!(affinity.contains("\"Gt\""), "{affinity}");
    let needs = patched["metadata"]["annotations"][GPU_NEEDS_ANNOTATION]
        .as_str()
        .map(GpuNeeds::from_annotation);
    let needs = needs.and_then(Result::ok).unwrap_or_else(|| panic!("{patched}"));
    assert_eq!(needs.images, vec!["nvcr.io/nvidia/pytorch:24.01-py3".to_owned()]);
    assert_eq!(needs.compute_capability.map(|c| c.to_string()).as_deref(), Some("5.0"));
}

#[test]
fn an_annotation_a_user_wrote_is_overwritten_or_removed() {
    let mut pod = templated(PYTORCH);
    pod["metadata"]["annotations"] =
        json!({GPU_NEEDS_ANNOTATION: "{\"computeCapability\":\"3.0\"}"});
    let evaluation = evaluate_with_claims(&pod, &[template()], &Settings::default());
    let patched = apply(&pod, &evaluation.patch);
    assert_eq!(
        patched["metadata"]["annotations"][GPU_NEEDS_ANNOTATION],
        json!(cuda_13_needs().annotation_value())
    );
    assert!(evaluation.changes.iter().any(|c| c.overrides_author));
    // An image that needs nothing: the annotation goes.
    let mut plain = templated("busybox:1.36");
    plain["metadata"]["annotations"] =
        json!({GPU_NEEDS_ANNOTATION: "{\"computeCapability\":\"3.0\"}", "keep": "me"});
    let evaluation = evaluate_with_claims(&plain, &[template()], &Settings::default());
    let patched = apply(&plain, &evaluation.patch);
    assert_eq!(patched["metadata"]["annotations"].get(GPU_NEEDS_ANNOTATION), None, "{patched}");
    assert_eq!(patched["metadata"]["annotations"]["keep"], "me");
    let again = evaluate_with_claims(&patched, &[template()], &Settings::default());
    assert!(again.patch.is_empty(), "{:?}", again.patch);
}

/// A shared ResourceClaim, allocated `device` in the pool `node-1` or not,
/// and the node's ResourceSlice.
fn shared_claim(allocated: Option<&str>, selectors: Value) -> Vec<Value> {
    let mut claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "shared-gpu", "namespace": "gpu-test1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "selectors": selectors}}]}}});
    if let Some(device) = allocated {
        claim["status"] = json!({"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": device}]}}});
    }
    let slice = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpu.nvidia.com"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "node-1", "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "gpu-0", "attributes": {"productName": {"string": "Tesla P100"},
                    "cudaComputeCapability": {"version": "6.0.0"}, "cudaDriverVersion": {"version": "13.1.0"},
                    "driverVersion": {"version": "590.44.1"}}},
                {"name": "gpu-1", "attributes": {"productName": {"string": "A100"},
                    "cudaComputeCapability": {"version": "8.0.0"}, "cudaDriverVersion": {"version": "13.1.0"},
                    "driverVersion": {"version": "590.44.1"}}}]}});
    vec![claim, slice]
}

fn on_shared_claim() -> Value {
    pod(json!({"resourceClaimName": "shared-gpu"}), PYTORCH)
}

#[test]
fn a_shared_claim_allocated_below_the_needs_is_a_violation() {
    let evaluation = evaluate_with_claims(
        &on_shared_claim(),
        &shared_claim(Some("gpu-0"), json!([])),
        &Settings::default(),
    );
    assert_eq!(
        messages_of(&evaluation, RuleId::ComputeAffinity),
        vec![
            "gpu-policy: container \"ctr\" uses ResourceClaim \"shared-gpu\", allocated a device \
             below what its image needs (compute capability >= 7.5): \
             gpu-0 of pool node-1 has compute capability 6.0; use a claim whose devices meet it"
        ]
    );
    let fine = evaluate_with_claims(
        &on_shared_claim(),
        &shared_claim(Some("gpu-1"), json!([])),
        &Settings::default(),
    );
    assert_eq!(messages_of(&fine, RuleId::ComputeAffinity), Vec::<String>::new());
}

#[test]
fn a_shared_claim_not_yet_allocated_is_warned_unless_its_selectors_guarantee_the_needs() {
    let notices = |objects: &[Value]| -> Vec<String> {
        evaluate_with_claims(&on_shared_claim(), objects, &Settings::default())
            .notices
            .iter()
            .filter(|n| n.kind == crate::policy::NoticeKind::UnguaranteedClaimFloor)
            .map(|n| n.message.to_string())
            .collect()
    };
    let needs = cuda_13_needs();
    assert_eq!(
        notices(&shared_claim(None, json!([]))),
        vec![format!(
            "gpu-policy: ResourceClaim \"shared-gpu\" (container \"ctr\") may get a GPU below \
             compute capability >= 7.5: add to its GPU requests the \
             selector {}",
            needs.selector()
        )]
    );
    let guarded = json!([{"cel": {"expression": needs.selector()}}]);
    assert_eq!(notices(&shared_claim(None, guarded)), Vec::<String>::new());
}

#[test]
fn a_claim_with_more_selectors_than_are_judged_guarantees_nothing() {
    let needs = cuda_13_needs();
    // Its own selector, drowned in 40 that select everything.
    let mut many = vec![json!({"cel": {"expression": needs.selector()}})];
    many.extend((0..40).map(|_| json!({"cel": {"expression": "true"}})));
    let evaluation = evaluate_with_claims(
        &on_shared_claim(),
        &shared_claim(None, Value::Array(many)),
        &Settings::default(),
    );
    assert!(
        evaluation
            .notices
            .iter()
            .any(|n| n.kind == crate::policy::NoticeKind::UnguaranteedClaimFloor),
        "{:?}",
        evaluation.notices
    );
}

#[test]
fn a_container_narrowed_to_no_gpu_request_of_the_claim_is_not_named() {
    let mut pod = on_shared_claim();
    // A second container uses the shared claim only through a request it
    // does not have: it holds none of its GPUs.
    pod["spec"]["containers"].as_array_mut().into_iter().for_each(|containers| {
        containers.push(json!({"name": "other", "image": PYTORCH,
                "resources": {"claims": [{"name": "gpu", "request": "nic"}]}}))
    });
    let evaluation =
        evaluate_with_claims(&pod, &shared_claim(None, json!([])), &Settings::default());
    let notices: Vec<String> = evaluation
        .notices
        .iter()
        .filter(|n| n.kind == crate::policy::NoticeKind::UnguaranteedClaimFloor)
        .map(|n| n.message.to_string())
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].contains("(container \"ctr\")"), "{}", notices[0]);
}
