use rstest::rstest;
use serde_json::{Value, json};

use crate::policy::dra::claims::{ClaimKind, read_spec};
use crate::policy::dra::floor::GpuNeeds;
use crate::policy::dra::owner::{Fetched, OwnerPod, ReadClaim};
use crate::policy::testing::{apply, evaluate_claim_for, evaluate_with_claims, leaked, owner_read};
use crate::policy::{Evaluation, NoticeKind};
use crate::settings::{Config, DraComputeAffinity, GPU_NEEDS_ANNOTATION, Settings};

/// NGC PyTorch 25.12: CUDA 13.1, compute capability 7.5, no driver floor.
const PYTORCH: &str = "nvcr.io/nvidia/pytorch:25.12-py3";
/// A CUDA 13.0 base image: compute capability 7.5, and a driver for CUDA
/// 13.0 as its config's `NVIDIA_REQUIRE_CUDA` says ([`require_cuda_13`]).
const CUDA_13: &str = "nvidia/cuda:13.0.0-runtime-ubuntu24.04";

/// The env of a container of [`CUDA_13`]: its image's requirement.
fn require_cuda_13() -> Value {
    json!([{"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=13.0"}])
}

/// pod1 as stored (UID `uid-1`): container `ctr` (of `image`) holds its
/// pod claim `gpu`, from the template `single-gpu`.
fn pod(image: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pod1", "namespace": "gpu-test1", "uid": "uid-1"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
            "containers": [{"name": "ctr", "image": image,
                            "resources": {"claims": [{"name": "gpu"}]}}]}})
}

fn template() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "single-gpu", "namespace": "gpu-test1"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}})
}

/// What R4 records on `pod` when it is admitted after its template.
fn needs_at_admission(pod: &Value) -> GpuNeeds {
    let admitted =
        apply(pod, &evaluate_with_claims(pod, &[template()], &Settings::default()).patch);
    let text = admitted["metadata"]["annotations"][GPU_NEEDS_ANNOTATION]
        .as_str()
        .unwrap_or_else(|| panic!("no needs recorded: {admitted}"));
    GpuNeeds::from_annotation(text).unwrap_or_else(|e| panic!("{e}"))
}

/// A claim the resource claim controller made for `pod1` from its pod
/// claim `gpu`.
fn claim(requests: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "pod1-gpu-x7k2p", "namespace": "gpu-test1",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "pod1",
                "uid": "uid-1", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"devices": {"requests": requests}}})
}

fn one_gpu() -> Value {
    claim(json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]))
}

/// The claim evaluated with `owner` read; no template in the caches.
fn evaluate(object: &Value, owner: Option<&OwnerPod<'_>>) -> Evaluation {
    evaluate_claim_for(object, owner, &[], &[], &Settings::default())
}

fn owner(pod: &Value) -> OwnerPod<'static> {
    owner_read(pod, Vec::new(), Vec::new())
}

fn selector_entry(needs: &GpuNeeds) -> Value {
    json!({"cel": {"expression": needs.selector()}})
}

#[test]
fn every_gpu_request_gets_the_floors_of_the_pods_images() {
    let object = claim(json!([
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
        {"name": "nic", "exactly": {"deviceClassName": "rdma.example.com"}},
        {"name": "either", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.nvidia.com",
             "selectors": [{"cel": {"expression": "device.attributes[\"gpu.nvidia.com\"].productName == \"H100\""}}]},
            {"name": "slice", "deviceClassName": "mig.nvidia.com"},
            {"name": "cpu", "deviceClassName": "cpu.example.com"}]},
    ]));
    let mut pod = pod(CUDA_13);
    pod["spec"]["containers"][0]["env"] = require_cuda_13();
    let needs = needs_at_admission(&pod);
    assert_eq!(needs.to_string(), "compute capability >= 7.5 and a driver for CUDA 13.0");
    let owner = owner(&pod);
    let evaluation = evaluate(&object, Some(&owner));
    let patched = apply(&object, &evaluation.patch);
    let requests = &patched["spec"]["devices"]["requests"];
    let entry = selector_entry(&needs);
    assert_eq!(requests[0]["exactly"]["selectors"], json!([entry]));
    assert_eq!(requests[1], object["spec"]["devices"]["requests"][1]);
    let first = &requests[2]["firstAvailable"];
    assert_eq!(first[0]["selectors"][1], entry);
    assert_eq!(first[0]["selectors"].as_array().map(Vec::len), Some(2));
    assert_eq!(first[1]["selectors"], json!([entry]));
    assert_eq!(first[2].get("selectors"), None);
    assert_eq!(
        evaluation.changes[0].summary,
        format!(
            "require compute capability >= 7.5 and a driver for CUDA 13.0 of the devices of \
             requests \"gpu\", \"either\" (pod pod1: {CUDA_13})"
        )
    );
    // Invoked again on the mutated claim: nothing more.
    assert!(evaluate(&patched, Some(&owner)).patch.is_empty());
}

#[test]
fn the_pods_annotation_is_not_read_an_edited_one_changes_nothing() {
    let stored = pod(PYTORCH);
    let needs = needs_at_admission(&stored);
    let expected = json!([selector_entry(&needs)]);
    let object = one_gpu();
    for annotation in [
        // Lowered by the pod's author after admission.
        "{\"computeCapability\":\"3.5\",\"images\":[\"busybox\"]}",
        "{\"computeCapability\":\"junk\"}",
    ] {
        let mut edited = stored.clone();
        edited["metadata"]["annotations"] = json!({GPU_NEEDS_ANNOTATION: annotation});
        let evaluation = evaluate(&object, Some(&owner(&edited)));
        assert!(evaluation.notices.is_empty(), "{:?}", evaluation.notices);
        let patched = apply(&object, &evaluation.patch);
        assert_eq!(
            patched["spec"]["devices"]["requests"][0]["exactly"]["selectors"], expected,
            "{annotation}"
        );
    }
}

#[test]
fn the_pod_annotation_of_a_minimum_tightens_them() {
    let mut stored = pod(PYTORCH);
    stored["metadata"]["annotations"] = json!({"gpu-policy.io/min-compute-capability": "9.0"});
    let evaluation = evaluate(&one_gpu(), Some(&owner(&stored)));
    assert_eq!(
        evaluation.changes[0].summary,
        format!(
            "require compute capability >= 9.0 of the devices of request \"gpu\" (pod pod1: \
             {PYTORCH})"
        )
    );
}

#[test]
fn the_floors_of_every_claimed_container_count_the_others_read_beside_the_pod() {
    // ctr holds this claim (PyTorch: 7.5); trainer holds the claim of
    // another template (CUDA 13.0: its driver floor), read beside the pod
    // as the caches did not know it yet.
    let mut stored = pod(PYTORCH);
    if let Some(claims) = stored["spec"]["resourceClaims"].as_array_mut() {
        claims.push(json!({"name": "more", "resourceClaimTemplateName": "new"}));
    }
    if let Some(containers) = stored["spec"]["containers"].as_array_mut() {
        containers.push(json!({"name": "trainer", "image": CUDA_13,
            "env": require_cuda_13(), "resources": {"claims": [{"name": "more"}]}}));
    }
    let spec = json!({"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}});
    let read = ReadClaim {
        kind: ClaimKind::Template,
        name: "new".to_owned(),
        read: Fetched::Found(read_spec(leaked(&spec), "spec").unwrap_or_default()),
    };
    let with_read = owner_read(&stored, Vec::new(), vec![read]);
    let evaluation = evaluate(&one_gpu(), Some(&with_read));
    assert!(
        evaluation.changes[0]
            .summary
            .starts_with("require compute capability >= 7.5 and a driver for CUDA 13.0 of"),
        "{:?}",
        evaluation.changes
    );
    // Without the read, trainer holds no GPU the webhook knows of.
    let evaluation = evaluate(&one_gpu(), Some(&owner(&stored)));
    assert!(
        evaluation.changes[0].summary.starts_with("require compute capability >= 7.5 of"),
        "{:?}",
        evaluation.changes
    );
}

#[test]
fn the_flat_v1beta1_shape_gets_it_too() {
    let object = claim(json!([{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 2}]));
    let stored = pod(PYTORCH);
    let patched = apply(&object, &evaluate(&object, Some(&owner(&stored))).patch);
    assert_eq!(
        patched["spec"]["devices"]["requests"][0]["selectors"],
        json!([selector_entry(&needs_at_admission(&stored))])
    );
}

#[test]
fn the_schedulers_extended_resource_claim_gets_it() {
    let mut object = claim(json!([{"name": "container-0-request-0", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]));
    object["metadata"]["annotations"] =
        json!({"resource.kubernetes.io/extended-resource-claim": "true"});
    let stored = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pod1", "namespace": "gpu-test1", "uid": "uid-1"},
        "spec": {"containers": [{"name": "ctr", "image": PYTORCH,
            "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
    // The DeviceClass that serves nvidia.com/gpu through DRA.
    let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"extendedResourceName": "nvidia.com/gpu"}});
    let owner = owner(&stored);
    let evaluation = evaluate_claim_for(&object, Some(&owner), &[class], &[], &Settings::default());
    assert!(evaluation.violations.is_empty());
    let patched = apply(&object, &evaluation.patch);
    let selectors = &patched["spec"]["devices"]["requests"][0]["exactly"]["selectors"];
    let expression = selectors[0]["cel"]["expression"].as_str().unwrap_or("");
    assert!(expression.contains("semver(\"7.5.0\")"), "{patched}");
}

#[test]
fn with_node_labels_only_claims_get_nothing() {
    let settings = Settings::from_config(Config {
        dra_compute_affinity: DraComputeAffinity::NodeLabels,
        ..Config::default()
    })
    .unwrap_or_default();
    let owner = owner(&pod(PYTORCH));
    let evaluation = evaluate_claim_for(&one_gpu(), Some(&owner), &[], &[], &settings);
    assert!(evaluation.patch.is_empty(), "{:?}", evaluation.patch);
}

#[rstest]
#[case::a_cpu_image(Some(owner(&pod("busybox"))), None)]
#[case::not_read_on_this_endpoint(None, None)]
#[case::pod_missing(
    Some(OwnerPod::NotFound),
    Some(
        "compute-affinity: claim unchanged: its pod \"pod1\" was not found with the UID it was made for"
    )
)]
#[case::api_error(Some(OwnerPod::Unreadable("pods \"pod1\" is forbidden".to_owned())), Some("compute-affinity: claim unchanged: cannot read its pod \"pod1\": pods \"pod1\" is forbidden"))]
#[case::another_pod(Some(owner(&{let mut p = pod(PYTORCH); p["metadata"]["uid"] = json!("uid-2"); p})), Some("compute-affinity: claim unchanged: its pod \"pod1\" was not found with the UID it was made for"))]
fn a_claim_whose_needs_cannot_be_told_is_admitted_unchanged(
    #[case] owner: Option<OwnerPod<'static>>,
    #[case] notice: Option<&str>,
) {
    let evaluation = evaluate(&one_gpu(), owner.as_ref());
    assert!(evaluation.patch.is_empty(), "{:?}", evaluation.patch);
    assert!(evaluation.violations.is_empty());
    let notices: Vec<&str> = evaluation.notice_bodies(NoticeKind::UnreadClaimOwner);
    assert_eq!(notices, notice.into_iter().collect::<Vec<_>>());
}

#[test]
fn a_claim_not_made_for_a_pod_is_left_alone() {
    let mut object = one_gpu();
    object["metadata"]["ownerReferences"] = json!([]);
    let evaluation = evaluate(&object, Some(&owner(&pod(PYTORCH))));
    assert!(evaluation.patch.is_empty());
    assert!(evaluation.notices.is_empty());
}
