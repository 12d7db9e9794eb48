use rstest::rstest;
use serde_json::{Value, json};

use crate::document::Document;
use crate::policy::dra::claims::ClaimKind;
use crate::policy::dra::owner::OwnerPod;
use crate::policy::dra::products::selector;
use crate::policy::testing::{apply, evaluate_claim_for, owner_read};
use crate::policy::{Evaluation, Evaluator, RuleId};
use crate::settings::{Config, GPU_PRODUCTS_ANNOTATION, MAX_PRODUCT_PATTERNS, Settings};
use kubernetes_cel::{Device, DeviceSelector};

const H100: &str = "NVIDIA-H100*";

/// A ResourceClaim in `team-a`, made for no pod.
fn standalone(requests: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "shared-gpu", "namespace": "team-a"},
        "spec": {"devices": {"requests": requests}}})
}

/// A claim the resource claim controller made for `pod1` (UID `uid-1`) from its pod claim `gpu`.
fn made_for_pod1() -> Value {
    let mut claim =
        standalone(json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]));
    claim["metadata"]["name"] = json!("pod1-gpu-x7k2p");
    claim["metadata"]["annotations"] = json!({"resource.kubernetes.io/pod-claim-name": "gpu"});
    claim["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod",
        "name": "pod1", "uid": "uid-1", "controller": true, "blockOwnerDeletion": true}]);
    claim
}

/// pod1 as stored: container `ctr` of NGC PyTorch 25.12 (compute capability 7.5) holds its pod
/// claim `gpu`, from the template `single-gpu`.
fn pod1() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pod1", "namespace": "team-a", "uid": "uid-1"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
            "containers": [{"name": "ctr", "image": "nvcr.io/nvidia/pytorch:25.12-py3",
                            "resources": {"claims": [{"name": "gpu"}]}}]}})
}

fn evaluate_in(claim: &Value, owner: Option<&OwnerPod<'_>>, products: &str) -> Evaluation {
    evaluate_claim_for(
        claim,
        owner,
        &[],
        &[(GPU_PRODUCTS_ANNOTATION, products)],
        &Settings::default(),
    )
}

/// The selector the namespace annotated `products` gets, within `settings`.
fn expected(settings: &Settings, products: &str) -> String {
    let annotations = [(GPU_PRODUCTS_ANNOTATION.to_owned(), products.to_owned())].into();
    let namespace = settings.for_namespace(&annotations);
    selector(&namespace.gpu_products).unwrap_or_else(|| panic!("none")).expect("short")
}

fn entry(selector: &str) -> Value {
    json!({"cel": {"expression": selector}})
}

/// Whether the selectors of an alternative (ANDed) let through a device of `driver` named
/// `product`, as the scheduler would.
fn admits(selectors: &Value, driver: &str, product: &str) -> bool {
    let device = Device::from_slice_device(
        driver,
        &json!({"name": "gpu-0", "attributes": {"productName": {"string": product},
            "cudaComputeCapability": {"version": "9.0.0"}}}),
    );
    selectors.as_array().unwrap_or_else(|| panic!("no selectors: {selectors}")).iter().all(|s| {
        let text = s["cel"]["expression"].as_str().unwrap_or_else(|| panic!("{s}"));
        let compiled = DeviceSelector::compile(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        compiled.matches(&device).unwrap_or_else(|e| panic!("{text}: {e}"))
    })
}

#[test]
fn a_standalone_claim_gets_the_products_in_every_gpu_alternative() {
    let object = standalone(json!([
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
        {"name": "nic", "exactly": {"deviceClassName": "rdma.example.com"}},
        {"name": "either", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.nvidia.com",
             "selectors": [{"cel": {"expression": "device.attributes[\"gpu.nvidia.com\"].type == \"gpu\""}}]},
            {"name": "slice", "deviceClassName": "mig.nvidia.com"},
            {"name": "cpu", "deviceClassName": "cpu.example.com"}]},
    ]));
    let evaluation = evaluate_in(&object, None, H100);
    let patched = apply(&object, &evaluation.patch);
    let requests = &patched["spec"]["devices"]["requests"];
    let product = entry(&expected(&Settings::default(), H100));
    assert_eq!(requests[0]["exactly"]["selectors"], json!([product]));
    assert_eq!(requests[1], object["spec"]["devices"]["requests"][1]);
    let first = &requests[2]["firstAvailable"];
    assert_eq!(first[0]["selectors"][1], product);
    assert_eq!(first[0]["selectors"].as_array().map(Vec::len), Some(2));
    assert_eq!(first[1]["selectors"], json!([product]));
    assert_eq!(first[2].get("selectors"), None);
    assert_eq!(evaluation.changes.len(), 1, "{:?}", evaluation.changes);
    assert_eq!(evaluation.changes[0].rule, RuleId::ComputeAffinity);
    assert_eq!(
        evaluation.changes[0].summary,
        "require a GPU product of NVIDIA-H100* of the devices of requests \"gpu\", \"either\" \
         (namespace team-a)"
    );
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);
    // What the scheduler may pick from the patched claim.
    let selectors = &requests[0]["exactly"]["selectors"];
    assert!(admits(selectors, "gpu.nvidia.com", "NVIDIA H100 80GB HBM3"));
    assert!(!admits(selectors, "gpu.nvidia.com", "NVIDIA A100-SXM4-40GB"));
    assert!(admits(selectors, "gpu.example.com", "Other GPU"));
    // Invoked again on the mutated claim: nothing more.
    assert!(evaluate_in(&patched, None, H100).patch.is_empty());
}

#[test]
fn the_flat_v1beta1_shape_gets_it_too() {
    let object = standalone(json!([{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]));
    let patched = apply(&object, &evaluate_in(&object, None, H100).patch);
    assert_eq!(
        patched["spec"]["devices"]["requests"][0]["selectors"],
        json!([entry(&expected(&Settings::default(), H100))])
    );
}

#[rstest]
#[case::pod_read(Some(owner_read(&pod1(), Vec::new(), Vec::new())))]
#[case::pod_missing(Some(OwnerPod::NotFound))]
#[case::pod_unreadable(Some(OwnerPod::Unreadable("pods \"pod1\" is forbidden".to_owned())))]
#[case::not_read_on_this_endpoint(None)]
fn a_claim_made_for_a_pod_gets_them_whether_or_not_the_pod_is_read(
    #[case] owner: Option<OwnerPod<'static>>,
) {
    let object = made_for_pod1();
    let evaluation = evaluate_in(&object, owner.as_ref(), H100);
    let patched = apply(&object, &evaluation.patch);
    let selectors = &patched["spec"]["devices"]["requests"][0]["exactly"]["selectors"];
    let product = entry(&expected(&Settings::default(), H100));
    assert_eq!(selectors.as_array().and_then(|s| s.last()), Some(&product), "{patched}");
    assert!(evaluate_in(&patched, owner.as_ref(), H100).patch.is_empty());
}

#[test]
fn with_the_floors_both_selectors_go_into_one_list() {
    let owner = owner_read(&pod1(), Vec::new(), Vec::new());
    let object = made_for_pod1();
    let evaluation = evaluate_in(&object, Some(&owner), H100);
    assert_eq!(evaluation.changes.len(), 2, "{:?}", evaluation.changes);
    assert!(evaluation.changes[0].summary.starts_with("require compute capability >= 7.5"));
    let patched = apply(&object, &evaluation.patch);
    let selectors = &patched["spec"]["devices"]["requests"][0]["exactly"]["selectors"];
    assert_eq!(selectors.as_array().map(Vec::len), Some(2), "{patched}");
    let floors = selectors[0]["cel"]["expression"].as_str().unwrap_or("");
    assert!(floors.contains("cudaComputeCapability"), "{floors}");
    assert_eq!(selectors[1], entry(&expected(&Settings::default(), H100)));
    assert!(evaluate_in(&patched, Some(&owner), H100).patch.is_empty());
}

#[test]
fn both_lists_are_required() {
    let settings = Settings::from_config(Config {
        gpu_products: vec!["NVIDIA-H100*".to_owned(), "NVIDIA-A100*".to_owned()],
        ..Config::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let object =
        standalone(json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]));
    let evaluation =
        evaluate_claim_for(&object, None, &[], &[(GPU_PRODUCTS_ANNOTATION, "*-80GB*")], &settings);
    assert!(
        evaluation.changes[0]
            .summary
            .starts_with("require a GPU product of *-80GB* within NVIDIA-H100*,NVIDIA-A100* of"),
        "{:?}",
        evaluation.changes
    );
    let patched = apply(&object, &evaluation.patch);
    let selectors = &patched["spec"]["devices"]["requests"][0]["exactly"]["selectors"];
    assert_eq!(selectors, &json!([entry(&expected(&settings, "*-80GB*"))]));
    assert!(admits(selectors, "gpu.nvidia.com", "NVIDIA A100-SXM4-80GB"));
    assert!(!admits(selectors, "gpu.nvidia.com", "NVIDIA A100-SXM4-40GB"));
    assert!(!admits(selectors, "gpu.nvidia.com", "NVIDIA L40S-80GB"));
    // The cluster's list alone, without the annotation.
    let evaluation = evaluate_claim_for(&object, None, &[], &[], &settings);
    let patched = apply(&object, &evaluation.patch);
    let selectors = &patched["spec"]["devices"]["requests"][0]["exactly"]["selectors"];
    assert!(admits(selectors, "gpu.nvidia.com", "NVIDIA A100-SXM4-40GB"));
}

#[rstest]
#[case::any_product(None)]
#[case::unreadable_annotation(Some("NVIDIA H100"))]
fn a_namespace_allowing_any_product_changes_nothing(#[case] annotation: Option<&str>) {
    let object =
        standalone(json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]));
    let annotations: Vec<(&str, &str)> =
        annotation.map(|a| (GPU_PRODUCTS_ANNOTATION, a)).into_iter().collect();
    let evaluation = evaluate_claim_for(&object, None, &[], &annotations, &Settings::default());
    assert!(evaluation.patch.is_empty(), "{:?}", evaluation.patch);
}

#[test]
fn a_claim_without_gpu_requests_is_left_alone() {
    let object =
        standalone(json!([{"name": "nic", "exactly": {"deviceClassName": "rdma.example.com"}}]));
    let evaluation = evaluate_in(&object, None, H100);
    assert!(evaluation.patch.is_empty() && evaluation.violations.is_empty(), "{evaluation:?}");
}

#[test]
fn a_template_is_never_changed() {
    let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "single-gpu", "namespace": "team-a"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}});
    let settings = Settings::default();
    let annotations = [(GPU_PRODUCTS_ANNOTATION.to_owned(), H100.to_owned())].into();
    let namespace = settings.for_namespace(&annotations);
    let evaluator = Evaluator::of_cluster(&settings, &namespace, None, None);
    let document = Document::from_value(&template);
    let evaluation = evaluator
        .evaluate_claim(document.root(), ClaimKind::Template, "team-a")
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert!(evaluation.patch.is_empty(), "{:?}", evaluation.patch);
}

#[test]
fn a_selector_past_the_api_servers_limit_is_a_violation() {
    let long: Vec<String> =
        (0..MAX_PRODUCT_PATTERNS).map(|n| format!("NVIDIA-{n:02}-{}", "A-".repeat(26))).collect();
    let settings =
        Settings::from_config(Config { gpu_products: long.clone(), ..Config::default() })
            .unwrap_or_else(|e| panic!("{e}"));
    let object =
        standalone(json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]));
    let annotation = long.join(",");
    let evaluation = evaluate_claim_for(
        &object,
        None,
        &[],
        &[(GPU_PRODUCTS_ANNOTATION, annotation.as_str())],
        &settings,
    );
    assert!(evaluation.patch.is_empty(), "{:?}", evaluation.patch);
    let messages: Vec<String> =
        evaluation.violations.iter().map(|v| v.message.to_string()).collect();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(
        messages[0].contains("more than the 10240 a claim's selector may hold"),
        "{messages:?}"
    );
    assert_eq!(evaluation.violations[0].rule, RuleId::ComputeAffinity);
}
