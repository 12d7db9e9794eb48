use super::*;
use crate::policy::sharing::VISIBLE_DEVICES as VARIABLE;
use crate::policy::testing::{apply, env_of, evaluate_pod, evaluate_with};
use crate::policy::{Evaluation, RuleId};
use rstest::rstest;
use serde_json::{Value, json};

const KAI: &str = "kai-scheduler";

/// A pod KAI schedules, with these annotations and containers.
fn kai_pod(annotations: Value, init: Vec<Value>, containers: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "frac", "namespace": "default", "annotations": annotations},
        "spec": {"schedulerName": KAI, "initContainers": init, "containers": containers}})
}

fn container(name: &str) -> Value {
    json!({"name": name, "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"})
}

/// The env entry KAI's webhook writes into the share container.
fn kai_env(configmap: &str) -> Value {
    json!({"name": VARIABLE, "valueFrom": {"configMapKeyRef":
        {"name": configmap, "key": VARIABLE}}})
}

fn denials(evaluation: &Evaluation) -> Vec<String> {
    evaluation.violations.iter().map(|v| v.message.to_string()).collect()
}

fn settings(yaml: &str) -> Settings {
    Settings::from_yaml(yaml, "config.yaml").unwrap_or_else(|err| panic!("{err}"))
}

#[rstest]
#[case::first_regular_container(json!({"gpu-fraction": "0.5"}), vec![], vec!["main", "sidecar"], Some("main"))]
#[case::by_memory(json!({"gpu-memory": "4096"}), vec![], vec!["main"], Some("main"))]
#[case::named(json!({"gpu-fraction": "0.5", "gpu-fraction-container-name": "gpu"}), vec![], vec!["side", "gpu"], Some("gpu"))]
#[case::init_first(json!({"gpu-fraction": "0.5", "gpu-fraction-container-name": "prep"}), vec!["prep"], vec!["main"], Some("prep"))]
#[case::unknown_name(json!({"gpu-fraction": "0.5", "gpu-fraction-container-name": "nope"}), vec![], vec!["main"], None)]
#[case::no_fraction(json!({"gpu-fraction-num-devices": "2"}), vec![], vec!["main"], None)]
fn kai_picks_the_share_container(
    #[case] annotations: Value,
    #[case] init: Vec<&str>,
    #[case] containers: Vec<&str>,
    #[case] holder: Option<&str>,
) {
    let pod = kai_pod(
        annotations,
        init.into_iter().map(container).collect(),
        containers.into_iter().map(container).collect(),
    );
    let settings = Settings::default();
    let view =
        PodView::parse(crate::policy::testing::leaked(&pod), crate::policy::Shape::Pod, &settings)
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("a view"));
    let shares: Vec<&str> =
        view.containers.iter().filter(|c| c.kai_share).map(|c| c.name).collect();
    assert_eq!(shares, holder.into_iter().collect::<Vec<_>>());
}

/// Only KAI binds a pod with KAI's scheduler name; under another scheduler
/// the annotation gives nothing, and with KAI sharing off neither.
#[rstest]
#[case::default_scheduler("", Some("default-scheduler"))]
#[case::kai_off("gpuSharing: {kaiScheduler: {enabled: false}}", Some(KAI))]
#[case::another_name("gpuSharing: {kaiScheduler: {schedulerName: kai}}", Some(KAI))]
fn the_annotation_alone_makes_no_gpu_container(
    #[case] yaml: &str,
    #[case] scheduler: Option<&str>,
) {
    let mut pod = kai_pod(json!({"gpu-fraction": "0.5"}), vec![], vec![container("main")]);
    pod["spec"]["schedulerName"] = json!(scheduler);
    let evaluation = evaluate_with(&pod, &settings(yaml));
    let patched = apply(&pod, &evaluation.patch);
    assert_eq!(env_of(&patched, "main"), vec![json!({"name": VARIABLE, "value": "void"})]);
}

/// The share container keeps KAI's variable and loses any other; the
/// sidecar is pinned; the reserved class is allowed.
#[test]
fn a_kai_fraction_keeps_its_share_and_its_class() {
    let mut main = container("main");
    main["env"] = json!([
        {"name": VARIABLE, "value": "all"},
        kai_env("frac-abc1234-shared-gpu-0"),
        {"name": "GPU_PORTION", "valueFrom": {"configMapKeyRef": {"name": "frac-abc1234-shared-gpu-0", "key": "GPU_PORTION"}}},
    ]);
    let mut pod = kai_pod(
        json!({"gpu-fraction": "0.5", KAI_CONFIGMAP: "frac-abc1234-shared-gpu"}),
        vec![],
        vec![main, container("sidecar")],
    );
    pod["spec"]["runtimeClassName"] = json!("nvidia");
    let evaluation = evaluate_pod(&pod);
    assert!(denials(&evaluation).is_empty(), "{evaluation:?}");
    let patched = apply(&pod, &evaluation.patch);
    let main_env = env_of(&patched, "main");
    assert!(main_env.contains(&kai_env("frac-abc1234-shared-gpu-0")), "{main_env:?}");
    assert!(!main_env.iter().any(|e| e["value"] == "all"), "{main_env:?}");
    assert_eq!(env_of(&patched, "sidecar"), vec![json!({"name": VARIABLE, "value": "void"})]);
    assert!(apply(&patched, &evaluate_pod(&patched).patch) == patched, "idempotent");
}

#[rstest]
#[case::other_configmap(kai_env("mine"))]
#[case::other_key(json!({"name": VARIABLE, "valueFrom": {"configMapKeyRef": {"name": "frac-x-shared-gpu-0", "key": "all"}}}))]
#[case::not_an_index(kai_env("frac-x-shared-gpu-all"))]
#[case::with_a_value(json!({"name": VARIABLE, "value": "all", "valueFrom": {"configMapKeyRef": {"name": "frac-x-shared-gpu-0", "key": VARIABLE}}}))]
fn an_authored_variable_in_the_share_container_is_replaced_by_the_pin(#[case] entry: Value) {
    let mut main = container("main");
    main["env"] = json!([entry]);
    let pod = kai_pod(
        json!({"gpu-fraction": "0.5", KAI_CONFIGMAP: "frac-x-shared-gpu"}),
        vec![],
        vec![main],
    );
    let patched = apply(&pod, &evaluate_pod(&pod).patch);
    assert_eq!(env_of(&patched, "main"), vec![json!({"name": VARIABLE, "value": "void"})]);
}

/// Before KAI's webhook has written the share's variable, the share
/// container is pinned (KAI replaces the entry); after, it is not.
#[test]
fn the_share_container_is_pinned_until_kai_writes_its_variable() {
    let pod = kai_pod(json!({"gpu-fraction": "0.5"}), vec![], vec![container("main")]);
    let evaluation = evaluate_pod(&pod);
    let summaries: Vec<&str> = evaluation.changes.iter().map(|c| c.summary.as_str()).collect();
    assert!(
        summaries.contains(&"pin NVIDIA_VISIBLE_DEVICES=void in container \"main\" until KAI-Scheduler sets its GPU share"),
        "{summaries:?}"
    );
    assert_eq!(apply(&pod, &evaluation.patch)["spec"]["runtimeClassName"], "nvidia");
}

#[rstest]
#[case::fraction_of_one(json!({"gpu-fraction": "1"}), "must be a number above 0 and below 1")]
#[case::fraction_above_one(json!({"gpu-fraction": "1.2"}), "must be a number above 0 and below 1")]
#[case::fraction_zero(json!({"gpu-fraction": "0"}), "must be a number above 0 and below 1")]
#[case::fraction_nan(json!({"gpu-fraction": "NaN"}), "must be a number above 0 and below 1")]
#[case::memory_units(json!({"gpu-memory": "2Gi"}), "must be a whole number of MiB above 0")]
#[case::both(json!({"gpu-fraction": "0.5", "gpu-memory": "100"}), "cannot both be set")]
#[case::devices(json!({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}), "must be a whole number above 0")]
#[case::devices_above(json!({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "9"}), "above the maximum of 8 per container")]
#[case::unknown_container(json!({"gpu-fraction": "0.5", "gpu-fraction-container-name": "x"}), "names no container")]
fn kai_denies_what_kai_refuses(#[case] annotations: Value, #[case] reason: &str) {
    let pod = kai_pod(annotations, vec![], vec![container("main")]);
    let evaluation = evaluate_pod(&pod);
    let messages = denials(&evaluation);
    assert!(messages.iter().any(|m| m.contains(reason)), "{reason}: {messages:?}");
    assert!(evaluation.violations.iter().all(|v| v.rule == RuleId::BoundedRequests));
}

#[test]
fn a_fraction_next_to_a_whole_card_is_denied() {
    let mut whole = container("whole");
    whole["resources"] = json!({"limits": {"nvidia.com/gpu": 1}});
    let pod = kai_pod(json!({"gpu-fraction": "0.5"}), vec![], vec![container("main"), whole]);
    let messages = denials(&evaluate_pod(&pod));
    assert!(
        messages
            .iter()
            .any(|m| m.contains("container \"whole\" must not also set limits.nvidia.com/gpu")),
        "{messages:?}"
    );
}

#[rstest]
#[case::fractions_count_per_device("3", 3)]
#[case::default_one("", 1)]
fn a_fraction_counts_its_devices_against_the_pod_maximum(
    #[case] devices: &str,
    #[case] cards: u64,
) {
    let mut annotations = json!({"gpu-fraction": "0.5"});
    if !devices.is_empty() {
        annotations["gpu-fraction-num-devices"] = json!(devices);
    }
    let pod = kai_pod(annotations, vec![], vec![container("main")]);
    let settings = settings(&format!("maxPerPod: {}", cards - 1));
    let messages = denials(&evaluate_with(&pod, &settings));
    assert!(
        messages.iter().any(|m| m.contains(&format!("the pod needs {cards} nvidia.com/gpu"))),
        "{messages:?}"
    );
    let settings = self::settings(&format!("maxPerPod: {cards}"));
    assert!(denials(&evaluate_with(&pod, &settings)).is_empty());
}

fn hami_pod(limits: Value, requests: Option<Value>) -> Value {
    let mut resources = json!({"limits": limits});
    if let Some(requests) = requests {
        resources["requests"] = requests;
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vgpu", "namespace": "default"},
        "spec": {"containers": [
            {"name": "main", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04", "resources": resources},
            {"name": "log", "image": "busybox"}]}})
}

/// A HAMi share is a GPU container, counted as one card, its values never
/// cards; the sidecar is pinned, and so is the share until HAMi has
/// written its card count.
#[rstest]
#[case::memory_only(json!({"nvidia.com/gpumem": 3000}), true)]
#[case::cores_only(json!({"nvidia.com/gpucores": 30}), true)]
#[case::percentage_only(json!({"nvidia.com/gpumem-percentage": "50"}), true)]
#[case::with_cards(json!({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 100}), false)]
fn hami_shares_are_gpu_containers_not_cards(#[case] limits: Value, #[case] awaits_hami: bool) {
    let pod = hami_pod(limits, None);
    let evaluation = evaluate_pod(&pod);
    assert!(denials(&evaluation).is_empty(), "{evaluation:?}");
    let patched = apply(&pod, &evaluation.patch);
    let pinned = vec![json!({"name": VARIABLE, "value": "void"})];
    let expected = if awaits_hami { pinned } else { Vec::new() };
    assert_eq!(env_of(&patched, "main"), expected);
    assert_eq!(env_of(&patched, "log"), vec![json!({"name": VARIABLE, "value": "void"})]);
    assert_eq!(patched["spec"]["runtimeClassName"], "nvidia");
}

#[test]
fn a_hami_share_counts_as_one_card() {
    let pod = hami_pod(json!({"nvidia.com/gpumem": 3000}), None);
    let messages = denials(&evaluate_with(&pod, &settings("maxPerPod: 0")));
    assert!(messages.iter().any(|m| m.contains("the pod needs 1 nvidia.com/gpu")), "{messages:?}");
}

/// Naming the share resources in `gpuResources` changes nothing while HAMi
/// is on: 3000 MiB is not 3000 cards.
#[test]
fn share_resources_in_gpu_resources_are_still_shares() {
    let pod = hami_pod(json!({"nvidia.com/gpumem": 3000}), None);
    let settings = settings("gpuResources: ['nvidia.com/gpu', 'nvidia.com/gpumem']");
    assert!(denials(&evaluate_with(&pod, &settings)).is_empty());
}

#[rstest]
#[case::cores_above_100(json!({"nvidia.com/gpucores": 101}), None, "limits.nvidia.com/gpucores is 101, above 100 percent")]
#[case::percentage_above_100(json!({"nvidia.com/gpumem-percentage": 150}), None, "limits.nvidia.com/gpumem-percentage is 150")]
#[case::fractional(json!({"nvidia.com/gpumem": "1.5"}), None, "a HAMi share is a whole number")]
#[case::request_not_limit(json!({"nvidia.com/gpumem": 3000}), Some(json!({"nvidia.com/gpumem": 2000})), "requests.nvidia.com/gpumem differs from limits.nvidia.com/gpumem")]
fn hami_share_values_are_checked_as_shares(
    #[case] limits: Value,
    #[case] requests: Option<Value>,
    #[case] reason: &str,
) {
    let messages = denials(&evaluate_pod(&hami_pod(limits, requests)));
    assert!(messages.iter().any(|m| m.contains(reason)), "{reason}: {messages:?}");
}

/// The API server defaults requests to limits: a share written in `limits`
/// alone reaches the webhook in both, and is reported once, as written.
#[rstest]
#[case::percentage_above_100(json!({"nvidia.com/gpumem-percentage": 101}))]
#[case::fractional(json!({"nvidia.com/gpumem": "1.5"}))]
fn a_request_defaulted_from_its_limit_is_reported_once(#[case] limits: Value) {
    let written = denials(&evaluate_pod(&hami_pod(limits.clone(), None)));
    let defaulted = denials(&evaluate_pod(&hami_pod(limits.clone(), Some(limits))));
    assert_eq!(written.len(), 1, "{written:?}");
    assert_eq!(defaulted, written);
}

/// With HAMi off, its names are whatever `gpuResources` makes of them.
#[test]
fn with_hami_off_a_share_alone_is_no_gpu() {
    let pod = hami_pod(json!({"nvidia.com/gpumem": 3000}), None);
    let evaluation = evaluate_with(&pod, &settings("gpuSharing: {hami: {enabled: false}}"));
    let patched = apply(&pod, &evaluation.patch);
    assert_eq!(env_of(&patched, "main"), vec![json!({"name": VARIABLE, "value": "void"})]);
}

#[rstest]
#[case::fraction("0.5", true)]
#[case::leading_dot(".25", true)]
#[case::scientific("5e-1", true)]
#[case::one("1.0", false)]
#[case::negative("-0.5", false)]
#[case::infinity("inf", false)]
#[case::hex("0x1p-1", false)]
#[case::empty("", false)]
fn fractions_read_as_kai_reads_them(#[case] raw: &str, #[case] accepted: bool) {
    assert_eq!(fraction_below_one(raw), accepted, "{raw:?}");
}

/// Time slicing: a replica of `nvidia.com/gpu.shared` is a GPU resource
/// like a card (the device plugin decides whether more than one replica
/// may be asked for); the container is not pinned and the pod gets the
/// runtime class.
#[test]
fn a_time_sliced_replica_is_a_gpu_request() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ts"},
        "spec": {"containers": [{"name": "main", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04",
            "resources": {"limits": {"nvidia.com/gpu.shared": 2}}}]}});
    let evaluation = evaluate_pod(&pod);
    assert!(denials(&evaluation).is_empty(), "{evaluation:?}");
    let patched = apply(&pod, &evaluation.patch);
    assert_eq!(env_of(&patched, "main"), Vec::<Value>::new());
    assert_eq!(patched["spec"]["runtimeClassName"], "nvidia");
    let messages = denials(&evaluate_with(&pod, &settings("maxPerPod: 1")));
    assert!(
        messages.iter().any(|m| m.contains("the pod needs 2 nvidia.com/gpu.shared")),
        "{messages:?}"
    );
}

/// The templates spell the annotations and the card resource out; they
/// must be the names the rule reads.
#[test]
fn the_templates_name_what_the_rule_reads() {
    let named = [
        (KAI_BOTH, vec![GPU_FRACTION, GPU_MEMORY]),
        (KAI_BESIDE_CARDS, vec![HAMI_CARDS]),
        (KAI_FRACTION, vec![GPU_FRACTION, HAMI_CARDS]),
        (KAI_MEMORY, vec![GPU_MEMORY]),
        (KAI_DEVICES, vec![FRACTION_DEVICES]),
        (KAI_DEVICES_ABOVE_MAXIMUM, vec![FRACTION_DEVICES]),
        (KAI_CONTAINER, vec![FRACTION_CONTAINER]),
    ];
    for (template, names) in named {
        for name in names {
            assert!(template.text().contains(name), "{template:?} {name}");
        }
    }
}
