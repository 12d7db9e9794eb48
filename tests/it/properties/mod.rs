//! Structure-aware property tests over generated raw pod JSON.
//!
//! The generator (`tests/it/support/pods.rs`) builds realistic and adversarial
//! pods (init containers, sidecars, ephemeral containers, GPU and non-GPU
//! resources with valid and invalid quantities, `NVIDIA_VISIBLE_DEVICES`
//! entries, runtime classes, node affinity, hostPath volumes, metadata keys
//! with `/` and `~`, owner references, and unknown fields everywhere) and
//! the properties below check the contract of `docs/policy.md` through the public
//! admission API. The oracles are written from the spec, not from the
//! implementation: they read the generated JSON and say what the policy
//! must have done to it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use crate::support::fixtures;
use crate::support::oracles::*;
use crate::support::pods::{
    Case, LISTS, MAJOR, MAX_GPUS, MIN_CC, MINOR, MUTATIONS, NVD, Obj, REQUIRED, case, expression,
    pick,
};
use crate::support::workloads::pod_of_workload;
use gpu_policy::admission::{Mode, ObjectKind, Workload, decide};
use gpu_policy::document::Document;
use gpu_policy::policy::{Evaluation, Evaluator, NoticeKind, ObjectError, Subject};
use gpu_policy::settings::Settings;
use json_patch::PatchOperation;
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};

mod claim_counts;
mod claims;
mod patches;
mod review_fuzz;
mod robustness;
mod rules;
mod workloads;

const MUTATING_RULES: [&str; 4] =
    ["visible-devices", "runtime-class", "compute-affinity", "gpu-tolerations"];

/// The default settings, with a GPU toleration: R8 changes the GPU pods too.
static SETTINGS: LazyLock<Settings> = LazyLock::new(|| {
    let yaml = "gpuTolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]";
    Settings::from_yaml(yaml, "properties").unwrap_or_else(|err| panic!("{err}"))
});

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// Arbitrary JSON up to depth 6, with keys and strings biased towards the
/// fields the policy reads, so that random documents reach deep code.
fn arbitrary_json() -> impl Strategy<Value = Value> {
    const WORDS: [&str; 40] = [
        "metadata",
        "spec",
        "annotations",
        "labels",
        "containers",
        "initContainers",
        "ephemeralContainers",
        "env",
        "name",
        "value",
        "valueFrom",
        "resources",
        "limits",
        "requests",
        "nvidia.com/gpu",
        "nvidia.com/mig-1g.5gb",
        "runtimeClassName",
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
        "matchExpressions",
        "volumes",
        "hostPath",
        "path",
        "volumeMounts",
        "mountPath",
        "restartPolicy",
        "Always",
        "image",
        "template",
        "jobTemplate",
        "ownerReferences",
        "controller",
        "kind",
        "NVIDIA_VISIBLE_DEVICES",
        "gpu-policy.io/mutations",
        "gpu-policy.io/min-compute-capability",
        "nvidia/cuda:13.0.1-base-ubuntu24.04",
        "a~b/c",
    ];
    let word = || {
        prop_oneof![
            4 => pick(&WORDS).prop_map(str::to_owned),
            1 => ".{0,8}",
            1 => pick(&["1", "0", "-1", "2000m", "1e0", "500m", "8.6", "", "/dev"])
                .prop_map(str::to_owned),
        ]
    };
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        word().prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 96, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((word(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

// ---------------------------------------------------------------------------
// Running the policy
// ---------------------------------------------------------------------------

fn evaluate_as(
    object: &Value,
    kind: ObjectKind,
    namespace: &str,
    namespace_annotations: &BTreeMap<String, String>,
) -> Result<Option<Evaluation>, ObjectError> {
    let document = Document::from_value(object);
    with_evaluator(namespace_annotations, |evaluator| {
        kind.created(document.root(), namespace)
            .map(|subject| evaluator.evaluate(&subject))
            .transpose()
    })
}

/// `f` with the evaluator of the default settings in a namespace with
/// `namespace_annotations`, nothing of a cluster known.
fn with_evaluator<R>(
    namespace_annotations: &BTreeMap<String, String>,
    f: impl FnOnce(&Evaluator<'_>) -> R,
) -> R {
    let namespace_settings = SETTINGS.for_namespace(namespace_annotations);
    f(&Evaluator::of_cluster(&SETTINGS, &namespace_settings, None, None))
}

/// Evaluates `new` as an update of the pod `old`.
fn evaluate_update(new: &Value, old: &Value, case: &Case) -> Result<Evaluation, TestCaseError> {
    let (new, old) = (Document::from_value(new), Document::from_value(old));
    with_evaluator(&case.namespace_annotations, |evaluator| {
        evaluator.evaluate(&Subject::pod_update(new.root(), old.root(), &case.namespace))
    })
    .map_err(|err| TestCaseError::fail(format!("an update was rejected as unreadable: {err}")))
}

/// Evaluates a generated pod, which is well-formed, so it must be read.
fn evaluate_pod(pod: &Value, case: &Case) -> Result<Evaluation, TestCaseError> {
    match evaluate_as(pod, ObjectKind::Pod, &case.namespace, &case.namespace_annotations) {
        Ok(Some(evaluation)) => Ok(evaluation),
        Ok(None) => Err(TestCaseError::fail("a Pod was ignored")),
        Err(err) => {
            Err(TestCaseError::fail(format!("a well-formed pod was rejected as unreadable: {err}")))
        }
    }
}

fn apply(object: &Value, patch: &[PatchOperation]) -> Result<Value, TestCaseError> {
    let mut patched = object.clone();
    json_patch::patch(&mut patched, patch).map_err(|err| {
        TestCaseError::fail(format!(
            "patch does not apply: {err}\npatch: {}",
            serde_json::to_string(patch).unwrap_or_default()
        ))
    })?;
    Ok(patched)
}

/// The generated pod after its evaluation's patch.
fn patched(case: &Case) -> Result<(Evaluation, Value), TestCaseError> {
    let evaluation = evaluate_pod(&case.pod, case)?;
    let patched = apply(&case.pod, &evaluation.patch)?;
    Ok((evaluation, patched))
}
