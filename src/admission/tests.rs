use std::collections::BTreeMap;

use rstest::rstest;
use serde_json::{Value, json};

use super::*;
use crate::policy::dra::claims::ClaimKind;
use crate::policy::testing::leaked;
use crate::policy::{Evaluation, Evaluator, Shape};
use crate::settings::Settings;
use gpu_policy_test_support::review::Review;

fn evaluation(object: &Value, kind: ObjectKind) -> Evaluation {
    let settings = Settings::default();
    let namespace_settings = settings.for_namespace(&BTreeMap::new());
    let evaluator = Evaluator {
        settings: &settings,
        namespace: &namespace_settings,
        cluster: None,
        nodes: None,
        claims: None,
        images: None,
        claim_owner: None,
    };
    let evaluated = kind
        .created(leaked(object), "default")
        .map(|subject| evaluator.evaluate(&subject))
        .transpose();
    match evaluated {
        Ok(Some(evaluation)) => evaluation,
        other => panic!("not evaluated: {other:?}"),
    }
}

/// A pod with one change (void pin) and one violation (request without
/// limit).
fn pod_with_change_and_violation() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "cpu", "image": "nvidia/cuda:12.4.0-base"},
        {"name": "gpu", "resources": {"requests": {"nvidia.com/gpu": 1}}},
    ]}})
}

fn clean_gpu_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "gpu", "image": "nvidia/cuda:12.4.0-base", "resources": {"limits": {"nvidia.com/gpu": 1}}},
    ]}})
}

fn deployment(pod: &Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"template": {"metadata": pod["metadata"].clone(), "spec": pod["spec"].clone()}}})
}

/// Enforce mode carries the patch of a pod that needs one, and no other
/// mode or kind carries any.
#[test]
fn only_enforce_mode_carries_a_pods_patch() {
    let mutated_pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04"}]},
    });
    let objects = [
        (mutated_pod.clone(), ObjectKind::Pod),
        (pod_with_change_and_violation(), ObjectKind::Pod),
        (clean_gpu_pod(), ObjectKind::Pod),
        (deployment(&mutated_pod), ObjectKind::of("apps", "Deployment")),
    ];
    let mut carried = 0;
    for (object, kind) in &objects {
        for mode in [Mode::Enforce, Mode::Warn, Mode::Audit] {
            let answer = decide(mode, *kind, &evaluation(object, *kind));
            carried += usize::from(answer.carries_patch());
        }
    }
    assert_eq!(carried, 2, "enforce mode patches the mutated pod and the clean GPU pod");
}

#[rstest]
#[case(Mode::Enforce, false, false, 0, false)]
#[case(Mode::Warn, true, false, 3, false)]
#[case(Mode::Audit, true, false, 0, true)]
fn modes_on_a_denied_pod(
    #[case] mode: Mode,
    #[case] allowed: bool,
    #[case] patched: bool,
    #[case] warnings: usize,
    #[case] audited: bool,
) {
    let pod = pod_with_change_and_violation();
    let decision = decide(mode, ObjectKind::Pod, &evaluation(&pod, ObjectKind::Pod));
    assert_eq!(decision.allowed, allowed);
    assert_eq!(decision.carries_patch(), patched);
    assert_eq!(decision.warnings.len(), warnings, "{:?}", decision.warnings);
    assert_eq!(decision.audit_annotations.contains_key("violations"), audited);
    assert_eq!(decision.audit_annotations.contains_key("mutations"), audited);
    assert_eq!(decision.denial.is_some(), !allowed);
}

#[test]
fn enforce_mutates_a_clean_gpu_pod_quietly() {
    let pod = clean_gpu_pod();
    let evaluated = evaluation(&pod, ObjectKind::Pod);
    let decision = decide(Mode::Enforce, ObjectKind::Pod, &evaluated);
    assert!(decision.allowed);
    assert!(decision.warnings.is_empty());
    assert!(decision.audit_annotations.is_empty());
    assert!(decision.carries_patch());
    let ops: Vec<String> = evaluated.patch.iter().map(|op| op.path().to_string()).collect();
    assert_eq!(ops, vec!["/spec/runtimeClassName", "/spec/affinity", "/metadata/annotations"]);
}

#[test]
fn warn_mode_says_what_would_happen() {
    let pod = pod_with_change_and_violation();
    let decision = decide(Mode::Warn, ObjectKind::Pod, &evaluation(&pod, ObjectKind::Pod));
    assert_eq!(
        decision.warnings,
        vec![
            "gpu-policy: [bounded-requests] would deny: container \"gpu\" must set limits.nvidia.com/gpu: a GPU request needs an equa…",
            "gpu-policy: [visible-devices] would pin NVIDIA_VISIBLE_DEVICES=void in container \"cpu\" (no GPU limit)",
            "gpu-policy: [runtime-class] would set runtimeClassName: nvidia (GPU pod)",
        ]
    );
}

#[test]
fn enforce_denial_lists_every_violation_on_one_line() {
    let mut pod = pod_with_change_and_violation();
    pod["spec"]["runtimeClassName"] = json!("kata");
    let decision = decide(Mode::Enforce, ObjectKind::Pod, &evaluation(&pod, ObjectKind::Pod));
    let denial = decision.denial.unwrap_or_default();
    assert!(denial.starts_with("gpu-policy: [bounded-requests] container \"gpu\""), "{denial}");
    assert!(denial.contains("; [runtime-class] runtimeClassName \"kata\""), "{denial}");
    assert!(!denial.contains('\n'));
}

#[rstest]
#[case(Mode::Enforce)]
#[case(Mode::Warn)]
#[case(Mode::Audit)]
fn templates_are_never_patched(#[case] mode: Mode) {
    let kind = ObjectKind::Workload(Workload::Deployment);
    let object = deployment(&clean_gpu_pod());
    let evaluation = evaluation(&object, kind);
    assert!(!evaluation.changes.is_empty());
    let decision = decide(mode, kind, &evaluation);
    assert!(!decision.carries_patch());
    assert!(decision.allowed);
}

#[test]
fn templates_warn_only_about_overrides() {
    let kind = ObjectKind::Workload(Workload::Deployment);
    let quiet = deployment(&json!({"metadata": {}, "spec": {"containers": [
        {"name": "cpu", "image": "nvidia/cuda:12.4.0-base"}]}}));
    let decision = decide(Mode::Enforce, kind, &evaluation(&quiet, kind));
    assert!(decision.warnings.is_empty(), "{:?}", decision.warnings);

    let overriding = deployment(&json!({"metadata": {}, "spec": {"containers": [
        {"name": "cpu", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}}));
    for mode in [Mode::Enforce, Mode::Warn] {
        let decision = decide(mode, kind, &evaluation(&overriding, kind));
        assert_eq!(
            decision.warnings,
            vec![
                "gpu-policy: [visible-devices] pods will replace NVIDIA_VISIBLE_DEVICES with void in container \"cpu\" (no GPU limit)"
            ]
        );
    }
}

#[test]
fn warnings_are_cut_under_120_characters() {
    let long = format!("gpu-policy: {}", "x".repeat(300));
    let cut = warning(&long);
    assert_eq!(cut.chars().count(), MAX_WARNING_CHARS);
    assert!(cut.ends_with('…'));
    assert_eq!(warning("gpu-policy: short"), "gpu-policy: short");
}

#[test]
fn allowlisted_objects_are_recorded_for_audit() {
    let exporter = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "nvidia-gpu-exporter", "namespace": "kube-system"},
        "spec": {"template": {"spec": {"runtimeClassName": "nvidia", "containers": [
            {"name": "e", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}}}});
    let kind = ObjectKind::Workload(Workload::DaemonSet);
    let settings = Settings::default();
    let ns = settings.for_namespace(&BTreeMap::new());
    let evaluator = Evaluator {
        settings: &settings,
        namespace: &ns,
        cluster: None,
        nodes: None,
        claims: None,
        images: None,
        claim_owner: None,
    };
    let evaluated = kind
        .created(leaked(&exporter), "kube-system")
        .map(|subject| evaluator.evaluate(&subject))
        .transpose();
    let Ok(Some(evaluation)) = evaluated else {
        panic!("not evaluated");
    };
    let decision = decide(Mode::Enforce, kind, &evaluation);
    assert!(decision.allowed && decision.warnings.is_empty());
    assert_eq!(
        decision.audit_annotations.get("allowlisted").map(String::as_str),
        Some("kube-system/DaemonSet/nvidia-gpu-exporter")
    );
}

#[rstest]
#[case("v1", "Pod", ObjectKind::Pod)]
#[case("apps/v1", "Deployment", ObjectKind::Workload(Workload::Deployment))]
#[case("batch/v1", "CronJob", ObjectKind::Workload(Workload::CronJob))]
#[case("v1", "PodTemplate", ObjectKind::Workload(Workload::PodTemplate))]
#[case("v1", "ReplicationController", ObjectKind::Workload(Workload::ReplicationController))]
#[case("example.com/v1", "Deployment", ObjectKind::Ignored)]
#[case("v1", "Service", ObjectKind::Ignored)]
#[case("apps/v1", "Pod", ObjectKind::Ignored)]
fn kinds(#[case] api_version: &str, #[case] kind: &str, #[case] expected: ObjectKind) {
    assert_eq!(ObjectKind::of_manifest(api_version, kind), expected);
}

/// `Shape::ALL` lists the shapes of the kinds admitted (a pod's and each
/// workload's), each once and nothing else: a shape for a new workload
/// fails here until it is listed, and the tests that go over every shape
/// cover it.
#[test]
fn every_shape_admitted_is_listed() {
    let mut admitted: Vec<Shape> = Workload::ALL.iter().map(|w| w.shape()).collect();
    admitted.push(Shape::Pod);
    for shape in &admitted {
        assert!(Shape::ALL.contains(shape), "{shape:?} is not in Shape::ALL");
    }
    for (at, shape) in Shape::ALL.iter().enumerate() {
        assert!(admitted.contains(shape), "no kind has the shape {shape:?}");
        assert!(!Shape::ALL[..at].contains(shape), "{shape:?} is listed twice");
    }
}

/// A review of `object` as these tests send it: kind and resource of a
/// Pod's shape in the object's group, a dry run by `alice`, `extra` request
/// fields on top.
fn review(object: &Value, operation: &str, extra: Value) -> Vec<u8> {
    let kind = object["kind"].as_str().unwrap_or("Pod");
    let group =
        object["apiVersion"].as_str().and_then(|v| v.rsplit_once('/')).map_or("", |(g, _)| g);
    let mut review = Review::create(object, "ml")
        .uid("3f1e0c1a-0000-4000-8000-000000000001")
        .set("kind", json!({"group": group, "version": "v1", "kind": kind}))
        .set("resource", json!({"group": group, "version": "v1", "resource": "pods"}))
        .set("operation", json!(operation))
        .set("userInfo", json!({"username": "alice"}))
        .dry_run(true);
    for (key, value) in extra.as_object().into_iter().flatten() {
        review = review.set(key, value.clone());
    }
    review.body()
}

fn answer(body: &[u8], endpoint: Endpoint) -> Value {
    let settings = Settings::default();
    let ns = settings.for_namespace(&BTreeMap::new());
    let request = match decode(body) {
        Ok(request) => request,
        Err(err) => panic!("{err}"),
    };
    let evaluator = Evaluator {
        settings: &settings,
        namespace: &ns,
        cluster: None,
        nodes: None,
        claims: None,
        images: None,
        claim_owner: None,
    };
    let answer = respond(&request, endpoint, &subject(&request, endpoint), &evaluator);
    let bytes = answer.encode(&request.uid).unwrap_or_default();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

#[test]
fn mutate_returns_a_base64_json_patch_and_echoes_the_uid() {
    let reply = answer(&review(&clean_gpu_pod(), "CREATE", json!({})), Endpoint::Mutate);
    assert_eq!(reply["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(reply["kind"], "AdmissionReview");
    let response = &reply["response"];
    assert_eq!(response["uid"], "3f1e0c1a-0000-4000-8000-000000000001");
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");
    let patch = response["patch"].as_str().unwrap_or_default();
    let decoded = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, patch);
    let operations: Value =
        serde_json::from_slice(&decoded.unwrap_or_default()).unwrap_or_default();
    let paths: Vec<&str> =
        operations.as_array().into_iter().flatten().filter_map(|op| op["path"].as_str()).collect();
    assert_eq!(paths, vec!["/spec/runtimeClassName", "/spec/affinity", "/metadata/annotations"]);
}

#[test]
fn validate_denies_with_403_and_the_reason() {
    let reply = answer(
        &review(&pod_with_change_and_violation(), "CREATE", json!({})),
        Endpoint::Validate(Mode::Enforce),
    );
    let response = &reply["response"];
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert!(
        response["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("must set limits.nvidia.com/gpu"))
    );
    assert!(response.get("patch").is_none());
}

#[test]
fn validate_warn_carries_warnings_and_audit_carries_annotations() {
    let body = review(&pod_with_change_and_violation(), "CREATE", json!({}));
    let warn = answer(&body, Endpoint::Validate(Mode::Warn));
    assert_eq!(warn["response"]["allowed"], true);
    assert_eq!(warn["response"]["warnings"].as_array().map(Vec::len), Some(3));
    let audit = answer(&body, Endpoint::Validate(Mode::Audit));
    assert_eq!(audit["response"]["allowed"], true);
    assert!(audit["response"].get("warnings").is_none());
    assert!(audit["response"]["auditAnnotations"]["violations"].is_string());
}

#[rstest]
#[case("DELETE", json!({}))]
// An update that changes nothing of a pod the webhook never mutated.
#[case("UPDATE", json!({"oldObject": pod_with_change_and_violation()}))]
#[case("UPDATE", json!({"subResource": "status"}))]
fn other_pod_operations_are_allowed_untouched(#[case] operation: &str, #[case] extra: Value) {
    let reply =
        answer(&review(&pod_with_change_and_violation(), operation, extra), Endpoint::Mutate);
    assert_eq!(reply["response"]["allowed"], true);
    assert!(reply["response"].get("patch").is_none());
}

#[test]
fn ephemeral_container_update_pins_the_new_container() {
    let old = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "app"}]}});
    let mut new = old.clone();
    new["spec"]["ephemeralContainers"] =
        json!([{"name": "debugger", "image": "nvidia/cuda:12.4.0-base"}]);
    let body =
        review(&new, "UPDATE", json!({"subResource": "ephemeralcontainers", "oldObject": old}));
    let reply = answer(&body, Endpoint::Mutate);
    assert_eq!(reply["response"]["allowed"], true);
    assert_eq!(reply["response"]["patchType"], "JSONPatch");
}

#[test]
fn unreadable_object_is_denied_with_the_field() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": "app"}});
    let reply = answer(&review(&pod, "CREATE", json!({})), Endpoint::Validate(Mode::Enforce));
    assert_eq!(reply["response"]["allowed"], false);
    assert_eq!(
        reply["response"]["status"]["message"],
        "gpu-policy: cannot read this Pod: spec.containers: must be a list, not a string"
    );
}

#[test]
fn unknown_kinds_are_allowed() {
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}});
    let reply = answer(&review(&service, "CREATE", json!({})), Endpoint::Validate(Mode::Enforce));
    assert_eq!(reply["response"]["allowed"], true);
}

#[rstest]
#[case(b"not json".as_slice(), "body is not an AdmissionReview")]
#[case(br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":null}"#.as_slice(), "unsupported apiVersion")]
#[case(br#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod"}"#.as_slice(), "expected AdmissionReview")]
#[case(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.as_slice(), "has no request")]
#[case(br#"{"kind":"AdmissionReview","request":null}"#.as_slice(), "missing field `apiVersion`")]
#[case(b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"Admission\xffReview\"}".as_slice(), "not UTF-8")]
fn malformed_reviews_are_errors(#[case] body: &[u8], #[case] message: &str) {
    let err: Option<ReviewError> = decode(body).err();
    let text = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(text.contains(message), "{text}");
}

/// Found by the `review` fuzz target: serde_json quotes an unknown value as
/// it was decoded, line breaks included, and the 400 reason must stay on
/// one line.
#[test]
fn a_malformed_review_is_refused_on_one_line() {
    let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREA\nmkdir\r-p\u2028x\u0085y"}}"#;
    let text = decode(body).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(text.contains("unknown variant"), "{text}");
    assert!(!text.contains(['\n', '\r', '\u{2028}', '\u{85}']), "{text:?}");
}

#[test]
fn mutate_never_denies_and_does_not_patch_a_pod_that_will_be_denied() {
    let body = review(&pod_with_change_and_violation(), "CREATE", json!({}));
    let reply = answer(&body, Endpoint::Mutate);
    assert_eq!(reply["response"]["allowed"], true);
    assert!(reply["response"].get("patch").is_none());
    let unreadable = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": "x"}});
    let reply = answer(&review(&unreadable, "CREATE", json!({})), Endpoint::Mutate);
    assert_eq!(reply["response"]["allowed"], true);
    let reply =
        answer(&review(&unreadable, "CREATE", json!({})), Endpoint::Validate(Mode::Enforce));
    assert_eq!(reply["response"]["allowed"], false);
}

fn privileged_pod(gpu: bool) -> Value {
    let mut container = json!({"name": "app", "image": "registry.example/app:1",
        "securityContext": {"privileged": true}});
    if gpu {
        container["resources"] = json!({"limits": {"nvidia.com/gpu": 1}});
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [container]}})
}

#[rstest]
// a privileged container without a GPU: the pod and the template are denied
#[case(false, ObjectKind::Pod, Mode::Enforce, false, "must not be privileged")]
#[case(
    false,
    ObjectKind::Workload(Workload::Deployment),
    Mode::Enforce,
    false,
    "must not be privileged"
)]
#[case(
    false,
    ObjectKind::Workload(Workload::Deployment),
    Mode::Warn,
    true,
    "would deny: container \"app\" must not be privileged"
)]
// a privileged GPU container: allowed with a warning, pod and template alike
#[case(true, ObjectKind::Pod, Mode::Enforce, true, "privileged container \"app\" sees every GPU")]
#[case(
    true,
    ObjectKind::Workload(Workload::Deployment),
    Mode::Enforce,
    true,
    "privileged container \"app\" sees every GPU"
)]
#[case(true, ObjectKind::Pod, Mode::Warn, true, "privileged container \"app\" sees every GPU")]
fn privileged_containers_by_mode_and_kind(
    #[case] gpu: bool,
    #[case] kind: ObjectKind,
    #[case] mode: Mode,
    #[case] allowed: bool,
    #[case] said: &str,
) {
    let pod = privileged_pod(gpu);
    let object = match kind {
        ObjectKind::Pod => pod,
        _ => deployment(&pod),
    };
    let decision = decide(mode, kind, &evaluation(&object, kind));
    assert_eq!(decision.allowed, allowed, "{decision:?}");
    let text =
        decision.denial.iter().chain(&decision.warnings).cloned().collect::<Vec<_>>().join("\n");
    assert!(text.contains(said), "{text}");
    assert!(decision.warnings.iter().all(|w| w.chars().count() <= MAX_WARNING_CHARS));
}

#[test]
fn privileged_gpu_containers_are_quiet_in_audit_mode() {
    let pod = privileged_pod(true);
    let decision = decide(Mode::Audit, ObjectKind::Pod, &evaluation(&pod, ObjectKind::Pod));
    assert!(decision.allowed);
    assert!(decision.warnings.is_empty(), "{:?}", decision.warnings);
}

/// A ResourceClaimTemplate of one GPU request with `exactly` fields.
fn claim_template(exactly: Value, annotations: Value) -> Value {
    let mut request = json!({"deviceClassName": "gpu.nvidia.com"});
    if let (Some(into), Some(from)) = (request.as_object_mut(), exactly.as_object()) {
        into.extend(from.clone());
    }
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": "all-gpus", "annotations": annotations},
           "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}}})
}

#[rstest]
#[case("resource.k8s.io/v1", "ResourceClaim", ObjectKind::Claim(ClaimKind::Claim))]
#[case("resource.k8s.io/v1beta1", "ResourceClaimTemplate", ObjectKind::Claim(ClaimKind::Template))]
#[case("resource.k8s.io/v1", "DeviceClass", ObjectKind::Ignored)]
// The core group has no claims.
#[case("v1", "ResourceClaim", ObjectKind::Ignored)]
fn claim_kinds(#[case] api_version: &str, #[case] kind: &str, #[case] expected: ObjectKind) {
    assert_eq!(ObjectKind::of_manifest(api_version, kind), expected);
}

/// The three validating endpoints decide a claim as the mode says; the
/// mutating one never looks at it.
#[test]
fn claims_are_validated_per_mode_and_never_mutated() {
    let all = claim_template(json!({"allocationMode": "All"}), json!({}));
    let body = review(&all, "CREATE", json!({}));
    let expected = "gpu-policy: [bounded-requests] request \"gpu\" asks for every GPU of a node \
                    (allocationMode: All); use allocationMode: ExactCount with a count";

    let enforce = &answer(&body, Endpoint::Validate(Mode::Enforce))["response"];
    assert_eq!(enforce["allowed"], false, "{enforce}");
    assert_eq!(enforce["status"]["code"], 403, "{enforce}");
    assert_eq!(enforce["status"]["message"], expected, "{enforce}");

    let warn = &answer(&body, Endpoint::Validate(Mode::Warn))["response"];
    assert_eq!(warn["allowed"], true, "{warn}");
    assert_eq!(
        warn["warnings"],
        json!([warning(
            &expected.replace("[bounded-requests] ", "[bounded-requests] would deny: ")
        )]),
        "{warn}"
    );

    let audit = &answer(&body, Endpoint::Validate(Mode::Audit))["response"];
    assert_eq!(audit["allowed"], true, "{audit}");
    assert!(audit.get("warnings").is_none_or(Value::is_null), "{audit}");
    assert_eq!(
        audit["auditAnnotations"]["violations"],
        expected.trim_start_matches("gpu-policy: "),
        "{audit}"
    );

    let mutate = &answer(&body, Endpoint::Mutate)["response"];
    assert_eq!(mutate["allowed"], true, "{mutate}");
    assert!(mutate.get("patch").is_none(), "{mutate}");

    // A bounded template is allowed quietly.
    let one = claim_template(json!({"count": 1}), json!({}));
    let allowed =
        &answer(&review(&one, "CREATE", json!({})), Endpoint::Validate(Mode::Enforce))["response"];
    assert_eq!(allowed["allowed"], true, "{allowed}");
    assert!(allowed.get("warnings").is_none_or(Value::is_null));
}

#[test]
fn scheduler_made_claims_are_never_denied_even_unreadable() {
    let annotations = json!({"resource.kubernetes.io/extended-resource-claim": "true"});
    for exactly in [json!({"allocationMode": "All"}), json!({"count": "lots"})] {
        let mut claim = claim_template(exactly, annotations.clone());
        claim["kind"] = json!("ResourceClaim");
        claim["spec"] = claim["spec"]["spec"].clone();
        let body = review(&claim, "CREATE", json!({}));
        for mode in Mode::ALL {
            let response = &answer(&body, Endpoint::Validate(mode))["response"];
            assert_eq!(response["allowed"], true, "{mode}: {response}");
            assert!(response.get("warnings").is_none_or(Value::is_null));
            assert!(response.get("auditAnnotations").is_none_or(Value::is_null));
        }
    }
}

#[test]
fn a_claim_update_that_keeps_the_spec_is_not_checked() {
    let all = claim_template(json!({"allocationMode": "All"}), json!({}));
    // A finalizer removed (the claim being deleted): the spec is unchanged.
    let mut released = all.clone();
    released["metadata"]["finalizers"] = json!([]);
    let body = review(&released, "UPDATE", json!({"oldObject": all}));
    let response = &answer(&body, Endpoint::Validate(Mode::Enforce))["response"];
    assert_eq!(response["allowed"], true, "{response}");
    // A changed spec (should the API ever allow it) is checked again.
    let one = claim_template(json!({"count": 1}), json!({}));
    let body = review(&all, "UPDATE", json!({"oldObject": one}));
    let response = &answer(&body, Endpoint::Validate(Mode::Enforce))["response"];
    assert_eq!(response["allowed"], false, "{response}");
    // Status is a subresource: not the claim's author's doing.
    let body = review(&all, "UPDATE", json!({"oldObject": one, "subResource": "status"}));
    let response = &answer(&body, Endpoint::Validate(Mode::Enforce))["response"];
    assert_eq!(response["allowed"], true, "{response}");
}

/// Only the GPU containers of a Pod being created, or of a workload's pod
/// template on a validating endpoint, are looked up in registries; the
/// platform comes from the node selector.
#[test]
fn the_images_worth_a_registry_lookup() {
    use crate::registry::Platform;
    let settings = Settings::default();
    let lookup = |body: Vec<u8>, endpoint: Endpoint| {
        let request = decode(&body).unwrap_or_else(|err| panic!("{err}"));
        let (_, subject) = subject(&request, endpoint).ok()??;
        images::wanted(&subject, &settings, None)
    };
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "nodeSelector": {"kubernetes.io/arch": "arm64"},
        "containers": [
            {"name": "cpu", "image": "busybox"},
            {"name": "a", "image": "train:1", "resources": {"limits": {"nvidia.com/gpu": 1}}},
            {"name": "b", "image": "train:1", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
    let expected = Some(crate::admission::images::Wanted {
        images: vec!["train:1".to_owned()],
        platform: Ok(Platform::linux("arm64")),
        namespace: "default".to_owned(),
    });
    let create = Review::create(&pod, "default").body();
    assert_eq!(lookup(create.clone(), Endpoint::Mutate), expected);
    assert_eq!(lookup(create, Endpoint::Validate(Mode::Warn)), expected);
    let workload = Review::create(&deployment(&pod), "default").body();
    assert_eq!(lookup(workload.clone(), Endpoint::Validate(Mode::Enforce)), expected);
    assert_eq!(lookup(workload, Endpoint::Mutate), None);
    let cpu = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": [{"name": "cpu", "image": "nvidia/cuda:13.0.2-base"}]}});
    assert_eq!(lookup(Review::create(&cpu, "default").body(), Endpoint::Mutate), None);
    let ephemeral =
        Review::update(&pod, &pod, "default").sub_resource("ephemeralcontainers").body();
    assert_eq!(lookup(ephemeral, Endpoint::Mutate), None);
}
