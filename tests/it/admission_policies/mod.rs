//! The generated admission policies against the webhook's rules.
//!
//! - [`equivalence`]: on the property generator's pods (10,000 in CI) and
//!   their workloads, each generated ValidatingAdmissionPolicy denies
//!   exactly when the webhook's rule of the same id reports a violation,
//!   and each MutatingAdmissionPolicy leaves the pod exactly as the
//!   webhook's changes of its rule do;
//! - [`manifests`]: the fixtures (the golden files' inputs and the sharing
//!   schemes' ones, in every mode) and the examples decided by `check
//!   --engine cel` as by `check`;
//! - [`pod_counts`]: R2's effective pod count, init containers and
//!   sidecars in every order, policy against webhook case by case;
//! - [`sharing_cases`]: the GPU sharing schemes case by case: every KAI
//!   annotation value the generator draws, and the cards shares add to the
//!   pod's count.
//!
//! The equivalence runs on the generator's pods with the sharing schemes
//! laid over some of them ([`sharing_pods`]), each under one of
//! [`VARIANTS`]: the default settings and the settings that change what
//! the policies say (no runtime class injected, privileged GPU containers
//! denied, the sharing schemes off).
//!
//! Where the policies cannot decide as the webhook does, the case is
//! excluded by a named exception ([`Exception`]), each one listed in
//! docs/policy.md; the test counts them, so an exception that swallows
//! most cases shows.

mod equivalence;
mod manifests;
mod pod_counts;
mod sharing_cases;
mod sharing_pods;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use gpu_policy::admission::{ObjectKind, Subject, evaluate_object};
use gpu_policy::admission_policy::engine::{PolicyEngine, create_attributes};
use gpu_policy::policy::{Evaluation, Evaluator, RuleId};
use gpu_policy::settings::Settings;
use serde_json::Value;

pub static SETTINGS: LazyLock<Settings> = LazyLock::new(Settings::default);

pub static ENGINE: LazyLock<PolicyEngine> = LazyLock::new(|| engine(&SETTINGS));

fn engine(settings: &Settings) -> PolicyEngine {
    match PolicyEngine::new(settings) {
        Ok(engine) => engine,
        Err(err) => panic!("the generated policies must compile: {err}"),
    }
}

/// Settings the policies and the webhook are compared under, and the
/// policies generated from them.
pub struct Variant {
    pub name: &'static str,
    pub settings: Settings,
    pub engine: PolicyEngine,
}

/// The configurations of [`VARIANTS`], by name.
const VARIANT_CONFIGS: [(&str, &str); 4] = [
    ("defaults", "{}"),
    ("runtimeClassName: \"\"", "runtimeClassName: ''"),
    ("privilegedGpu: deny", "privilegedGpu: deny"),
    (
        "gpuSharing off",
        "gpuSharing: {kaiScheduler: {enabled: false}, hami: {enabled: false}}",
    ),
];

pub static VARIANTS: LazyLock<Vec<Variant>> = LazyLock::new(|| {
    VARIANT_CONFIGS
        .iter()
        .map(|(name, yaml)| {
            let settings = match Settings::from_yaml(yaml, name) {
                Ok(settings) => settings,
                Err(err) => panic!("{name}: {err}"),
            };
            Variant {
                name,
                engine: engine(&settings),
                settings,
            }
        })
        .collect()
});

/// Why a case is left out of the comparison. Each is a documented limit of
/// the policies or something the API server refuses before admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exception {
    /// Two containers share a name: pod validation rejects it before any
    /// validating admission, and the policies find containers by name.
    DuplicateContainerNames,
    /// A hostPath or mount path with a `..` segment: the webhook resolves
    /// it, the policies read it as written (the API server rejects `..` in
    /// a hostPath).
    DotDotPath,
}

/// The webhook's verdict on one object in a namespace with these
/// annotations: its evaluation, without cluster or claims. None when it
/// cannot read the object (a field of the wrong shape), which the API
/// server's decoding rejects before admission: such cases are not compared.
pub fn webhook(
    object: &Value,
    kind: ObjectKind,
    namespace: &str,
    annotations: &BTreeMap<String, String>,
) -> Option<Evaluation> {
    webhook_under(&SETTINGS, object, kind, namespace, annotations)
}

/// [`webhook`] under other settings.
pub fn webhook_under(
    settings: &Settings,
    object: &Value,
    kind: ObjectKind,
    namespace: &str,
    annotations: &BTreeMap<String, String>,
) -> Option<Evaluation> {
    let namespace_settings = settings.for_namespace(annotations);
    let evaluator = Evaluator::of_cluster(settings, &namespace_settings, None, None);
    evaluate_object(&evaluator, &Subject::created(object, kind, namespace))
        .ok()
        .flatten()
}

/// The rules the webhook reports violations of.
pub fn webhook_rules(evaluation: &Evaluation) -> BTreeSet<RuleId> {
    evaluation.violations.iter().map(|v| v.rule).collect()
}

/// The rules whose generated policies deny the object's creation, with
/// their messages.
pub fn policy_rules(
    object: &Value,
    namespace: &str,
    annotations: &BTreeMap<String, String>,
) -> (BTreeSet<RuleId>, Vec<String>) {
    policy_rules_of(&ENGINE, object, namespace, annotations)
}

/// [`policy_rules`] of the policies of other settings.
pub fn policy_rules_of(
    engine: &PolicyEngine,
    object: &Value,
    namespace: &str,
    annotations: &BTreeMap<String, String>,
) -> (BTreeSet<RuleId>, Vec<String>) {
    let Some(attributes) = create_attributes(object, namespace, "enforce", annotations) else {
        return (BTreeSet::new(), Vec::new());
    };
    let violations = engine.validate(&attributes);
    let rules = violations.iter().map(|(rule, _, _)| *rule).collect();
    let messages = violations
        .into_iter()
        .map(|(_, policy, message)| format!("{policy}: {message}"))
        .collect();
    (rules, messages)
}

/// The pod specs of an object's kinds, for the exceptions.
fn pod_spec(object: &Value) -> Option<&Value> {
    match object.get("kind").and_then(Value::as_str) {
        Some("Pod") => object.get("spec"),
        Some("CronJob") => object.pointer("/spec/jobTemplate/spec/template/spec"),
        Some("PodTemplate") => object.pointer("/template/spec"),
        _ => object.pointer("/spec/template/spec"),
    }
}

/// The exceptions that apply to an object, if any.
pub fn exception(object: &Value) -> Option<Exception> {
    let spec = pod_spec(object)?;
    let mut names = BTreeSet::new();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = container.get("name").and_then(Value::as_str).unwrap_or("");
            if !names.insert(name.to_owned()) {
                return Some(Exception::DuplicateContainerNames);
            }
            let mounts = container.get("volumeMounts").and_then(Value::as_array);
            for mount in mounts.into_iter().flatten() {
                if mount
                    .get("mountPath")
                    .and_then(Value::as_str)
                    .is_some_and(has_dot_dot)
                {
                    return Some(Exception::DotDotPath);
                }
            }
        }
    }
    let volumes = spec.get("volumes").and_then(Value::as_array);
    for volume in volumes.into_iter().flatten() {
        if volume
            .pointer("/hostPath/path")
            .and_then(Value::as_str)
            .is_some_and(has_dot_dot)
        {
            return Some(Exception::DotDotPath);
        }
    }
    None
}

fn has_dot_dot(path: &str) -> bool {
    path.split('/').any(|segment| segment == "..")
}
