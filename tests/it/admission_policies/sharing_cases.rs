//! The GPU sharing schemes, policy against webhook case by case, where
//! random pods seldom reach them alone: every KAI annotation value of the
//! generator's lists on an otherwise clean pod, and the cards HAMi shares
//! and KAI fractions add to the pod's count (R2's `maxPerPod`).

use std::collections::BTreeMap;

use gpu_policy::admission::ObjectKind;
use gpu_policy::policy::RuleId;
use gpu_policy::settings::Settings;
use rstest::rstest;
use serde_json::{Value, json};

use super::sharing_pods::{BAD_DEVICES, BAD_FRACTIONS, BAD_MEMORIES, DEVICES, FRACTIONS, MEMORIES};
use super::{
    ENGINE, messages_agree, policy_messages, policy_rules, policy_rules_of, webhook, webhook_rules,
    webhook_under,
};

/// A pod in namespace `gpu` with these annotations and containers; its
/// scheduler `scheduler` when given.
fn pod(
    scheduler: Option<&str>,
    annotations: &[(&str, &str)],
    inits: Vec<Value>,
    containers: Vec<Value>,
) -> Value {
    let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "shared", "namespace": "gpu", "annotations": annotations},
        "spec": {"initContainers": inits, "containers": containers},
    });
    if let Some(scheduler) = scheduler {
        pod["spec"]["schedulerName"] = json!(scheduler);
    }
    pod
}

/// A container with these limits (and no requests); a sidecar when
/// `sidecar`.
fn container(name: &str, limits: Value, sidecar: bool) -> Value {
    let mut c = json!({
        "name": name,
        "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
        "resources": {"limits": limits},
    });
    if sidecar {
        c["restartPolicy"] = json!("Always");
    }
    c
}

fn plain(name: &str) -> Value {
    container(name, json!({}), false)
}

fn gpus(name: &str, n: u64) -> Value {
    container(name, json!({"nvidia.com/gpu": n.to_string()}), false)
}

/// Whether the webhook's R2 denies `pod` in a namespace with `annotations`,
/// after checking that the policies deny exactly what the webhook does.
fn bounded_denies(pod: &Value, annotations: &BTreeMap<String, String>) -> bool {
    let evaluation = webhook(pod, ObjectKind::Pod, "gpu", annotations)
        .unwrap_or_else(|| panic!("the webhook reads {pod}"));
    let expected = webhook_rules(&evaluation);
    let (actual, messages) = policy_rules(pod, "gpu", annotations);
    assert_eq!(
        actual, expected,
        "{pod}\nwebhook: {:?}\npolicies: {messages:?}",
        evaluation.violations
    );
    let policies = policy_messages(&ENGINE, pod, "gpu", annotations);
    if let Err(difference) = messages_agree(pod, &evaluation, policies) {
        panic!("{pod}\n{difference}");
    }
    expected.contains(&RuleId::BoundedRequests)
}

#[test]
fn kai_annotation_values_decide_as_the_webhook() {
    let none = BTreeMap::new();
    let lists: [(&str, &[&str], bool); 6] = [
        ("gpu-fraction", &FRACTIONS, false),
        ("gpu-fraction", &BAD_FRACTIONS, true),
        ("gpu-memory", &MEMORIES, false),
        ("gpu-memory", &BAD_MEMORIES, true),
        ("gpu-fraction-num-devices", &DEVICES, false),
        ("gpu-fraction-num-devices", &BAD_DEVICES, true),
    ];
    for (key, values, denied) in lists {
        for value in values {
            let mut annotations = vec![(key, *value)];
            if key == "gpu-fraction-num-devices" {
                annotations.push(("gpu-fraction", "0.5"));
            }
            let pod = pod(Some("kai-scheduler"), &annotations, vec![], vec![plain("train")]);
            assert_eq!(bounded_denies(&pod, &none), denied, "{key}={value:?}");
        }
    }
}

#[rstest]
// Both annotations, a named container missing, a fraction beside a card.
#[case::both(&[("gpu-fraction", "0.5"), ("gpu-memory", "1024")], vec![], vec![plain("a")], true)]
#[case::named_missing(&[("gpu-fraction", "0.5"), ("gpu-fraction-container-name", "x")], vec![], vec![plain("a")], true)]
#[case::named_init(&[("gpu-fraction", "0.5"), ("gpu-fraction-container-name", "i")], vec![plain("i")], vec![plain("a")], false)]
#[case::beside_a_card(&[("gpu-memory", "1024")], vec![], vec![plain("a"), gpus("b", 1)], true)]
#[case::beside_no_card(&[("gpu-memory", "1024")], vec![], vec![plain("a"), gpus("b", 0)], false)]
fn kai_problems_decide_as_the_webhook(
    #[case] annotations: &[(&str, &str)],
    #[case] inits: Vec<Value>,
    #[case] containers: Vec<Value>,
    #[case] denied: bool,
) {
    let pod = pod(Some("kai-scheduler"), annotations, inits, containers);
    assert_eq!(bounded_denies(&pod, &BTreeMap::new()), denied);
}

fn hami(name: &str, cards: Option<&str>) -> Value {
    let mut limits = json!({"nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"});
    if let Some(cards) = cards {
        limits["nvidia.com/gpu"] = json!(cards);
    }
    container(name, limits, false)
}

/// A sidecar holding a HAMi share (one card).
fn sidecar_share(name: &str) -> Value {
    let mut c = hami(name, None);
    c["restartPolicy"] = json!("Always");
    c
}

fn fraction(devices: Option<&str>, named: Option<&str>) -> Vec<(&'static str, String)> {
    let mut annotations = vec![("gpu-fraction", "0.5".to_owned())];
    if let Some(devices) = devices {
        annotations.push(("gpu-fraction-num-devices", devices.to_owned()));
    }
    if let Some(named) = named {
        annotations.push(("gpu-fraction-container-name", named.to_owned()));
    }
    annotations
}

#[rstest]
// A HAMi share without nvidia.com/gpu is one card: 2 + 1 above 2.
#[case::hami_implied(None, vec![], vec![], vec![gpus("a", 2), hami("b", None)], Some("2"), true)]
#[case::hami_implied_within(None, vec![], vec![], vec![gpus("a", 1), hami("b", None)], Some("2"), false)]
// With nvidia.com/gpu, that count: 0, or 1 (not 1 + 1).
#[case::hami_zero_cards(None, vec![], vec![], vec![gpus("a", 2), hami("b", Some("0"))], Some("2"), false)]
#[case::hami_one_card(None, vec![], vec![], vec![gpus("a", 1), hami("b", Some("1"))], Some("2"), false)]
#[case::hami_two_shares(None, vec![], vec![], vec![hami("a", None), hami("b", None), hami("c", None)], Some("2"), true)]
// A KAI fraction counts its devices under nvidia.com/gpu (a whole-card
// limit beside it is denied anyway): 2 + HAMi's 1 above 2, 1 + 1 not.
#[case::kai_devices(Some("kai-scheduler"), fraction(Some("2"), None), vec![], vec![plain("a"), hami("b", None)], Some("2"), true)]
#[case::kai_devices_within(Some("kai-scheduler"), fraction(Some("1"), None), vec![], vec![plain("a"), hami("b", None)], Some("2"), false)]
// One device by default, in the first container: 1 + 1 + 1.
#[case::kai_default(Some("kai-scheduler"), fraction(None, None), vec![], vec![plain("a"), hami("b", None), hami("c", None)], Some("2"), true)]
// An init container holding it runs beside the sidecar started before it.
#[case::kai_init_after_sidecar(
    Some("kai-scheduler"),
    fraction(Some("2"), Some("i")),
    vec![sidecar_share("s"), plain("i")],
    vec![plain("a")],
    Some("2"),
    true
)]
#[case::kai_init_before_sidecar(
    Some("kai-scheduler"),
    fraction(Some("2"), Some("i")),
    vec![plain("i"), sidecar_share("s")],
    vec![plain("a")],
    Some("2"),
    false
)]
// Another scheduler: the annotations are not KAI's, nothing is counted.
#[case::other_scheduler(Some("default-scheduler"), fraction(Some("3"), None), vec![], vec![plain("a"), gpus("b", 8)], None, false)]
fn shares_count_as_the_webhook_counts(
    #[case] scheduler: Option<&str>,
    #[case] annotations: Vec<(&'static str, String)>,
    #[case] inits: Vec<Value>,
    #[case] containers: Vec<Value>,
    #[case] namespace_maximum: Option<&str>,
    #[case] denied: bool,
) {
    let annotations: Vec<(&str, &str)> =
        annotations.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let pod = pod(scheduler, &annotations, inits, containers);
    let namespace: BTreeMap<String, String> = namespace_maximum
        .map(|max| ("gpu-policy.io/max-gpus-per-pod".to_owned(), max.to_owned()))
        .into_iter()
        .collect();
    assert_eq!(bounded_denies(&pod, &namespace), denied);
}

/// Whether R2 denies `pod` under the settings `yaml`, after checking that
/// the policies generated from them deny exactly what the webhook does.
fn bounded_denies_under(yaml: &str, pod: &Value) -> bool {
    let settings = Settings::from_yaml(yaml, "sharing.yaml").unwrap_or_else(|err| panic!("{err}"));
    let engine = super::engine(&settings);
    let none = BTreeMap::new();
    let evaluation = webhook_under(&settings, pod, ObjectKind::Pod, "gpu", &none)
        .unwrap_or_else(|| panic!("the webhook reads {pod}"));
    let expected = webhook_rules(&evaluation);
    let (actual, messages) = policy_rules_of(&engine, pod, "gpu", &none);
    assert_eq!(
        actual, expected,
        "{yaml}: {pod}\nwebhook: {:?}\npolicies: {messages:?}",
        evaluation.violations
    );
    let policies = policy_messages(&engine, pod, "gpu", &none);
    if let Err(difference) = messages_agree(pod, &evaluation, policies) {
        panic!("{yaml}: {pod}\n{difference}");
    }
    expected.contains(&RuleId::BoundedRequests)
}

/// `gpu-fraction-num-devices` above `maxPerContainer`, where `maxPerPod`
/// does not hide it.
#[rstest]
#[case("8", false)]
#[case("9", true)]
#[case("0000000000000000016", true)]
#[case("9999999999999999999", true)]
fn kai_devices_above_the_container_maximum(#[case] devices: &str, #[case] denied: bool) {
    let annotations = [("gpu-fraction", "0.5"), ("gpu-fraction-num-devices", devices)];
    let pod = pod(Some("kai-scheduler"), &annotations, vec![], vec![plain("a")]);
    assert_eq!(bounded_denies_under("maxPerPod: 16", &pod), denied);
}

/// HAMi's share values are never cards while HAMi is on, even when a
/// `gpuResources` pattern matches them; with HAMi off they are what the
/// patterns say.
#[rstest]
#[case("gpuResources: ['nvidia.com/gpu*']", false)]
#[case("gpuResources: ['nvidia.com/gpu', 'nvidia.com/gpumem']", false)]
#[case("{gpuResources: ['nvidia.com/gpu*'], gpuSharing: {hami: {enabled: false}}}", true)]
#[case("{gpuResources: ['nvidia.com/gpumem'], gpuSharing: {hami: {enabled: false}}}", true)]
fn hami_shares_are_never_cards(#[case] yaml: &str, #[case] denied: bool) {
    let pod = pod(None, &[], vec![], vec![hami("a", None)]);
    assert_eq!(bounded_denies_under(yaml, &pod), denied);
}
