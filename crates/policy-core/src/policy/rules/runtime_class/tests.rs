use super::*;
use crate::policy::RuleId;
use crate::policy::testing::{apply, claim_template, evaluate_pod, evaluate_with};
use crate::settings::Settings;
use rstest::rstest;
use serde_json::json;

const ID: RuleId = RuleId::RuntimeClass;

fn pod(runtime_class: Option<&str>, gpus: u64) -> Value {
    let mut pod = json!({"spec": {"containers": [
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}});
    if let Some(class) = runtime_class {
        pod["spec"]["runtimeClassName"] = json!(class);
    }
    pod
}

/// A pod in `default` whose container `c` uses claim `gpu` (template
/// `one-gpu`, one GPU) or `nic` (template `one-nic`, no GPU), with a
/// device-plugin limit of `gpus`.
fn dra_pod(claim: &str, runtime_class: Option<&str>, gpus: u64) -> Value {
    let mut pod = pod(runtime_class, gpus);
    pod["metadata"] = json!({"namespace": "default"});
    pod["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": claim}]);
    pod["spec"]["resourceClaims"] = json!([
            {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
            {"name": "nic", "resourceClaimTemplateName": "one-nic"}]);
    pod
}

/// R3 on DRA pods: (claim, runtime class, device-plugin GPUs) ->
/// (class after the patch, denied).
#[rstest]
// only DRA GPUs: no class injected, and the reserved class is accepted
#[case("gpu", None, 0, None, false)]
#[case("gpu", Some("nvidia"), 0, Some("nvidia"), false)]
// a GPU pod all the same: a class outside the GPU set is denied
#[case("gpu", Some("kata"), 0, Some("kata"), true)]
// device-plugin GPUs too: the class is injected as for any GPU pod
#[case("gpu", None, 1, Some("nvidia"), false)]
// a claim of no GPU class makes no GPU pod: the reserved class is denied
#[case("nic", None, 0, None, false)]
#[case("nic", Some("nvidia"), 0, Some("nvidia"), true)]
fn dra_pods(
    #[case] claim: &str,
    #[case] runtime_class: Option<&str>,
    #[case] gpus: u64,
    #[case] after: Option<&str>,
    #[case] denied: bool,
) {
    let objects = vec![
        claim_template("one-gpu", "gpu.nvidia.com"),
        claim_template("one-nic", "rdma.example.com"),
    ];
    let pod = dra_pod(claim, runtime_class, gpus);
    let evaluation =
        crate::policy::testing::evaluate_with_claims(&pod, &objects, &Settings::default());
    let patched = apply(&pod, &evaluation.patch);
    assert_eq!(patched["spec"]["runtimeClassName"].as_str(), after, "{:?}", evaluation.changes);
    assert_eq!(
        evaluation.violations.iter().any(|v| v.rule == ID),
        denied,
        "{:?}",
        evaluation.violations
    );
}

#[rstest]
// GPU pod without a class: injected
#[case(pod(None, 1), Some("nvidia"), 0)]
#[case(pod(Some(""), 1), Some("nvidia"), 0)]
// GPU pod with the GPU class: nothing to do
#[case(pod(Some("nvidia"), 1), None, 0)]
// GPU pod with another class: denied
#[case(pod(Some("kata"), 1), None, 1)]
// non-GPU pod with the GPU class: denied
#[case(pod(Some("nvidia"), 0), None, 1)]
// non-GPU pod with another class, or none: fine
#[case(pod(Some("gvisor"), 0), None, 0)]
#[case(pod(None, 0), None, 0)]
fn runtime_class_table(
    #[case] pod: Value,
    #[case] injected: Option<&str>,
    #[case] violations: usize,
) {
    let evaluation = evaluate_pod(&pod);
    let changes = evaluation.changes.iter().filter(|c| c.rule == ID).count();
    assert_eq!(changes, usize::from(injected.is_some()));
    let patched = apply(&pod, &evaluation.patch);
    if let Some(class) = injected {
        assert_eq!(patched["spec"]["runtimeClassName"], json!(class));
    }
    let found: Vec<_> = evaluation.violations.iter().filter(|v| v.rule == ID).collect();
    assert_eq!(found.len(), violations, "{found:?}");
}

#[test]
fn messages_say_what_to_do() {
    let wrong = evaluate_pod(&pod(Some("kata"), 1));
    assert_eq!(
        wrong.violations[0].message,
        "gpu-policy: runtimeClassName \"kata\" is not a GPU runtime class; use nvidia or remove the field"
    );
    let reserved = evaluate_pod(&pod(Some("nvidia"), 0));
    assert!(reserved.violations[0].message.contains("reserved for pods that request a GPU"));
}

#[test]
fn allowlisted_pods_may_use_the_gpu_class_without_requesting() {
    let mut exporter = pod(Some("nvidia"), 0);
    exporter["metadata"] = json!({"namespace": "kube-system", "ownerReferences": [
            {"kind": "DaemonSet", "name": "nvidia-gpu-exporter", "controller": true}]});
    assert!(evaluate_pod(&exporter).violations.is_empty());
}

#[test]
fn configured_class_is_injected() {
    let settings = Settings::from_yaml(
        "runtimeClassName: nvidia-cdi\ngpuRuntimeClasses: [nvidia, nvidia-cdi]",
        "t",
    )
    .unwrap_or_default();
    let pod = pod(None, 2);
    let patched = apply(&pod, &evaluate_with(&pod, &settings).patch);
    assert_eq!(patched["spec"]["runtimeClassName"], json!("nvidia-cdi"));
}

/// `runtimeClassName: ""` injects nothing into a GPU pod, and the
/// classes of `gpuRuntimeClasses` stay reserved for GPU pods.
#[test]
fn an_empty_class_injects_nothing_and_still_reserves() {
    let settings = Settings::from_yaml("runtimeClassName: ''", "t").unwrap_or_default();
    assert_eq!(settings.config().runtime_class_name, "");
    let gpu = pod(None, 1);
    let evaluation = evaluate_with(&gpu, &settings);
    assert!(evaluation.changes.iter().all(|c| c.rule != ID), "{evaluation:?}");
    assert!(apply(&gpu, &evaluation.patch)["spec"].get("runtimeClassName").is_none());
    let cpu = pod(Some("nvidia"), 0);
    let denied = crate::policy::testing::messages_of(&evaluate_with(&cpu, &settings), ID);
    assert_eq!(
        denied,
        ["gpu-policy: runtimeClassName \"nvidia\" is reserved for pods that request a GPU; \
              remove it, or request nvidia.com/gpu in limits"]
    );
    // A GPU pod may still name it.
    assert!(evaluate_with(&pod(Some("nvidia"), 1), &settings).violations.is_empty());
}

mod with_a_cluster {
    use super::*;
    use crate::policy::cluster::{ClusterSnapshot, RuntimeClassInfo};
    use crate::policy::testing::evaluate_in_cluster;

    fn cluster(info: Option<RuntimeClassInfo>) -> ClusterSnapshot {
        let mut snapshot = ClusterSnapshot::default();
        if let Some(info) = info {
            snapshot.runtime_classes.insert("nvidia".to_owned(), info);
        }
        snapshot
    }

    fn scheduling_class() -> RuntimeClassInfo {
        RuntimeClassInfo {
            pod_fixed_overhead: json!({"cpu": "250m", "memory": "64Mi"}).as_object().cloned(),
            node_selector: json!({"nvidia.com/gpu.present": "true"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            tolerations: vec![
                json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}),
            ],
        }
    }

    #[test]
    fn missing_class_is_not_injected() {
        let gpu = pod(None, 1);
        let evaluation = evaluate_in_cluster(&gpu, &cluster(None));
        assert!(evaluation.changes.iter().all(|c| c.rule != ID));
        assert!(evaluation.notices.iter().any(|n| n.message.contains("does not exist")));
        assert!(evaluation.violations.is_empty());
    }

    #[test]
    fn naming_a_missing_class_is_denied() {
        let evaluation = evaluate_in_cluster(&pod(Some("nvidia"), 1), &cluster(None));
        assert_eq!(
            evaluation.violations.iter().map(|v| v.message.as_str()).collect::<Vec<_>>(),
            vec![
                "gpu-policy: RuntimeClass \"nvidia\" does not exist in this cluster; install the NVIDIA runtime class or remove the field"
            ]
        );
    }

    #[test]
    fn injected_class_brings_overhead_and_scheduling() {
        let gpu = pod(None, 1);
        let evaluation = evaluate_in_cluster(&gpu, &cluster(Some(scheduling_class())));
        let patched = apply(&gpu, &evaluation.patch);
        assert_eq!(patched["spec"]["runtimeClassName"], "nvidia");
        assert_eq!(patched["spec"]["overhead"], json!({"cpu": "250m", "memory": "64Mi"}));
        assert_eq!(patched["spec"]["nodeSelector"], json!({"nvidia.com/gpu.present": "true"}));
        assert_eq!(
            patched["spec"]["tolerations"],
            json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
        );
    }

    #[test]
    fn scheduling_merges_with_what_the_pod_has() {
        let mut gpu = pod(None, 1);
        gpu["spec"]["nodeSelector"] = json!({"zone": "a"});
        gpu["spec"]["tolerations"] = json!([
            {"key": "nvidia.com/gpu", "effect": "NoSchedule", "operator": "Exists"},
            {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
        ]);
        let evaluation = evaluate_in_cluster(&gpu, &cluster(Some(scheduling_class())));
        let patched = apply(&gpu, &evaluation.patch);
        assert_eq!(
            patched["spec"]["nodeSelector"],
            json!({"zone": "a", "nvidia.com/gpu.present": "true"})
        );
        assert_eq!(patched["spec"]["tolerations"], gpu["spec"]["tolerations"]);
    }

    #[rstest]
    #[case("nodeSelector", json!({"nvidia.com/gpu.present": "false"}), "conflicts")]
    #[case("overhead", json!({"cpu": "1"}), "differs")]
    fn conflicts_with_the_class_are_denied(
        #[case] field: &str,
        #[case] value: Value,
        #[case] message: &str,
    ) {
        let mut gpu = pod(None, 1);
        gpu["spec"][field] = value;
        let evaluation = evaluate_in_cluster(&gpu, &cluster(Some(scheduling_class())));
        assert!(
            evaluation.violations.iter().any(|v| v.rule == ID && v.message.contains(message)),
            "{:?}",
            evaluation.violations
        );
    }
}
