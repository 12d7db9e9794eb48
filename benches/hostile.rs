//! The whole webhook path for one review of each hostile shape
//! (`hostile/shapes.rs`): objects that grow one dimension a rule reads
//! until the review's body is at the server's limit (3 MiB). Each review
//! is decoded, answered and encoded as the server's `admit` does
//! (`admission::decode`, `admission::answer`, `Answer::encode`), on one
//! thread. The target is at most 100 ms a review for every shape
//! (docs/performance.md, "Hostile shapes").
//!
//! The answers are given with a cluster to read, so that the paths that
//! read it are timed too: the `nvidia` RuntimeClass (with a node selector,
//! an overhead and tolerations), a node of 8 GPUs labelled by GPU Feature
//! Discovery (so that R4 writes its affinity), and eight
//! ResourceClaimTemplates `t0`..`t7` of 32 GPU requests `r0`..`r31` each.
//! A ResourceClaim made for a pod is answered with that pod read, as the
//! server reads it, its `gpu-policy.io/gpu-needs` recorded.
//!
//! The bodies are built once, outside the timed loop. `--quick` or a short
//! `--measurement-time` suits a shared machine: a review takes
//! milliseconds, and criterion's noise is far below the target.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

use gpu_policy::admission::OwnerRead;
use gpu_policy::admission::{Endpoint, Mode, answer, claim_owner_to_read, decode, subject};
use gpu_policy::policy::ClusterFacts;
use gpu_policy::policy::cluster::{ClusterSnapshot, NodeGpus, RuntimeClassInfo};
use gpu_policy::policy::dra::claims::ClaimKind;
use gpu_policy::policy::dra::tables::KeptClaim;
use gpu_policy::server::MAX_BODY_BYTES;
use gpu_policy::settings::Settings;

/// The server's allocator, as in the `policy` benchmark.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use gpu_policy_test_support::review::Review;

#[allow(dead_code)]
#[path = "hostile/shapes.rs"]
mod shapes;
use shapes::{HostileShape, NAMESPACE, SHAPES, Webhook};

/// The review of `object`, as the API server sends a CREATE.
fn body(object: &Value) -> Vec<u8> {
    Review::create(object, NAMESPACE).body()
}

/// What the answers may read of the cluster.
fn cluster(settings: &Settings) -> ClusterSnapshot {
    let mut snapshot = ClusterSnapshot::default();
    let node_selector = json!({"nvidia.com/gpu.present": "true"});
    let overhead = json!({"cpu": "250m", "memory": "120Mi"});
    let class = RuntimeClassInfo {
        pod_fixed_overhead: overhead.as_object().cloned(),
        node_selector: node_selector.as_object().cloned().unwrap_or_default(),
        tolerations: vec![
            json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}),
            json!({"key": "k7", "operator": "Exists", "effect": "NoSchedule"}),
        ],
    };
    snapshot.runtime_classes.insert("nvidia".to_owned(), class);
    snapshot.nodes.insert(
        "node-0".to_owned(),
        NodeGpus {
            allocatable: [("nvidia.com/gpu".to_owned(), 8)].into_iter().collect(),
            compute_capability: Some(gpu_policy::cuda::ComputeCapability::new(8, 0)),
            driver_labels: true,
            product: None,
        },
    );
    snapshot.dra.settings =
        gpu_policy::policy::dra::tables::GpuSettings::new(std::sync::Arc::new(settings.clone()));
    for t in 0..8 {
        let requests: Vec<Value> = (0..32)
            .map(|r| json!({"name": format!("r{r}"), "exactly": {"deviceClassName": "gpu.nvidia.com"}}))
            .collect();
        let name = format!("t{t}");
        let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"spec": {"devices": {"requests": requests}}}});
        snapshot.dra.templates.insert(
            (NAMESPACE.to_owned(), name.clone()),
            KeptClaim::of(&name, &template, ClaimKind::Template),
        );
    }
    snapshot
}

/// The pod the claims of the shapes are made for, as the server reads it.
fn owner() -> OwnerRead {
    OwnerRead::Read {
        text: json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "owner", "namespace": NAMESPACE, "uid": "uid-owner"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                "containers": [{"name": "train", "image": "nvcr.io/nvidia/pytorch:25.12-py3",
                    "resources": {"claims": [{"name": "gpu"}]}}]}})
        .to_string(),
        generated: Vec::new(),
        claims: Vec::new(),
    }
}

fn endpoint(webhook: Webhook) -> Endpoint {
    match webhook {
        Webhook::Mutate => Endpoint::Mutate,
        Webhook::Enforce => Endpoint::Validate(Mode::Enforce),
    }
}

/// The whole path, as the server's `admit` runs it for one request.
fn admit(
    body: &[u8],
    endpoint: Endpoint,
    settings: &Settings,
    cluster: &dyn ClusterFacts,
    owner: &OwnerRead,
) -> Vec<u8> {
    let request = decode(body).expect("review decodes");
    let subject = subject(&request, endpoint);
    let read = subject.as_ref().ok().and_then(Option::as_ref);
    let owner = read
        .and_then(|read| claim_owner_to_read(&request, endpoint, read, settings, Some(cluster)))
        .map(|_| owner);
    let answer = answer(&request, endpoint, &subject, settings, Some(cluster), None, owner);
    answer.encode(&request.uid).expect("answer encodes")
}

fn hostile(c: &mut Criterion) {
    let settings = Settings::default();
    let cluster = cluster(&settings);
    let owner = owner();
    let bodies: Vec<(&HostileShape, usize, Vec<u8>)> = SHAPES
        .iter()
        .map(|shape| {
            let (count, object) =
                shapes::largest_within(shape, MAX_BODY_BYTES, |object| body(object).len());
            (shape, count, body(&object))
        })
        .collect();

    // Outside the timed loop: each answer is a review of the shape's kind.
    for (shape, count, body) in &bodies {
        let out = admit(body, endpoint(shape.webhook), &settings, &cluster, &owner);
        let review: Value = serde_json::from_slice(&out).expect("response is JSON");
        assert!(
            review["response"]["allowed"].is_boolean(),
            "{}: {}",
            shape.name,
            String::from_utf8_lossy(&out).chars().take(500).collect::<String>()
        );
        eprintln!(
            "{}: {count} items, a body of {} bytes, an answer of {} bytes",
            shape.name,
            body.len(),
            out.len()
        );
    }

    let mut group = c.benchmark_group("hostile");
    group
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(10);
    for (shape, _, body) in &bodies {
        let endpoint = endpoint(shape.webhook);
        group.bench_function(shape.name, |b| {
            b.iter(|| admit(black_box(body), endpoint, &settings, &cluster, &owner))
        });
    }
    group.finish();
}

criterion_group!(benches, hostile);
criterion_main!(benches);
