//! GPU sharing schemes beside gpu-policy, on the pods of their own tests
//! (`tests/fixtures/sharing/`, each file names the test it comes from):
//! golden files, the enforce decisions, and both orders of the mutating
//! webhooks (the scheme's replayed from its code, `support::sharing_webhooks`),
//! with gpu-policy reinvoked after the scheme as `reinvocationPolicy:
//! IfNeeded` makes the API server do.

use std::path::{Path, PathBuf};

use gpu_policy::admission::Mode;
use gpu_policy::admission::checker::{Checker, ObjectReport, mutated};
use gpu_policy::policy::testing::env_of;
use gpu_policy::settings::Settings;
use serde_json::{Value, json};

use crate::golden::compare_with_golden;
use crate::support::fixtures::load;
use crate::support::sharing_webhooks::{hami_mutate, kai_mutate};

const PIN: &str = "NVIDIA_VISIBLE_DEVICES";

fn fixtures() -> Vec<PathBuf> {
    crate::support::fixtures::sharing_files()
}

fn fixture(prefix: &str) -> Value {
    let path = fixtures()
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(prefix)))
        .unwrap_or_else(|| panic!("no sharing fixture {prefix}"));
    load(&path)
        .into_iter()
        .map(|doc| doc.object)
        .find(|object| object["kind"] == "Pod")
        .unwrap_or_else(|| panic!("{} has no pod", path.display()))
}

fn check(pod: &Value) -> ObjectReport {
    Checker::new(&Settings::default(), Mode::Enforce, "default").check(pod)
}

/// gpu-policy's mutating webhook: the pod it returns.
fn gpu_policy(pod: &Value) -> Value {
    let report = check(pod);
    mutated(pod, &report).unwrap_or_else(|err| panic!("the patch does not apply: {err}"))
}

#[test]
fn sharing_fixtures_match_golden_files() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/sharing");
    compare_with_golden(&fixtures(), &golden);
}

/// The decisions on the schemes' own pods, as their tests expect them.
#[test]
fn enforce_decisions_on_the_schemes_own_pods() {
    let mut table = Vec::new();
    for path in fixtures() {
        for doc in load(&path) {
            if doc.object["kind"] != "Pod" {
                continue;
            }
            let report = check(&doc.object);
            let rules: Vec<String> = report.violations.iter().map(|v| v.rule.to_string()).collect();
            table.push(format!(
                "{}: {}{}",
                report.name,
                if report.allowed { "allowed" } else { "denied" },
                if rules.is_empty() { String::new() } else { format!(" [{}]", rules.join(",")) }
            ));
        }
    }
    assert_eq!(
        table,
        [
            // The DRA driver's MPS demo: both containers share the claim.
            "test-pod: allowed",
            // KAI fractions, as KAI admits or refuses them.
            "test-pod: allowed",
            "test-pod: allowed",
            "test-pod: allowed",
            "test-pod: allowed",
            "fraction-too-big: denied [bounded-requests]",
            "fraction-and-memory: denied [bounded-requests]",
            "fraction-and-whole-gpu: denied [bounded-requests]",
            "test-pod: allowed",
            // HAMi shares: never counted as cards, percentages bounded,
            // a privileged container beside a GPU denied as HAMi does.
            "gpumem-only: allowed",
            "gpumem-only: allowed",
            "gpucores-only: allowed",
            "gpucores-only: allowed",
            "gpumem-percentage-only: allowed",
            "gpumem-percentage-only: allowed",
            "gpu-only: allowed",
            "gpumem-percentage-101: denied [bounded-requests]",
            "mixed-pod: denied [device-paths]",
        ]
    );
}

/// A pod through both webhooks in one order, gpu-policy reinvoked after
/// the scheme; the final pod is what the validating webhooks see.
fn through(pod: &Value, scheme: fn(&Value) -> Value, policy_first: bool) -> Value {
    let final_pod =
        if policy_first { gpu_policy(&scheme(&gpu_policy(pod))) } else { gpu_policy(&scheme(pod)) };
    let report = check(&final_pod);
    assert!(report.allowed, "{:?}", report.violations);
    assert!(report.patch.is_empty(), "not settled: {:?}", report.patch);
    assert_eq!(scheme(&final_pod), final_pod, "the scheme would change it again");
    final_pod
}

fn pins_of(pod: &Value, name: &str) -> Vec<Value> {
    env_of(pod, name).into_iter().filter(|e| e["name"] == PIN).collect()
}

#[test]
fn a_kai_fraction_keeps_its_share_in_both_orders() {
    let mut pod = fixture("32");
    pod["spec"]["containers"][0]["image"] = json!("nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04");
    for policy_first in [true, false] {
        let after = through(&pod, kai_mutate, policy_first);
        assert_eq!(
            pins_of(&after, "gpu-container"),
            vec![json!({"name": PIN, "valueFrom": {"configMapKeyRef":
                {"name": "test-pod-x7k2b9q-shared-gpu-1", "key": PIN}}})],
            "policy first: {policy_first}"
        );
        assert_eq!(pins_of(&after, "sidecar"), vec![json!({"name": PIN, "value": "void"})]);
        assert_eq!(after["spec"]["runtimeClassName"], "nvidia");
    }
}

#[test]
fn a_kai_fraction_on_an_init_container_keeps_its_share() {
    for policy_first in [true, false] {
        let after = through(&fixture("37"), kai_mutate, policy_first);
        let share = pins_of(&after, "init-gpu");
        assert_eq!(share.len(), 1, "{share:?}");
        assert_eq!(
            share[0]["valueFrom"]["configMapKeyRef"]["name"],
            "test-pod-x7k2b9q-shared-gpu-i0"
        );
        assert_eq!(pins_of(&after, "main-container"), vec![json!({"name": PIN, "value": "void"})]);
    }
}

/// HAMi's share containers end unpinned, with HAMi's card count; a CPU
/// sidecar stays pinned.
#[test]
fn hami_shares_end_unpinned_in_both_orders() {
    for prefix in ["40", "42", "44"] {
        let mut pod = fixture(prefix);
        let sidecar =
            json!({"name": "log", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"});
        pod["spec"]["containers"].as_array_mut().expect("containers").push(sidecar);
        for policy_first in [true, false] {
            let after = through(&pod, hami_mutate, policy_first);
            assert_eq!(pins_of(&after, "test"), Vec::<Value>::new(), "{prefix} {policy_first}");
            assert_eq!(after["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], 1);
            assert_eq!(pins_of(&after, "log"), vec![json!({"name": PIN, "value": "void"})]);
        }
    }
}

/// `gpumem: 3000` is 3000 MiB of one card, not 3000 cards.
#[test]
fn three_thousand_mib_is_admitted() {
    let mut pod = fixture("40");
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] = json!(3000);
    for policy_first in [true, false] {
        through(&pod, hami_mutate, policy_first);
    }
}

/// Without the scheme's webhook (not installed, or a pod bound by
/// `nodeName`), the share container stays pinned: its image's `ENV` hands it
/// no card.
#[test]
fn without_the_schemes_webhook_the_share_stays_pinned() {
    for (prefix, container) in [("30", "test-container"), ("40", "test")] {
        let after = gpu_policy(&fixture(prefix));
        assert_eq!(
            pins_of(&after, container),
            vec![json!({"name": PIN, "value": "void"})],
            "{prefix}"
        );
        assert!(check(&after).allowed);
    }
}
