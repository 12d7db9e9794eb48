//! Generators of raw pod JSON for the property tests (`tests/it/properties/`)
//! and the independent patch check (`tests/it/patch_check.rs`).
//!
//! [`case`] builds realistic and adversarial pods: init containers,
//! sidecars, ephemeral containers, GPU and non-GPU resources with valid and
//! invalid quantities, `NVIDIA_VISIBLE_DEVICES` entries, runtime classes,
//! node affinity, hostPath volumes, metadata keys with `/` and `~`, owner
//! references, and unknown fields everywhere. `case_of(Pods::SchemaValid)`
//! builds the same pods without what the Kubernetes JSON schemas reject in
//! strict mode (see [`Pods`]).

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

pub type Obj = Map<String, Value>;

pub const NVD: &str = "NVIDIA_VISIBLE_DEVICES";
pub const MUTATIONS: &str = "gpu-policy.io/mutations";
pub const MIN_CC: &str = "gpu-policy.io/min-compute-capability";
pub const MAX_GPUS: &str = "gpu-policy.io/max-gpus-per-pod";
pub const MAJOR: &str = "nvidia.com/gpu.compute.major";
pub const MINOR: &str = "nvidia.com/gpu.compute.minor";
pub const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
pub const LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];

/// Keys no Kubernetes version knows; they must survive every patch.
pub const UNKNOWN_KEYS: [&str; 3] = ["futureField", "zz~/weird", "x.k8s.io/new~1field"];

pub const GPU_RESOURCES: [&str; 3] =
    ["nvidia.com/gpu", "nvidia.com/mig-1g.5gb", "nvidia.com/gpu.shared"];
pub const RESOURCES: [&str; 5] =
    ["nvidia.com/gpu", "nvidia.com/mig-1g.5gb", "nvidia.com/gpu.shared", "cpu", "memory"];

/// Images and the minimum compute capability the spec's image table gives
/// them (`nvidia/cuda:13.*` 7.5, `12.*` 5.0, `11.*` 3.5, with `nvcr.io/`
/// and Docker Hub prefixes; PyTorch CUDA 12.8 builds 7.0; the NGC framework
/// images by the CUDA version of their release month; vLLM's CUDA 13.0
/// image, which also carries a driver floor, see [`DRIVER_FLOOR_IMAGE`]).
pub const IMAGES: [(&str, Option<(u32, u32)>); 12] = [
    ("nvidia/cuda:13.0.1-base-ubuntu24.04", Some((7, 5))),
    ("docker.io/nvidia/cuda:13.0.1-base-ubuntu24.04", Some((7, 5))),
    ("nvidia/cuda:12.6.3-runtime", Some((5, 0))),
    ("nvcr.io/nvidia/cuda:11.8.0-base", Some((3, 5))),
    ("pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime", Some((7, 0))),
    ("busybox", None),
    ("vllm/vllm-openai:latest", None),
    // Not the official image: the pattern is anchored.
    ("registry.example/nvidia/cuda:13.0.1", None),
    ("nvcr.io/nvidia/cuda:13.0.0-runtime", Some((7, 5))),
    // NGC 25.12 is CUDA 13.1, 24.05 is CUDA 12.4; both declare cuda>=9.0.
    ("nvcr.io/nvidia/pytorch:25.12-py3", Some((7, 5))),
    ("nvcr.io/nvidia/tritonserver:24.05-py3", Some((5, 0))),
    (DRIVER_FLOOR_IMAGE, Some((7, 5))),
];

/// The one generated image with a driver floor: built on CUDA 13.0, it runs
/// on a driver for CUDA 13.0 or on the forward-compatible branches 535, 550,
/// 565, 570 and 575.
pub const DRIVER_FLOOR_IMAGE: &str = "vllm/vllm-openai:v0.11.0-cu130";

pub const MOUNT_PATHS: [&str; 4] =
    ["/data", "/scratch", "/dev/nvidia0", "/var/run/nvidia-container-devices/all"];

pub const HOST_PATHS: [&str; 4] = ["/dev", "/dev/nvidia0", "/tmp", "/var/lib/x"];

/// Mount paths, mostly harmless (device paths make R6 deny the pod).
fn mount_path() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        20 => Just(MOUNT_PATHS[0]),
        10 => Just(MOUNT_PATHS[1]),
        1 => Just(MOUNT_PATHS[2]),
        1 => Just(MOUNT_PATHS[3]),
    ]
}

// ---------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------

/// Which pods to generate.
///
/// Both kinds come from the same strategies and draw the same random
/// numbers; `SchemaValid` only leaves out, when building the values, what
/// the Kubernetes JSON schemas reject in strict mode or Kubernetes rejects
/// as a name or key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pods {
    /// What the webhook may be sent before the API server validates the
    /// pod: unknown fields everywhere, names and keys with `/` and `~`.
    Adversarial,
    /// Only fields Kubernetes knows, DNS-label names, qualified label,
    /// annotation and node selector keys, GPU quantities as Kubernetes
    /// requires them of extended resources. `null` for optional fields
    /// stays: the schemas accept it.
    SchemaValid,
}

impl Pods {
    fn valid_key(self, key: &str) -> bool {
        self == Pods::Adversarial || !key.contains('~')
    }
}

/// One generated admission: the pod, its namespace, and the namespace's
/// annotations.
#[derive(Debug, Clone)]
pub struct Case {
    pub pod: Value,
    pub namespace: String,
    pub namespace_annotations: BTreeMap<String, String>,
}

pub fn pick<T: Clone + std::fmt::Debug + 'static>(
    items: &[T],
) -> impl Strategy<Value = T> + use<T> {
    prop::sample::select(items.to_vec())
}

pub fn object(value: Value) -> Obj {
    match value {
        Value::Object(map) => map,
        _ => Obj::new(),
    }
}

pub fn extend(target: &mut Obj, extra: Vec<(String, Value)>) {
    for (key, value) in extra {
        target.insert(key, value);
    }
}

fn unknown_fields(pods: Pods) -> impl Strategy<Value = Vec<(String, Value)>> {
    let values = vec![
        json!({"x": [1, 2]}),
        json!(true),
        json!("text"),
        json!(null),
        json!([]),
        json!({"nested": {"a~b/c": 1}}),
    ];
    prop::collection::vec((pick(&UNKNOWN_KEYS), prop::sample::select(values)), 0..=2).prop_map(
        move |pairs| match pods {
            Pods::Adversarial => {
                pairs.into_iter().map(|(key, value)| (key.to_owned(), value)).collect()
            }
            Pods::SchemaValid => Vec::new(),
        },
    )
}

fn gpu_quantity() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => Just(json!(1)),
        2 => Just(json!(2)),
        3 => Just(json!("1")),
        1 => Just(json!("2000m")),
        1 => Just(json!("1e0")),
        2 => Just(json!("0")),
        1 => Just(json!(0)),
        1 => Just(json!(9)),
        1 => Just(json!("500m")),
        1 => Just(json!("-1")),
        1 => Just(json!("abc")),
    ]
}

/// What the oracle knows of the generated GPU quantities; None: invalid.
pub fn known_count(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => match s.as_str() {
            "0" => Some(0),
            "1" | "1e0" => Some(1),
            "2000m" => Some(2),
            _ => None,
        },
        _ => None,
    }
}

fn resource_map() -> impl Strategy<Value = Value> {
    prop::collection::vec((pick(&RESOURCES), gpu_quantity(), pick(&["500m", "1Gi", "2"])), 0..=3)
        .prop_map(|entries| {
            let mut map = Obj::new();
            for (name, gpu, other) in entries {
                let value = if GPU_RESOURCES.contains(&name) { gpu } else { json!(other) };
                map.insert(name.to_owned(), value);
            }
            Value::Object(map)
        })
}

fn resources(pods: Pods) -> impl Strategy<Value = Option<Value>> {
    (0..8u8, resource_map(), resource_map(), unknown_fields(pods)).prop_map(
        move |(shape, first, second, extra)| {
            let mut resources = Obj::new();
            match shape {
                0 => return None,
                1 => {
                    resources.insert("requests".into(), first);
                }
                2..=4 => {
                    resources.insert("limits".into(), first);
                }
                5 | 6 => {
                    resources.insert("requests".into(), first.clone());
                    resources.insert("limits".into(), first);
                }
                _ => {
                    resources.insert("requests".into(), first);
                    resources.insert("limits".into(), second);
                }
            }
            if pods == Pods::SchemaValid {
                whole_gpu_limits(&mut resources);
            }
            extend(&mut resources, extra);
            Some(Value::Object(resources))
        },
    )
}

/// Kubernetes' rules for extended resources: a whole number, a limit
/// always, and a request only equal to it.
fn whole_gpu_limits(resources: &mut Obj) {
    for name in GPU_RESOURCES {
        let request = resources.get("requests").and_then(|r| r.get(name)).cloned();
        let limit = resources.get("limits").and_then(|l| l.get(name)).cloned();
        let Some(limit) = limit.or_else(|| request.clone()) else {
            continue;
        };
        let limit = match known_count(&limit) {
            Some(_) => limit,
            None => json!(1),
        };
        if request.is_some() {
            resources["requests"][name] = limit.clone();
        }
        resources.entry("limits").or_insert_with(|| json!({}))[name] = limit;
    }
}

/// `None`: no `env` field.
fn env(pods: Pods) -> impl Strategy<Value = Option<Value>> {
    let entry = (0..8u8, pick(&["all", "void", "0,1", "none"]), unknown_fields(pods));
    (0..8u8, prop::collection::vec(entry, 0..=4)).prop_map(|(shape, entries)| match shape {
        0 => None,
        1 => Some(Value::Null),
        _ => Some(Value::Array(
            entries
                .into_iter()
                .enumerate()
                .map(|(i, (kind, value, extra))| {
                    let mut entry = object(match kind {
                        0..=2 => json!({"name": NVD, "value": value}),
                        3 => json!({"name": NVD, "valueFrom":
                            {"configMapKeyRef": {"name": "gpu", "key": "devices"}}}),
                        4 => json!({"name": NVD, "value": "void", "valueFrom":
                            {"fieldRef": {"fieldPath": "metadata.name"}}}),
                        _ => json!({"name": format!("VAR_{i}"), "value": format!("v{i}")}),
                    });
                    extend(&mut entry, extra);
                    Value::Object(entry)
                })
                .collect(),
        )),
    })
}

fn mounts(paths: Vec<&str>) -> Option<Value> {
    if paths.is_empty() {
        return None;
    }
    Some(Value::Array(
        paths
            .iter()
            .enumerate()
            .map(|(i, path)| json!({"name": format!("vol-{i}"), "mountPath": path}))
            .collect(),
    ))
}

/// A container's `securityContext`, sometimes privileged (as the NVIDIA
/// DaemonSets and `kubectl debug --profile=sysadmin` are).
fn security_context() -> impl Strategy<Value = Option<Value>> {
    // Rare enough that most generated pods are still admitted and patched.
    prop::option::weighted(
        0.1,
        prop_oneof![
            2 => Just(json!({"privileged": true})),
            1 => Just(json!({"privileged": false, "runAsUser": 0})),
            1 => Just(json!({"privileged": null})),
            1 => Just(json!({"runAsNonRoot": true})),
        ],
    )
}

/// An init (`init: true`) or regular container, without its name.
fn container(pods: Pods, init: bool) -> impl Strategy<Value = Obj> {
    (
        prop::option::weighted(0.9, pick(&IMAGES)),
        resources(pods),
        env(pods),
        prop::bool::weighted(0.4),
        prop::collection::vec(mount_path(), 0..=2),
        security_context(),
        unknown_fields(pods),
    )
        .prop_map(move |(image, resources, env, sidecar, paths, security, extra)| {
            let mut c = Obj::new();
            if let Some(security) = security {
                c.insert("securityContext".into(), security);
            }
            if let Some((image, _)) = image {
                c.insert("image".into(), json!(image));
            }
            if let Some(resources) = resources {
                c.insert("resources".into(), resources);
            }
            if let Some(env) = env {
                c.insert("env".into(), env);
            }
            if init && sidecar {
                c.insert("restartPolicy".into(), json!("Always"));
            }
            if let Some(mounts) = mounts(paths) {
                c.insert("volumeMounts".into(), mounts);
            }
            extend(&mut c, extra);
            c
        })
}

fn ephemeral_container(pods: Pods) -> impl Strategy<Value = Obj> {
    (
        pick(&IMAGES),
        env(pods),
        // Kubernetes rejects resources on ephemeral containers; the webhook
        // sees them before validation, so generate some.
        prop::option::weighted(0.15, resources(pods)),
        security_context(),
        unknown_fields(pods),
    )
        .prop_map(|((image, _), env, resources, security, extra)| {
            let mut c = Obj::new();
            if let Some(security) = security {
                c.insert("securityContext".into(), security);
            }
            c.insert("image".into(), json!(image));
            c.insert("targetContainerName".into(), json!("app-0"));
            if let Some(env) = env {
                c.insert("env".into(), env);
            }
            if let Some(Some(resources)) = resources {
                c.insert("resources".into(), resources);
            }
            extend(&mut c, extra);
            c
        })
}

pub fn expression(key: &str, operator: &str, values: &[&str]) -> Value {
    if values.is_empty() {
        json!({"key": key, "operator": operator})
    } else {
        json!({"key": key, "operator": operator, "values": values})
    }
}

fn expressions() -> Vec<Value> {
    vec![
        expression("topology.kubernetes.io/zone", "In", &["a"]),
        expression("topology.kubernetes.io/zone", "In", &["b"]),
        expression("nvidia.com/gpu.product", "In", &["NVIDIA-A100-SXM4-40GB"]),
        expression("x/y~z", "Exists", &[]),
        // Compute constraints an earlier invocation (or the author) wrote.
        expression(MAJOR, "Gt", &["7"]),
        expression(MAJOR, "In", &["7"]),
        expression(MINOR, "Gt", &["4"]),
        expression(MAJOR, "Gt", &["4"]),
        expression(MAJOR, "Gt", &["8"]),
    ]
}

fn node_selector_term(pods: Pods) -> impl Strategy<Value = Value> {
    (
        prop::option::weighted(
            0.8,
            prop::collection::vec(prop::sample::select(expressions()), 0..=3),
        ),
        prop::bool::weighted(0.3),
        unknown_fields(pods),
    )
        .prop_map(move |(exprs, fields, extra)| {
            let mut term = Obj::new();
            if let Some(exprs) = exprs {
                let mut unique: Vec<Value> = Vec::new();
                for e in exprs {
                    let key = e["key"].as_str().unwrap_or_default();
                    if !unique.contains(&e) && pods.valid_key(key) {
                        unique.push(e);
                    }
                }
                term.insert("matchExpressions".into(), Value::Array(unique));
            }
            if fields {
                term.insert(
                    "matchFields".into(),
                    json!([{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]),
                );
            }
            extend(&mut term, extra);
            Value::Object(term)
        })
}

fn affinity(pods: Pods) -> impl Strategy<Value = Option<Value>> {
    let required =
        (0..10u8, prop::collection::vec(node_selector_term(pods), 0..=3), unknown_fields(pods))
            .prop_map(move |(shape, terms, extra)| match shape {
                0 => None,
                // The schemas require `nodeSelectorTerms`.
                1 if pods == Pods::Adversarial => Some(json!({})),
                1 | 2 => Some(json!({"nodeSelectorTerms": []})),
                _ => {
                    let mut required = Obj::new();
                    required.insert("nodeSelectorTerms".into(), Value::Array(terms));
                    extend(&mut required, extra);
                    Some(Value::Object(required))
                }
            });
    let node_affinity = (0..8u8, required, any::<bool>(), unknown_fields(pods)).prop_map(
        |(shape, required, preferred, extra)| match shape {
            0 => None,
            1 => Some(Value::Null),
            _ => {
                let mut node = Obj::new();
                if let Some(required) = required {
                    node.insert(REQUIRED.into(), required);
                }
                if preferred {
                    node.insert(
                        "preferredDuringSchedulingIgnoredDuringExecution".into(),
                        json!([{"weight": 10, "preference": {"matchExpressions": [
                            {"key": MAJOR, "operator": "Gt", "values": ["8"]}]}}]),
                    );
                }
                extend(&mut node, extra);
                Some(Value::Object(node))
            }
        },
    );
    (0..10u8, node_affinity, any::<bool>(), unknown_fields(pods)).prop_map(
        move |(shape, node, anti, extra)| match shape {
            0 => None,
            1 => Some(Value::Null),
            2 => Some(json!({"podAffinity": {}})),
            _ => {
                let mut affinity = Obj::new();
                if let Some(node) = node {
                    affinity.insert("nodeAffinity".into(), node);
                }
                if anti {
                    let anti_affinity = match pods {
                        Pods::Adversarial => json!({
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {"labelSelector": {"matchLabels": {"a~b/c": "x"}},
                                 "topologyKey": "kubernetes.io/hostname"}],
                            "futureField": {"x": [1, 2]}}),
                        Pods::SchemaValid => json!({
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {"labelSelector": {"matchLabels": {"app": "web"}},
                                 "topologyKey": "kubernetes.io/hostname"}]}),
                    };
                    affinity.insert("podAntiAffinity".into(), anti_affinity);
                }
                extend(&mut affinity, extra);
                Some(Value::Object(affinity))
            }
        },
    )
}

fn volumes(pods: Pods) -> impl Strategy<Value = Option<Value>> {
    // Indices 0 and 1 are device paths (R6 denies them): keep them rare.
    let kind =
        prop_oneof![1 => Just(0usize), 1 => Just(1), 5 => Just(2), 5 => Just(3), 6 => Just(4)];
    prop::collection::vec((kind, unknown_fields(pods)), 0..=3).prop_map(|list| {
        if list.is_empty() {
            return None;
        }
        Some(Value::Array(
            list.into_iter()
                .enumerate()
                .map(|(i, (kind, extra))| {
                    let mut volume = object(match HOST_PATHS.get(kind) {
                        Some(path) => json!({"name": format!("vol-{i}"),
                            "hostPath": {"path": path, "type": ""}}),
                        None => json!({"name": format!("vol-{i}"), "emptyDir": {}}),
                    });
                    extend(&mut volume, extra);
                    Value::Object(volume)
                })
                .collect(),
        ))
    })
}

pub const LABELS: [(&str, &str); 4] = [
    ("a~b/c", "x"),
    ("x/y~1z", "y"),
    ("app", "web"),
    ("app.kubernetes.io/name", "nvidia-gpu-exporter"),
];

pub const ANNOTATIONS: [(&str, &str); 13] = [
    ("a~b/c", "1"),
    ("x/y~1z", "2"),
    ("~0~1/", "tilde"),
    (MIN_CC, "8.0"),
    (MIN_CC, "7.5"),
    (MIN_CC, "junk"),
    (MIN_CC, "0.0"),
    (MIN_CC, "8.6"),
    (MUTATIONS, "runtime-class"),
    (MUTATIONS, "visible-devices,future-rule"),
    (MUTATIONS, ""),
    ("cdi.k8s.io/gpu", "nvidia.com/gpu=0"),
    ("example.com/note", "nvidia.com/gpu"),
];

fn string_map(pairs: Vec<(&str, &str)>) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), json!(v))).collect())
}

fn owner_reference(kind: u8) -> Option<Value> {
    let reference = |kind: &str, name: &str, controller: bool| {
        json!([{"apiVersion": "apps/v1", "kind": kind, "name": name,
                "uid": "0b8f-uid", "controller": controller, "blockOwnerDeletion": true}])
    };
    match kind {
        0 | 1 => None,
        2 | 3 => Some(reference("DaemonSet", "nvidia-gpu-exporter", true)),
        4 => Some(reference("DaemonSet", "nvidia-gpu-exporter", false)),
        5 => Some(reference("DaemonSet", "dcgm-exporter", true)),
        6 => Some(reference("Deployment", "nvidia-gpu-exporter", true)),
        _ => Some(reference("ReplicaSet", "web-5d8f", true)),
    }
}

/// The pod's metadata; its `namespace`, when present, is set by [`case`].
fn metadata(pods: Pods) -> impl Strategy<Value = Option<Value>> {
    (
        0..12u8,
        prop::collection::vec(pick(&LABELS), 0..=3),
        0..5u8,
        prop::collection::vec(pick(&ANNOTATIONS), 0..=4),
        0..8u8,
        unknown_fields(pods),
    )
        .prop_map(move |(shape, labels, annotation_shape, annotations, owner, extra)| {
            match shape {
                0 => return None,
                1 => return Some(Value::Null),
                _ => {}
            }
            let mut meta = Obj::new();
            meta.insert("name".into(), json!("pod-1"));
            let labels: Vec<_> = labels.into_iter().filter(|(k, _)| pods.valid_key(k)).collect();
            let annotations: Vec<_> =
                annotations.into_iter().filter(|(k, _)| pods.valid_key(k)).collect();
            if !labels.is_empty() {
                meta.insert("labels".into(), string_map(labels));
            }
            match annotation_shape {
                0 => {}
                1 => {
                    meta.insert("annotations".into(), Value::Null);
                }
                _ => {
                    meta.insert("annotations".into(), string_map(annotations));
                }
            }
            if let Some(owner) = owner_reference(owner) {
                meta.insert("ownerReferences".into(), owner);
            }
            extend(&mut meta, extra);
            Some(Value::Object(meta))
        })
}

fn named(list: Vec<Obj>, prefix: &str) -> Value {
    Value::Array(
        list.into_iter()
            .enumerate()
            .map(|(i, mut c)| {
                c.insert("name".into(), json!(format!("{prefix}{i}")));
                Value::Object(c)
            })
            .collect(),
    )
}

fn spec(pods: Pods) -> impl Strategy<Value = Value> {
    (
        (
            0..6u8,
            0..4u8,
            prop::collection::vec(container(pods, true), 0..=4),
            prop::collection::vec(container(pods, false), 1..=4),
            prop::collection::vec(ephemeral_container(pods), 0..=2),
        ),
        volumes(pods),
        affinity(pods),
        any::<bool>(),
        any::<bool>(),
        unknown_fields(pods),
    )
        .prop_map(
            move |(
                (class, init_shape, init, regular, ephemeral),
                volumes,
                affinity,
                weird,
                node_selector,
                extra,
            )| {
                let mut spec = Obj::new();
                match class {
                    1 => {
                        spec.insert("runtimeClassName".into(), json!("nvidia"));
                    }
                    2 => {
                        spec.insert("runtimeClassName".into(), json!("kata"));
                    }
                    3 => {
                        spec.insert("runtimeClassName".into(), json!(""));
                    }
                    4 => {
                        spec.insert("runtimeClassName".into(), Value::Null);
                    }
                    _ => {}
                }
                let (init_prefix, app_prefix, debug_prefix) = if weird && pods == Pods::Adversarial
                {
                    ("i~1/", "a~0/", "d/~")
                } else {
                    ("init-", "app-", "debug-")
                };
                if !init.is_empty() || init_shape == 0 {
                    spec.insert("initContainers".into(), named(init, init_prefix));
                }
                spec.insert("containers".into(), named(regular, app_prefix));
                if !ephemeral.is_empty() {
                    spec.insert("ephemeralContainers".into(), named(ephemeral, debug_prefix));
                }
                if let Some(volumes) = volumes {
                    spec.insert("volumes".into(), volumes);
                }
                if let Some(affinity) = affinity {
                    spec.insert("affinity".into(), affinity);
                }
                if node_selector {
                    spec.insert("nodeSelector".into(), json!({"kubernetes.io/os": "linux"}));
                }
                extend(&mut spec, extra);
                Value::Object(spec)
            },
        )
}

pub fn namespace_annotations() -> impl Strategy<Value = BTreeMap<String, String>> {
    (
        prop::option::of(pick(&["8.0", "7.5", "junk", "6.1"])),
        prop::option::of(pick(&["2", "16", "x"])),
    )
        .prop_map(|(min, max)| {
            let mut annotations = BTreeMap::new();
            if let Some(min) = min {
                annotations.insert(MIN_CC.to_owned(), min.to_owned());
            }
            if let Some(max) = max {
                annotations.insert(MAX_GPUS.to_owned(), max.to_owned());
            }
            annotations
        })
}

/// Removes every GPU resource, for pods that surely request none.
pub fn strip_gpu_resources(spec: &mut Value) {
    for field in LISTS {
        for c in spec[field].as_array_mut().into_iter().flatten() {
            for side in ["requests", "limits"] {
                if let Some(map) = c["resources"][side].as_object_mut() {
                    map.retain(|name, _| !GPU_RESOURCES.contains(&name.as_str()));
                }
            }
        }
    }
}

/// Adversarial pods: see [`Pods::Adversarial`].
pub fn case() -> impl Strategy<Value = Case> {
    case_of(Pods::Adversarial)
}

pub fn case_of(pods: Pods) -> impl Strategy<Value = Case> {
    (
        (pick(&["default", "kube-system", "gpu-team"]), any::<bool>()),
        metadata(pods),
        spec(pods),
        unknown_fields(pods),
        any::<bool>(),
        namespace_annotations(),
        prop::bool::weighted(0.25),
    )
        .prop_map(
            |(
                (namespace, with_ns),
                metadata,
                mut spec,
                extra,
                status,
                namespace_annotations,
                cpu_only,
            )| {
                if cpu_only {
                    strip_gpu_resources(&mut spec);
                }
                let mut pod = Obj::new();
                pod.insert("apiVersion".into(), json!("v1"));
                pod.insert("kind".into(), json!("Pod"));
                if let Some(mut metadata) = metadata {
                    if with_ns && let Some(meta) = metadata.as_object_mut() {
                        meta.insert("namespace".into(), json!(namespace));
                    }
                    pod.insert("metadata".into(), metadata);
                }
                pod.insert("spec".into(), spec);
                if status {
                    pod.insert("status".into(), json!({"phase": "Pending"}));
                }
                extend(&mut pod, extra);
                Case {
                    pod: Value::Object(pod),
                    namespace: namespace.to_owned(),
                    namespace_annotations,
                }
            },
        )
}
