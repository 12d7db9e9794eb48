//! The oracles of the property tests, written from the policy
//! (docs/policy.md), not from the implementation: they read a generated pod
//! and say what the policy must have done to it.

use std::collections::{BTreeMap, BTreeSet};

use gpu_policy::admission::{MAX_WARNING_CHARS, Workload};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::pods::{
    DRIVER_FLOOR_IMAGE, GPU_RESOURCES, IMAGES, LISTS, MAJOR, MIN_CC, MINOR, MUTATIONS, NVD, Obj,
    REQUIRED, UNKNOWN_KEYS, expression, known_count,
};

pub const ALLOWLISTED_DAEMONSETS: [&str; 3] =
    ["nvidia-gpu-exporter", "nvidia-device-plugin-daemonset", "gpu-feature-discovery"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Init,
    Sidecar,
    Regular,
    Ephemeral,
}

/// Every container of a pod, in order, with its kind.
pub fn containers(pod: &Value) -> Vec<(Kind, &Value)> {
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
pub fn gpu_status(kind: Kind, c: &Value) -> Option<bool> {
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
pub fn pod_gpu(pod: &Value) -> Option<bool> {
    let statuses: Vec<Option<bool>> =
        containers(pod).into_iter().map(|(kind, c)| gpu_status(kind, c)).collect();
    if statuses.contains(&Some(true)) {
        Some(true)
    } else if statuses.contains(&None) {
        None
    } else {
        Some(false)
    }
}

pub fn fully_decided(pod: &Value) -> bool {
    containers(pod).into_iter().all(|(kind, c)| gpu_status(kind, c).is_some())
}

/// Rule 5 for a pod: namespace and controller owner reference.
pub fn pod_allowlisted(pod: &Value, namespace: &str) -> bool {
    let owner = pod
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|r| r["controller"] == true);
    namespace == "kube-system"
        && owner.is_some_and(|r| {
            r["kind"] == "DaemonSet"
                && r["name"].as_str().is_some_and(|n| ALLOWLISTED_DAEMONSETS.contains(&n))
        })
}

/// R6 on privileged containers (`securityContext.privileged: true`) of a
/// pod that is not allowlisted: `(denied, warned)`. A privileged container
/// that is not a GPU container (ephemeral ones included) gets the pod
/// denied; a privileged GPU container gets a warning. A container whose GPU
/// value is invalid counts as asking for a card, as the GPU container
/// definition says.
pub fn privileged_findings(pod: &Value, namespace: &str) -> (bool, bool) {
    if pod_allowlisted(pod, namespace) {
        return (false, false);
    }
    let (mut denied, mut warned) = (false, false);
    for (kind, c) in containers(pod) {
        if c["securityContext"]["privileged"] != true {
            continue;
        }
        match gpu_status(kind, c) {
            Some(false) => denied = true,
            _ => warned = true,
        }
    }
    (denied, warned)
}

pub fn workload_allowlisted(kind: Workload, name: &str, namespace: &str) -> bool {
    namespace == "kube-system"
        && kind == Workload::DaemonSet
        && ALLOWLISTED_DAEMONSETS.contains(&name)
}

pub fn env_of(c: &Value) -> Vec<&Value> {
    c["env"].as_array().into_iter().flatten().collect()
}

pub fn visible_devices_entries(c: &Value) -> Vec<&Value> {
    env_of(c).into_iter().filter(|e| e["name"] == NVD).collect()
}

/// The literal value of an env entry (no `valueFrom`).
pub fn literal(entry: &Value) -> Option<&str> {
    if entry.get("valueFrom").is_some() {
        return None;
    }
    entry["value"].as_str()
}

pub fn capability(raw: &str) -> Option<(u32, u32)> {
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

pub fn image_minimum(image: &str) -> Option<(u32, u32)> {
    IMAGES.iter().find(|(name, _)| *name == image).and_then(|(_, minimum)| *minimum)
}

pub fn is_cuda13(image: &str) -> bool {
    image_minimum(image) == Some((7, 5)) && image.contains("nvidia/cuda:13.")
}

/// R4: the highest of namespace minimum, pod annotation (only if it does not
/// lower the namespace minimum), and the images of GPU containers.
pub fn expected_minimum(
    pod: &Value,
    namespace_annotations: &BTreeMap<String, String>,
) -> Option<(u32, u32)> {
    let namespace = namespace_annotations.get(MIN_CC).and_then(|raw| capability(raw));
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

/// The driver floor of [`DRIVER_FLOOR_IMAGE`] as the spec writes it: the
/// CUDA version the driver supports, or a forward-compatible branch, on the
/// current GFD labels and on the older ones.
pub fn driver_floor_alternatives() -> Vec<Vec<Value>> {
    let branches = ["535", "550", "565", "570", "575"];
    let mut out = Vec::new();
    for (runtime, driver) in [
        ("nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.driver-version.major"),
        ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.driver.major"),
    ] {
        out.push(vec![expression(runtime, "Gt", &["12"])]);
        out.push(vec![expression(driver, "In", &branches)]);
    }
    out
}

/// Whether a GPU container of the pod runs [`DRIVER_FLOOR_IMAGE`].
pub fn has_driver_floor(pod: &Value) -> bool {
    containers(pod).into_iter().any(|(kind, c)| {
        gpu_status(kind, c) == Some(true) && c["image"].as_str() == Some(DRIVER_FLOOR_IMAGE)
    })
}

/// The pod's whole constraint: each compute alternative ANDed with each
/// driver alternative. Empty when nothing is required.
pub fn pod_alternatives(
    pod: &Value,
    namespace_annotations: &BTreeMap<String, String>,
) -> Vec<Vec<Value>> {
    let compute =
        expected_minimum(pod, namespace_annotations).map(alternatives).unwrap_or_default();
    if !has_driver_floor(pod) {
        return compute;
    }
    let driver = driver_floor_alternatives();
    if compute.is_empty() {
        return driver;
    }
    let mut out = Vec::new();
    for c in &compute {
        for d in &driver {
            let mut both = c.clone();
            both.extend(d.iter().cloned());
            out.push(both);
        }
    }
    out
}

/// The spec's constraint as ORed alternatives of ANDed expressions.
pub fn alternatives((major, minor): (u32, u32)) -> Vec<Vec<Value>> {
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

pub fn match_expressions(term: &Value) -> Vec<Value> {
    term["matchExpressions"].as_array().cloned().unwrap_or_default()
}

/// Whether a node with these GFD labels satisfies the compute expressions of
/// a term (other expressions are taken as satisfied).
pub fn admits(expression: &Value, major: u32, minor: u32) -> bool {
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
pub fn term_guarantees(term: &Value, minimum: (u32, u32)) -> bool {
    let expressions = match_expressions(term);
    (0..=20u32).all(|major| {
        (0..=20u32).all(|minor| {
            (major, minor) >= minimum || !expressions.iter().all(|e| admits(e, major, minor))
        })
    })
}

pub fn required_terms(pod: &Value) -> Option<&Vec<Value>> {
    pod.pointer("/spec/affinity/nodeAffinity")
        .and_then(|n| n.get(REQUIRED))
        .and_then(|r| r.get("nodeSelectorTerms"))
        .and_then(Value::as_array)
}

/// What the spec says the terms become: every term that does not already
/// carry one alternative is multiplied out, one copy per alternative, with
/// the alternative's expressions ANDed in (none duplicated).
pub fn expected_terms(original: &Value, alternatives: &[Vec<Value>]) -> Vec<Value> {
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
            all.extend(alternative.iter().filter(|e| !expressions.contains(e)).cloned());
            let mut multiplied = term.clone();
            multiplied["matchExpressions"] = Value::Array(all);
            expected.push(multiplied);
        }
    }
    expected
}

/// A term with duplicate expressions removed (for comparisons that leave
/// duplicates to their own property).
pub fn without_duplicates(term: &Value) -> Value {
    let mut term = term.clone();
    if let Some(list) = term.get_mut("matchExpressions").and_then(Value::as_array_mut) {
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
pub fn count_of(c: &Value, resource: &str) -> Option<u64> {
    let resources = &c["resources"];
    match resources["limits"].get(resource) {
        Some(limit) => known_count(limit),
        None => resources["requests"].get(resource).map_or(Some(0), known_count),
    }
}

/// Kubernetes' effective pod count of one resource (sidecars included).
pub fn effective_count(pod: &Value, resource: &str) -> Option<u64> {
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
pub fn bounded_requests_violated(pod: &Value, max_per_pod: u64) -> bool {
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

pub fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Pointers of every unknown key in the document, except under `env` entries
/// and node selector terms (whose indices a patch may legitimately shift;
/// those are compared structurally).
pub fn unknown_key_pointers(value: &Value, at: &str, out: &mut Vec<String>) {
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
pub fn same_except(
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

pub fn mutation_tokens(pod: &Value) -> Option<Vec<String>> {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(MUTATIONS))
        .and_then(Value::as_str)
        .map(|v| v.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect())
}

pub fn check_warnings(warnings: &[String]) -> Result<(), TestCaseError> {
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
pub fn wrap(kind: Workload, pod: &Value, name: &str, namespace: &str) -> Value {
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
pub fn all_pointers(value: &Value, at: &str, out: &mut Vec<String>) {
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
