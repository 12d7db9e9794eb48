//! R8's policies case by case: the validation denies with `denyCpuPodsOnGpuNodes` and warns in
//! every mode without it, in the webhook's words; the mutating policy adds what the webhook adds;
//! both stay within the API server's cost limits with the most tolerations `gpuTolerations` takes.

use std::collections::BTreeMap;

use gpu_policy::admission::{Mode, ObjectKind};
use gpu_policy::admission_policy::cost_check;
use gpu_policy::admission_policy::engine::{PolicyEngine, as_admitted, create_attributes};
use gpu_policy::admission_policy::{all_generated, bindings};
use gpu_policy::kubernetes_version::KubernetesVersion;
use gpu_policy::policy::{NoticeKind, RuleId};
use gpu_policy::settings::{MAX_GPU_TOLERATIONS, Settings};
use kubernetes_cel::MutationOutcome;
use serde_json::{Value, json};

use super::{policy_messages, webhook_messages, webhook_under};

const TOLERATIONS: &str = "gpuTolerations: [{key: nvidia.com/gpu, operator: Exists, \
    effect: NoSchedule}, {key: dedicated, value: gpu, effect: NoExecute, tolerationSeconds: 60}]";

fn settings(deny: bool) -> Settings {
    let yaml = format!("{{{TOLERATIONS}, denyCpuPodsOnGpuNodes: {deny}}}");
    Settings::from_yaml(&yaml, "test").unwrap_or_else(|err| panic!("{err}"))
}

fn engine(settings: &Settings) -> PolicyEngine {
    PolicyEngine::new(settings).unwrap_or_else(|err| panic!("the policies must compile: {err}"))
}

fn pod(limits: Value, tolerations: Option<Value>) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox",
            "resources": {"limits": limits}}]}});
    if let Some(tolerations) = tolerations {
        pod["spec"]["tolerations"] = tolerations;
    }
    pod
}

fn cpu_pod() -> Value {
    pod(json!({"cpu": "1"}), Some(json!([{"operator": "Exists"}, {"key": "other"}])))
}

#[test]
fn a_cpu_pod_tolerating_a_gpu_taint_is_denied_in_the_webhooks_words() {
    let settings = settings(true);
    let annotations = BTreeMap::new();
    let pod = cpu_pod();
    let evaluation = webhook_under(&settings, &pod, ObjectKind::Pod, "default", &annotations)
        .unwrap_or_else(|| panic!("the webhook reads the pod"));
    let webhook = webhook_messages(&evaluation);
    assert_eq!(webhook.get(&RuleId::GpuTolerations).map(Vec::len), Some(1), "{webhook:?}");
    let policies = policy_messages(&engine(&settings), &pod, "default", &annotations);
    assert_eq!(policies.get(&RuleId::GpuTolerations), webhook.get(&RuleId::GpuTolerations));
}

#[test]
fn without_deny_the_validation_warns_in_every_mode() {
    let settings = settings(false);
    let annotations = BTreeMap::new();
    let pod = cpu_pod();
    let evaluation = webhook_under(&settings, &pod, ObjectKind::Pod, "default", &annotations)
        .unwrap_or_else(|| panic!("the webhook reads the pod"));
    let notices: Vec<String> = evaluation
        .notices
        .iter()
        .filter(|n| n.kind == NoticeKind::GpuTaintTolerated)
        .map(|n| n.message.to_string())
        .collect();
    assert_eq!(notices.len(), 1);
    let engine = engine(&settings);
    let report = engine.report(&pod, None, "default", Mode::Enforce, &annotations);
    assert!(report.allowed, "{:?}", report.denial);
    assert!(report.violations.is_empty());
    assert_eq!(report.warnings, notices);
    assert_eq!(report.warnings_in_full, notices);
    // Its bindings warn where the others deny.
    let generated = all_generated(&settings, KubernetesVersion::default());
    let policy = generated
        .validating
        .iter()
        .find(|p| p.rule == RuleId::GpuTolerations)
        .unwrap_or_else(|| panic!("a validation is generated"));
    assert!(policy.warn_only);
    let actions: Vec<Value> =
        bindings("ValidatingAdmissionPolicyBinding", &policy.name, policy.warn_only)
            .iter()
            .map(|binding| binding["spec"]["validationActions"][0].clone())
            .collect();
    assert_eq!(actions, [json!("Warn"), json!("Warn"), json!("Audit")]);
    // A GPU pod tolerating the taint is not warned.
    let gpu = pod_with_gpu(Some(json!([{"operator": "Exists"}])));
    let report = engine.report(&gpu, None, "default", Mode::Enforce, &annotations);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

fn pod_with_gpu(tolerations: Option<Value>) -> Value {
    pod(json!({"nvidia.com/gpu": 1}), tolerations)
}

#[test]
fn the_mutating_policy_adds_what_the_webhook_adds() {
    let settings = settings(false);
    let engine = engine(&settings);
    let annotations = BTreeMap::new();
    for tolerations in [
        None,
        Some(json!([])),
        Some(json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])),
        Some(json!([{"key": "dedicated", "operator": "Equal", "value": "gpu",
            "effect": "NoExecute", "tolerationSeconds": 60}, {"key": "x"}])),
    ] {
        let pod = pod_with_gpu(tolerations);
        let evaluation = webhook_under(&settings, &pod, ObjectKind::Pod, "default", &annotations)
            .unwrap_or_else(|| panic!("the webhook reads the pod"));
        let operations: Vec<json_patch::PatchOperation> = evaluation
            .changes
            .iter()
            .filter(|c| c.rule == RuleId::GpuTolerations)
            .flat_map(|c| evaluation.operations(c).to_vec())
            .collect();
        let mut expected = pod.clone();
        json_patch::patch(&mut expected, &operations).unwrap_or_else(|err| panic!("{err}"));
        let attributes = create_attributes(&pod, "default", "enforce", &annotations)
            .unwrap_or_else(|| panic!("a Pod is matched"));
        let actual = match engine.mutate_rule(RuleId::GpuTolerations, &attributes) {
            Some(MutationOutcome::Patched { object, .. }) => object,
            other => panic!("{other:?}"),
        };
        assert_eq!(actual, as_admitted(&expected));
        assert_eq!(
            actual["spec"]["tolerations"].as_array().map(|list| list.len() >= 2),
            Some(true),
            "{actual}"
        );
    }
}

#[test]
fn the_most_gpu_tolerations_stay_within_the_cost_limits() {
    let list: Vec<String> = (0..MAX_GPU_TOLERATIONS)
        .map(|i| {
            format!(
                "{{key: example.com/taint-{i}, value: v{i}, effect: NoExecute, \
                 tolerationSeconds: {i}}}"
            )
        })
        .collect();
    let yaml = format!("{{gpuTolerations: [{}], denyCpuPodsOnGpuNodes: true}}", list.join(", "));
    let settings = Settings::from_yaml(&yaml, "test").unwrap_or_else(|err| panic!("{err}"));
    let checks = cost_check::check(&settings, true);
    let names: Vec<&str> = checks.iter().map(|c| c.reference_name.as_str()).collect();
    assert!(!checks.is_empty(), "{names:?}");
    for check in &checks {
        assert!(check.within_limits(), "{check:?}");
    }
}
