use std::collections::BTreeMap;

use rstest::rstest;
use serde_json::{Value, json};

use crate::policy::dra::allocation::OwnerPod;
use crate::policy::dra::claims::ClaimKind;
use crate::policy::dra::floor::GpuNeeds;
use crate::policy::testing::{apply, leaked};
use crate::policy::{Evaluation, Evaluator, NoticeKind};
use crate::settings::{GPU_NEEDS_ANNOTATION, Settings};

/// What the NGC CUDA 13.1 images need (as R4 records it on the pod).
const NEEDS: &str = "{\"computeCapability\":\"7.5\",\"driverVersion\":\"cuda>=13.1\",\
                     \"images\":[\"nvcr.io/nvidia/pytorch:25.12-py3\"]}";

fn needs() -> GpuNeeds {
    GpuNeeds::from_annotation(NEEDS).unwrap_or_else(|e| panic!("{e}"))
}

/// A claim the resource claim controller made for `pod1` from its template.
fn claim(requests: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "pod1-gpu-x7k2p", "namespace": "gpu-test1",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "pod1",
                "uid": "uid-1", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"devices": {"requests": requests}}})
}

fn owner(annotation: Option<&str>) -> OwnerPod {
    let annotations: BTreeMap<String, String> = annotation
        .map(|text| (GPU_NEEDS_ANNOTATION.to_owned(), text.to_owned()))
        .into_iter()
        .collect();
    OwnerPod::Read {
        uid: "uid-1".to_owned(),
        annotations,
    }
}

fn evaluate(object: &Value, owner: Option<&OwnerPod>) -> Evaluation {
    let settings = Settings::default();
    let namespace = settings.for_namespace(&BTreeMap::new());
    let evaluator = Evaluator {
        settings: &settings,
        namespace: &namespace,
        cluster: None,
        nodes: None,
        claims: None,
        images: None,
        claim_owner: owner,
    };
    evaluator
        .evaluate_claim(leaked(object), ClaimKind::Claim, "gpu-test1")
        .unwrap_or_else(|e| panic!("{e}"))
}

fn selector_entry() -> Value {
    json!({"cel": {"expression": needs().selector()}})
}

#[test]
fn every_gpu_request_gets_the_selector_and_others_are_untouched() {
    let object = claim(json!([
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
        {"name": "nic", "exactly": {"deviceClassName": "rdma.example.com"}},
        {"name": "either", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.nvidia.com",
             "selectors": [{"cel": {"expression": "device.attributes[\"gpu.nvidia.com\"].productName == \"H100\""}}]},
            {"name": "slice", "deviceClassName": "mig.nvidia.com"},
            {"name": "cpu", "deviceClassName": "cpu.example.com"}]},
    ]));
    let owner = owner(Some(NEEDS));
    let evaluation = evaluate(&object, Some(&owner));
    let patched = apply(&object, &evaluation.patch);
    let requests = &patched["spec"]["devices"]["requests"];
    assert_eq!(
        requests[0]["exactly"]["selectors"],
        json!([selector_entry()])
    );
    assert_eq!(requests[1], object["spec"]["devices"]["requests"][1]);
    let first = &requests[2]["firstAvailable"];
    assert_eq!(first[0]["selectors"][1], selector_entry());
    assert_eq!(first[0]["selectors"].as_array().map(Vec::len), Some(2));
    assert_eq!(first[1]["selectors"], json!([selector_entry()]));
    assert_eq!(first[2].get("selectors"), None);
    assert_eq!(
        evaluation.changes[0].summary,
        "require compute capability >= 7.5 and a driver for CUDA 13.1 of the devices of requests \
         \"gpu\", \"either\" (pod pod1: nvcr.io/nvidia/pytorch:25.12-py3)"
    );
    // Invoked again on the mutated claim: nothing more.
    assert!(evaluate(&patched, Some(&owner)).patch.is_empty());
}

#[test]
fn the_flat_v1beta1_shape_gets_it_too() {
    let object = claim(json!([{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 2}]));
    let owner = owner(Some(NEEDS));
    let patched = apply(&object, &evaluate(&object, Some(&owner)).patch);
    assert_eq!(
        patched["spec"]["devices"]["requests"][0]["selectors"],
        json!([selector_entry()])
    );
}

#[test]
fn the_schedulers_extended_resource_claim_gets_it() {
    let mut object = claim(json!([{"name": "container-0-request-0", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]));
    object["metadata"]["annotations"] =
        json!({"resource.kubernetes.io/extended-resource-claim": "true"});
    let owner = owner(Some(NEEDS));
    let evaluation = evaluate(&object, Some(&owner));
    assert!(evaluation.violations.is_empty());
    let patched = apply(&object, &evaluation.patch);
    assert_eq!(
        patched["spec"]["devices"]["requests"][0]["exactly"]["selectors"],
        json!([selector_entry()])
    );
}

#[rstest]
#[case::no_needs_recorded(Some(owner(None)), None)]
#[case::not_read_on_this_endpoint(None, None)]
#[case::pod_missing(
    Some(OwnerPod::NotFound),
    Some(
        "compute-affinity: claim unchanged: its pod \"pod1\" was not found with the UID it was made for"
    )
)]
#[case::api_error(Some(OwnerPod::Unreadable("pods \"pod1\" is forbidden".to_owned())), Some("compute-affinity: claim unchanged: cannot read its pod \"pod1\": pods \"pod1\" is forbidden"))]
#[case::another_pod(Some(OwnerPod::Read { uid: "uid-2".to_owned(), annotations: BTreeMap::new() }), Some("compute-affinity: claim unchanged: its pod \"pod1\" was not found with the UID it was made for"))]
#[case::foreign_annotation(
    Some(owner(Some("{\"computeCapability\":\"junk\"}"))),
    Some(
        "compute-affinity: claim unchanged: pod \"pod1\" annotation gpu-policy.io/gpu-needs is unreadable: \"junk\" is not a compute capability (expected MAJOR.MINOR, e.g. \"8.0\")"
    )
)]
fn a_claim_whose_needs_cannot_be_told_is_admitted_unchanged(
    #[case] owner: Option<OwnerPod>,
    #[case] notice: Option<&str>,
) {
    let object = claim(json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]));
    let evaluation = evaluate(&object, owner.as_ref());
    assert!(evaluation.patch.is_empty(), "{:?}", evaluation.patch);
    assert!(evaluation.violations.is_empty());
    let notices: Vec<&str> = evaluation.notice_bodies(NoticeKind::UnreadClaimOwner);
    assert_eq!(notices, notice.into_iter().collect::<Vec<_>>());
}

#[test]
fn a_claim_not_made_for_a_pod_is_left_alone() {
    let mut object =
        claim(json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]));
    object["metadata"]["ownerReferences"] = json!([]);
    let owner = owner(Some(NEEDS));
    let evaluation = evaluate(&object, Some(&owner));
    assert!(evaluation.patch.is_empty());
    assert!(evaluation.notices.is_empty());
}
