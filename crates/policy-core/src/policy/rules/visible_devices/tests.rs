use super::*;
use crate::policy::testing::{apply, env_of, evaluate_pod, evaluate_pod_update};
use crate::policy::{Change, RuleId};

const ID: RuleId = RuleId::VisibleDevices;
use rstest::rstest;
use serde_json::json;

fn gpu_limit() -> Value {
    json!({"limits": {"nvidia.com/gpu": 1}})
}

#[rstest]
// no env at all: env is created
#[case(json!({"name": "c"}), vec![json!({"name": VARIABLE, "value": "void"})], false)]
// other variables stay, pin appended
#[case(json!({"name": "c", "env": [{"name": "A", "value": "1"}]}),
           vec![json!({"name": "A", "value": "1"}), json!({"name": VARIABLE, "value": "void"})], false)]
// an author's "all" is replaced
#[case(json!({"name": "c", "env": [{"name": VARIABLE, "value": "all"}, {"name": "B", "value": "2"}]}),
           vec![json!({"name": "B", "value": "2"}), json!({"name": VARIABLE, "value": "void"})], true)]
// duplicates and valueFrom all go
#[case(json!({"name": "c", "env": [
                {"name": VARIABLE, "value": "0"},
                {"name": "K", "value": "k"},
                {"name": VARIABLE, "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}},
                {"name": VARIABLE, "value": "void"}]}),
           vec![json!({"name": "K", "value": "k"}), json!({"name": VARIABLE, "value": "void"})], true)]
// a valueFrom next to a void value is not the pin
#[case(json!({"name": "c", "env": [{"name": VARIABLE, "value": "void", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]}),
           vec![json!({"name": VARIABLE, "value": "void"})], true)]
fn non_gpu_container_ends_with_one_pin(
    #[case] container: Value,
    #[case] expected_env: Vec<Value>,
    #[case] overrides: bool,
) {
    let pod = json!({"spec": {"containers": [container]}});
    let evaluation = evaluate_pod(&pod);
    let changes: Vec<&Change> = evaluation.changes.iter().filter(|c| c.rule == ID).collect();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].overrides_author, overrides);
    assert_eq!(env_of(&apply(&pod, &evaluation.patch), "c"), expected_env);
}

#[test]
fn pinned_container_is_left_alone() {
    let pod = json!({"spec": {"containers": [{"name": "c", "env": [
        {"name": "A", "value": "1"}, {"name": VARIABLE, "value": "void"}, {"name": "B", "value": "2"}
    ]}]}});
    assert!(evaluate_pod(&pod).changes.is_empty());
}

#[rstest]
#[case(json!([{"name": VARIABLE, "value": "all"}]), vec![])]
#[case(json!([{"name": VARIABLE, "value": "0,1"}, {"name": "X", "value": "x"}, {"name": VARIABLE, "value": "2"}]),
           vec![json!({"name": "X", "value": "x"})])]
fn gpu_container_loses_authored_values(#[case] env: Value, #[case] expected: Vec<Value>) {
    let pod =
        json!({"spec": {"containers": [{"name": "c", "resources": gpu_limit(), "env": env}]}});
    let evaluation = evaluate_pod(&pod);
    let change = evaluation.changes.iter().find(|c| c.rule == ID);
    assert!(
        change.is_some_and(|c| c.overrides_author && c.summary.contains("GPU container \"c\""))
    );
    assert_eq!(env_of(&apply(&pod, &evaluation.patch), "c"), expected);
}

#[test]
fn gpu_container_without_the_variable_is_untouched() {
    let pod = json!({"spec": {"runtimeClassName": "nvidia",
            "containers": [{"name": "c", "resources": gpu_limit(), "env": [{"name": "A", "value": "1"}]}]}});
    assert!(evaluate_pod(&pod).changes.iter().all(|c| c.rule != ID));
}

#[test]
fn every_container_kind_is_pinned_except_gpu_ones() {
    let pod = json!({"spec": {
        "initContainers": [{"name": "init"}, {"name": "sidecar", "restartPolicy": "Always"}],
        "containers": [{"name": "gpu", "resources": gpu_limit()}, {"name": "logger"}],
    }});
    let evaluation = evaluate_pod(&pod);
    let change = evaluation.changes.iter().find(|c| c.rule == ID);
    assert_eq!(
        change.map(|c| c.summary.as_str()),
        Some(
            "pin NVIDIA_VISIBLE_DEVICES=void in containers \"init\", \"sidecar\", \"logger\" (no GPU limit)"
        )
    );
    let patched = apply(&pod, &evaluation.patch);
    for name in ["init", "sidecar", "logger"] {
        assert_eq!(env_of(&patched, name), vec![json!({"name": VARIABLE, "value": "void"})]);
    }
    assert!(env_of(&patched, "gpu").is_empty());
}

#[test]
fn allowlisted_pods_are_not_pinned() {
    let pod = json!({"metadata": {"namespace": "kube-system", "ownerReferences": [
            {"kind": "DaemonSet", "name": "nvidia-gpu-exporter", "controller": true, "uid": "1"}]},
            "spec": {"containers": [{"name": "exporter", "env": [{"name": VARIABLE, "value": "all"}]}]}});
    let evaluation = evaluate_pod(&pod);
    assert!(evaluation.changes.is_empty(), "{:?}", evaluation.changes);
    assert!(evaluation.allowlisted.is_some());
}

#[test]
fn ephemeral_update_pins_only_new_ephemeral_containers() {
    let old = json!({"spec": {"containers": [{"name": "app"}],
            "ephemeralContainers": [{"name": "debugger-1"}]}});
    let new = json!({"spec": {"containers": [{"name": "app"}],
            "ephemeralContainers": [{"name": "debugger-1"}, {"name": "debugger-2", "image": "nvidia/cuda:12.4.0-base"}]}});
    let evaluation = evaluate_pod_update(&new, &old);
    let summaries: Vec<&str> = evaluation.changes.iter().map(|c| c.summary.as_str()).collect();
    assert_eq!(
        summaries,
        vec!["pin NVIDIA_VISIBLE_DEVICES=void in container \"debugger-2\" (no GPU limit)"]
    );
    let patched = apply(&new, &evaluation.patch);
    assert_eq!(env_of(&patched, "debugger-2").len(), 1);
    assert!(env_of(&patched, "debugger-1").is_empty());
    assert!(env_of(&patched, "app").is_empty());
}

#[test]
fn configured_pin_is_used() {
    let settings = crate::settings::Settings::from_yaml("visibleDevicesPin: none", "t");
    let settings = settings.unwrap_or_default();
    let pod = json!({"spec": {"containers": [{"name": "c"}]}});
    let evaluation = crate::policy::testing::evaluate_with(&pod, &settings);
    let patched = apply(&pod, &evaluation.patch);
    assert_eq!(env_of(&patched, "c"), vec![json!({"name": VARIABLE, "value": "none"})]);
}
