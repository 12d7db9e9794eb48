//! The names the [`super::VARIANTS`]' settings read, laid over the
//! generator's pods (after the sharing schemes): GPU resources of other
//! names (`example.com/gpu`, `example.com/tpu-accel`, which the wildcard
//! `example.com/*-accel` matches, `nvidia.com/mig-2g.10gb`, and
//! `example.com/fpga`, which no variant counts), the runtime class
//! `nvidia-cdi`, owners and workload names around the allowlist's
//! `namePrefix` entries, and values of the namespace annotation
//! `gpu-policy.io/max-gpus-per-pod` beyond the generator's, and tolerations
//! around the taints of the variant's `gpuTolerations` (tolerating them or
//! not, or already carrying them).
//!
//! The layer draws its own random numbers after the pod's, so the pods
//! underneath are the generator's own.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::sharing_pods::sharing_case;
use crate::support::pods::{Case, GPU_RESOURCES, LISTS, MAX_GPUS, pick};

/// What GPU resources become in a container whose resources are renamed.
pub const OTHER_RESOURCES: [&str; 4] =
    ["example.com/gpu", "example.com/tpu-accel", "nvidia.com/mig-2g.10gb", "example.com/fpga"];

/// Owners, and the namespace the pod then goes to: an allowlist
/// `namePrefix` matched (longer than the prefix), the prefix alone (no
/// match), another kind, another namespace.
const OWNERS: [(&str, &str, &str); 6] = [
    ("DaemonSet", "nvidia-dcgm-exporter", "kube-system"),
    ("DaemonSet", "nvidia-", "kube-system"),
    ("ReplicaSet", "dcgm-exporter-7c9f8", "gpu-team"),
    ("ReplicaSet", "dcgm-exporter-", "gpu-team"),
    ("Deployment", "dcgm-exporter-7c9f8", "gpu-team"),
    ("ReplicaSet", "dcgm-exporter-7c9f8", "default"),
];

/// Names of the pod, and of the Deployment made of it
/// (`equivalence::deployment_of`), and the namespace it then goes to: a
/// `namePrefix` entry matched or not.
const NAMES: [(&str, &str); 4] = [
    ("generated-7c9f8", "gpu-team"),
    ("generated-", "gpu-team"),
    ("generated-7c9f8", "default"),
    ("pod-1", "gpu-team"),
];

/// Values of `gpu-policy.io/max-gpus-per-pod`: lower than every maximum,
/// between, above, and spellings to read or ignore.
const MAX_GPUS_VALUES: [&str; 9] =
    ["0", "1", "3", "+2", " 2 ", "007", "99999999999999999999", "-1", "2.0"];

/// Tolerations a pod may carry, around the variant's `gpuTolerations`
/// (`nvidia.com/gpu:NoSchedule`, any value; `dedicated=gpu:NoExecute` for 60
/// seconds): each of them as written, with the default operator written out,
/// tolerating every taint or every effect, and others of another key, value
/// or effect.
const TOLERATIONS: [&str; 10] = [
    r#"{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}"#,
    r#"{"key": "dedicated", "value": "gpu", "effect": "NoExecute", "tolerationSeconds": 60}"#,
    r#"{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute", "tolerationSeconds": 60}"#,
    r#"{"operator": "Exists"}"#,
    r#"{"operator": "Exists", "effect": "NoExecute"}"#,
    r#"{"key": "nvidia.com/gpu", "value": "present"}"#,
    r#"{"key": "dedicated", "value": "cpu", "effect": "NoExecute"}"#,
    r#"{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "PreferNoSchedule"}"#,
    r#"{"key": "example.com/fpga", "operator": "Exists"}"#,
    r#"{"key": "dedicated", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}"#,
];

/// What is laid over one pod.
#[derive(Debug, Clone)]
pub struct Names {
    /// Containers (a list of [`LISTS`] and an index, modulo its length)
    /// whose GPU resources get another name.
    resources: Vec<((usize, usize), &'static str)>,
    runtime_class: bool,
    owner: Option<(&'static str, &'static str, &'static str)>,
    name: Option<(&'static str, &'static str)>,
    max_gpus: Option<&'static str>,
    /// `spec.tolerations`, of [`TOLERATIONS`].
    tolerations: Option<Vec<&'static str>>,
}

fn names() -> impl Strategy<Value = Names> {
    (
        prop::option::weighted(
            0.4,
            prop::collection::vec(((0..2usize, 0..4usize), pick(&OTHER_RESOURCES)), 1..=3),
        ),
        prop::bool::weighted(0.15),
        prop::option::weighted(0.3, pick(&OWNERS)),
        prop::option::weighted(0.4, pick(&NAMES)),
        prop::option::weighted(0.3, pick(&MAX_GPUS_VALUES)),
        prop::option::weighted(0.4, prop::collection::vec(pick(&TOLERATIONS), 0..=3)),
    )
        .prop_map(|(resources, runtime_class, owner, name, max_gpus, tolerations)| Names {
            resources: resources.unwrap_or_default(),
            runtime_class,
            owner,
            name,
            max_gpus,
            tolerations,
        })
}

/// The sharing cases with the variants' names laid over some of them.
pub fn variant_case() -> impl Strategy<Value = Case> {
    (sharing_case(), names()).prop_map(|(mut case, names)| {
        lay_over(&mut case, &names);
        case
    })
}

fn lay_over(case: &mut Case, names: &Names) {
    if let Some(value) = names.max_gpus {
        case.namespace_annotations.insert(MAX_GPUS.to_owned(), value.to_owned());
    }
    let pod = &mut case.pod;
    if (names.name.is_some() || names.owner.is_some()) && !pod["metadata"].is_object() {
        pod["metadata"] = json!({});
    }
    if let Some(metadata) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
        let mut namespace = None;
        if let Some((name, at)) = names.name {
            metadata.insert("name".into(), json!(name));
            namespace = Some(at);
        }
        if let Some((kind, name, at)) = names.owner {
            metadata.insert(
                "ownerReferences".into(),
                json!([{"apiVersion": "apps/v1", "kind": kind, "name": name,
                        "uid": "0b8f-uid", "controller": true}]),
            );
            namespace = Some(at);
        }
        if let Some(namespace) = namespace {
            case.namespace = namespace.to_owned();
            if metadata.contains_key("namespace") {
                metadata.insert("namespace".into(), json!(namespace));
            }
        }
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if names.runtime_class {
        spec.insert("runtimeClassName".into(), json!("nvidia-cdi"));
    }
    if let Some(tolerations) = &names.tolerations {
        let list = tolerations.iter().filter_map(|text| serde_json::from_str(text).ok());
        spec.insert("tolerations".into(), Value::Array(list.collect()));
    }
    for ((list, index), name) in &names.resources {
        let Some(containers) =
            spec.get_mut(LISTS[list % LISTS.len()]).and_then(Value::as_array_mut)
        else {
            continue;
        };
        let len = containers.len();
        let Some(container) = containers.get_mut(index % len.max(1)) else {
            continue;
        };
        for field in ["limits", "requests"] {
            let Some(map) = container
                .pointer_mut(&format!("/resources/{field}"))
                .and_then(Value::as_object_mut)
            else {
                continue;
            };
            for old in GPU_RESOURCES {
                if let Some(value) = map.remove(old) {
                    map.insert((*name).to_owned(), value);
                }
            }
        }
    }
}
