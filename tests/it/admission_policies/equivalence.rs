//! Each generated policy decides as the webhook's rule of the same id, in
//! the same words, on the property generator's pods (as Pods and as
//! Deployment templates), with the GPU sharing schemes and the variants'
//! names laid over some of them ([`variant_case`]), each under one of the
//! [`VARIANTS`] of the settings, and on its DRA claims.
//!
//! Each variant also counts its relevant cases: those where its settings
//! change the webhook's answer (violations, changes, notices) from the
//! default settings' answer. A variant whose names the generator seldom
//! draws would otherwise pass without testing anything.
//!
//! `GPU_POLICY_EQUIVALENCE_CASES` sets the number of pods (default 10,000,
//! spread over the variants).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use gpu_policy::admission::{ObjectKind, Workload};
use gpu_policy::admission_policy::engine::PolicyEngine;
use gpu_policy::admission_policy::engine::{as_admitted, create_attributes};
use gpu_policy::kubernetes_version::{DraApi, KubernetesVersion, RequestShape};
use gpu_policy::policy::RuleId;
use gpu_policy::policy::dra::claims::ClaimKind;
use kubernetes_cel::MutationOutcome;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

use super::variant_pods::variant_case;
use super::{
    VARIANTS, Variant, exception, messages_agree, policy_messages, webhook_rules, webhook_under,
};
use crate::support::pods::MAX_GPUS;

fn cases() -> u32 {
    std::env::var("GPU_POLICY_EQUIVALENCE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() })
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
        "metadata": {
            "name": pod.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("generated"),
            "namespace": pod.pointer("/metadata/namespace"),
        },
        "spec": {"selector": {"matchLabels": {"app": "generated"}}, "template": template},
    })
}

/// What [`compare`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compared {
    /// Left out: an exception, or an object the webhook cannot read.
    No,
    /// Compared; `relevant` when the variant's settings change the
    /// webhook's answer from the defaults'.
    Yes { relevant: bool },
}

fn compare(
    variant: &Variant,
    object: &Value,
    kind: ObjectKind,
    namespace: &str,
    annotations: &BTreeMap<String, String>,
) -> Result<Compared, TestCaseError> {
    if exception(object).is_some() {
        return Ok(Compared::No);
    }
    let Some(evaluation) = webhook_under(&variant.settings, object, kind, namespace, annotations)
    else {
        return Ok(Compared::No);
    };
    let expected = webhook_rules(&evaluation);
    let messages = policy_messages(&variant.engine, object, namespace, annotations);
    let actual: std::collections::BTreeSet<RuleId> = messages.keys().copied().collect();
    prop_assert_eq!(
        &actual,
        &expected,
        "{}: policies and webhook disagree\nobject: {}\nwebhook: {:?}\npolicies: {:?}",
        variant.name,
        object,
        evaluation.violations.iter().map(|v| v.message.to_string()).collect::<Vec<_>>(),
        messages
    );
    if let Err(difference) = messages_agree(object, &evaluation, messages) {
        return Err(TestCaseError::fail(format!(
            "{}: policies and webhook say it differently\nobject: {object}\n{difference}",
            variant.name
        )));
    }
    let defaults = &VARIANTS[0].settings;
    let relevant = webhook_under(defaults, object, kind, namespace, annotations)
        .is_none_or(|default| answer(&default) != answer(&evaluation));
    Ok(Compared::Yes { relevant })
}

/// What a person sees of an evaluation: the messages and the changes.
fn answer(evaluation: &gpu_policy::policy::Evaluation) -> Vec<String> {
    let violations = evaluation.violations.iter().map(|v| v.message.to_string());
    let notices = evaluation.notices.iter().map(|n| n.message.to_string());
    let changes = evaluation.changes.iter().map(|c| c.summary.clone());
    violations.chain(notices).chain(changes).collect()
}

/// How many of its cases each variant must find relevant, in percent:
/// the variants of pod settings on pods, of claim settings on claims.
fn least_relevant(variant: &Variant, claims: bool) -> usize {
    match (variant.name, claims) {
        ("defaults", _) => 0,
        ("gpuDeviceClasses: extra", false) => 0,
        ("gpuDeviceClasses: extra" | "maxPerContainer: 2, maxPerPod: 3", true) => 10,
        (_, true) => 0,
        (_, false) => 5,
    }
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
    let Some(evaluation) =
        webhook_under(&variant.settings, pod, ObjectKind::Pod, namespace, annotations)
    else {
        return Ok(());
    };
    let Some(attributes) = create_attributes(pod, namespace, "enforce", annotations) else {
        return Err(TestCaseError::fail("a Pod must be matched"));
    };
    for rule in [RuleId::VisibleDevices, RuleId::RuntimeClass, RuleId::GpuTolerations] {
        let operations: Vec<json_patch::PatchOperation> = evaluation
            .changes
            .iter()
            .filter(|c| c.rule == rule)
            .flat_map(|c| evaluation.operations(c).to_vec())
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

/// Per variant: cases drawn, compared, relevant.
struct Counts(Vec<[AtomicUsize; 3]>);

impl Counts {
    fn new() -> Self {
        Counts(VARIANTS.iter().map(|_| Default::default()).collect())
    }

    fn add(&self, at: usize, compared: Compared) {
        self.0[at][0].fetch_add(1, Ordering::Relaxed);
        if let Compared::Yes { relevant } = compared {
            self.0[at][1].fetch_add(1, Ordering::Relaxed);
            if relevant {
                self.0[at][2].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Every variant got its share of the cases, compared most of them,
    /// and found enough of them relevant.
    fn check(self, what: &str, total: usize, claims: bool) {
        for (variant, [drawn, compared, relevant]) in VARIANTS.iter().zip(self.0) {
            let (drawn, compared, relevant) =
                (drawn.into_inner(), compared.into_inner(), relevant.into_inner());
            eprintln!(
                "{}: {compared} of {drawn} {what} compared, {relevant} relevant",
                variant.name
            );
            assert!(
                compared * 10 >= drawn * 9 && drawn * VARIANTS.len() * 2 >= total,
                "{}: only {compared} of {drawn} {what} were compared",
                variant.name
            );
            assert!(
                relevant * 100 >= compared * least_relevant(variant, claims),
                "{}: only {relevant} of {compared} {what} were relevant",
                variant.name
            );
        }
    }
}

#[test]
fn generated_policies_decide_as_the_webhook_on_generated_pods() {
    let total = cases();
    let counts = Counts::new();
    let strategy = (variant_case(), any::<bool>(), 0..VARIANTS.len());
    let result = runner(total).run(&strategy, |(case, as_template, at)| {
        let variant = &VARIANTS[at];
        let (object, kind) = match as_template {
            false => (case.pod.clone(), ObjectKind::Pod),
            true => (deployment_of(&case.pod), ObjectKind::Workload(Workload::Deployment)),
        };
        let namespace = &case.namespace;
        let compared = compare(variant, &object, kind, namespace, &case.namespace_annotations)?;
        counts.add(at, compared);
        compare_mutations(variant, &case.pod, namespace, &case.namespace_annotations)
    });
    if let Err(err) = result {
        panic!("{err}");
    }
    counts.check("cases", total as usize, false);
}

/// One device request as `dra` writes it: exact (in `exactly`, or the
/// request itself in v1beta1) or `firstAvailable` where the release has
/// it, GPU classes and not, every allocation mode, counts around the
/// maximum, admin access.
fn device_request(dra: DraApi) -> impl Strategy<Value = Value> {
    let alternative = (
        prop::sample::select(vec![
            "gpu.nvidia.com",
            "mig.nvidia.com",
            "rdma.example.com",
            "gpu.example.com",
        ]),
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
    (any::<bool>(), prop::collection::vec(alternative, 1..=3)).prop_map(
        move |(exact, alternatives)| {
            if exact || !dra.first_available {
                match dra.shape {
                    RequestShape::Exactly => json!({"exactly": alternatives[0]}),
                    RequestShape::Flat => alternatives[0].clone(),
                }
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
        },
    )
}

/// A ResourceClaim or ResourceClaimTemplate of `dra`'s version in
/// `default`, `kube-system` (an allowlisted namespace) or `gpu-team` (one
/// with `namePrefix` entries), sometimes one the scheduler made for an
/// extended resource.
fn claim_object(dra: DraApi) -> impl Strategy<Value = (Value, ClaimKind, String)> {
    (
        prop::sample::select(ClaimKind::ALL.to_vec()),
        prop::sample::select(vec!["default", "kube-system", "gpu-team"]),
        prop::collection::vec(device_request(dra), 0..=4),
        prop::sample::select(vec![None, Some("true"), Some("false")]),
    )
        .prop_map(move |(kind, namespace, requests, extended)| {
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
            let api_version = format!("resource.k8s.io/{}", dra.version);
            let object = json!({"apiVersion": api_version, "kind": kind.as_str(),
                                "metadata": metadata, "spec": spec});
            (object, kind, namespace.to_owned())
        })
}

#[test]
fn generated_claim_policy_decides_as_the_webhook_on_generated_claims() {
    let denied = AtomicUsize::new(0);
    let counts = Counts::new();
    let annotations = prop::sample::select(vec![
        BTreeMap::new(),
        BTreeMap::from([(MAX_GPUS.to_owned(), "4".to_owned())]),
        BTreeMap::from([(MAX_GPUS.to_owned(), "2".to_owned())]),
    ]);
    let total = cases() / 5;
    let result = runner(total).run(
        &(claim_object(KubernetesVersion::default().dra()), annotations, 0..VARIANTS.len()),
        |((object, kind, namespace), annotations, at)| {
            let variant = &VARIANTS[at];
            let kind = ObjectKind::Claim(kind);
            let evaluation =
                webhook_under(&variant.settings, &object, kind, &namespace, &annotations);
            if evaluation.is_some_and(|e| !e.violations.is_empty()) {
                denied.fetch_add(1, Ordering::Relaxed);
            }
            let compared = compare(variant, &object, kind, &namespace, &annotations)?;
            counts.add(at, compared);
            Ok(())
        },
    );
    if let Err(err) = result {
        panic!("{err}");
    }
    assert!(denied.into_inner() > 0, "no generated claim was denied");
    counts.check("claims", total as usize, true);
}

/// Before 1.34 claims are `resource.k8s.io/v1beta1`, with flat requests
/// (and no `firstAvailable` in 1.32): the claim policy rendered for 1.32
/// and for 1.33 decides as the webhook on claims of that shape.
#[test]
fn the_claim_policy_of_each_v1beta1_release_decides_as_the_webhook() {
    for minor in [32, 33] {
        let release = KubernetesVersion::new(minor);
        let defaults = &VARIANTS[0];
        let variant = Variant {
            name: defaults.name,
            settings: defaults.settings.clone(),
            engine: PolicyEngine::for_release(&defaults.settings, release)
                .unwrap_or_else(|err| panic!("the policies of {release} must compile: {err}")),
        };
        let denied = AtomicUsize::new(0);
        let compared = AtomicUsize::new(0);
        let result =
            runner(cases() / 20).run(&claim_object(release.dra()), |(object, kind, namespace)| {
                let kind = ObjectKind::Claim(kind);
                let annotations = BTreeMap::new();
                let evaluation =
                    webhook_under(&variant.settings, &object, kind, &namespace, &annotations);
                if evaluation.is_some_and(|e| !e.violations.is_empty()) {
                    denied.fetch_add(1, Ordering::Relaxed);
                }
                if compare(&variant, &object, kind, &namespace, &annotations)? != Compared::No {
                    compared.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            });
        if let Err(err) = result {
            panic!("{release}: {err}");
        }
        assert!(denied.into_inner() > 0, "{release}: no generated claim was denied");
        assert!(compared.into_inner() > 0, "{release}: no claim was compared");
    }
}
