//! The full webhook path for one AdmissionReview:
//! `decode(bytes)` -> `subject(..)` -> `respond(..)` -> `Answer::encode`.
//!
//! Cases:
//! - `mutate/gpu-pod`: the pod template of the vLLM Mistral-7B Deployment
//!   (fixture 07) as a Pod, CREATE, mutating webhook (runtime class injected,
//!   mutations annotation recorded);
//! - `mutate/cpu-pod`: the pod template of the vLLM CPU Deployment
//!   (fixture 09: a CUDA image, no GPU request) as a Pod, mutating webhook
//!   (`NVIDIA_VISIBLE_DEVICES=void` pinned);
//! - `mutate/cpu-pod-reapply`: that pod as stored, UPDATEd by a second
//!   `kubectl apply` that sends the author's `NVIDIA_VISIBLE_DEVICES=all`
//!   back: the old and the new pod both read, the pin made again;
//! - `validate-enforce/gpu-deployment`: the Deployment of fixture 07 itself,
//!   validating webhook of an `enforce` namespace;
//! - `mutate/dra-pod`: the DRA quickstart pod of fixture 21 (two containers
//!   sharing one claimed GPU) with a log shipper beside them
//!   (`reviews/dra-pod.json`), mutating webhook, its claim resolved from the
//!   fixture's ResourceClaimTemplate (the shipper is pinned, the claimed
//!   containers are not).
//!
//!
//! The `dra-floors` group measures R4's DRA half:
//! - `mutate/claim-made-for-pod`: the ResourceClaim the resource claim
//!   controller makes for the quickstart's pod, its pod already read (the
//!   GET is not timed): the selector is added to its GPU request;
//! - `validate-enforce/pod-on-shared-claim`: a CUDA 13 pod on a shared
//!   claim not yet allocated whose three hand-written selectors do not
//!   guarantee the floor: the selectors are compiled and run on the probe
//!   devices, and the pod is warned.
//!
//! The review bodies are built once, outside the timed loop; so is the check
//! that each case takes the path it is meant to measure.
//!
//! For scale, the `json` group reads the GPU pod's review two ways with no
//! policy at all: `skim` checks its syntax and builds nothing (the least any
//! JSON decoder does), `tree` builds the `serde_json::Value` that the webhook
//! patches against (see `docs/performance.md`).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

use gpu_policy::admission::Mode;
use gpu_policy::admission::owner::{OwnerDocument, OwnerRead};
use gpu_policy::admission::{Endpoint, decode, respond, subject};
use gpu_policy::policy::dra::tables::ClaimTables;
use gpu_policy::policy::{ClaimFacts, Evaluator};
use gpu_policy::settings::{NamespaceSettings, Settings};

/// The server's allocator (mimalloc's `MiMalloc`, as src/main.rs
/// installs it), so that the path allocates here as it does there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use gpu_policy_test_support::review::Review;

const GPU_DEPLOYMENT: &str = include_str!("../tests/fixtures/07-vllm-mistral-7b-deployment.yaml");
const CPU_DEPLOYMENT: &str =
    include_str!("../tests/fixtures/09-vllm-cpu-deployment-cuda-image-no-gpu.yaml");

const DRA_QUICKSTART: &str =
    include_str!("../tests/fixtures/21-dra-gpu-test2-two-containers-one-claim.yaml");
const DRA_POD: &[u8] = include_bytes!("reviews/dra-pod.json");

const NAMESPACE: &str = "ml";

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str::<Value>(text).expect("fixture parses as YAML")
}

/// The Pod a ReplicaSet of `deployment` would create: the template's
/// metadata and spec, with a name and namespace.
fn pod_of(deployment: &Value, name: &str) -> Value {
    let template = &deployment["spec"]["template"];
    let mut metadata = template["metadata"].clone();
    metadata["name"] = json!(name);
    metadata["namespace"] = json!(NAMESPACE);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": template["spec"].clone(),
    })
}

/// An AdmissionReview v1 CREATE request, as the API server sends it for
/// the ReplicaSet controller.
fn review(object: &Value) -> Vec<u8> {
    Review::create(object, NAMESPACE)
        .set(
            "userInfo",
            json!({
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "uid": "0b6e4f3c-2d9a-4a8e-9a57-6f1c1f0d2b3e",
                "groups": [
                    "system:serviceaccounts",
                    "system:serviceaccounts:kube-system",
                    "system:authenticated"
                ]
            }),
        )
        .body()
}

/// The whole path, as the server runs it for one request.
fn admit(
    body: &[u8],
    endpoint: Endpoint,
    settings: &Settings,
    namespace_settings: &NamespaceSettings,
    claims: Option<&dyn ClaimFacts>,
) -> Vec<u8> {
    let request = decode(body).expect("review decodes");
    let evaluator = Evaluator {
        settings,
        namespace: namespace_settings,
        cluster: None,
        nodes: None,
        claims,
        images: None,
        claim_owner: None,
    };
    let subject = subject(&request, endpoint);
    let answer = respond(&request, endpoint, &subject, &evaluator);
    answer.encode(&request.uid).expect("answer encodes")
}

/// Runs the path once and returns the `response` of the encoded review.
fn response_of(
    body: &[u8],
    endpoint: Endpoint,
    settings: &Settings,
    namespace_settings: &NamespaceSettings,
    claims: Option<&dyn ClaimFacts>,
) -> Value {
    let out = admit(body, endpoint, settings, namespace_settings, claims);
    let review: Value = serde_json::from_slice(&out).expect("response is JSON");
    review["response"].clone()
}

fn webhook(c: &mut Criterion) {
    let settings = Settings::default();
    let namespace_settings = settings.for_namespace(&BTreeMap::new());

    let gpu_deployment = yaml(GPU_DEPLOYMENT);
    let cpu_deployment = yaml(CPU_DEPLOYMENT);
    let gpu_pod = review(&pod_of(&gpu_deployment, "mistral-7b-6d9c7b8f5d-x2k4q"));
    let cpu_pod = review(&pod_of(&cpu_deployment, "vllm-server-5b7f9c6d48-qk8zt"));
    // The API server refuses a body whose namespace differs from the URL's.
    let mut in_namespace = gpu_deployment.clone();
    in_namespace["metadata"]["namespace"] = json!(NAMESPACE);
    let deployment = review(&in_namespace);

    // Outside the timed loop: each case really takes the path it measures.
    let gpu = response_of(&gpu_pod, Endpoint::Mutate, &settings, &namespace_settings, None);
    assert_eq!(gpu["allowed"], json!(true), "{gpu}");
    assert_eq!(gpu["patchType"], json!("JSONPatch"), "{gpu}");
    assert!(
        gpu["patch"].as_str().is_some_and(|p| !p.is_empty()),
        "the GPU pod must be patched: {gpu}"
    );
    let cpu = response_of(&cpu_pod, Endpoint::Mutate, &settings, &namespace_settings, None);
    assert!(
        cpu["allowed"] == json!(true) && cpu["patch"].is_string(),
        "the CUDA-image pod without a GPU must be pinned: {cpu}"
    );
    // The CPU pod as stored, and the second `kubectl apply` of its
    // manifest: the author's `all` sent back where the pin is.
    let cpu_value = pod_of(&cpu_deployment, "vllm-server-5b7f9c6d48-qk8zt");
    let cpu_patch: json_patch::Patch = serde_json::from_slice(
        &base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            cpu["patch"].as_str().unwrap_or_default(),
        )
        .expect("base64"),
    )
    .expect("a JSON Patch");
    let mut stored = cpu_value.clone();
    json_patch::patch(&mut stored, &cpu_patch).expect("the patch applies");
    let mut reapplied = stored.clone();
    for container in reapplied["spec"]["containers"].as_array_mut().into_iter().flatten() {
        for entry in container["env"].as_array_mut().into_iter().flatten() {
            if entry["name"] == "NVIDIA_VISIBLE_DEVICES" {
                entry["value"] = json!("all");
            }
        }
    }
    let reapply = Review::update(&reapplied, &stored, NAMESPACE).body();
    let again = response_of(&reapply, Endpoint::Mutate, &settings, &namespace_settings, None);
    assert!(
        again["allowed"] == json!(true) && again["patch"].is_string(),
        "the re-apply must get the pin back: {again}"
    );
    let validated = response_of(
        &deployment,
        Endpoint::Validate(Mode::Enforce),
        &settings,
        &namespace_settings,
        None,
    );
    assert!(
        validated["allowed"] == json!(true) && validated.get("patch").is_none(),
        "the Deployment must be validated, not mutated: {validated}"
    );

    // The DRA pod's template, in the review's namespace, as `check` or the
    // cluster cache would find it.
    let mut template = serde_saphyr::from_multiple::<Value>(DRA_QUICKSTART)
        .expect("fixture parses as YAML")
        .into_iter()
        .find(|o| o["kind"] == "ResourceClaimTemplate")
        .expect("the fixture's template");
    template["metadata"]["namespace"] = json!(NAMESPACE);
    let input_claims = ClaimTables::collect(&[&template], NAMESPACE, &settings);
    let dra_claims: Option<&dyn ClaimFacts> = Some(&input_claims);
    let dra = response_of(DRA_POD, Endpoint::Mutate, &settings, &namespace_settings, dra_claims);
    let patch = dra["patch"].as_str().unwrap_or_default();
    let patch = String::from_utf8(
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, patch).expect("base64"),
    )
    .expect("UTF-8");
    assert!(
        dra["allowed"] == json!(true)
            && dra.get("warnings").is_none()
            && patch.contains("/spec/containers/2/env")
            && !patch.contains("/spec/containers/0/"),
        "only the log shipper of the DRA pod must be pinned: {dra} {patch}"
    );

    let mut group = c.benchmark_group("webhook");
    group
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(2))
        .sample_size(50);
    let cases = [
        ("mutate/gpu-pod", gpu_pod.as_slice(), Endpoint::Mutate, None),
        ("mutate/cpu-pod", cpu_pod.as_slice(), Endpoint::Mutate, None),
        ("mutate/cpu-pod-reapply", reapply.as_slice(), Endpoint::Mutate, None),
        (
            "validate-enforce/gpu-deployment",
            deployment.as_slice(),
            Endpoint::Validate(Mode::Enforce),
            None,
        ),
        ("mutate/dra-pod", DRA_POD, Endpoint::Mutate, dra_claims),
    ];
    for (name, body, endpoint, claims) in cases {
        group.bench_function(name, |b| {
            b.iter(|| admit(black_box(body), endpoint, &settings, &namespace_settings, claims))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("json");
    group
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(2))
        .sample_size(50);
    group.bench_function("skim/gpu-pod", |b| {
        b.iter(|| {
            serde_json::from_slice::<serde::de::IgnoredAny>(black_box(gpu_pod.as_slice()))
                .expect("review is JSON")
        })
    });
    group.bench_function("tree/gpu-pod", |b| {
        b.iter(|| {
            serde_json::from_slice::<Value>(black_box(gpu_pod.as_slice())).expect("review is JSON")
        })
    });
    group.finish();
}

/// A claim made for pod `pod1` (UID `uid-1`) from its template.
fn claim_made_for_pod1() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "pod1-gpu-x7k2p", "namespace": NAMESPACE,
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "pod1",
                "uid": "uid-1", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}})
}

/// A shared claim, not allocated, whose selectors leave the floor open.
fn shared_claim() -> Value {
    let selectors: Vec<Value> = [
        "device.attributes[\"gpu.nvidia.com\"].productName.startsWith(\"NVIDIA\")",
        "device.capacity[\"gpu.nvidia.com\"].memory.isGreaterThan(quantity(\"15Gi\"))",
        "device.attributes[\"gpu.nvidia.com\"].cudaComputeCapability.isGreaterThan(semver(\"5.9.9\"))",
    ]
    .iter()
    .map(|expression| json!({"cel": {"expression": expression}}))
    .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "shared-gpu", "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "selectors": selectors}}]}}})
}

fn dra_floors(c: &mut Criterion) {
    let settings = Settings::default();
    let namespace_settings = settings.for_namespace(&BTreeMap::new());
    let claim = review(&claim_made_for_pod1());
    // pod1 as the API server sends it: what R4 reads of it is its spec.
    let owner = OwnerRead::Read {
        text: json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "pod1", "namespace": NAMESPACE, "uid": "uid-1"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
                "containers": [{"name": "train", "image": "nvcr.io/nvidia/pytorch:25.12-py3",
                    "resources": {"claims": [{"name": "gpu"}]}}]}})
        .to_string(),
        generated: Vec::new(),
        claims: Vec::new(),
    };
    let pod = review(&json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "on-shared", "namespace": NAMESPACE},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "shared-gpu"}],
            "containers": [{"name": "train", "image": "nvcr.io/nvidia/pytorch:25.12-py3",
                "resources": {"claims": [{"name": "gpu"}]}}]}}));
    let shared = shared_claim();
    let input_claims = ClaimTables::collect(&[&shared], NAMESPACE, &settings);

    let run = |body: &[u8], endpoint: Endpoint, owner: Option<&OwnerRead>| -> Vec<u8> {
        let request = decode(body).expect("review decodes");
        // Read as the webhook reads the owner of each claim it answers.
        let document = owner.map(OwnerRead::document);
        let owner = document.as_ref().map(OwnerDocument::owner_pod);
        let evaluator = Evaluator {
            settings: &settings,
            namespace: &namespace_settings,
            cluster: None,
            nodes: None,
            claims: Some(&input_claims),
            images: None,
            claim_owner: owner.as_ref(),
        };
        let subject = subject(&request, endpoint);
        let answer = respond(&request, endpoint, &subject, &evaluator);
        answer.encode(&request.uid).expect("answer encodes")
    };
    // Outside the timed loop: each case takes the path it measures.
    let response = |out: Vec<u8>| -> Value {
        serde_json::from_slice::<Value>(&out).expect("response is JSON")["response"].clone()
    };
    let mutated = response(run(&claim, Endpoint::Mutate, Some(&owner)));
    assert_eq!(mutated["patchType"], json!("JSONPatch"), "{mutated}");
    let warned = response(run(&pod, Endpoint::Validate(Mode::Enforce), None));
    assert!(
        warned["allowed"] == json!(true)
            && warned["warnings"].to_string().contains("may get a GPU below"),
        "{warned}"
    );

    let mut group = c.benchmark_group("dra-floors");
    group
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(2))
        .sample_size(50);
    group.bench_function("mutate/claim-made-for-pod", |b| {
        b.iter(|| run(black_box(&claim), Endpoint::Mutate, Some(&owner)))
    });
    group.bench_function("validate-enforce/pod-on-shared-claim", |b| {
        b.iter(|| run(black_box(&pod), Endpoint::Validate(Mode::Enforce), None))
    });
    group.finish();
}

criterion_group!(benches, webhook, dra_floors);
criterion_main!(benches);
