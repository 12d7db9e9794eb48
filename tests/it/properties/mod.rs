//! Structure-aware property tests over generated raw pod JSON.
//!
//! The generator (`tests/support/pods.rs`) builds realistic and adversarial
//! pods (init containers, sidecars, ephemeral containers, GPU and non-GPU
//! resources with valid and invalid quantities, `NVIDIA_VISIBLE_DEVICES`
//! entries, runtime classes, node affinity, hostPath volumes, metadata keys
//! with `/` and `~`, owner references, and unknown fields everywhere) and
//! the properties below check the contract of `SPEC.md` through the public
//! admission API. The oracles are written from the spec, not from the
//! implementation: they read the generated JSON and say what the policy
//! must have done to it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use crate::support::fixtures;
use crate::support::pods::{
    Case, GPU_RESOURCES, IMAGES, LISTS, MAJOR, MAX_GPUS, MIN_CC, MINOR, MUTATIONS, NVD, Obj,
    REQUIRED, UNKNOWN_KEYS, case, expression, known_count, pick,
};
use crate::support::workloads::pod_of_workload;
use gpu_policy::admission::{
    MAX_WARNING_CHARS, Mode, ObjectKind, PodOperation, Workload, decide, evaluate_object,
};
use gpu_policy::policy::{Evaluation, ObjectError};
use gpu_policy::settings::Settings;
use json_patch::PatchOperation;
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};

const MUTATING_RULES: [&str; 3] = ["visible-devices", "runtime-class", "compute-affinity"];
const ALLOWLISTED_DAEMONSETS: [&str; 3] = [
    "nvidia-gpu-exporter",
    "nvidia-device-plugin-daemonset",
    "gpu-feature-discovery",
];

static SETTINGS: LazyLock<Settings> = LazyLock::new(Settings::default);

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
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
    let namespace_settings = SETTINGS.for_namespace(namespace_annotations);
    evaluate_object(
        object,
        kind,
        namespace,
        PodOperation::Create,
        &SETTINGS,
        &namespace_settings,
    )
}

/// Evaluates a generated pod, which is well-formed, so it must be read.
fn evaluate_pod(pod: &Value, case: &Case) -> Result<Evaluation, TestCaseError> {
    match evaluate_as(
        pod,
        ObjectKind::Pod,
        &case.namespace,
        &case.namespace_annotations,
    ) {
        Ok(Some(evaluation)) => Ok(evaluation),
        Ok(None) => Err(TestCaseError::fail("a Pod was ignored")),
        Err(err) => Err(TestCaseError::fail(format!(
            "a well-formed pod was rejected as unreadable: {err}"
        ))),
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

// ---------------------------------------------------------------------------
// Oracles, from the spec
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Init,
    Sidecar,
    Regular,
    Ephemeral,
}

/// Every container of a pod, in order, with its kind.
fn containers(pod: &Value) -> Vec<(Kind, &Value)> {
    let mut all = Vec::new();
    for field in LISTS {
        for c in pod["spec"][field].as_array().into_iter().flatten() {
            let kind = match field {
                "initContainers" if c["restartPolicy"] == "Always" => Kind::Sidecar,
                "initContainers" => Kind::Init,
                "containers" => Kind::Regular,
                _ => Kind::Ephemeral,
            };
            all.push((kind, c));
        }
    }
    all
}

/// Whether a container is a GPU container: `Some(true)` when a GPU
/// resource has a value > 0 in requests or limits, `Some(false)` when every
/// GPU value is 0 (or there is none), `None` when a GPU value is invalid and
/// none is positive (the policy denies those anyway). Ephemeral containers
/// never are.
fn gpu_status(kind: Kind, c: &Value) -> Option<bool> {
    if kind == Kind::Ephemeral {
        return Some(false);
    }
    let mut invalid = false;
    for field in ["requests", "limits"] {
        for (name, value) in c["resources"][field].as_object().into_iter().flatten() {
            if !GPU_RESOURCES.contains(&name.as_str()) {
                continue;
            }
            match known_count(value) {
                Some(0) => {}
                Some(_) => return Some(true),
                None => invalid = true,
            }
        }
    }
    (!invalid).then_some(false)
}

/// `Some(true)`: a GPU pod; `Some(false)`: surely not; `None`: undecided.
fn pod_gpu(pod: &Value) -> Option<bool> {
    let statuses: Vec<Option<bool>> = containers(pod)
        .into_iter()
        .map(|(kind, c)| gpu_status(kind, c))
        .collect();
    if statuses.contains(&Some(true)) {
        Some(true)
    } else if statuses.contains(&None) {
        None
    } else {
        Some(false)
    }
}

fn fully_decided(pod: &Value) -> bool {
    containers(pod)
        .into_iter()
        .all(|(kind, c)| gpu_status(kind, c).is_some())
}

/// Rule 5 for a pod: namespace and controller owner reference.
fn pod_allowlisted(pod: &Value, namespace: &str) -> bool {
    let owner = pod
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|r| r["controller"] == true);
    namespace == "kube-system"
        && owner.is_some_and(|r| {
            r["kind"] == "DaemonSet"
                && r["name"]
                    .as_str()
                    .is_some_and(|n| ALLOWLISTED_DAEMONSETS.contains(&n))
        })
}

fn workload_allowlisted(kind: Workload, name: &str, namespace: &str) -> bool {
    namespace == "kube-system"
        && kind == Workload::DaemonSet
        && ALLOWLISTED_DAEMONSETS.contains(&name)
}

fn env_of(c: &Value) -> Vec<&Value> {
    c["env"].as_array().into_iter().flatten().collect()
}

fn visible_devices_entries(c: &Value) -> Vec<&Value> {
    env_of(c).into_iter().filter(|e| e["name"] == NVD).collect()
}

/// The literal value of an env entry (no `valueFrom`).
fn literal(entry: &Value) -> Option<&str> {
    if entry.get("valueFrom").is_some() {
        return None;
    }
    entry["value"].as_str()
}

fn capability(raw: &str) -> Option<(u32, u32)> {
    let raw = raw.trim();
    let (major, minor) = raw.split_once('.').unwrap_or((raw, "0"));
    let number = |part: &str| -> Option<u32> {
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    Some((number(major)?, number(minor)?))
}

fn image_minimum(image: &str) -> Option<(u32, u32)> {
    IMAGES
        .iter()
        .find(|(name, _)| *name == image)
        .and_then(|(_, minimum)| *minimum)
}

fn is_cuda13(image: &str) -> bool {
    image_minimum(image) == Some((7, 5)) && image.contains("nvidia/cuda:13.")
}

/// R4: the highest of namespace minimum, pod annotation (only if it does not
/// lower the namespace minimum), and the images of GPU containers.
fn expected_minimum(
    pod: &Value,
    namespace_annotations: &BTreeMap<String, String>,
) -> Option<(u32, u32)> {
    let namespace = namespace_annotations
        .get(MIN_CC)
        .and_then(|raw| capability(raw));
    let annotation = pod
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(MIN_CC))
        .and_then(Value::as_str)
        .and_then(capability)
        .filter(|value| namespace.is_none_or(|n| *value >= n));
    let images = containers(pod)
        .into_iter()
        .filter(|(kind, c)| gpu_status(*kind, c) == Some(true))
        .filter_map(|(_, c)| c["image"].as_str().and_then(image_minimum));
    namespace.into_iter().chain(annotation).chain(images).max()
}

/// The spec's constraint as ORed alternatives of ANDed expressions.
fn alternatives((major, minor): (u32, u32)) -> Vec<Vec<Value>> {
    let e = |key: &str, op: &str, value: u32| expression(key, op, &[&value.to_string()]);
    match (major, minor) {
        (0, 0) => Vec::new(),
        (major, 0) => vec![vec![e(MAJOR, "Gt", major - 1)]],
        (major, minor) => vec![
            vec![e(MAJOR, "Gt", major)],
            vec![e(MAJOR, "In", major), e(MINOR, "Gt", minor - 1)],
        ],
    }
}

fn match_expressions(term: &Value) -> Vec<Value> {
    term["matchExpressions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Whether a node with these GFD labels satisfies the compute expressions of
/// a term (other expressions are taken as satisfied).
fn admits(expression: &Value, major: u32, minor: u32) -> bool {
    let label = match expression["key"].as_str() {
        Some(MAJOR) => i64::from(major),
        Some(MINOR) => i64::from(minor),
        _ => return true,
    };
    let values: Vec<i64> = expression["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str()?.parse().ok())
        .collect();
    match expression["operator"].as_str() {
        Some("Gt") => values.first().is_some_and(|v| label > *v),
        Some("Lt") => values.first().is_some_and(|v| label < *v),
        Some("In") => values.contains(&label),
        Some("NotIn") => !values.contains(&label),
        Some("DoesNotExist") => false,
        _ => true,
    }
}

/// Whether every card a term admits has at least the given capability.
fn term_guarantees(term: &Value, minimum: (u32, u32)) -> bool {
    let expressions = match_expressions(term);
    (0..=20u32).all(|major| {
        (0..=20u32).all(|minor| {
            (major, minor) >= minimum || !expressions.iter().all(|e| admits(e, major, minor))
        })
    })
}

fn required_terms(pod: &Value) -> Option<&Vec<Value>> {
    pod.pointer("/spec/affinity/nodeAffinity")
        .and_then(|n| n.get(REQUIRED))
        .and_then(|r| r.get("nodeSelectorTerms"))
        .and_then(Value::as_array)
}

/// What the spec says the terms become: every term that does not already
/// carry one alternative is multiplied out, one copy per alternative, with
/// the alternative's expressions ANDed in (none duplicated).
fn expected_terms(original: &Value, alternatives: &[Vec<Value>]) -> Vec<Value> {
    let terms = required_terms(original).cloned().unwrap_or_default();
    if terms.is_empty() {
        return alternatives
            .iter()
            .map(|alternative| json!({"matchExpressions": alternative}))
            .collect();
    }
    let mut expected = Vec::new();
    for term in terms {
        let expressions = match_expressions(&term);
        if alternatives
            .iter()
            .any(|alternative| alternative.iter().all(|e| expressions.contains(e)))
        {
            expected.push(term);
            continue;
        }
        for alternative in alternatives {
            let mut all = expressions.clone();
            all.extend(
                alternative
                    .iter()
                    .filter(|e| !expressions.contains(e))
                    .cloned(),
            );
            let mut multiplied = term.clone();
            multiplied["matchExpressions"] = Value::Array(all);
            expected.push(multiplied);
        }
    }
    expected
}

/// A term with duplicate expressions removed (for comparisons that leave
/// duplicates to their own property).
fn without_duplicates(term: &Value) -> Value {
    let mut term = term.clone();
    if let Some(list) = term
        .get_mut("matchExpressions")
        .and_then(Value::as_array_mut)
    {
        let mut unique: Vec<Value> = Vec::new();
        for e in list.drain(..) {
            if !unique.contains(&e) {
                unique.push(e);
            }
        }
        *list = unique;
    }
    term
}

/// The GPU count of a container for one resource (limit, else request), as
/// the device plugin would allocate it; None when it is not a valid count.
fn count_of(c: &Value, resource: &str) -> Option<u64> {
    let resources = &c["resources"];
    match resources["limits"].get(resource) {
        Some(limit) => known_count(limit),
        None => resources["requests"]
            .get(resource)
            .map_or(Some(0), known_count),
    }
}

/// Kubernetes' effective pod count of one resource (sidecars included).
fn effective_count(pod: &Value, resource: &str) -> Option<u64> {
    let (mut steady, mut sidecars, mut init_peak) = (0u64, 0u64, 0u64);
    for (kind, c) in containers(pod) {
        let count = count_of(c, resource)?;
        match kind {
            Kind::Regular => steady += count,
            Kind::Sidecar => {
                steady += count;
                sidecars += count;
                init_peak = init_peak.max(sidecars);
            }
            Kind::Init => init_peak = init_peak.max(count + sidecars),
            Kind::Ephemeral => {}
        }
    }
    Some(steady.max(init_peak))
}

/// R2: whether the pod must be denied for its GPU requests.
fn bounded_requests_violated(pod: &Value, max_per_pod: u64) -> bool {
    let mut names = BTreeSet::new();
    for (_, c) in containers(pod) {
        for resource in GPU_RESOURCES {
            let request = c["resources"]["requests"].get(resource);
            let limit = c["resources"]["limits"].get(resource);
            if request.is_none() && limit.is_none() {
                continue;
            }
            names.insert(resource);
            let (request, limit) = (request.map(known_count), limit.map(known_count));
            if request == Some(None) || limit == Some(None) {
                return true; // not a whole, non-negative number
            }
            match (request.flatten(), limit.flatten()) {
                (Some(r), None) if r > 0 => return true, // request without limit
                (Some(r), Some(l)) if r != l => return true,
                _ => {}
            }
            if limit.flatten().or(request.flatten()).is_some_and(|n| n > 8) {
                return true;
            }
        }
    }
    names
        .into_iter()
        .any(|resource| effective_count(pod, resource).is_some_and(|n| n > max_per_pod))
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Pointers of every unknown key in the document, except under `env` entries
/// and node selector terms (whose indices a patch may legitimately shift;
/// those are compared structurally).
fn unknown_key_pointers(value: &Value, at: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let pointer = format!("{at}/{}", escape(key));
                if UNKNOWN_KEYS.contains(&key.as_str())
                    && !pointer.contains("/env/")
                    && !pointer.contains("/nodeSelectorTerms/")
                {
                    out.push(pointer.clone());
                }
                unknown_key_pointers(child, &pointer, out);
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                unknown_key_pointers(child, &format!("{at}/{index}"), out);
            }
        }
        _ => {}
    }
}

/// Every key of `before` and `after` other than `except` has the same value
/// in both (a key may not appear or disappear either).
fn same_except(
    before: &Value,
    after: &Value,
    except: &[&str],
    at: &str,
) -> Result<(), TestCaseError> {
    let empty = Obj::new();
    let b = before.as_object().unwrap_or(&empty);
    let a = after.as_object().unwrap_or(&empty);
    prop_assert_eq!(
        before.is_object(),
        after.is_object(),
        "{} changed type: {} -> {}",
        at,
        before,
        after
    );
    let keys: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
    for key in keys {
        if except.contains(&key.as_str()) {
            continue;
        }
        prop_assert_eq!(
            b.get(key),
            a.get(key),
            "{}/{} changed although no rule may touch it",
            at,
            escape(key)
        );
    }
    Ok(())
}

fn mutation_tokens(pod: &Value) -> Option<Vec<String>> {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(MUTATIONS))
        .and_then(Value::as_str)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect()
        })
}

fn check_warnings(warnings: &[String]) -> Result<(), TestCaseError> {
    for warning in warnings {
        prop_assert!(
            warning.starts_with("gpu-policy:"),
            "warning without the gpu-policy: prefix: {:?}",
            warning
        );
        prop_assert!(
            warning.chars().count() <= MAX_WARNING_CHARS && MAX_WARNING_CHARS == 119,
            "warning of {} chars: {:?}",
            warning.chars().count(),
            warning
        );
    }
    Ok(())
}

/// The generated pod as the template of a workload of the given kind.
fn wrap(kind: Workload, pod: &Value, name: &str, namespace: &str) -> Value {
    let mut template = Obj::new();
    if let Some(metadata) = pod.get("metadata") {
        template.insert("metadata".into(), metadata.clone());
    }
    template.insert("spec".into(), pod["spec"].clone());
    let template = Value::Object(template);
    let metadata = json!({"name": name, "namespace": namespace, "futureField": {"x": [1, 2]}});
    let api_version = match kind.group() {
        "" => "v1".to_owned(),
        group => format!("{group}/v1"),
    };
    match kind {
        Workload::CronJob => json!({"apiVersion": api_version, "kind": kind.kind(),
            "metadata": metadata, "spec": {"schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"template": template}}}}),
        Workload::PodTemplate => json!({"apiVersion": api_version, "kind": kind.kind(),
            "metadata": metadata, "template": template}),
        _ => json!({"apiVersion": api_version, "kind": kind.kind(), "metadata": metadata,
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": template}}),
    }
}

/// Every pointer inside a document (not the root).
fn all_pointers(value: &Value, at: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let pointer = format!("{at}/{}", escape(key));
                out.push(pointer.clone());
                all_pointers(child, &pointer, out);
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                let pointer = format!("{at}/{index}");
                out.push(pointer.clone());
                all_pointers(child, &pointer, out);
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(1000))]

    /// 1. Evaluation never panics and reads every well-formed pod; the
    /// evaluation's patch, and in enforce mode the decision's, applies to the
    /// original object.
    #[test]
    fn p1_patches_apply(case in case()) {
        let evaluation = evaluate_pod(&case.pod, &case)?;
        apply(&case.pod, &evaluation.patch)?;
        prop_assert_eq!(evaluation.patch.is_empty(), evaluation.changes.is_empty());
        let decision = decide(Mode::Enforce, ObjectKind::Pod, &evaluation);
        apply(&case.pod, &decision.patch)?;
        prop_assert_eq!(decision.allowed, evaluation.violations.is_empty());
        prop_assert_eq!(decision.denial.is_some(), !decision.allowed);
        if decision.allowed {
            prop_assert_eq!(&decision.patch, &evaluation.patch);
        } else {
            prop_assert!(decision.patch.is_empty(), "a denied pod got a patch");
            let denial = decision.denial.unwrap_or_default();
            prop_assert!(denial.starts_with("gpu-policy:"), "denial {:?}", denial);
        }
        for violation in &evaluation.violations {
            prop_assert!(violation.message.starts_with("gpu-policy:"), "{:?}", violation);
        }
        check_warnings(&decision.warnings)?;
    }

    /// 2. Idempotence (webhook re-invocation): the patched pod needs no
    /// further change, and mutating it neither adds nor removes violations.
    #[test]
    fn p2_idempotent(case in case()) {
        let (evaluation, patched) = patched(&case)?;
        let again = evaluate_pod(&patched, &case)?;
        prop_assert!(
            again.patch.is_empty() && again.changes.is_empty(),
            "second evaluation changes the pod again: {:?}\npatched pod: {}",
            again.changes,
            patched
        );
        prop_assert_eq!(&again.violations, &evaluation.violations);
    }

    /// 3. Everything the rules may not touch survives the patch: unknown
    /// keys at every level, labels and annotations with `/` and `~` in their
    /// keys, resources, volumes, container fields other than `env`, the
    /// other env entries in order, and the affinity outside the required
    /// node selector terms.
    #[test]
    fn p3_untouched_fields_survive(case in case()) {
        let (_, patched) = patched(&case)?;
        let original = &case.pod;

        let mut pointers = Vec::new();
        unknown_key_pointers(original, "", &mut pointers);
        for pointer in &pointers {
            prop_assert_eq!(
                original.pointer(pointer),
                patched.pointer(pointer),
                "unknown key at {} changed",
                pointer
            );
        }

        same_except(original, &patched, &["metadata", "spec"], "")?;
        match original.get("metadata") {
            Some(metadata @ Value::Object(_)) => {
                same_except(metadata, &patched["metadata"], &["annotations"], "/metadata")?;
                match metadata.get("annotations") {
                    Some(annotations @ Value::Object(_)) => same_except(
                        annotations,
                        &patched["metadata"]["annotations"],
                        &[MUTATIONS],
                        "/metadata/annotations",
                    )?,
                    before => {
                        let after = patched["metadata"].get("annotations");
                        prop_assert!(
                            after == before
                                || after.and_then(Value::as_object).is_some_and(|a| {
                                    a.keys().all(|k| k == MUTATIONS)
                                }),
                            "annotations {:?} became {:?}",
                            before,
                            after
                        );
                    }
                }
            }
            before => {
                let after = patched.get("metadata");
                prop_assert!(
                    after == before
                        || after.and_then(Value::as_object).is_some_and(|m| {
                            m.keys().all(|k| k == "annotations")
                                && m["annotations"]
                                    .as_object()
                                    .is_some_and(|a| a.keys().all(|k| k == MUTATIONS))
                        }),
                    "metadata {:?} became {:?}",
                    before,
                    after
                );
            }
        }

        let spec = &original["spec"];
        let after = &patched["spec"];
        let mut except = vec!["runtimeClassName", "affinity"];
        except.extend(LISTS);
        same_except(spec, after, &except, "/spec")?;
        if spec["runtimeClassName"].as_str().is_some_and(|c| !c.is_empty()) {
            prop_assert_eq!(&spec["runtimeClassName"], &after["runtimeClassName"]);
        }
        for field in LISTS {
            prop_assert_eq!(spec.get(field).is_some(), after.get(field).is_some());
            let before: &[Value] = spec[field].as_array().map_or(&[], Vec::as_slice);
            let now: &[Value] = after[field].as_array().map_or(&[], Vec::as_slice);
            prop_assert_eq!(before.len(), now.len(), "/spec/{} changed length", field);
            for (index, (b, a)) in before.iter().zip(now).enumerate() {
                let at = format!("/spec/{field}/{index}");
                same_except(b, a, &["env"], &at)?;
                let others = |c: &Value| -> Vec<Value> {
                    env_of(c).into_iter().filter(|e| e["name"] != NVD).cloned().collect()
                };
                prop_assert_eq!(others(b), others(a), "{}/env: other entries changed", at);
                if !b["env"].is_array() {
                    prop_assert!(
                        a.get("env") == b.get("env")
                            || a["env"].as_array().is_some_and(|env| env.len() == 1
                                && env[0] == json!({"name": NVD, "value": "void"})),
                        "{}/env {:?} became {:?}",
                        at,
                        b.get("env"),
                        a.get("env")
                    );
                }
            }
        }
        if let Some(affinity @ Value::Object(_)) = spec.get("affinity") {
            same_except(affinity, &after["affinity"], &["nodeAffinity"], "/spec/affinity")?;
            if let Some(node @ Value::Object(_)) = affinity.get("nodeAffinity") {
                let at = "/spec/affinity/nodeAffinity";
                same_except(node, &after["affinity"]["nodeAffinity"], &[REQUIRED], at)?;
                if let Some(required @ Value::Object(_)) = node.get(REQUIRED) {
                    same_except(
                        required,
                        &after["affinity"]["nodeAffinity"][REQUIRED],
                        &["nodeSelectorTerms"],
                        "/spec/affinity/nodeAffinity/required…",
                    )?;
                }
            }
        }
    }

    /// 4. After patching: every non-GPU container of a non-allowlisted pod
    /// has exactly one `NVIDIA_VISIBLE_DEVICES`, `void`; every GPU container
    /// has none; allowlisted pods keep their env; a GPU pod has a runtime
    /// class (its own if non-empty, else `nvidia`), a non-GPU pod keeps its
    /// own; a GPU pod with a minimum compute capability has it in every
    /// required term (for CUDA 13 images: `major Gt 7` or `major In [7]` and
    /// `minor Gt 4`), and a pod without one keeps its affinity.
    #[test]
    fn p4_pins_runtime_class_and_affinity(case in case()) {
        let (_, patched) = patched(&case)?;
        let original = &case.pod;
        let allowlisted = pod_allowlisted(original, &case.namespace);
        let before = containers(original);
        let after = containers(&patched);
        prop_assert_eq!(before.len(), after.len());
        for ((kind, b), (_, a)) in before.iter().zip(&after) {
            let name = b["name"].as_str().unwrap_or("");
            let entries = visible_devices_entries(a);
            if allowlisted {
                prop_assert_eq!(b.get("env"), a.get("env"), "allowlisted {:?} env changed", name);
                continue;
            }
            match gpu_status(*kind, b) {
                Some(false) => {
                    prop_assert_eq!(
                        entries.len(), 1,
                        "non-GPU {:?} container {:?} has {} {} entries: {:?}",
                        kind, name, entries.len(), NVD, a.get("env")
                    );
                    prop_assert_eq!(
                        literal(entries[0]), Some("void"), "{:?}: {}", name, entries[0]
                    );
                }
                Some(true) => prop_assert!(
                    entries.is_empty(),
                    "GPU container {:?} keeps {:?}", name, entries
                ),
                None => {}
            }
        }

        let class_before = &original["spec"]["runtimeClassName"];
        let class_after = &patched["spec"]["runtimeClassName"];
        match pod_gpu(original) {
            Some(true) => {
                if class_before.as_str().is_some_and(|c| !c.is_empty()) {
                    prop_assert_eq!(class_before, class_after);
                } else {
                    prop_assert_eq!(class_after, &json!("nvidia"), "GPU pod without runtime class");
                }
            }
            Some(false) => prop_assert_eq!(
                original["spec"].get("runtimeClassName"),
                patched["spec"].get("runtimeClassName")
            ),
            None => {}
        }

        match pod_gpu(original) {
            Some(true) if fully_decided(original) => {
                let minimum = expected_minimum(original, &case.namespace_annotations)
                    .filter(|m| *m != (0, 0));
                let terms = required_terms(&patched).cloned().unwrap_or_default();
                match minimum {
                    Some(minimum) => {
                        prop_assert!(
                            !terms.is_empty(), "no required terms for minimum {:?}", minimum
                        );
                        for term in &terms {
                            prop_assert!(
                                term_guarantees(term, minimum),
                                "term {} admits cards below {:?}", term, minimum
                            );
                        }
                    }
                    None => prop_assert_eq!(
                        original["spec"].get("affinity"),
                        patched["spec"].get("affinity"),
                        "affinity changed without a minimum"
                    ),
                }
                let cuda13 = containers(original).into_iter().any(|(kind, c)| {
                    gpu_status(kind, c) == Some(true)
                        && c["image"].as_str().is_some_and(is_cuda13)
                });
                if cuda13 {
                    let literal_form = minimum.is_some_and(|m| m <= (8, 0));
                    for term in &terms {
                        prop_assert!(term_guarantees(term, (7, 5)), "CUDA 13 term {}", term);
                        if literal_form {
                            let e = match_expressions(term);
                            let gt7 = e.contains(&expression(MAJOR, "Gt", &["7"]));
                            let in7 = e.contains(&expression(MAJOR, "In", &["7"]))
                                && e.contains(&expression(MINOR, "Gt", &["4"]));
                            prop_assert!(gt7 || in7, "CUDA 13 term {} lacks the constraint", term);
                        }
                    }
                }
            }
            Some(false) => prop_assert_eq!(
                original["spec"].get("affinity"),
                patched["spec"].get("affinity"),
                "non-GPU pod's affinity changed"
            ),
            _ => {}
        }
    }

    /// 5. `gpu-policy.io/mutations` lists exactly the rules that changed the
    /// pod (merged with what an earlier invocation recorded), each once.
    #[test]
    fn p5_mutation_annotation(case in case()) {
        let (evaluation, patched) = patched(&case)?;
        let changed: BTreeSet<String> =
            evaluation.changes.iter().map(|c| c.rule.to_string()).collect();
        for rule in &changed {
            prop_assert!(MUTATING_RULES.contains(&rule.as_str()), "rule {} made a change", rule);
        }
        let before = mutation_tokens(&case.pod);
        let after = mutation_tokens(&patched);
        if changed.is_empty() {
            prop_assert!(evaluation.patch.is_empty());
            prop_assert_eq!(before, after);
        } else {
            let Some(tokens) = after else {
                return Err(TestCaseError::fail(format!(
                    "changes {changed:?} but no {MUTATIONS} annotation: {}",
                    patched["metadata"]
                )));
            };
            let unique: BTreeSet<String> = tokens.iter().cloned().collect();
            prop_assert_eq!(unique.len(), tokens.len(), "duplicate tokens in {:?}", tokens);
            let mut expected = changed.clone();
            expected.extend(before.unwrap_or_default());
            prop_assert_eq!(unique, expected);
        }
    }

    /// 6. Node selector terms are multiplied out: each original term that
    /// already carries an alternative stays as it is, every other term
    /// becomes one term per alternative (the original expressions first, the
    /// rest of the term unchanged), so the count is the spec's sum; no term
    /// is left without the constraint. Duplicate expressions are ignored
    /// here (see 6b).
    #[test]
    fn p6_terms_multiplied_out(case in case()) {
        let (_, patched) = patched(&case)?;
        let original = &case.pod;
        if pod_gpu(original) != Some(true) || !fully_decided(original) {
            return Ok(());
        }
        let Some(minimum) = expected_minimum(original, &case.namespace_annotations)
            .filter(|m| *m != (0, 0))
        else {
            return Ok(());
        };
        let alternatives = alternatives(minimum);
        let expected = expected_terms(original, &alternatives);
        let actual = required_terms(&patched).cloned().unwrap_or_default();
        let original_terms = required_terms(original).cloned().unwrap_or_default();
        let count: usize = original_terms
            .iter()
            .map(|t| {
                let e = match_expressions(t);
                if alternatives.iter().any(|a| a.iter().all(|x| e.contains(x))) {
                    1
                } else {
                    alternatives.len()
                }
            })
            .sum();
        let count = if original_terms.is_empty() { alternatives.len() } else { count };
        prop_assert_eq!(actual.len(), count, "terms: {}", Value::Array(actual.clone()));
        let normal =
            |terms: &[Value]| -> Vec<Value> { terms.iter().map(without_duplicates).collect() };
        prop_assert_eq!(normal(&actual), normal(&expected));
        for term in &original_terms {
            let e = match_expressions(term);
            prop_assert!(
                actual.iter().any(|t| match_expressions(t).starts_with(&e)),
                "original term {} lost its expressions", term
            );
        }
        for term in &actual {
            prop_assert!(
                alternatives.iter().any(|a| a.iter().all(|x| match_expressions(term).contains(x))),
                "term {} has no compute constraint", term
            );
        }
    }

    /// 6b. "No duplicate expression is added when the pod already carries
    /// it": no patched term has the same expression twice (the generator
    /// never writes duplicates itself).
    #[test]
    fn p6b_no_duplicate_expressions(case in case()) {
        let (_, patched) = patched(&case)?;
        for term in required_terms(&patched).into_iter().flatten() {
            let expressions = match_expressions(term);
            for (index, e) in expressions.iter().enumerate() {
                prop_assert!(
                    !expressions[..index].contains(e),
                    "term {} repeats {}", term, e
                );
            }
        }
    }

    /// 7. Workload templates are validated, never mutated; modes: enforce
    /// allows exactly when there is no violation, warn allows with one
    /// warning per notice, violation and (pods) change, audit is silent;
    /// warnings start with `gpu-policy:` and fit in 119 characters. A
    /// template gets the same violations as the pod and an override warning
    /// exactly when an author-written `NVIDIA_VISIBLE_DEVICES` will go.
    #[test]
    fn p7_workloads_and_modes(
        case in case(),
        kind in pick(&Workload::ALL),
        name in pick(&["web", "nvidia-gpu-exporter", "gpu-feature-discovery"]),
    ) {
        let pod_evaluation = evaluate_pod(&case.pod, &case)?;
        let warn = decide(Mode::Warn, ObjectKind::Pod, &pod_evaluation);
        prop_assert!(warn.allowed && warn.patch.is_empty() && warn.denial.is_none());
        prop_assert_eq!(
            warn.warnings.len(),
            pod_evaluation.notices.len()
                + pod_evaluation.violations.len()
                + pod_evaluation.changes.len()
        );
        check_warnings(&warn.warnings)?;
        let audit = decide(Mode::Audit, ObjectKind::Pod, &pod_evaluation);
        prop_assert!(audit.allowed && audit.patch.is_empty() && audit.warnings.is_empty());
        prop_assert_eq!(
            audit.audit_annotations.contains_key("violations"),
            !pod_evaluation.violations.is_empty()
        );
        prop_assert_eq!(
            audit.audit_annotations.contains_key("mutations"),
            !pod_evaluation.changes.is_empty()
        );

        let workload = wrap(kind, &case.pod, name, &case.namespace);
        let object_kind = ObjectKind::Workload(kind);
        let namespace_annotations = &case.namespace_annotations;
        let evaluation = match evaluate_as(&workload, object_kind, &case.namespace, namespace_annotations) {
            Ok(Some(evaluation)) => evaluation,
            other => return Err(TestCaseError::fail(format!("{kind:?} not evaluated: {other:?}"))),
        };
        let allowlisted = workload_allowlisted(kind, name, &case.namespace);
        prop_assert_eq!(evaluation.allowlisted.is_some(), allowlisted);
        let overrides = evaluation.changes.iter().filter(|c| c.overrides_author).count();

        let enforce = decide(Mode::Enforce, object_kind, &evaluation);
        prop_assert!(enforce.patch.is_empty(), "{:?} got a patch: {:?}", kind, enforce.patch);
        prop_assert_eq!(enforce.allowed, evaluation.violations.is_empty());
        prop_assert_eq!(enforce.denial.is_some(), !enforce.allowed);
        prop_assert_eq!(enforce.warnings.len(), evaluation.notices.len() + overrides);
        check_warnings(&enforce.warnings)?;

        let warn = decide(Mode::Warn, object_kind, &evaluation);
        prop_assert!(warn.allowed && warn.patch.is_empty());
        prop_assert_eq!(
            warn.warnings.len(),
            evaluation.notices.len() + evaluation.violations.len() + overrides
        );
        check_warnings(&warn.warnings)?;

        let audit = decide(Mode::Audit, object_kind, &evaluation);
        prop_assert!(audit.allowed && audit.patch.is_empty() && audit.warnings.is_empty());
        prop_assert!(!audit.audit_annotations.contains_key("mutations"));

        if !allowlisted && !pod_allowlisted(&case.pod, &case.namespace) {
            prop_assert_eq!(&evaluation.violations, &pod_evaluation.violations);
            let summaries = |e: &Evaluation| -> Vec<String> {
                e.changes.iter().map(|c| c.summary.clone()).collect()
            };
            prop_assert_eq!(summaries(&evaluation), summaries(&pod_evaluation));
            if fully_decided(&case.pod) {
                let authored = containers(&case.pod).into_iter().any(|(kind, c)| {
                    let entries = visible_devices_entries(c);
                    match gpu_status(kind, c) {
                        Some(true) => !entries.is_empty(),
                        _ => entries.iter().any(|e| literal(e) != Some("void")),
                    }
                });
                let warned = enforce.warnings.iter().any(|w| w.contains(NVD));
                prop_assert_eq!(
                    warned, authored,
                    "template override warning: {:?}", enforce.warnings
                );
            }
        }
        if allowlisted {
            prop_assert!(
                evaluation.changes.iter().all(|c| c.rule.to_string() != "visible-devices")
            );
        }
    }

    /// 9. A `pods/ephemeralcontainers` update touches only the new ephemeral
    /// containers (each pinned to `void`), plus the mutations record.
    #[test]
    fn p9_ephemeral_update_only_touches_new_containers(case in case(), keep in any::<Index>()) {
        let pod = &case.pod;
        let Some(ephemeral) = pod["spec"]["ephemeralContainers"].as_array() else {
            return Ok(());
        };
        let kept = keep.index(ephemeral.len() + 1);
        let mut old = pod.clone();
        old["spec"]["ephemeralContainers"] = Value::Array(ephemeral[..kept].to_vec());
        let namespace_settings = SETTINGS.for_namespace(&case.namespace_annotations);
        let evaluation = match evaluate_object(
            pod,
            ObjectKind::Pod,
            &case.namespace,
            PodOperation::EphemeralContainers { old_object: &old },
            &SETTINGS,
            &namespace_settings,
        ) {
            Ok(Some(evaluation)) => evaluation,
            other => return Err(TestCaseError::fail(format!("not evaluated: {other:?}"))),
        };
        for operation in &evaluation.patch {
            let path = operation.path().to_string();
            let new_container = (kept..ephemeral.len())
                .any(|i| path.starts_with(&format!("/spec/ephemeralContainers/{i}/env")));
            let record = path == "/metadata"
                || path == "/metadata/annotations"
                || path == format!("/metadata/annotations/{}", escape(MUTATIONS));
            prop_assert!(new_container || record, "update patches {}", path);
        }
        let patched = apply(pod, &evaluation.patch)?;
        if !pod_allowlisted(pod, &case.namespace) {
            let now = patched["spec"]["ephemeralContainers"].as_array().cloned().unwrap_or_default();
            for c in &now[kept..] {
                let entries = visible_devices_entries(c);
                prop_assert_eq!(entries.len(), 1, "new ephemeral {}", c);
                prop_assert_eq!(literal(entries[0]), Some("void"));
            }
        }
    }
    /// 10. R2 denies exactly the pods the spec says (invalid or fractional
    /// values, a request without a limit, request != limit, more than 8 per
    /// container, an effective pod count with sidecars above the namespace
    /// maximum), and ignored annotations are reported as notices.
    #[test]
    fn p10_bounded_requests_and_notices(case in case()) {
        let evaluation = evaluate_pod(&case.pod, &case)?;
        let max = case.namespace_annotations.get(MAX_GPUS).map(String::as_str);
        let max_per_pod = match max {
            Some("2") => 2,
            _ => 8,
        };
        let expected = bounded_requests_violated(&case.pod, max_per_pod);
        let actual = evaluation.violations.iter().any(|v| v.rule.to_string() == "bounded-requests");
        prop_assert_eq!(
            actual, expected, "bounded-requests violations: {:?}", evaluation.violations
        );

        let mut notices = usize::from(matches!(max, Some("16" | "x")));
        let namespace_minimum = case.namespace_annotations.get(MIN_CC).map(String::as_str);
        notices += usize::from(namespace_minimum == Some("junk"));
        let namespace_minimum = namespace_minimum.and_then(capability);
        let pod_annotation = case.pod
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(MIN_CC))
            .and_then(Value::as_str);
        let ignored = pod_annotation.is_some_and(|raw| match capability(raw) {
            None => true,
            Some(value) => namespace_minimum.is_some_and(|n| value < n),
        });
        let gpu = pod_gpu(&case.pod);
        if gpu == Some(true) {
            notices += usize::from(ignored);
            prop_assert_eq!(evaluation.notices.len(), notices, "notices: {:?}", evaluation.notices);
        } else if gpu == Some(false) {
            prop_assert!(
                evaluation.notices.len() == notices
                    || evaluation.notices.len() == notices + usize::from(ignored),
                "notices: {:?}", evaluation.notices
            );
        }
        for notice in &evaluation.notices {
            prop_assert!(notice.starts_with("gpu-policy:"), "{:?}", notice);
        }
    }
}

proptest! {
    #![proptest_config(config(2000))]

    /// 8. Arbitrary JSON never panics the evaluation, as a Pod or as any
    /// workload; when it is read, its patch applies.
    #[test]
    fn p8_arbitrary_json_never_panics(value in arbitrary_json()) {
        let kinds = std::iter::once(ObjectKind::Pod)
            .chain(Workload::ALL.into_iter().map(ObjectKind::Workload));
        for kind in kinds {
            if let Ok(Some(evaluation)) = evaluate_as(&value, kind, "default", &BTreeMap::new()) {
                apply(&value, &evaluation.patch)?;
                for mode in Mode::ALL {
                    check_warnings(&decide(mode, kind, &evaluation).warnings)?;
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(config(1000))]

    /// 8b. A generated pod with one subtree replaced by arbitrary JSON (or
    /// removed) never panics; when it is read, its patch applies and the
    /// patched pod needs no further change.
    #[test]
    fn p8b_damaged_pods_never_panic(
        case in case(),
        at in any::<Index>(),
        remove in prop::bool::weighted(0.2),
        replacement in arbitrary_json(),
    ) {
        let mut pointers = Vec::new();
        all_pointers(&case.pod, "", &mut pointers);
        let pointer = at.get(&pointers).clone();
        let mut pod = case.pod.clone();
        let (parent, last) = pointer.rsplit_once('/').unwrap_or(("", ""));
        let removed = remove
            && pod
                .pointer_mut(parent)
                .and_then(Value::as_object_mut)
                .is_some_and(|map| {
                    map.remove(&last.replace("~1", "/").replace("~0", "~")).is_some()
                });
        if !removed && let Some(slot) = pod.pointer_mut(&pointer) {
            *slot = replacement;
        }
        let namespace_annotations = &case.namespace_annotations;
        let result = evaluate_as(&pod, ObjectKind::Pod, &case.namespace, namespace_annotations);
        if let Ok(Some(evaluation)) = result {
            let patched = apply(&pod, &evaluation.patch)?;
            let again = evaluate_as(&patched, ObjectKind::Pod, &case.namespace, namespace_annotations);
            match again {
                Ok(Some(again)) => prop_assert!(
                    again.patch.is_empty(),
                    "not idempotent at {}: {:?}\npod: {}", pointer, again.changes, pod
                ),
                other => return Err(TestCaseError::fail(format!(
                    "patched pod no longer readable: {other:?}\npod: {pod}"
                ))),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Fuzzing the server's entry points
// ---------------------------------------------------------------------------

/// Bounded fuzzing on the stable toolchain of what the server does with a
/// request body: [`review::decode`], [`review::respond`] on every endpoint
/// and [`review::encode`]. The bodies are AdmissionReviews around the
/// fixtures of `tests/fixtures/` (and pods made from their templates),
/// generated pods and workloads, and namespaces, damaged by structure-aware
/// mutations (a subtree replaced or removed, a field added, an env entry
/// duplicated, a GPU count changed), with a damaged envelope or damaged bytes
/// some of the time, or plain random bytes.
///
/// Debug builds are slow and a case must cost little more than the server's
/// own work: the objects are read, generated and written out once
/// ([`corpus`]), with the byte range of every node, and a case is a small
/// recipe of edits spliced into that text.
mod review_fuzz {
    use std::collections::HashMap;
    use std::ops::Range;
    use std::sync::OnceLock;

    use base64::Engine;
    use base64::engine::general_purpose::STANDARD as BASE64;
    use gpu_policy::admission::review::{self, Endpoint};
    use gpu_policy::settings::{MODE_LABEL, NamespaceSettings};
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    use super::*;

    const GENERATED_PODS: usize = 384;
    const GENERATED_WORKLOADS: usize = 128;
    const UID: &str = "705ab4f5-6393-11e8-b7cc-42010a800002";

    /// A node of a written-out object.
    struct Node {
        pointer: String,
        /// The value's bytes.
        value: Range<usize>,
        /// What removing the node from its parent removes: the member or
        /// element and one comma next to it.
        entry: Range<usize>,
        is_object: bool,
    }

    /// One object a case starts from: its compact JSON text and where each
    /// node is in it.
    struct Base {
        object: Value,
        text: Vec<u8>,
        /// `group`, `version`, `kind`, `resource` of the request.
        kind: [&'static str; 4],
        /// Every node, the root first.
        nodes: Vec<Node>,
        index: HashMap<String, usize>,
        /// Nodes that are objects, containers, env entries, resource
        /// quantities (indices into `nodes`).
        objects: Vec<usize>,
        containers: Vec<usize>,
        env_entries: Vec<usize>,
        quantities: Vec<usize>,
    }

    impl Base {
        fn new(object: Value) -> Self {
            let mut text = Vec::with_capacity(4096);
            let mut nodes = Vec::new();
            write_nodes(&mut text, &object, String::new(), 0..0, &mut nodes);
            let index: HashMap<String, usize> = nodes
                .iter()
                .enumerate()
                .map(|(i, node)| (node.pointer.clone(), i))
                .collect();
            let select = |keep: &dyn Fn(&Node, &str, &str) -> bool| -> Vec<usize> {
                nodes
                    .iter()
                    .enumerate()
                    .filter(|(_, node)| {
                        let (parent, last) = node.pointer.rsplit_once('/').unwrap_or(("", ""));
                        keep(node, parent, last)
                    })
                    .map(|(i, _)| i)
                    .collect()
            };
            let numbered =
                |last: &str| !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit());
            let objects = select(&|node, _, _| node.is_object);
            let containers = select(&|_, parent, last| {
                numbered(last)
                    && LISTS
                        .iter()
                        .any(|list| parent.ends_with(&format!("/{list}")))
            });
            let env_entries = select(&|_, parent, last| numbered(last) && parent.ends_with("/env"));
            let quantities = select(&|_, parent, _| {
                parent.ends_with("/resources/limits") || parent.ends_with("/resources/requests")
            });
            Base {
                kind: request_kind(&object),
                object,
                text,
                nodes,
                index,
                objects,
                containers,
                env_entries,
                quantities,
            }
        }

        fn node(&self, pointer: &str) -> Option<&Node> {
            self.index.get(pointer).map(|&i| &self.nodes[i])
        }
    }

    /// Writes `value` as compact JSON (the text `serde_json::to_vec` writes,
    /// several times faster in a debug build) and records its nodes.
    fn write_nodes(
        out: &mut Vec<u8>,
        value: &Value,
        pointer: String,
        entry_start: Range<usize>,
        nodes: &mut Vec<Node>,
    ) {
        let start = out.len();
        let at = nodes.len();
        nodes.push(Node {
            pointer: pointer.clone(),
            value: start..start,
            entry: entry_start,
            is_object: value.is_object(),
        });
        let mut children: Vec<usize> = Vec::new();
        match value {
            Value::Array(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    children.push(nodes.len());
                    let here = out.len();
                    write_nodes(out, item, format!("{pointer}/{i}"), here..here, nodes);
                }
                out.push(b']');
            }
            Value::Object(map) => {
                out.push(b'{');
                for (i, (key, item)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    let here = out.len();
                    write_str(out, key);
                    out.push(b':');
                    children.push(nodes.len());
                    write_nodes(
                        out,
                        item,
                        format!("{pointer}/{}", escape(key)),
                        here..here,
                        nodes,
                    );
                }
                out.push(b'}');
            }
            Value::String(s) => write_str(out, s),
            Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
            Value::Bool(true) => out.extend_from_slice(b"true"),
            Value::Bool(false) => out.extend_from_slice(b"false"),
            Value::Null => out.extend_from_slice(b"null"),
        }
        nodes[at].value.end = out.len();
        // An entry takes the comma before it, the first one the comma after
        // it (if any), so that the rest stays valid JSON.
        let count = children.len();
        for (i, child) in children.into_iter().enumerate() {
            let node = &mut nodes[child];
            let (from, to) = (node.entry.start, node.value.end);
            node.entry = match i {
                0 if count > 1 => from..to + 1,
                0 => from..to,
                _ => from - 1..to,
            };
        }
    }

    /// Compact JSON, as [`write_nodes`] writes it; the nodes are dropped
    /// (the values written this way, a case's edits, are small).
    fn write_json(out: &mut Vec<u8>, value: &Value) {
        write_nodes(out, value, String::new(), 0..0, &mut Vec::new());
    }

    fn write_str(out: &mut Vec<u8>, s: &str) {
        if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
            serde_json::to_writer(&mut *out, s).expect("a string serialises");
        } else {
            out.push(b'"');
            out.extend_from_slice(s.as_bytes());
            out.push(b'"');
        }
    }

    fn json_text(value: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        write_json(&mut out, value);
        out
    }

    /// What the API server would put in `request.kind` and
    /// `request.resource` for an object.
    fn request_kind(object: &Value) -> [&'static str; 4] {
        let api_version = object["apiVersion"].as_str().unwrap_or("v1");
        let kind = object["kind"].as_str().unwrap_or("Pod");
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        Workload::ALL
            .into_iter()
            .find(|w| w.group() == group && w.kind() == kind)
            .map(|w| [w.group(), "v1", w.kind(), w.resource()])
            .unwrap_or(match (api_version, kind) {
                ("v1", "Pod") => ["", "v1", "Pod", "pods"],
                ("v1", "Namespace") => ["", "v1", "Namespace", "namespaces"],
                _ => ["", "v1", "Service", "services"],
            })
    }

    struct Corpus {
        bases: Vec<Base>,
        /// One per combination of the namespace annotations [`case`] makes.
        namespace_settings: Vec<NamespaceSettings>,
    }

    /// The fixtures (and a pod for each workload fixture's template),
    /// generated pods and workloads, and namespaces; read and generated once.
    fn corpus() -> &'static Corpus {
        static CORPUS: OnceLock<Corpus> = OnceLock::new();
        CORPUS.get_or_init(|| {
            let mut objects: Vec<Value> = fixtures::objects().into_iter().map(|(_, o)| o).collect();
            let mut templates: Vec<Value> = objects
                .iter()
                .filter_map(|w| pod_of_workload(w, "abcde", "00000000-0000-0000-0000-000000000001"))
                .collect();
            objects.append(&mut templates);
            // Always the same pods (XorShift: ChaCha is slow in debug builds).
            let mut runner = TestRunner::new_with_rng(
                Config {
                    rng_algorithm: RngAlgorithm::XorShift,
                    ..Config::default()
                },
                TestRng::deterministic_rng(RngAlgorithm::XorShift),
            );
            let strategy = case();
            for index in 0..GENERATED_PODS + GENERATED_WORKLOADS {
                let generated = strategy
                    .new_tree(&mut runner)
                    .expect("the pod generator never rejects")
                    .current();
                objects.push(if index < GENERATED_PODS {
                    generated.pod
                } else {
                    let kind = Workload::ALL[index % Workload::ALL.len()];
                    wrap(kind, &generated.pod, "web", &generated.namespace)
                });
            }
            for mode in ["enforce", "warn", "audit", "off", ""] {
                objects.push(json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "ml", "labels": {MODE_LABEL: mode},
                                 "annotations": {MIN_CC: "8.0", MAX_GPUS: "2"}}}));
            }
            objects
                .push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}));
            let bases: Vec<Base> = objects.into_iter().map(Base::new).collect();
            for base in &bases {
                let back: Value =
                    serde_json::from_slice(&base.text).expect("write_nodes writes JSON");
                assert_eq!(back, base.object, "write_nodes changed a value");
            }
            let mut namespace_settings = Vec::new();
            for min in [None, Some("8.0"), Some("7.5"), Some("junk"), Some("6.1")] {
                for max in [None, Some("2"), Some("16"), Some("x")] {
                    let mut annotations = BTreeMap::new();
                    if let Some(min) = min {
                        annotations.insert(MIN_CC.to_owned(), min.to_owned());
                    }
                    if let Some(max) = max {
                        annotations.insert(MAX_GPUS.to_owned(), max.to_owned());
                    }
                    namespace_settings.push(SETTINGS.for_namespace(&annotations));
                }
            }
            Corpus {
                bases,
                namespace_settings,
            }
        })
    }

    /// Small JSON values, cheap to generate (a recursive strategy is not).
    fn small_json() -> impl Strategy<Value = Value> {
        let composite = vec![
            json!([]),
            json!({}),
            json!([null]),
            json!({"": null}),
            json!([{"name": NVD, "value": "all"}]),
            json!({"name": NVD, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
            json!({"nvidia.com/gpu": "1"}),
            json!({"limits": {"nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": 2}}),
            json!({"limits": {"nvidia.com/gpu": "1"}}),
            json!([{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]),
            json!({"nodeSelectorTerms": [{"matchExpressions": [
                {"key": MAJOR, "operator": "Gt", "values": ["9"]}]}]}),
            json!({"nodeSelectorTerms": [{}]}),
            json!([{"matchExpressions": null}]),
            json!({"matchExpressions": [{"key": MAJOR, "operator": "In", "values": []}]}),
            json!({"nodeAffinity": {REQUIRED: null}}),
            json!({MUTATIONS: "runtime-class", MIN_CC: "8.0"}),
            json!({MIN_CC: "99.99"}),
            json!([{"apiVersion": "apps/v1", "kind": "DaemonSet",
                    "name": "nvidia-gpu-exporter", "controller": true}]),
            json!({"hostPath": {"path": "/dev/nvidia0"}, "name": "v"}),
            json!([{"name": "v", "mountPath": "/dev"}]),
            json!({"a": {"b": {"c": {"d": [[[[]]]]}}}}),
            json!(["\u{0}", "\u{7f}", "\u{10ffff}", "\\\"", "\u{2028}"]),
        ];
        // The likeliest first: a union generates the options before the
        // one it picks lazily, which costs.
        prop_oneof![
            3 => word().prop_map(Value::String),
            3 => prop::sample::select(composite),
            2 => quantity(),
            1 => Just(Value::Null),
            1 => any::<bool>().prop_map(Value::Bool),
            1 => any::<i64>().prop_map(|n| json!(n)),
            1 => any::<u64>().prop_map(|n| json!(n)),
            1 => any::<f64>()
                .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ]
    }

    /// Keys and strings the policy reads, and some arbitrary ones.
    fn word() -> impl Strategy<Value = String> {
        const WORDS: [&str; 24] = [
            "name",
            "value",
            "valueFrom",
            "env",
            "resources",
            "limits",
            "requests",
            "nvidia.com/gpu",
            "nvidia.com/mig-1g.5gb",
            "runtimeClassName",
            "nvidia",
            "affinity",
            "nodeSelectorTerms",
            "matchExpressions",
            "restartPolicy",
            "Always",
            "image",
            "annotations",
            "ownerReferences",
            "controller",
            NVD,
            MUTATIONS,
            MIN_CC,
            "all",
        ];
        prop_oneof![
            3 => pick(&WORDS).prop_map(str::to_owned),
            1 => prop::collection::vec(any::<char>(), 0..6).prop_map(String::from_iter),
        ]
    }

    /// GPU counts as the API server might let them through, and not.
    fn quantity() -> impl Strategy<Value = Value> {
        prop::sample::select(vec![
            json!("1"),
            json!(1),
            json!(1.0),
            json!(1.5),
            json!(-0.0),
            json!(8),
            json!(9),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1e300),
            json!("0"),
            json!("8"),
            json!("9"),
            json!("1.5"),
            json!("0.5"),
            json!(".5"),
            json!("1."),
            json!("1e3"),
            json!("1E0"),
            json!("1e-3"),
            json!("1k"),
            json!("1Ki"),
            json!("1M"),
            json!("1n"),
            json!("+1"),
            json!("-0"),
            json!("01"),
            json!(" 1"),
            json!("1 "),
            json!("1m"),
            json!("999m"),
            json!("1000m"),
            json!("8000m"),
            json!("9223372036854775807"),
            json!("9223372036854775808"),
            json!("18446744073709551616"),
            json!("1e308"),
            json!("1e309"),
            json!("0.000000001e9"),
            json!("1.0000000000000000001"),
            json!(""),
            json!("\u{661}"),
            json!("0x1"),
            json!("1_000"),
            json!("NaN"),
            json!("Infinity"),
            Value::Null,
            json!(true),
            json!([1]),
            json!({"value": 1}),
        ])
    }

    /// A change to the object; the index picks the node it applies to.
    #[derive(Debug, Clone)]
    enum Mutation {
        Replace(Index, Value),
        Remove(Index),
        /// Sets a field of an object (adds it or replaces its value).
        Set(Index, String, Value),
        /// Appends a copy of an env entry to its list, with value `all` if
        /// the flag is set.
        DuplicateEnv(Index, bool),
        /// Appends an `NVIDIA_VISIBLE_DEVICES` entry to a container's env.
        AddVisibleDevices(Index, Value),
        Quantity(Index, Value),
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        let devices = prop_oneof![
            pick(&["all", "void", "none", "0", "GPU-1234", "", "all,void"]).prop_map(|v| json!(v)),
            small_json(),
        ];
        prop_oneof![
            4 => (any::<Index>(), small_json()).prop_map(|(at, v)| Mutation::Replace(at, v)),
            4 => (any::<Index>(), quantity()).prop_map(|(at, v)| Mutation::Quantity(at, v)),
            2 => any::<Index>().prop_map(Mutation::Remove),
            2 => (any::<Index>(), word(), small_json())
                .prop_map(|(at, key, v)| Mutation::Set(at, key, v)),
            2 => (any::<Index>(), any::<bool>()).prop_map(|(at, all)| Mutation::DuplicateEnv(at, all)),
            2 => (any::<Index>(), devices).prop_map(|(at, v)| Mutation::AddVisibleDevices(at, v)),
        ]
    }

    /// Replace `range` of the base text with `text`.
    struct Splice {
        range: Range<usize>,
        text: Vec<u8>,
    }

    fn replace(node: &Node, value: &Value) -> Splice {
        Splice {
            range: node.value.clone(),
            text: json_text(value),
        }
    }

    /// Appends to the array `node`, which is `array` in the base.
    fn append(node: &Node, array: &[Value], value: &Value) -> Splice {
        let end = node.value.end - 1;
        let mut text = if array.is_empty() {
            Vec::new()
        } else {
            vec![b',']
        };
        write_json(&mut text, value);
        Splice {
            range: end..end,
            text,
        }
    }

    /// Sets `key` of the object `node`, which is `map` in the base.
    fn set(base: &Base, node: &Node, map: &Obj, key: &str, value: &Value) -> Splice {
        if let Some(member) = base.node(&format!("{}/{}", node.pointer, escape(key))) {
            return replace(member, value);
        }
        let start = node.value.start + 1;
        let mut text = Vec::new();
        write_str(&mut text, key);
        text.push(b':');
        write_json(&mut text, value);
        if !map.is_empty() {
            text.push(b',');
        }
        Splice {
            range: start..start,
            text,
        }
    }

    fn splice_of(base: &Base, mutation: &Mutation) -> Option<Splice> {
        let node = |list: &[usize], at: &Index| -> Option<&Node> {
            (!list.is_empty()).then(|| &base.nodes[*at.get(list)])
        };
        // Any node but the root: the object stays an object.
        let below_root = |at: &Index| -> Option<&Node> {
            let count = base.nodes.len() - 1;
            (count > 0).then(|| &base.nodes[1 + at.index(count)])
        };
        match mutation {
            Mutation::Replace(at, value) => Some(replace(below_root(at)?, value)),
            Mutation::Remove(at) => {
                let node = below_root(at)?;
                Some(Splice {
                    range: node.entry.clone(),
                    text: Vec::new(),
                })
            }
            Mutation::Set(at, key, value) => {
                let node = node(&base.objects, at)?;
                let map = base.object.pointer(&node.pointer)?.as_object()?;
                Some(set(base, node, map, key, value))
            }
            Mutation::DuplicateEnv(at, all) => {
                let node = node(&base.env_entries, at)?;
                let mut entry = base.object.pointer(&node.pointer)?.clone();
                if *all && let Some(map) = entry.as_object_mut() {
                    map.insert("value".into(), json!("all"));
                }
                let parent = node.pointer.rsplit_once('/')?.0;
                let env = base.object.pointer(parent)?.as_array()?;
                Some(append(base.node(parent)?, env, &entry))
            }
            Mutation::AddVisibleDevices(at, value) => {
                let node = node(&base.containers, at)?;
                let container = base.object.pointer(&node.pointer)?.as_object()?;
                let entry = json!({"name": NVD, "value": value});
                match container.get("env") {
                    Some(Value::Array(env)) => Some(append(
                        base.node(&format!("{}/env", node.pointer))?,
                        env,
                        &entry,
                    )),
                    _ => Some(set(base, node, container, "env", &json!([entry]))),
                }
            }
            Mutation::Quantity(at, value) => Some(replace(node(&base.quantities, at)?, value)),
        }
    }

    /// The base text with the splices that do not touch an earlier one (the
    /// text stays valid JSON).
    fn render(base: &Base, splices: Vec<Splice>) -> Vec<u8> {
        let mut kept: Vec<Splice> = Vec::new();
        for splice in splices {
            let touches = kept
                .iter()
                .any(|k| splice.range.start <= k.range.end && k.range.start <= splice.range.end);
            if !touches {
                kept.push(splice);
            }
        }
        kept.sort_by_key(|s| s.range.start);
        let mut out = Vec::with_capacity(base.text.len() + 256);
        let mut at = 0;
        for splice in kept {
            out.extend_from_slice(&base.text[at..splice.range.start]);
            out.extend_from_slice(&splice.text);
            at = splice.range.end;
        }
        out.extend_from_slice(&base.text[at..]);
        out
    }

    /// What the request says about the operation.
    #[derive(Debug, Clone)]
    struct Envelope {
        uid: String,
        /// CREATE, UPDATE, DELETE or CONNECT.
        operation: usize,
        /// `ephemeralcontainers` (or `status`), with an oldObject that has
        /// the last `n` ephemeral containers fewer.
        sub_resource: Option<(bool, usize)>,
        /// Another kind than the object's.
        kind: Option<[&'static str; 4]>,
        namespace: Option<&'static str>,
        admin: bool,
        /// The mode label of a Namespace's oldObject.
        old_label: Option<&'static str>,
        /// A field of the request (`true`) or of the review replaced, or
        /// removed.
        damage: Option<(bool, Index, Option<Value>)>,
    }

    const REQUEST_FIELDS: [&str; 14] = [
        "uid",
        "kind",
        "resource",
        "requestKind",
        "namespace",
        "operation",
        "userInfo",
        "object",
        "oldObject",
        "subResource",
        "dryRun",
        "name",
        "options",
        "extra",
    ];
    const REVIEW_FIELDS: [&str; 3] = ["apiVersion", "kind", "request"];
    const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

    fn envelope() -> impl Strategy<Value = Envelope> {
        let odd_uids = [
            "",
            "x",
            "\"quoted\" \\ back\\slash",
            "\u{0}\u{1f}\u{7f}",
            "\u{2028}\u{feff}\u{10ffff}",
            "gpu-policy: ünïcödé ✓",
        ]
        .map(str::to_owned);
        let uid = prop_oneof![
            16 => Just(UID.to_owned()),
            1 => prop::sample::select(odd_uids.to_vec()),
            1 => prop::collection::vec(any::<char>(), 0..12).prop_map(String::from_iter),
            1 => Just("u".repeat(300)),
        ];
        let kinds = [
            ["", "v1", "Pod", "pods"],
            ["apps", "v1", "Deployment", "deployments"],
            ["batch", "v1", "CronJob", "cronjobs"],
            ["", "v1", "PodTemplate", "podtemplates"],
            ["apps", "v1", "Pod", "pods"],
            ["", "v1", "Namespace", "namespaces"],
            ["", "v1", "Service", "services"],
        ];
        (
            uid,
            prop_oneof![12 => Just(0usize), 3 => Just(1), 1 => Just(2), 1 => Just(3)],
            prop::option::weighted(0.1, (prop::bool::weighted(0.9), 0..3usize)),
            prop::option::weighted(0.08, pick(&kinds)),
            prop::option::weighted(0.9, pick(&["default", "kube-system", "ml"])),
            any::<bool>(),
            prop::option::weighted(0.7, pick(&["enforce", "warn", "audit", "bogus"])),
            prop::option::weighted(
                0.08,
                (
                    any::<bool>(),
                    any::<Index>(),
                    prop::option::weighted(0.7, small_json()),
                ),
            ),
        )
            .prop_map(
                |(uid, operation, sub_resource, kind, namespace, admin, old_label, damage)| {
                    Envelope {
                        uid,
                        operation,
                        sub_resource,
                        kind,
                        namespace,
                        admin,
                        old_label,
                        damage,
                    }
                },
            )
    }

    /// How the finished body is damaged, if at all.
    #[derive(Debug, Clone)]
    enum Bytes {
        Intact,
        Arbitrary(Vec<u8>),
        Truncate(Index),
        Flip(Index, u8),
        Splice(Index, Vec<u8>),
    }

    fn bytes() -> impl Strategy<Value = Bytes> {
        prop_oneof![
            90 => Just(Bytes::Intact),
            3 => prop::collection::vec(any::<u8>(), 0..96).prop_map(Bytes::Arbitrary),
            2 => any::<Index>().prop_map(Bytes::Truncate),
            3 => (any::<Index>(), 1..=255u8).prop_map(|(at, bits)| Bytes::Flip(at, bits)),
            2 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
                .prop_map(|(at, extra)| Bytes::Splice(at, extra)),
        ]
    }

    fn endpoint() -> impl Strategy<Value = Endpoint> {
        prop_oneof![
            5 => Just(Endpoint::Mutate),
            2 => Just(Endpoint::Validate(Mode::Enforce)),
            1 => Just(Endpoint::Validate(Mode::Warn)),
            1 => Just(Endpoint::Validate(Mode::Audit)),
            1 => Just(Endpoint::Namespace),
        ]
    }

    /// The starting object: one of the corpus, or (rarely: it is slow) a
    /// freshly generated pod.
    #[derive(Debug, Clone)]
    enum Source {
        Corpus(Index),
        Fresh(Box<Case>),
    }

    fn source() -> impl Strategy<Value = Source> {
        prop_oneof![
            399 => any::<Index>().prop_map(Source::Corpus),
            // Boxed: the value trees of `case` are large, and debug builds
            // copy them around.
            1 => case().prop_map(|c| Source::Fresh(Box::new(c))).boxed(),
        ]
    }

    /// A field of the review, already JSON text.
    type Fields = Vec<(&'static str, Vec<u8>)>;

    fn write_fields(out: &mut Vec<u8>, fields: &Fields) {
        out.push(b'{');
        for (i, (key, text)) in fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_str(out, key);
            out.push(b':');
            out.extend_from_slice(text);
        }
        out.push(b'}');
    }

    fn damage(fields: &mut Fields, names: &[&'static str], at: &Index, value: &Option<Value>) {
        let name = *at.get(names);
        fields.retain(|(key, _)| *key != name);
        if let Some(value) = value {
            fields.push((name, json_text(value)));
        }
    }

    /// The review body of a case, and whether it is a well-formed review.
    fn body(
        source: &Source,
        mutations: &[Mutation],
        envelope: &Envelope,
        bytes: &Bytes,
    ) -> (Vec<u8>, bool) {
        let fresh;
        let base = match source {
            Source::Corpus(index) => index.get(&corpus().bases),
            Source::Fresh(case) => {
                fresh = Base::new(case.pod.clone());
                &fresh
            }
        };
        let splices = || mutations.iter().filter_map(|m| splice_of(base, m));
        let object = render(base, splices().collect());
        let [group, version, kind, resource] = envelope.kind.unwrap_or(base.kind);
        let operation = OPERATIONS[envelope.operation];
        // Plain ASCII, written as it is (faster than `json!`).
        let text = |s: String| s.into_bytes();
        let mut uid = Vec::new();
        write_str(&mut uid, &envelope.uid);
        let mut request: Fields = vec![
            ("uid", uid),
            (
                "kind",
                text(format!(
                    r#"{{"group":"{group}","version":"{version}","kind":"{kind}"}}"#
                )),
            ),
            (
                "resource",
                text(format!(
                    r#"{{"group":"{group}","version":"{version}","resource":"{resource}"}}"#
                )),
            ),
            ("operation", text(format!(r#""{operation}""#))),
            ("dryRun", text("false".into())),
        ];
        if let Some(namespace) = envelope.namespace
            && kind != "Namespace"
        {
            request.push(("namespace", text(format!(r#""{namespace}""#))));
        }
        let groups = if envelope.admin {
            "system:masters"
        } else {
            "system:authenticated"
        };
        request.push((
            "userInfo",
            text(format!(r#"{{"username":"alice","groups":["{groups}"]}}"#)),
        ));
        let mut old = None;
        if kind == "Namespace" && operation != "CREATE" {
            // Namespaces are small: edit the value.
            let mut namespace: Value = serde_json::from_slice(&object).unwrap_or(Value::Null);
            if let Some(labels) = namespace
                .pointer_mut("/metadata/labels")
                .and_then(Value::as_object_mut)
            {
                match envelope.old_label {
                    Some(label) => labels.insert(MODE_LABEL.into(), json!(label)),
                    None => labels.remove(MODE_LABEL),
                };
            }
            old = Some(json_text(&namespace));
        }
        if let Some((ephemeral, removed)) = envelope.sub_resource {
            let name = if ephemeral {
                "ephemeralcontainers"
            } else {
                "status"
            };
            request.push(("subResource", json_text(&json!(name))));
            let count = base
                .object
                .pointer("/spec/ephemeralContainers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let removals = (count.saturating_sub(removed)..count).filter_map(|i| {
                let node = base.node(&format!("/spec/ephemeralContainers/{i}"))?;
                Some(Splice {
                    range: node.entry.clone(),
                    text: Vec::new(),
                })
            });
            old = Some(render(base, splices().chain(removals).collect()));
        }
        if operation == "DELETE" {
            request.push(("oldObject", old.take().unwrap_or(object)));
        } else {
            request.push(("object", object));
            if let Some(old) = old {
                request.push(("oldObject", old));
            }
        }
        let mut review: Fields = vec![
            ("apiVersion", br#""admission.k8s.io/v1""#.to_vec()),
            ("kind", br#""AdmissionReview""#.to_vec()),
        ];
        match &envelope.damage {
            Some((true, at, value)) => damage(&mut request, &REQUEST_FIELDS, at, value),
            Some((false, at, value)) => damage(&mut review, &REVIEW_FIELDS, at, value),
            None => {}
        }
        let mut request_text = Vec::with_capacity(base.text.len() * 2 + 512);
        write_fields(&mut request_text, &request);
        if !review.iter().any(|(key, _)| *key == "request") {
            review.push(("request", request_text));
        }
        let mut body = Vec::with_capacity(base.text.len() * 2 + 1024);
        write_fields(&mut body, &review);
        match bytes {
            Bytes::Intact => {}
            Bytes::Arbitrary(arbitrary) => body.clone_from(arbitrary),
            Bytes::Truncate(at) => body.truncate(at.index(body.len())),
            Bytes::Flip(at, bits) => {
                let index = at.index(body.len());
                body[index] ^= bits;
            }
            Bytes::Splice(at, extra) => {
                let index = at.index(body.len() + 1);
                body.splice(index..index, extra.iter().copied());
            }
        }
        (
            body,
            envelope.damage.is_none() && matches!(bytes, Bytes::Intact),
        )
    }

    /// Runs the body through the server's steps and checks the answer.
    fn serve(
        body: &[u8],
        well_formed: bool,
        endpoint: Endpoint,
        namespace_settings: &NamespaceSettings,
    ) -> Result<(), TestCaseError> {
        let decoded = review::decode(body);
        let request = match decoded {
            Ok(request) => request,
            Err(err) => {
                prop_assert!(!well_formed, "a well-formed review was rejected: {}", err);
                return Ok(());
            }
        };
        let (response, _) =
            review::respond(&request, endpoint, &SETTINGS, namespace_settings, None);
        let encoded = match review::encode(response) {
            Ok(encoded) => encoded,
            Err(err) => return Err(TestCaseError::fail(format!("encode failed: {err}"))),
        };
        let reply: Value = serde_json::from_slice(&encoded)
            .map_err(|err| TestCaseError::fail(format!("the answer is not JSON: {err}")))?;
        prop_assert_eq!(&reply["apiVersion"], "admission.k8s.io/v1");
        prop_assert_eq!(&reply["kind"], "AdmissionReview");
        let response = &reply["response"];
        prop_assert_eq!(
            response["uid"].as_str(),
            Some(request.uid.as_str()),
            "uid not echoed"
        );
        prop_assert!(response["allowed"].is_boolean(), "no allowed: {}", response);
        let Some(patch) = response.get("patch") else {
            return Ok(());
        };
        prop_assert_eq!(
            endpoint,
            Endpoint::Mutate,
            "a validating answer has a patch"
        );
        prop_assert_eq!(&response["patchType"], "JSONPatch");
        let decoded = patch
            .as_str()
            .and_then(|p| BASE64.decode(p).ok())
            .ok_or_else(|| TestCaseError::fail(format!("patch is not base64: {patch}")))?;
        let operations: json_patch::Patch = serde_json::from_slice(&decoded)
            .map_err(|err| TestCaseError::fail(format!("patch is not a JSON patch: {err}")))?;
        let Some(mut object) = request.object.map(|o| o.raw) else {
            return Err(TestCaseError::fail("a patch without an object"));
        };
        json_patch::patch(&mut object, &operations)
            .map_err(|err| TestCaseError::fail(format!("the patch does not apply: {err}")))?;
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            // The bounded fuzzing run of CI: about a minute in a debug build.
            cases: 100_000,
            failure_persistence: None,
            max_shrink_iters: 2048,
            // ChaCha, the default, costs a tenth of the time in a debug build.
            rng_algorithm: RngAlgorithm::XorShift,
            ..ProptestConfig::default()
        })]

        /// 11. No request body makes the server panic or fail to answer:
        /// only `decode` may refuse a body, and never a well-formed review;
        /// every answer encodes and echoes the uid; a patch (mutating
        /// webhook only) is base64 of a JSON patch that applies to the
        /// object.
        #[test]
        fn p11_review_bodies_never_fail_the_server(
            source in source(),
            mutations in prop::collection::vec(mutation(), 0..=3),
            envelope in envelope(),
            bytes in bytes(),
            endpoint in endpoint(),
            namespace_settings in any::<Index>(),
        ) {
            corpus();
            let (body, well_formed) = body(&source, &mutations, &envelope, &bytes);
            let namespace_settings = namespace_settings.get(&corpus().namespace_settings);
            serve(&body, well_formed, endpoint, namespace_settings).map_err(|err| {
                TestCaseError::fail(format!(
                    "{err}\nendpoint {endpoint:?}, body:\n{}",
                    String::from_utf8_lossy(&body)
                ))
            })?;
        }
    }
}
