use std::collections::BTreeMap;

use rstest::rstest;
use serde_json::{Value, json};

use super::*;
use crate::policy::Evaluator;
use crate::policy::dra::claims::ClaimKind;
use crate::policy::dra::tables::ClaimTables;
use crate::policy::testing::leaked;
use crate::settings::Settings;

fn claim(namespace: &str, requests: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": "c", "namespace": namespace},
               "spec": {"devices": {"requests": requests}}})
}

fn gpu(name: &str, extra: Value) -> Value {
    let mut exactly = json!({"deviceClassName": "gpu.nvidia.com"});
    if let (Some(into), Some(from)) = (exactly.as_object_mut(), extra.as_object()) {
        into.extend(from.clone());
    }
    json!({"name": name, "exactly": exactly})
}

fn messages(object: &Value, annotations: &[(&str, &str)]) -> Result<Vec<String>, String> {
    let settings = Settings::default();
    let annotations: BTreeMap<String, String> =
        annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let namespace_settings = settings.for_namespace(&annotations);
    let input = ClaimTables::collect(&[], "default", &settings);
    let evaluator = Evaluator {
        settings: &settings,
        namespace: &namespace_settings,
        cluster: None,
        nodes: None,
        claims: Some(&input),
        images: None,
        claim_owner: None,
    };
    let namespace =
        object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default");
    let kind =
        ClaimKind::of_kind(object["kind"].as_str().unwrap_or("")).unwrap_or(ClaimKind::Claim);
    evaluator
        .evaluate_claim(leaked(object), kind, namespace)
        .map(|e| e.violations.iter().map(|v| v.message.to_string()).collect())
        .map_err(|e| e.to_string())
}

#[rstest]
// allowed: one, eight, two requests of four, a non-GPU class unbounded
#[case(claim("ml", json!([gpu("g", json!({}))])), vec![])]
#[case(claim("ml", json!([gpu("g", json!({"count": 8}))])), vec![])]
#[case(claim("ml", json!([gpu("a", json!({"count": 4})), gpu("b", json!({"count": 4}))])), vec![])]
#[case(claim("ml", json!([{"name": "nics", "exactly": {"deviceClassName": "rdma.example.com", "allocationMode": "All", "adminAccess": true}}])), vec![])]
// All on a GPU class
#[case(claim("ml", json!([gpu("g", json!({"allocationMode": "All"}))])),
           vec!["gpu-policy: request \"g\" asks for every GPU of a node (allocationMode: All); use allocationMode: ExactCount with a count"])]
// All in a firstAvailable alternative
#[case(claim("ml", json!([{"name": "g", "firstAvailable": [
            {"name": "one", "deviceClassName": "gpu.nvidia.com"},
            {"name": "all", "deviceClassName": "mig.nvidia.com", "allocationMode": "All"}]}])),
           vec!["gpu-policy: request \"g\" asks for every GPU of a node (allocationMode: All); use allocationMode: ExactCount with a count"])]
// count above maxPerContainer (and so the claim above maxPerPod)
#[case(claim("ml", json!([gpu("g", json!({"count": 9}))])),
           vec!["gpu-policy: request \"g\" asks for 9 GPUs, above the maximum of 8 per container; lower its count",
                "gpu-policy: the claim's GPU requests total 9, above the maximum of 8 per pod here; split the claim or lower the counts"])]
// a claim total above maxPerPod
#[case(claim("ml", json!([gpu("a", json!({"count": 6})), gpu("b", json!({"count": 4}))])),
           vec!["gpu-policy: the claim's GPU requests total 10, above the maximum of 8 per pod here; split the claim or lower the counts"])]
// adminAccess outside the allowlist's namespaces, and inside
#[case(claim("ml", json!([gpu("g", json!({"adminAccess": true}))])),
           vec!["gpu-policy: request \"g\" sets adminAccess on a GPU class, allowed only in namespaces the allowlist names; remove adminAccess"])]
#[case(claim("kube-system", json!([gpu("g", json!({"adminAccess": true}))])), vec![])]
fn claims_are_bounded(#[case] object: Value, #[case] expected: Vec<&str>) {
    assert_eq!(messages(&object, &[]), Ok(expected.iter().map(|s| s.to_string()).collect()));
}

#[test]
fn thousands_of_bad_requests_make_a_short_denial() {
    let requests: Vec<Value> =
        (0..10_000).map(|i| gpu(&format!("r{i}"), json!({"allocationMode": "All"}))).collect();
    let found = messages(&claim("ml", Value::Array(requests)), &[]).unwrap_or_default();
    assert_eq!(found.len(), 4, "{found:?}");
    assert_eq!(found[3], "gpu-policy: and 9997 more like these in the claim's other requests");
}

#[test]
fn a_template_is_checked_like_a_claim() {
    let template = json!({"apiVersion": "resource.k8s.io/v1beta2", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [gpu("g", json!({"count": 16}))]}}}});
    // Above both the container and the pod maximum.
    assert_eq!(messages(&template, &[]).map(|m| m.len()), Ok(2));
}

#[test]
fn the_namespace_maximum_applies_to_the_claim_total() {
    let object = claim("ml", json!([gpu("a", json!({"count": 2})), gpu("b", json!({"count": 2}))]));
    assert_eq!(messages(&object, &[]), Ok(vec![]));
    assert_eq!(
            messages(&object, &[("gpu-policy.io/max-gpus-per-pod", "2")]),
            Ok(vec!["gpu-policy: the claim's GPU requests total 4, above the maximum of 2 per pod here; split the claim or lower the counts".to_owned()])
        );
}

#[test]
fn scheduler_made_claims_are_never_denied() {
    let mut object =
        claim("ml", json!([gpu("container-0-request-0", json!({"allocationMode": "All"}))]));
    object["metadata"]["annotations"] = json!({EXTENDED_RESOURCE_CLAIM: "true"});
    assert_eq!(messages(&object, &[]), Ok(vec![]));
    object["metadata"]["annotations"] = json!({EXTENDED_RESOURCE_CLAIM: "false"});
    assert_eq!(messages(&object, &[]).map(|m| m.len()), Ok(1));
}

#[test]
fn malformed_claims_name_the_field() {
    let object = claim("ml", json!([gpu("g", json!({"count": -3}))]));
    assert_eq!(
        messages(&object, &[]),
        Err("spec.devices.requests[0].exactly.count: must be a whole number above 0, not -3"
            .to_owned())
    );
}
