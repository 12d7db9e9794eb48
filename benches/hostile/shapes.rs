//! Hostile shapes: objects that grow one dimension a rule reads until the
//! review's body reaches the server's limit (3 MiB), one shape per
//! dimension. A pod author controls every field of a real review, and
//! any caller can forge one, so each of these is as admissible as any
//! other object: the webhook must answer each in time linear in its size.
//!
//! The `hostile` benchmark measures the whole answer to each shape
//! (decode, evaluate, encode); the attack test `cpu_shapes` (tests/attack/) sends
//! each to the release binary and reads the CPU time it took. Both build
//! the objects here, so that they measure the same shapes.
//!
//! This file depends on `serde_json` only: the benchmark includes it with
//! `#[path]`, as it includes the tests' review builder.

use serde_json::{Map, Value, json};

/// The webhook a shape is sent to: the one whose answer costs the most
/// for it (the mutating webhook encodes a patch, the validating one a
/// denial).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhook {
    Mutate,
    Enforce,
}

/// One hostile shape: what grows, and the object with `n` of it.
#[derive(Debug, Clone, Copy)]
pub struct HostileShape {
    /// The benchmark's name of the shape.
    pub name: &'static str,
    /// What grows, in words.
    pub grows: &'static str,
    pub webhook: Webhook,
    /// The object with `n` of what grows.
    pub object: fn(usize) -> Value,
}

/// The namespace every shape is created in.
pub const NAMESPACE: &str = "ml";

/// An image the default image table gives a compute and a driver floor
/// (CUDA 13), so that the GPU containers' floors are read.
pub const CUDA_IMAGE: &str = "nvcr.io/nvidia/cuda:13.0.1-runtime-ubuntu24.04";

/// The annotation a pod raises its minimum compute capability with.
const MIN_COMPUTE_CAPABILITY: &str = "gpu-policy.io/min-compute-capability";

/// Every shape, one per dimension a rule reads.
pub const SHAPES: &[HostileShape] = &[
    HostileShape {
        name: "resource-names",
        grows: "GPU resource names (nvidia.com/mig-*) of one container, in requests and limits",
        webhook: Webhook::Enforce,
        object: resource_names,
    },
    HostileShape {
        name: "containers",
        grows: "containers, GPU ones of distinct CUDA images and pinned ones",
        webhook: Webhook::Mutate,
        object: containers,
    },
    HostileShape {
        name: "env",
        grows: "env entries each rule reads (NVIDIA_VISIBLE_DEVICES, NVIDIA_REQUIRE_CUDA)",
        webhook: Webhook::Mutate,
        object: env,
    },
    HostileShape {
        name: "volumes",
        grows: "hostPath volumes at /dev/nvidia*",
        webhook: Webhook::Enforce,
        object: volumes,
    },
    HostileShape {
        name: "mounts",
        grows: "volume mounts of one container, at and beside the device-list path",
        webhook: Webhook::Enforce,
        object: mounts,
    },
    HostileShape {
        name: "annotations",
        grows: "pod annotations injecting NVIDIA devices through CDI",
        webhook: Webhook::Enforce,
        object: annotations,
    },
    HostileShape {
        name: "tolerations",
        grows: "tolerations of a GPU pod given a runtime class",
        webhook: Webhook::Mutate,
        object: tolerations,
    },
    HostileShape {
        name: "affinity-terms",
        grows: "required node selector terms, each multiplied by the compute constraint",
        webhook: Webhook::Mutate,
        object: affinity_terms,
    },
    HostileShape {
        name: "affinity-expressions",
        grows: "match expressions of one required node selector term",
        webhook: Webhook::Mutate,
        object: affinity_expressions,
    },
    HostileShape {
        name: "owner-references",
        grows: "owner references of a pod, its controller last",
        webhook: Webhook::Enforce,
        object: owner_references,
    },
    HostileShape {
        name: "pod-claims",
        grows: "spec.resourceClaims of a pod, each used by its containers",
        webhook: Webhook::Mutate,
        object: pod_claims,
    },
    HostileShape {
        name: "claim-uses",
        grows: "resources.claims of one container, naming requests and subrequests",
        webhook: Webhook::Mutate,
        object: claim_uses,
    },
    HostileShape {
        name: "claim-requests",
        grows: "device requests of a ResourceClaim made for a pod",
        webhook: Webhook::Mutate,
        object: claim_requests,
    },
    HostileShape {
        name: "claim-subrequests",
        grows: "firstAvailable subrequests of the requests of a ResourceClaim",
        webhook: Webhook::Mutate,
        object: claim_subrequests,
    },
    HostileShape {
        name: "claim-owner-references",
        grows: "owner references of a ResourceClaim, the pod it is made for last",
        webhook: Webhook::Mutate,
        object: claim_owner_references,
    },
];

/// The largest object of `shape` whose review body (as `body_len`
/// measures it) is at most `limit` bytes, and its count. A body grows by
/// about the same bytes for each item, so the count is solved for from
/// two sizes, then lowered until the body fits.
pub fn largest_within(
    shape: &HostileShape,
    limit: usize,
    body_len: impl Fn(&Value) -> usize,
) -> (usize, Value) {
    const PROBE: usize = 1000;
    let empty = body_len(&(shape.object)(0));
    let probe = body_len(&(shape.object)(PROBE));
    assert!(
        empty < limit && probe > empty,
        "{}: a body of {empty} bytes at the least, {probe} with {PROBE} items",
        shape.name
    );
    let per_item = (probe - empty).div_ceil(PROBE);
    let mut count = (limit - empty) / per_item;
    loop {
        let object = (shape.object)(count);
        let len = body_len(&object);
        if len <= limit {
            return (count, object);
        }
        count -= (len - limit).div_ceil(per_item).max(1);
    }
}

/// A Pod in [`NAMESPACE`] with `annotations` and `spec`.
fn pod(name: &str, annotations: Value, spec: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
        "spec": spec,
    })
}

/// A container of the CUDA image with one GPU.
fn gpu_container(name: &str) -> Value {
    json!({"name": name, "image": CUDA_IMAGE, "resources": {"limits": {"nvidia.com/gpu": 1}}})
}

fn resource_names(n: usize) -> Value {
    let names: Map<String, Value> =
        (0..n).map(|i| (format!("nvidia.com/mig-{i}g.5gb"), json!("1"))).collect();
    let container = json!({"name": "train", "image": CUDA_IMAGE,
        "resources": {"requests": names.clone(), "limits": names}});
    pod("resource-names", json!({}), json!({"containers": [container]}))
}

fn containers(n: usize) -> Value {
    let containers: Vec<Value> = (0..n)
        .map(|i| {
            if i % 2 == 0 {
                json!({"name": format!("g{i}"), "image": format!("nvidia/cuda:13.0.{i}-base"),
                    "resources": {"limits": {"nvidia.com/gpu": 1}}})
            } else {
                json!({"name": format!("c{i}"), "image": CUDA_IMAGE})
            }
        })
        .collect();
    pod("containers", json!({}), json!({"containers": containers}))
}

fn env(n: usize) -> Value {
    let entries = |offset: usize| -> Vec<Value> {
        (0..n / 2)
            .map(|i| match (i + offset) % 3 {
                0 => json!({"name": "NVIDIA_VISIBLE_DEVICES", "value": format!("{i}")}),
                1 => json!({"name": "NVIDIA_REQUIRE_CUDA", "value": format!("cuda>=12.{i}")}),
                _ => json!({"name": "NVIDIA_DISABLE_REQUIRE", "value": "false"}),
            })
            .collect()
    };
    let mut gpu = gpu_container("gpu");
    gpu["env"] = json!(entries(0));
    let plain = json!({"name": "plain", "image": CUDA_IMAGE, "env": entries(1)});
    pod("env", json!({}), json!({"containers": [gpu, plain]}))
}

fn volumes(n: usize) -> Value {
    let volumes: Vec<Value> = (0..n)
        .map(|i| json!({"name": format!("v{i}"), "hostPath": {"path": format!("/dev/nvidia{i}")}}))
        .collect();
    pod("volumes", json!({}), json!({"containers": [gpu_container("gpu")], "volumes": volumes}))
}

fn mounts(n: usize) -> Value {
    let mounts: Vec<Value> = (0..n)
        .map(|i| {
            let path = if i % 2 == 0 {
                format!("/var/run/nvidia-container-devices/{i}")
            } else {
                format!("/var/./run/../data/{i}/")
            };
            json!({"name": format!("m{i}"), "mountPath": path})
        })
        .collect();
    let container = json!({"name": "c", "image": CUDA_IMAGE, "volumeMounts": mounts});
    pod("mounts", json!({}), json!({"containers": [container]}))
}

fn annotations(n: usize) -> Value {
    let annotations: Map<String, Value> = (0..n)
        .map(|i| (format!("cdi.k8s.io/d{i}"), json!(format!("nvidia.com/gpu={i}"))))
        .collect();
    pod("annotations", json!(annotations), json!({"containers": [gpu_container("gpu")]}))
}

fn tolerations(n: usize) -> Value {
    let tolerations: Vec<Value> = (0..n)
        .map(|i| json!({"key": format!("k{i}"), "operator": "Exists", "effect": "NoSchedule"}))
        .collect();
    pod(
        "tolerations",
        json!({}),
        json!({"containers": [gpu_container("gpu")], "tolerations": tolerations}),
    )
}

/// A GPU pod asking for compute capability 8.6 (two alternatives), with
/// `terms` as its required node selector terms.
fn with_terms(name: &str, terms: Vec<Value>) -> Value {
    pod(
        name,
        json!({MIN_COMPUTE_CAPABILITY: "8.6"}),
        json!({"containers": [gpu_container("gpu")], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}),
    )
}

fn affinity_terms(n: usize) -> Value {
    let terms = (0..n)
        .map(|i| {
            json!({"matchExpressions": [
                {"key": "zone", "operator": "In", "values": [format!("z{i}")]}]})
        })
        .collect();
    with_terms("affinity-terms", terms)
}

fn affinity_expressions(n: usize) -> Value {
    let expressions: Vec<Value> = (0..n)
        .map(|i| json!({"key": format!("k{i}"), "operator": "In", "values": ["v"]}))
        .collect();
    with_terms("affinity-expressions", vec![json!({"matchExpressions": expressions})])
}

fn owner_references(n: usize) -> Value {
    let references: Vec<Value> = (0..n)
        .map(|i| {
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("r{i}"),
                "uid": format!("u{i}"), "controller": i + 1 == n})
        })
        .collect();
    let mut pod = pod("owner-references", json!({}), json!({"containers": [gpu_container("gpu")]}));
    pod["metadata"]["ownerReferences"] = json!(references);
    pod
}

fn pod_claims(n: usize) -> Value {
    let claims: Vec<Value> = (0..n)
        .map(|i| json!({"name": format!("p{i}"), "resourceClaimTemplateName": format!("t{}", i % 8)}))
        .collect();
    let uses = |range: std::ops::Range<usize>| -> Vec<Value> {
        range.map(|i| json!({"name": format!("p{i}")})).collect()
    };
    let half = n / 2;
    let containers = [
        json!({"name": "a", "image": CUDA_IMAGE, "resources": {"claims": uses(0..half)}}),
        json!({"name": "b", "image": CUDA_IMAGE, "resources": {"claims": uses(half..n)}}),
    ];
    let mut pod =
        pod("pod-claims", json!({}), json!({"containers": containers, "resourceClaims": claims}));
    pod["metadata"]["uid"] = json!("uid-pod-claims");
    pod
}

fn claim_uses(n: usize) -> Value {
    let uses: Vec<Value> = (0..n)
        .map(|i| {
            let request = match i % 3 {
                0 => format!("r{}", i % 32),
                1 => format!("r{}/s{i}", i % 32),
                _ => format!("missing{i}"),
            };
            json!({"name": "gpu", "request": request})
        })
        .collect();
    let container = json!({"name": "train", "image": CUDA_IMAGE, "resources": {"claims": uses}});
    pod(
        "claim-uses",
        json!({}),
        json!({"containers": [container],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t0"}]}),
    )
}

/// A ResourceClaim made for pod `owner` (UID `uid-owner`) with `requests`.
fn claim(name: &str, references: Vec<Value>, requests: Vec<Value>) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE,
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
            "ownerReferences": references},
        "spec": {"devices": {"requests": requests}},
    })
}

/// The owner reference of the pod the claims are made for.
pub fn owner_reference() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "name": "owner", "uid": "uid-owner",
        "controller": true, "blockOwnerDeletion": true})
}

fn claim_requests(n: usize) -> Value {
    let requests = (0..n)
        .map(|i| {
            json!({"name": format!("r{i}"), "exactly": {"deviceClassName": "gpu.nvidia.com",
                "selectors": [{"cel": {"expression": "true"}}]}})
        })
        .collect();
    claim("claim-requests", vec![owner_reference()], requests)
}

fn claim_subrequests(n: usize) -> Value {
    const PER_REQUEST: usize = 8;
    let requests = (0..n.div_ceil(PER_REQUEST))
        .map(|r| {
            let subrequests: Vec<Value> = (0..PER_REQUEST.min(n - r * PER_REQUEST))
                .map(|s| json!({"name": format!("s{s}"), "deviceClassName": "mig.nvidia.com"}))
                .collect();
            json!({"name": format!("r{r}"), "firstAvailable": subrequests})
        })
        .collect();
    claim("claim-subrequests", vec![owner_reference()], requests)
}

fn claim_owner_references(n: usize) -> Value {
    let mut references: Vec<Value> = (0..n)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Pod", "name": format!("p{i}"),
                "uid": format!("u{i}"), "controller": false})
        })
        .collect();
    references.push(owner_reference());
    let request = json!({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}});
    claim("claim-owner-references", references, vec![request])
}
