//! Each generated policy decides as the webhook's rule of the same id, on
//! the property generator's pods (as Pods and as Deployment templates),
//! with the GPU sharing schemes laid over some of them
//! ([`sharing_case`]), each under one of the [`VARIANTS`] of the
//! settings, and on its DRA claims.
//!
//! `GPU_POLICY_EQUIVALENCE_CASES` sets the number of pods (default 10,000,
//! spread over the variants).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use gpu_policy::admission::{ObjectKind, Workload};
use gpu_policy::admission_policy::engine::{as_admitted, create_attributes};
use gpu_policy::kubernetes_cel::MutationOutcome;
use gpu_policy::policy::RuleId;
use gpu_policy::policy::claims::ClaimKind;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

use super::sharing_pods::sharing_case;
use super::{VARIANTS, Variant, exception, policy_rules_of, webhook, webhook_rules, webhook_under};
use crate::support::pods::MAX_GPUS;

fn cases() -> u32 {
    std::env::var("GPU_POLICY_EQUIVALENCE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// The pod as a Deployment's template.
fn deployment_of(pod: &Value) -> Value {
    let mut template = json!({"spec": pod.get("spec").cloned().unwrap_or(json!({}))});
    if let Some(annotations) = pod.pointer("/metadata/annotations") {
        template["metadata"] = json!({"annotations": annotations});
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "generated", "namespace": pod.pointer("/metadata/namespace")},
        "spec": {"selector": {"matchLabels": {"app": "generated"}}, "template": template},
    })
}

fn compare(
    variant: &Variant,
    object: &Value,
    kind: ObjectKind,
    namespace: &str,
    annotations: &BTreeMap<String, String>,
) -> Result<bool, TestCaseError> {
    if exception(object).is_some() {
        return Ok(false);
    }
    let Some(evaluation) = webhook_under(&variant.settings, object, kind, namespace, annotations)
    else {
        return Ok(false);
    };
    let expected = webhook_rules(&evaluation);
    let (actual, messages) = policy_rules_of(&variant.engine, object, namespace, annotations);
    prop_assert_eq!(
        &actual,
        &expected,
        "{}: policies and webhook disagree\nobject: {}\nwebhook: {:?}\npolicies: {:?}",
        variant.name,
        object,
        evaluation
            .violations
            .iter()
            .map(|v| v.message.to_string())
            .collect::<Vec<_>>(),
        messages
    );
    Ok(true)
}

/// The pod after the webhook's changes of one rule alone, as the API
/// server would store it.
fn webhook_mutated(pod: &Value, changes: &[json_patch::PatchOperation]) -> Option<Value> {
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, changes).ok()?;
    Some(as_admitted(&patched))
}

fn compare_mutations(
    variant: &Variant,
    pod: &Value,
    namespace: &str,
    annotations: &BTreeMap<String, String>,
) -> Result<(), TestCaseError> {
    if exception(pod).is_some() {
        return Ok(());
    }
    let Some(evaluation) = webhook_under(
        &variant.settings,
        pod,
        ObjectKind::Pod,
        namespace,
        annotations,
    ) else {
        return Ok(());
    };
    let Some(attributes) = create_attributes(pod, namespace, "enforce", annotations) else {
        return Err(TestCaseError::fail("a Pod must be matched"));
    };
    for rule in [RuleId::VisibleDevices, RuleId::RuntimeClass] {
        let operations: Vec<json_patch::PatchOperation> = evaluation
            .changes
            .iter()
            .filter(|c| c.rule == rule)
            .flat_map(|c| c.operations.clone())
            .collect();
        let Some(expected) = webhook_mutated(pod, &operations) else {
            return Err(TestCaseError::fail("the webhook's patch must apply"));
        };
        let actual = match variant.engine.mutate_rule(rule, &attributes) {
            Some(MutationOutcome::Patched { object, .. }) => object,
            Some(MutationOutcome::NotMatched) | None => as_admitted(pod),
            Some(MutationOutcome::Failed(violation)) => {
                return Err(TestCaseError::fail(format!(
                    "{}: {rule:?}: the mutating policy failed: {}\npod: {pod}",
                    variant.name, violation.message
                )));
            }
        };
        prop_assert_eq!(
            &actual,
            &expected,
            "{}: {:?}: the mutating policy and the webhook leave the pod differently\npod: {}",
            variant.name,
            rule,
            pod
        );
    }
    Ok(())
}

#[test]
fn generated_policies_decide_as_the_webhook_on_generated_pods() {
    let total = cases();
    let drawn: Vec<AtomicUsize> = VARIANTS.iter().map(|_| AtomicUsize::new(0)).collect();
    let compared: Vec<AtomicUsize> = VARIANTS.iter().map(|_| AtomicUsize::new(0)).collect();
    let strategy = (sharing_case(), any::<bool>(), 0..VARIANTS.len());
    let result = runner(total).run(&strategy, |(case, as_template, at)| {
        let variant = &VARIANTS[at];
        let (object, kind) = match as_template {
            false => (case.pod.clone(), ObjectKind::Pod),
            true => (
                deployment_of(&case.pod),
                ObjectKind::Workload(Workload::Deployment),
            ),
        };
        drawn[at].fetch_add(1, Ordering::Relaxed);
        let namespace = &case.namespace;
        if compare(
            variant,
            &object,
            kind,
            namespace,
            &case.namespace_annotations,
        )? {
            compared[at].fetch_add(1, Ordering::Relaxed);
        }
        compare_mutations(variant, &case.pod, namespace, &case.namespace_annotations)
    });
    if let Err(err) = result {
        panic!("{err}");
    }
    // The exceptions are edge cases of the generator, not most of it, and
    // every variant gets its share of the cases.
    for ((variant, drawn), compared) in VARIANTS.iter().zip(drawn).zip(compared) {
        let (drawn, compared) = (drawn.into_inner(), compared.into_inner());
        eprintln!("{}: {compared} of {drawn} cases compared", variant.name);
        assert!(
            compared * 10 >= drawn * 9 && drawn * VARIANTS.len() * 2 >= total as usize,
            "{}: only {compared} of {drawn} cases were compared",
            variant.name
        );
    }
}

/// One device request: exact or `firstAvailable`, GPU classes and not,
/// every allocation mode, counts around the maximum, admin access.
fn device_request() -> impl Strategy<Value = Value> {
    let alternative = (
        prop::sample::select(vec!["gpu.nvidia.com", "mig.nvidia.com", "rdma.example.com"]),
        prop::option::of(prop::sample::select(vec!["ExactCount", "All"])),
        prop::option::of(1..12i64),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(class, mode, count, admin)| {
            let mut alternative = json!({"deviceClassName": class});
            if let Some(mode) = mode {
                alternative["allocationMode"] = json!(mode);
            }
            if let Some(count) = count {
                alternative["count"] = json!(count);
            }
            if let Some(admin) = admin {
                alternative["adminAccess"] = json!(admin);
            }
            alternative
        });
    (any::<bool>(), prop::collection::vec(alternative, 1..=3)).prop_map(|(exact, alternatives)| {
        if exact {
            json!({"exactly": alternatives[0]})
        } else {
            let named: Vec<Value> = alternatives
                .into_iter()
                .enumerate()
                .map(|(i, mut a)| {
                    a["name"] = json!(format!("alt{i}"));
                    a
                })
                .collect();
            json!({"firstAvailable": named})
        }
    })
}

/// A v1 ResourceClaim or ResourceClaimTemplate in `default` or
/// `kube-system` (an allowlisted namespace), sometimes one the scheduler
/// made for an extended resource.
fn claim_object() -> impl Strategy<Value = (Value, ClaimKind, String)> {
    (
        prop::sample::select(ClaimKind::ALL.to_vec()),
        prop::sample::select(vec!["default", "kube-system"]),
        prop::collection::vec(device_request(), 0..=4),
        prop::sample::select(vec![None, Some("true"), Some("false")]),
    )
        .prop_map(|(kind, namespace, requests, extended)| {
            let requests: Vec<Value> = requests
                .into_iter()
                .enumerate()
                .map(|(i, mut r)| {
                    r["name"] = json!(format!("r{i}"));
                    r
                })
                .collect();
            let devices = json!({"devices": {"requests": requests}});
            let mut metadata = json!({"name": "claim", "namespace": namespace});
            if let Some(value) = extended {
                metadata["annotations"] =
                    json!({"resource.kubernetes.io/extended-resource-claim": value});
            }
            let spec = match kind {
                ClaimKind::Claim => devices,
                ClaimKind::Template => json!({"spec": devices}),
            };
            let object = json!({"apiVersion": "resource.k8s.io/v1", "kind": kind.as_str(),
                                "metadata": metadata, "spec": spec});
            (object, kind, namespace.to_owned())
        })
}

#[test]
fn generated_claim_policy_decides_as_the_webhook_on_generated_claims() {
    let denied = AtomicUsize::new(0);
    let annotations = prop::sample::select(vec![
        BTreeMap::new(),
        BTreeMap::from([(MAX_GPUS.to_owned(), "4".to_owned())]),
    ]);
    let result = runner(cases() / 5).run(
        &(claim_object(), annotations),
        |((object, kind, namespace), annotations)| {
            let evaluation = webhook(&object, ObjectKind::Claim(kind), &namespace, &annotations);
            if evaluation.is_some_and(|e| !e.violations.is_empty()) {
                denied.fetch_add(1, Ordering::Relaxed);
            }
            let defaults = &VARIANTS[0];
            compare(
                defaults,
                &object,
                ObjectKind::Claim(kind),
                &namespace,
                &annotations,
            )?;
            Ok(())
        },
    );
    if let Err(err) = result {
        panic!("{err}");
    }
    assert!(denied.into_inner() > 0, "no generated claim was denied");
}
