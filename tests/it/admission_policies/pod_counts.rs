//! The effective GPU count of a pod (R2's `maxPerPod`), the policy against
//! the webhook on the cases random pods seldom reach: init containers
//! with the sidecars started before them, the namespace's lower maximum,
//! requests without limits, two GPU resources.

use std::collections::BTreeMap;

use gpu_policy::admission::ObjectKind;
use gpu_policy::policy::RuleId;
use rstest::rstest;
use serde_json::{Value, json};

use super::{ENGINE, messages_agree, policy_messages, policy_rules, webhook, webhook_rules};

/// A container asking for `gpus` of `resource` (limit and request), a
/// sidecar when `sidecar`.
fn container(name: &str, resource: &str, gpus: u64, sidecar: bool) -> Value {
    let mut c = json!({
        "name": name,
        "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
        "resources": {
            "limits": {resource: gpus.to_string()},
            "requests": {resource: gpus.to_string()},
        },
    });
    if sidecar {
        c["restartPolicy"] = json!("Always");
    }
    c
}

fn gpu(name: &str, gpus: u64) -> Value {
    container(name, "nvidia.com/gpu", gpus, false)
}

fn sidecar(name: &str, gpus: u64) -> Value {
    container(name, "nvidia.com/gpu", gpus, true)
}

fn pod(inits: Vec<Value>, containers: Vec<Value>) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "counted", "namespace": "gpu"},
        "spec": {"initContainers": inits, "containers": containers},
    })
}

#[rstest]
// Steady state: 5 + 4 regular GPUs, above the default 8.
#[case::regulars_above(pod(vec![], vec![gpu("a", 5), gpu("b", 4)]), None, true)]
#[case::regulars_at(pod(vec![], vec![gpu("a", 4), gpu("b", 4)]), None, false)]
// A sidecar runs beside the regular containers: 4 + 5.
#[case::sidecar_and_regular(pod(vec![sidecar("s", 4)], vec![gpu("a", 5)]), None, true)]
// An init container runs with the sidecars started before it: 4 + 5 = 9
// while it runs; 4 + 1 afterwards.
#[case::init_after_a_sidecar(
    pod(vec![sidecar("s", 4), gpu("i", 5)], vec![gpu("a", 1)]),
    None,
    true
)]
// The same init container before the sidecar: 5 alone, then 4 + 1.
#[case::init_before_the_sidecar(
    pod(vec![gpu("i", 5), sidecar("s", 4)], vec![gpu("a", 1)]),
    None,
    false
)]
// Only the sidecars before it count: 2 + 2 + 5 = 9 for the second init.
#[case::two_sidecars_before(
    pod(
        vec![sidecar("s1", 2), gpu("i1", 3), sidecar("s2", 2), gpu("i2", 5)],
        vec![gpu("a", 1)]
    ),
    None,
    true
)]
// Init containers run one at a time: 8 and 8 never together.
#[case::inits_in_turn(pod(vec![gpu("i1", 8), gpu("i2", 8)], vec![gpu("a", 1)]), None, false)]
// The namespace lowers the maximum to 4: 3 + 2.
#[case::namespace_maximum(pod(vec![sidecar("s", 2)], vec![gpu("a", 3)]), Some("4"), true)]
#[case::namespace_maximum_met(pod(vec![sidecar("s", 2)], vec![gpu("a", 2)]), Some("4"), false)]
// Each resource is counted on its own: 6 of one, 6 of the other.
#[case::two_resources(
    pod(
        vec![],
        vec![gpu("a", 6), container("b", "nvidia.com/mig-1g.5gb", 6, false)]
    ),
    None,
    false
)]
#[case::two_resources_one_above(
    pod(
        vec![container("s", "nvidia.com/mig-1g.5gb", 3, true)],
        vec![gpu("a", 6), container("b", "nvidia.com/mig-1g.5gb", 6, false)]
    ),
    None,
    true
)]
fn pod_counts_decide_as_the_webhook(
    #[case] pod: Value,
    #[case] namespace_maximum: Option<&str>,
    #[case] above: bool,
) {
    let annotations: BTreeMap<String, String> = namespace_maximum
        .map(|max| ("gpu-policy.io/max-gpus-per-pod".to_owned(), max.to_owned()))
        .into_iter()
        .collect();
    let evaluation =
        webhook(&pod, ObjectKind::Pod, "gpu", &annotations).expect("the webhook reads it");
    let expected = webhook_rules(&evaluation);
    assert_eq!(expected.contains(&RuleId::BoundedRequests), above, "{:?}", evaluation.violations);
    let (actual, messages) = policy_rules(&pod, "gpu", &annotations);
    assert_eq!(actual, expected, "{messages:?}");
    let policies = policy_messages(&ENGINE, &pod, "gpu", &annotations);
    if let Err(difference) = messages_agree(&pod, &evaluation, policies) {
        panic!("{difference}");
    }
}
