use super::*;
use crate::document::Document;
use crate::policy::RuleId;
use crate::policy::cluster::{ClusterSnapshot, RuntimeClassInfo};
use crate::policy::testing::{
    apply, claim_template, evaluate_update_in, evaluate_with, evaluate_with_claims, messages_of,
};
use crate::policy::{Evaluation, Evaluator, Scope, Subject};
use crate::settings::Settings;
use rstest::rstest;
use serde_json::json;

const ID: RuleId = RuleId::GpuTolerations;

const GPU_TAINT: &str = "{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}";
const DEDICATED_TAINT: &str =
    "{key: dedicated, value: gpu, effect: NoExecute, tolerationSeconds: 60}";

fn settings(extra: &str) -> Settings {
    let yaml = format!("{{gpuTolerations: [{GPU_TAINT}, {DEDICATED_TAINT}]{extra}}}");
    Settings::from_yaml(&yaml, "test").unwrap()
}

fn gpu_toleration() -> Value {
    json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
}

fn dedicated_toleration() -> Value {
    json!({"key": "dedicated", "value": "gpu", "effect": "NoExecute", "tolerationSeconds": 60})
}

fn pod(limits: Value) -> Value {
    json!({"metadata": {"namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}})
}

fn gpu_pod() -> Value {
    pod(json!({"nvidia.com/gpu": 1}))
}

fn cpu_pod(tolerations: Value) -> Value {
    let mut pod = pod(json!({"cpu": "1"}));
    pod["spec"]["tolerations"] = tolerations;
    pod
}

fn kai_pod() -> Value {
    let mut pod = pod(json!({"cpu": "1"}));
    pod["metadata"]["annotations"] = json!({"gpu-fraction": "0.5"});
    pod["spec"]["schedulerName"] = json!("kai-scheduler");
    pod
}

fn hami_pod() -> Value {
    pod(json!({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000}))
}

fn allowlisted(mut pod: Value) -> Value {
    pod["metadata"] = json!({"namespace": "kube-system", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nvidia-gpu-exporter",
         "uid": "u-1", "controller": true}]});
    pod
}

fn changes(evaluation: &Evaluation) -> Vec<&str> {
    evaluation.changes.iter().filter(|c| c.rule == ID).map(|c| c.summary.as_str()).collect()
}

/// The pod after the whole patch, and that patch applied once more adds nothing.
fn patched_idempotent(pod: &Value, settings: &Settings) -> Value {
    let evaluation = evaluate_with(pod, settings);
    let patched = apply(pod, &evaluation.patch);
    let again = evaluate_with(&patched, settings);
    assert_eq!(changes(&again), Vec::<&str>::new(), "reinvocation: {:?}", again.patch);
    patched
}

/// GPU pods of every kind get the GPU tolerations they lack, once; other pods get none.
#[rstest]
#[case::device_plugin(gpu_pod(), None, vec![gpu_toleration(), dedicated_toleration()])]
#[case::kai_share(kai_pod(), None, vec![gpu_toleration(), dedicated_toleration()])]
#[case::hami_share(hami_pod(), None, vec![gpu_toleration(), dedicated_toleration()])]
// what the pod has is kept, what it lacks appended
#[case::some_present(
    gpu_pod(),
    Some(json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])),
    vec![gpu_toleration(), dedicated_toleration()]
)]
// Equal is the default operator: written out, the same toleration
#[case::equal_written(
    gpu_pod(),
    Some(json!([{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute",
        "tolerationSeconds": 60}])),
    vec![json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute",
        "tolerationSeconds": 60}), gpu_toleration()]
)]
// another tolerationSeconds is another toleration
#[case::other_seconds(
    gpu_pod(),
    Some(json!([{"key": "dedicated", "value": "gpu", "effect": "NoExecute", "tolerationSeconds": 5}])),
    vec![json!({"key": "dedicated", "value": "gpu", "effect": "NoExecute", "tolerationSeconds": 5}),
        gpu_toleration(), dedicated_toleration()]
)]
#[case::empty_list(gpu_pod(), Some(json!([])), vec![gpu_toleration(), dedicated_toleration()])]
#[case::cpu_pod(pod(json!({"cpu": "1"})), None, vec![])]
#[case::allowlisted(allowlisted(gpu_pod()), None, vec![])]
fn gpu_pods_get_the_tolerations(
    #[case] mut pod: Value,
    #[case] tolerations: Option<Value>,
    #[case] expected: Vec<Value>,
) {
    if let Some(tolerations) = tolerations {
        pod["spec"]["tolerations"] = tolerations;
    }
    let patched = patched_idempotent(&pod, &settings(""));
    let after = patched["spec"]["tolerations"].as_array().cloned().unwrap_or_default();
    assert_eq!(after, expected);
}

#[test]
fn the_summary_names_the_taints_added() {
    let mut pod = gpu_pod();
    pod["spec"]["tolerations"] = json!([gpu_toleration()]);
    let evaluation = evaluate_with(&pod, &settings(""));
    assert_eq!(
        changes(&evaluation),
        ["add tolerations for the GPU taints: dedicated=gpu:NoExecute"]
    );
    let evaluation = evaluate_with(&gpu_pod(), &settings(""));
    assert_eq!(
        changes(&evaluation),
        ["add tolerations for the GPU taints: nvidia.com/gpu:NoSchedule, dedicated=gpu:NoExecute"]
    );
}

#[test]
fn nothing_without_gpu_tolerations() {
    let evaluation = evaluate_with(&gpu_pod(), &Settings::default());
    assert!(changes(&evaluation).is_empty());
    let evaluation = evaluate_with(&cpu_pod(json!([gpu_toleration()])), &Settings::default());
    assert!(evaluation.notices.is_empty() && evaluation.violations.is_empty());
}

#[test]
fn dra_only_gpu_pods_get_them() {
    let mut pod = pod(json!({}));
    pod["spec"]["containers"][0]["resources"] = json!({"claims": [{"name": "gpu"}]});
    pod["spec"]["resourceClaims"] =
        json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]);
    let objects = vec![claim_template("one-gpu", "gpu.nvidia.com")];
    let evaluation = evaluate_with_claims(&pod, &objects, &settings(""));
    let patched = apply(&pod, &evaluation.patch);
    assert_eq!(patched["spec"]["tolerations"], json!([gpu_toleration(), dedicated_toleration()]));
    // A claim of no GPU class: no GPU pod, nothing added.
    let objects = vec![claim_template("one-gpu", "rdma.example.com")];
    let evaluation = evaluate_with_claims(&pod, &objects, &settings(""));
    assert!(changes(&evaluation).is_empty());
}

#[test]
fn templates_get_the_change_at_their_place() {
    let deployment = json!({"kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
        "spec": {"template": {"spec": gpu_pod()["spec"]}}});
    let settings = settings("");
    let namespace = settings.for_namespace(&Default::default());
    let evaluator = Evaluator::of_cluster(&settings, &namespace, None, None);
    let document = Document::from_value(&deployment);
    let subject =
        Subject::template(document.root(), crate::policy::Shape::Template, "Deployment", "default");
    let evaluation = evaluator.evaluate(&subject).unwrap();
    let patched = apply(&deployment, &evaluation.patch);
    assert_eq!(
        patched["spec"]["template"]["spec"]["tolerations"],
        json!([gpu_toleration(), dedicated_toleration()])
    );
}

/// What the tolerations say of a pod that asks for no GPU: (tolerations, message or none).
#[rstest]
#[case::exact(
    json!([gpu_toleration()]),
    Some("the pod requests no GPU but tolerates the GPU taint \"nvidia.com/gpu:NoSchedule\" \
        through its toleration \"nvidia.com/gpu:NoSchedule\"")
)]
// operator Exists without a key tolerates every taint
#[case::tolerate_everything(
    json!([{"operator": "Exists"}]),
    Some("the pod requests no GPU but tolerates the GPU taints \"nvidia.com/gpu:NoSchedule\", \
        \"dedicated=gpu:NoExecute\" through its toleration \"*\"")
)]
// an empty effect tolerates every effect; a value is compared unless either side is Exists
#[case::any_effect(
    json!([{"key": "dedicated", "operator": "Equal", "value": "gpu"},
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "cpu"}]),
    Some("the pod requests no GPU but tolerates the GPU taints \"nvidia.com/gpu:NoSchedule\", \
        \"dedicated=gpu:NoExecute\" through its tolerations \"dedicated=gpu\", \
        \"nvidia.com/gpu=present:NoSchedule\"")
)]
#[case::other_value(json!([{"key": "dedicated", "value": "cpu", "effect": "NoExecute"}]), None)]
#[case::other_effect(json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}]), None)]
#[case::other_key(json!([{"key": "example.com/fpga", "operator": "Exists"}]), None)]
#[case::no_key_equal(json!([{"operator": "Equal", "effect": "NoSchedule"}]), None)]
fn cpu_pods_tolerating_a_gpu_taint(#[case] tolerations: Value, #[case] expected: Option<&str>) {
    const FIX: &str = ": it could be scheduled on a GPU node and keep the node's GPUs from GPU \
        pods; remove the toleration, or request a GPU";
    let pod = cpu_pod(tolerations);
    let expected: Vec<String> =
        expected.into_iter().map(|body| format!("gpu-policy: {body}{FIX}")).collect();
    // Warned by default, nothing changed.
    let warned = evaluate_with(&pod, &settings(""));
    let notices: Vec<String> = warned
        .notices
        .iter()
        .filter(|n| n.kind == NoticeKind::GpuTaintTolerated)
        .map(|n| n.message.to_string())
        .collect();
    assert_eq!(notices, expected);
    assert!(messages_of(&warned, ID).is_empty());
    assert!(changes(&warned).is_empty());
    // Denied with denyCpuPodsOnGpuNodes.
    let denied = evaluate_with(&pod, &settings(", denyCpuPodsOnGpuNodes: true"));
    assert_eq!(messages_of(&denied, ID), expected);
    assert!(denied.notices.iter().all(|n| n.kind != NoticeKind::GpuTaintTolerated));
}

#[rstest]
// a GPU pod may tolerate what it likes
#[case::gpu_pod(gpu_pod())]
#[case::allowlisted(allowlisted(pod(json!({"cpu": "1"}))))]
// a claim that cannot be resolved may hold a GPU
#[case::unresolved_claim({
    let mut pod = pod(json!({}));
    pod["spec"]["containers"][0]["resources"] = json!({"claims": [{"name": "gpu"}]});
    pod["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": "unknown"}]);
    pod
})]
fn pods_that_may_tolerate_gpu_taints(#[case] mut pod: Value) {
    pod["spec"]["tolerations"] = json!([{"operator": "Exists"}]);
    let evaluation = evaluate_with(&pod, &settings(", denyCpuPodsOnGpuNodes: true"));
    assert!(messages_of(&evaluation, ID).is_empty(), "{:?}", evaluation.violations);
    assert!(evaluation.notices.iter().all(|n| n.kind != NoticeKind::GpuTaintTolerated));
}

#[test]
fn updates_make_again_what_creation_added() {
    let settings = settings("");
    let created = apply(&gpu_pod(), &evaluate_with(&gpu_pod(), &settings).patch);
    // An update that sends the author's spec again (the tolerations left out) gets them back.
    let mut sent = gpu_pod();
    sent["metadata"] = created["metadata"].clone();
    let evaluation = evaluate_update_in(&sent, &created, &settings, None);
    let patched = apply(&sent, &evaluation.patch);
    assert_eq!(patched["spec"]["tolerations"], created["spec"]["tolerations"]);
    // An update that keeps them: nothing to do.
    let evaluation = evaluate_update_in(&created, &created, &settings, None);
    assert!(changes(&evaluation).is_empty());
    // A pod created without them (before the setting) gets nothing on update.
    let evaluation = evaluate_update_in(&gpu_pod(), &gpu_pod(), &settings, None);
    assert!(changes(&evaluation).is_empty());
}

#[test]
fn ephemeral_container_updates_are_left_alone() {
    let settings = settings(", denyCpuPodsOnGpuNodes: true");
    let old = cpu_pod(json!([{"operator": "Exists"}]));
    let mut new = old.clone();
    new["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "busybox"}]);
    let namespace = settings.for_namespace(&Default::default());
    let evaluator = Evaluator::of_cluster(&settings, &namespace, None, None);
    let (new_document, old_document) = (Document::from_value(&new), Document::from_value(&old));
    let scope = crate::policy::scope_for_update(old_document.root());
    assert!(matches!(scope, Scope::NewEphemeralContainers(_)));
    let evaluation =
        evaluator.evaluate(&Subject::pod(new_document.root(), "default", scope)).unwrap();
    assert!(messages_of(&evaluation, ID).is_empty());
}

fn cluster_with_class(tolerations: Vec<Value>) -> ClusterSnapshot {
    let mut cluster = ClusterSnapshot::default();
    cluster.runtime_classes.insert(
        "nvidia".to_owned(),
        RuntimeClassInfo { tolerations, ..RuntimeClassInfo::default() },
    );
    cluster
}

/// R3 adds the RuntimeClass's tolerations and R8 the GPU ones to a pod without tolerations, both
/// computed from the same pod: the patch applied holds each toleration once.
#[rstest]
#[case::apart(
    vec![json!({"key": "example.com/runtime", "operator": "Exists"})],
    vec![json!({"key": "example.com/runtime", "operator": "Exists"}), gpu_toleration(),
        dedicated_toleration()]
)]
#[case::overlapping(
    vec![gpu_toleration(), json!({"key": "example.com/runtime", "operator": "Exists"})],
    vec![gpu_toleration(), json!({"key": "example.com/runtime", "operator": "Exists"}),
        dedicated_toleration()]
)]
fn runtime_class_and_gpu_tolerations_compose(
    #[case] class_tolerations: Vec<Value>,
    #[case] expected: Vec<Value>,
) {
    let settings = settings("");
    let cluster = cluster_with_class(class_tolerations);
    let namespace = settings.for_namespace(&Default::default());
    let evaluator = Evaluator::of_cluster(&settings, &namespace, Some(&cluster), None);
    for mut pod in [gpu_pod(), {
        let mut pod = gpu_pod();
        pod["spec"]["tolerations"] = json!([]);
        pod
    }] {
        pod["spec"]["containers"][0]["image"] = json!("busybox");
        let document = Document::from_value(&pod);
        let evaluation =
            evaluator.evaluate(&Subject::pod(document.root(), "default", Scope::Whole)).unwrap();
        assert!(
            evaluation.changes.iter().any(|c| c.rule == RuleId::RuntimeClass),
            "{:?}",
            evaluation.changes
        );
        let patched = apply(&pod, &evaluation.patch);
        assert_eq!(patched["spec"]["tolerations"], json!(expected), "{:?}", evaluation.patch);
        let again = Document::from_value(&patched);
        let evaluation =
            evaluator.evaluate(&Subject::pod(again.root(), "default", Scope::Whole)).unwrap();
        assert!(evaluation.patch.is_empty(), "{:?}", evaluation.patch);
    }
}

#[test]
fn toleration_texts() {
    let text = |value: Value| toleration_text(Document::from_value(&value).root());
    assert_eq!(text(json!({"operator": "Exists"})), "*");
    assert_eq!(
        text(json!({"key": "k", "operator": "Exists", "effect": "NoSchedule"})),
        "k:NoSchedule"
    );
    assert_eq!(text(json!({"key": "k", "value": "v"})), "k=v");
}
