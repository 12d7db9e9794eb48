//! The webhook path of registry mode when the image is cached, against the
//! same pod in table mode (the default):
//! `decode(bytes)` -> `subject(..)` -> registry lookup -> `answer(..)` ->
//! `Answer::encode`.
//!
//! Cases (a GPU pod whose image lives on a loopback registry, built on CUDA
//! 12.8 with a forward-compatible driver branch, mutating webhook):
//! - `registry/mutate/gpu-pod-cache-hit`: `imageResolution.mode: registry`,
//!   the image's tag and config already cached (the registry is not asked
//!   again: checked below), so the lookup is the two in-memory caches;
//! - `registry/mutate/gpu-pod-table`: the same review in table mode, where
//!   the image is found in the built-in table by a pattern of its own.
//!
//! The budget is the largest allowed, so the first lookup (outside the
//! timed loop) completes under a slow profiler too.
//!
//! Both get the same compute-capability affinity and driver floor (checked
//! outside the timed loop), so the difference is the lookup alone.

use gpu_policy_test_support::pods::gpu_pod;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::Value;

use gpu_policy::admission::images::wanted;
use gpu_policy::admission::{Endpoint, decode, subject};
use gpu_policy::metrics::Metrics;
use gpu_policy::server::images::Images;
use gpu_policy::settings::Settings;

// The review builder and the fake registry of the tests.
#[path = "../tests/it/support/fake_registry/mod.rs"]
mod fake_registry;
use fake_registry::{Auth, FakeRegistry, image_config};
use gpu_policy_test_support::review::Review;

const NAMESPACE: &str = "ml";
const REQUIRE_CUDA: &str = "cuda>=12.8 brand=tesla,driver>=535,driver<536";

/// The review of a GPU pod of `image`.
fn gpu_pod_review(image: &str) -> Vec<u8> {
    Review::create(&gpu_pod().namespace(NAMESPACE).image(image).json(), NAMESPACE).body()
}

/// The whole path as the server runs it, registry lookup included.
async fn admit(body: &[u8], settings: &Settings, images: &Images) -> Vec<u8> {
    let request = decode(body).expect("review decodes");
    let subject = subject(&request, Endpoint::Mutate);
    let read = subject.as_ref().ok().and_then(Option::as_ref);
    let wanted = || read.and_then(|(_, subject)| wanted(subject, settings, None));
    let resolved = images.resolve(&request, settings, wanted).await;
    let facts = resolved.as_ref().map(|r| r as &dyn gpu_policy::policy::ImageFacts);
    let answer = gpu_policy::admission::answer(
        &request,
        Endpoint::Mutate,
        &subject,
        settings,
        None,
        facts,
        None,
    );
    answer.encode(&request.uid).expect("answer encodes")
}

fn patch_of(out: &[u8]) -> String {
    let review: Value = serde_json::from_slice(out).expect("response is JSON");
    let patch = review["response"]["patch"].as_str().unwrap_or_default();
    let bytes =
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, patch).expect("base64");
    String::from_utf8(bytes).expect("UTF-8")
}

fn registry(c: &mut Criterion) {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = runtime.block_on(FakeRegistry::start(Auth::None));
    let host = fake.host();
    let config =
        image_config(&["CUDA_VERSION=12.8.1", &format!("NVIDIA_REQUIRE_CUDA={REQUIRE_CUDA}")], &[]);
    fake.push_image("lab/train", "v1", &config);
    let image = format!("{host}/lab/train:v1");
    let body = gpu_pod_review(&image);

    let registry_settings = Settings::from_yaml(
        &format!(
            "imageResolution:\n  mode: registry\n  timeout: 4s\n  registries: [{host:?}]\n  insecureRegistries: [{host:?}]\n"
        ),
        "bench",
    )
    .expect("registry settings");
    // Table mode: the same image, known to the table by its own pattern.
    let table_settings = Settings::from_yaml(
        &format!(
            "imageResolution:\n  table:\n  - pattern: {:?}\n    cudaVersion: \"12.8\"\n    requireCuda: {REQUIRE_CUDA:?}\n",
            format!("^{}/lab/train:", regex::escape(&host))
        ),
        "bench",
    )
    .expect("table settings");
    let metrics = Metrics::new();
    let images = Images::default();
    images.apply(&registry_settings, &metrics);
    let no_images = Images::default();
    no_images.apply(&table_settings, &metrics);

    // Outside the timed loop: the first lookup fills the caches (on a busy
    // machine under a profiler it may outlive the budget and finish in the
    // background, which runs only while the runtime does: it gets the time
    // to), the next asks the registry nothing, and both modes patch the
    // same.
    let mut first = runtime.block_on(admit(&body, &registry_settings, &images));
    for _ in 0..100 {
        if patch_of(&first).contains("driver") {
            break;
        }
        runtime.block_on(async { tokio::time::sleep(Duration::from_millis(100)).await });
        first = runtime.block_on(admit(&body, &registry_settings, &images));
    }
    let fetched = fake.requests().len();
    let cached = runtime.block_on(admit(&body, &registry_settings, &images));
    assert_eq!(fake.requests().len(), fetched, "a cache hit asks the registry nothing");
    let table = runtime.block_on(admit(&body, &table_settings, &no_images));
    let (first, cached, table) = (patch_of(&first), patch_of(&cached), patch_of(&table));
    assert!(first.contains("nvidia.com/gpu.compute.major"), "{first}");
    assert!(first.contains("driver"), "the driver floor: {first}");
    assert_eq!(first, cached);
    assert_eq!(first, table, "both modes must make the same patch");

    let mut group = c.benchmark_group("registry");
    group
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(2))
        .sample_size(50);
    group.bench_function("mutate/gpu-pod-cache-hit", |b| {
        b.iter(|| runtime.block_on(admit(black_box(&body), &registry_settings, &images)))
    });
    group.bench_function("mutate/gpu-pod-table", |b| {
        b.iter(|| runtime.block_on(admit(black_box(&body), &table_settings, &no_images)))
    });
    group.finish();
}

criterion_group!(benches, registry);
criterion_main!(benches);
