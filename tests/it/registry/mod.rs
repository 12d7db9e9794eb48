//! The image registry client against the fake registry
//! (`support/fake_registry.rs`): resolution, index platforms, credentials,
//! the time budget, background completion, the caches, coalescing and
//! failures. Everything stays on loopback.

use std::time::{Duration, Instant};

use axum::http::Method;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use gpu_policy::document::Document;
use gpu_policy::registry::{
    Credentials, ImageConfigFacts, Lookup, Platform, Resolver, ResolverMetrics, ResolverOptions,
};
use gpu_policy::settings::{ImageResolution, ResolutionMode};
use prometheus_client::registry::Registry;
use serde_json::{Value, json};

use crate::support::fake_registry::{Auth, FakeRegistry, image_config};

mod dns;
mod hostile;
mod queue;

const REQUIRE_13_1: &str = "cuda>=13.1 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536 brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 brand=quadro,driver>=535,driver<536";
const REQUIRE_12_8: &str = "cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=tesla,driver>=470,driver<471 brand=tesla,driver>=535,driver<536";

fn cuda_config(version: &str, require: &str) -> Value {
    image_config(
        &[
            "PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin:/bin",
            &format!("NVIDIA_REQUIRE_CUDA={require}"),
            &format!("CUDA_VERSION={version}"),
        ],
        &[("com.nvidia.cuda.version", version), ("maintainer", "NVIDIA CORPORATION")],
    )
}

fn options(registry: &FakeRegistry) -> ResolverOptions {
    ResolverOptions {
        registries: vec![registry.host()],
        insecure_registries: vec![registry.host()],
        ..ResolverOptions::default()
    }
}

fn resolver(options: ResolverOptions) -> Resolver {
    match Resolver::new(options, None) {
        Ok(resolver) => resolver,
        Err(err) => panic!("resolver: {err}"),
    }
}

fn found(lookup: Lookup) -> ImageConfigFacts {
    match lookup {
        Lookup::Found(facts) => ImageConfigFacts::clone(&facts),
        other => panic!("expected Found, got {other:?}"),
    }
}

/// The reason of a lookup that ended as `result` (`failed`, `refused`,
/// `too_large`): one line, as it goes into a warning.
fn reason(lookup: Lookup, result: &str) -> String {
    let label = lookup.result();
    match lookup {
        Lookup::Failed(reason) | Lookup::Refused(reason) | Lookup::TooLarge(reason)
            if label == result =>
        {
            assert!(!reason.contains('\n'), "not one line: {reason:?}");
            reason
        }
        other => panic!("expected {result}, got {other:?}"),
    }
}

fn failed(lookup: Lookup) -> String {
    reason(lookup, "failed")
}

const BUDGET: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread")]
async fn resolves_what_the_image_config_says_of_cuda() {
    let registry = FakeRegistry::start(Auth::None).await;
    let digest =
        registry.push_image("nvidia/pytorch", "25.12-py3", &cuda_config("13.1.0", REQUIRE_13_1));
    registry.push_image("library/busybox", "1.37", &image_config(&["PATH=/bin"], &[]));
    let resolver = resolver(options(&registry));

    let image = format!("{}/nvidia/pytorch:25.12-py3", registry.host());
    let facts = found(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert_eq!(
        facts,
        ImageConfigFacts {
            cuda_version: Some("13.1.0".to_owned()),
            require_cuda: Some(REQUIRE_13_1.to_owned()),
            cuda_label: Some("13.1.0".to_owned()),
            digest: digest.clone(),
            oversized: None,
        }
    );

    // By digest, the same facts; an image without CUDA has none.
    let pinned = format!("{}/nvidia/pytorch@{digest}", registry.host());
    assert_eq!(found(resolver.resolve(&pinned, &Platform::default(), BUDGET).await), facts);
    let plain = format!("{}/library/busybox:1.37", registry.host());
    let none = found(resolver.resolve(&plain, &Platform::default(), BUDGET).await);
    assert_eq!((none.cuda_version, none.require_cuda, none.cuda_label), (None, None, None));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_index_gives_the_pods_platform() {
    let registry = FakeRegistry::start(Auth::None).await;
    registry.push_index(
        "vllm/vllm-openai",
        "v0.11.0",
        &[
            ("linux", "amd64", cuda_config("12.8.1", REQUIRE_12_8)),
            ("linux", "arm64", cuda_config("13.0.1", REQUIRE_13_1)),
        ],
    );
    let resolver = resolver(options(&registry));
    let image = format!("{}/vllm/vllm-openai:v0.11.0", registry.host());

    let arm_pod = json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}, "containers": []});
    let arm = found(
        resolver
            .resolve(
                &image,
                &Platform::of_pod_spec(Document::from_value(&arm_pod).root())
                    .unwrap_or_else(|err| panic!("{err}")),
                BUDGET,
            )
            .await,
    );
    assert_eq!(arm.cuda_version.as_deref(), Some("13.0.1"));
    let plain_pod = json!({"containers": []});
    let amd = found(
        resolver
            .resolve(
                &image,
                &Platform::of_pod_spec(Document::from_value(&plain_pod).root())
                    .unwrap_or_else(|err| panic!("{err}")),
                BUDGET,
            )
            .await,
    );
    assert_eq!(amd.cuda_version.as_deref(), Some("12.8.1"));
    assert_eq!(amd.require_cuda.as_deref(), Some(REQUIRE_12_8));
    // Both name the index.
    assert_eq!(arm.digest, amd.digest);

    let reason = failed(resolver.resolve(&image, &Platform::linux("s390x"), BUDGET).await);
    assert!(reason.contains("no linux/s390x image"), "{reason}");
}

#[tokio::test(flavor = "multi_thread")]
async fn anonymous_pulls_follow_the_bearer_challenge() {
    let registry = FakeRegistry::start(Auth::AnonymousBearer).await;
    registry.push_image(
        "nvidia/cuda",
        "13.0.1-base-ubuntu24.04",
        &cuda_config("13.0.1", REQUIRE_13_1),
    );
    let resolver = resolver(options(&registry));
    let image = format!("{}/nvidia/cuda:13.0.1-base-ubuntu24.04", registry.host());
    let facts = found(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert_eq!(facts.cuda_version.as_deref(), Some("13.0.1"));
    assert!(registry.tokens_issued() >= 1);
    let requests = registry.requests();
    let manifest = requests
        .iter()
        .find(|request| request.path.contains("/manifests/") && request.authorization.is_some());
    assert!(
        manifest.is_some_and(|request| request
            .authorization
            .as_deref()
            .is_some_and(|a| a.starts_with("Bearer "))),
        "{requests:?}"
    );
}

fn docker_config_file(
    dir: &tempfile::TempDir,
    host: &str,
    user: &str,
    password: &str,
) -> std::path::PathBuf {
    let auth = STANDARD.encode(format!("{user}:{password}"));
    let file = json!({"auths": {host: {"auth": auth}, "https://index.docker.io/v1/": {"username": "hub", "password": "x"}}});
    let path = dir.path().join(".dockerconfigjson");
    if let Err(err) = std::fs::write(&path, file.to_string()) {
        panic!("write {}: {err}", path.display());
    }
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn private_registries_take_the_credentials_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("tempdir: {err}"));
    for auth in [
        Auth::Bearer { user: "robot".to_owned(), password: "s3cret".to_owned() },
        Auth::Basic { user: "robot".to_owned(), password: "s3cret".to_owned() },
    ] {
        let registry = FakeRegistry::start(auth.clone()).await;
        registry.push_image("team/trainer", "1.0", &cuda_config("12.8.1", REQUIRE_12_8));
        let image = format!("{}/team/trainer:1.0", registry.host());

        // Without credentials: a one-line failure.
        let anonymous = resolver(options(&registry));
        let reason = failed(anonymous.resolve(&image, &Platform::default(), BUDGET).await);
        assert!(reason.contains("team/trainer"), "{auth:?}: {reason}");

        // Wrong credentials: still a failure.
        let wrong = docker_config_file(&dir, &registry.host(), "robot", "wrong");
        let config = ImageResolution {
            mode: ResolutionMode::Registry,
            registries: vec![registry.host()],
            insecure_registries: vec![registry.host()],
            credentials_file: Some(wrong),
            ..ImageResolution::default()
        };
        let with_wrong =
            resolver(ResolverOptions::from_settings(&config).unwrap_or_else(|err| panic!("{err}")));
        failed(with_wrong.resolve(&image, &Platform::default(), BUDGET).await);

        // The file the chart mounts: found.
        let right = docker_config_file(&dir, &registry.host(), "robot", "s3cret");
        let config = ImageResolution { credentials_file: Some(right), ..config };
        let options = ResolverOptions::from_settings(&config).unwrap_or_else(|err| panic!("{err}"));
        let registries: Vec<&str> = options.credentials.registries().collect();
        assert!(registries.contains(&"docker.io"), "{registries:?}");
        let facts = found(resolver(options).resolve(&image, &Platform::default(), BUDGET).await);
        assert_eq!(facts.cuda_version.as_deref(), Some("12.8.1"), "{auth:?}");
    }

    let missing = ImageResolution {
        credentials_file: Some(dir.path().join("absent.json")),
        ..ImageResolution::default()
    };
    let err = ResolverOptions::from_settings(&missing).map(|_| ()).map_err(|err| err.to_string());
    assert!(
        err.as_ref()
            .is_err_and(|err| err.starts_with("imageResolution.credentialsFile: cannot read")),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_registry_costs_an_admission_its_budget_only() {
    let registry = FakeRegistry::start(Auth::None).await;
    registry.push_image("slow/cuda", "13", &cuda_config("13.0.1", REQUIRE_13_1));
    registry.push_image("fast/cuda", "12", &cuda_config("12.8.1", REQUIRE_12_8));
    registry.set_delay("slow/cuda", Duration::from_secs(5));
    let resolver = resolver(options(&registry));
    let slow = format!("{}/slow/cuda:13", registry.host());
    let fast = format!("{}/fast/cuda:12", registry.host());

    let budget = Duration::from_millis(800);
    let started = Instant::now();
    let answers = resolver
        .resolve_all(
            "ml",
            [slow.as_str(), fast.as_str(), slow.as_str()],
            &Platform::default(),
            budget,
        )
        .await;
    let elapsed = started.elapsed();
    assert!(elapsed < budget + Duration::from_secs(1), "took {elapsed:?}");
    assert_eq!(answers.len(), 2, "each image once: {answers:?}");
    assert_eq!(answers[0], (slow.clone(), Lookup::TimedOut));
    assert_eq!(answers[1].0, fast);
    assert_eq!(found(answers[1].1.clone()).cuda_version.as_deref(), Some("12.8.1"));
}

/// Polls until `image` is answered from the cache, at most `limit`.
async fn until_cached(resolver: &Resolver, image: &str, limit: Duration) -> Lookup {
    let started = Instant::now();
    loop {
        let lookup = resolver.resolve(image, &Platform::default(), Duration::ZERO).await;
        if lookup != Lookup::TimedOut || started.elapsed() > limit {
            return lookup;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timed_out_lookup_finishes_in_the_background_for_the_next_admission() {
    let registry = FakeRegistry::start(Auth::None).await;
    registry.push_image("nvidia/pytorch", "25.12-py3", &cuda_config("13.1.0", REQUIRE_13_1));
    registry.set_delay("nvidia/pytorch", Duration::from_millis(1500));
    let resolver = resolver(options(&registry));
    let image = format!("{}/nvidia/pytorch:25.12-py3", registry.host());

    assert_eq!(
        resolver.resolve(&image, &Platform::default(), Duration::from_millis(200)).await,
        Lookup::TimedOut
    );
    let later = until_cached(&resolver, &image, Duration::from_secs(15)).await;
    assert_eq!(found(later).cuda_version.as_deref(), Some("13.1.0"));
    assert_eq!(registry.blob_gets("nvidia/pytorch"), 1);

    // The next admission: answered at once from the caches, nothing fetched.
    let before = registry.requests().len();
    let started = Instant::now();
    let again = resolver.resolve(&image, &Platform::default(), Duration::from_millis(200)).await;
    assert!(started.elapsed() < Duration::from_millis(200));
    assert_eq!(found(again).cuda_version.as_deref(), Some("13.1.0"));
    assert_eq!(registry.requests().len(), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn after_the_tag_ttl_only_the_digest_is_asked_again() {
    let registry = FakeRegistry::start(Auth::None).await;
    registry.push_image("nvidia/cuda", "12.8.1-runtime", &cuda_config("12.8.1", REQUIRE_12_8));
    let resolver =
        resolver(ResolverOptions { tag_ttl: Duration::from_millis(300), ..options(&registry) });
    let image = format!("{}/nvidia/cuda:12.8.1-runtime", registry.host());

    found(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    let repo = "nvidia/cuda";
    assert_eq!(
        (registry.manifest_gets(repo), registry.manifest_heads(repo), registry.blob_gets(repo)),
        (1, 0, 1)
    );

    // Within the TTL: no request at all.
    found(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert_eq!(
        (registry.manifest_gets(repo), registry.manifest_heads(repo), registry.blob_gets(repo)),
        (1, 0, 1)
    );

    // After it: one HEAD for the digest, the config from the digest cache.
    tokio::time::sleep(Duration::from_millis(400)).await;
    found(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert_eq!(
        (registry.manifest_gets(repo), registry.manifest_heads(repo), registry.blob_gets(repo)),
        (1, 1, 1)
    );

    // The tag moves: the new digest's config is fetched.
    let moved = registry.push_image(repo, "12.8.1-runtime", &cuda_config("12.9.0", REQUIRE_12_8));
    tokio::time::sleep(Duration::from_millis(400)).await;
    let facts = found(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert_eq!((facts.cuda_version.as_deref(), facts.digest), (Some("12.9.0"), moved));
    assert_eq!(registry.blob_gets(repo), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_lookups_of_one_image_share_one_fetch() {
    let registry = FakeRegistry::start(Auth::None).await;
    registry.push_image("nvidia/tritonserver", "25.12-py3", &cuda_config("13.1.0", REQUIRE_13_1));
    registry.set_delay("nvidia/tritonserver", Duration::from_millis(300));
    let resolver = resolver(options(&registry));
    let image = format!("{}/nvidia/tritonserver:25.12-py3", registry.host());

    let lookups = (0..8).map(|_| {
        let resolver = resolver.clone();
        let image = image.clone();
        tokio::spawn(async move { resolver.resolve(&image, &Platform::default(), BUDGET).await })
    });
    for answer in futures::future::join_all(lookups).await {
        match answer {
            Ok(lookup) => assert_eq!(found(lookup).cuda_version.as_deref(), Some("13.1.0")),
            Err(err) => panic!("lookup task: {err}"),
        }
    }
    let repo = "nvidia/tritonserver";
    assert_eq!((registry.manifest_gets(repo), registry.blob_gets(repo)), (1, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn failures_are_one_line_and_remembered_briefly() {
    let registry = FakeRegistry::start(Auth::None).await;
    registry.push_image("broken/image", "1", &cuda_config("12.8.1", REQUIRE_12_8));
    registry.set_status("broken/image", 500);
    let resolver = resolver(ResolverOptions {
        negative_ttl: Duration::from_millis(400),
        ..options(&registry)
    });

    let missing = format!("{}/nvidia/cuda:99.0", registry.host());
    let reason = failed(resolver.resolve(&missing, &Platform::default(), BUDGET).await);
    assert!(reason.contains("nvidia/cuda:99.0"), "{reason}");
    let broken = format!("{}/broken/image:1", registry.host());
    let reason = failed(resolver.resolve(&broken, &Platform::default(), BUDGET).await);
    assert!(reason.contains("broken/image:1"), "{reason}");
    let gets = registry.manifest_gets("broken/image");
    assert_eq!(gets, 1);

    // Within the negative TTL: the same answer, no request.
    let again = failed(resolver.resolve(&broken, &Platform::default(), BUDGET).await);
    assert_eq!(again, reason);
    assert_eq!(registry.manifest_gets("broken/image"), gets);

    // After it, asked again; the registry has recovered.
    tokio::time::sleep(Duration::from_millis(500)).await;
    registry.clear_faults("broken/image");
    let facts = found(resolver.resolve(&broken, &Platform::default(), BUDGET).await);
    assert_eq!(facts.cuda_version.as_deref(), Some("12.8.1"));
    assert_eq!(registry.manifest_gets("broken/image"), gets + 1);

    let bad = self::reason(
        resolver.resolve("Not A Reference", &Platform::default(), BUDGET).await,
        "refused",
    );
    assert_eq!(bad, "\"Not A Reference\" is not an image reference: invalid reference format");
}

#[tokio::test(flavor = "multi_thread")]
async fn lookups_and_cache_hits_are_counted() {
    let registry = FakeRegistry::start(Auth::None).await;
    registry.push_image("nvidia/cuda", "13.0.1-base", &cuda_config("13.0.1", REQUIRE_13_1));
    let mut metrics_registry = Registry::with_prefix("gpu_policy");
    let metrics = ResolverMetrics::register(&mut metrics_registry);
    let resolver =
        Resolver::new(options(&registry), Some(metrics)).unwrap_or_else(|err| panic!("{err}"));
    let image = format!("{}/nvidia/cuda:13.0.1-base", registry.host());
    found(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    found(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    reason(resolver.resolve("Not A Reference", &Platform::default(), BUDGET).await, "refused");

    let mut text = String::new();
    if let Err(err) = prometheus_client::encoding::text::encode(&mut text, &metrics_registry) {
        panic!("encode: {err}");
    }
    for line in [
        "gpu_policy_image_lookups_total{result=\"found\"} 2",
        "gpu_policy_image_lookups_total{result=\"refused\"} 1",
        "gpu_policy_image_cache_hits_total{cache=\"tag\"} 1",
        "gpu_policy_image_cache_hits_total{cache=\"config\"} 1",
        "gpu_policy_image_fetch_duration_seconds_count 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    assert_eq!(registry.count(Method::GET, "nvidia/cuda", "blobs"), 1);
}

#[test]
fn references_are_normalised_as_docker_does() {
    let resolver_credentials = Credentials::from_docker_config(
        br#"{"auths": {"https://index.docker.io/v1/": {"username": "hub", "password": "pw"}}}"#,
    )
    .unwrap_or_default();
    let reference: Result<oci_client::Reference, _> = "ubuntu".parse();
    let reference = reference.unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(reference.whole(), "docker.io/library/ubuntu:latest");
    assert!(matches!(
        resolver_credentials.auth_for(reference.registry()),
        oci_client::secrets::RegistryAuth::Basic(user, _) if user == "hub"
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn fetches_beyond_the_limit_wait_for_a_turn() {
    let registry = FakeRegistry::start(Auth::None).await;
    // Different configs: the same content would share one digest, and its
    // facts.
    for (repository, version) in [("team/one", "12.8.1"), ("team/two", "12.9.0")] {
        registry.push_image(repository, "1", &cuda_config(version, REQUIRE_12_8));
        registry.set_delay(repository, Duration::from_millis(500));
    }
    let resolver = resolver(ResolverOptions { max_concurrent_fetches: 1, ..options(&registry) });
    let images =
        [format!("{}/team/one:1", registry.host()), format!("{}/team/two:1", registry.host())];
    let started = Instant::now();
    let answers =
        resolver.resolve_all("ml", &images, &Platform::default(), Duration::from_secs(4)).await;
    // Each fetch makes at least two delayed requests (manifest, config):
    // one after the other, they take at least 2 s in all.
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_secs(2), "took {elapsed:?}: not one at a time");
    for (_, lookup) in answers {
        found(lookup);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn new_credentials_take_effect_and_clear_remembered_failures() {
    let registry = FakeRegistry::start(Auth::Basic {
        user: "robot".to_owned(),
        password: "rotated".to_owned(),
    })
    .await;
    registry.push_image("team/trainer", "2.0", &cuda_config("13.0.1", REQUIRE_13_1));
    let image = format!("{}/team/trainer:2.0", registry.host());
    let credentials = |password: &str| {
        let auth = STANDARD.encode(format!("robot:{password}"));
        let file = json!({"auths": {registry.host(): {"auth": auth}}});
        Credentials::from_docker_config(file.to_string().as_bytes())
            .unwrap_or_else(|err| panic!("{err}"))
    };
    let resolver =
        resolver(ResolverOptions { credentials: credentials("old"), ..options(&registry) });
    failed(resolver.resolve(&image, &Platform::default(), BUDGET).await);

    if let Err(err) = resolver.set_credentials(credentials("rotated")) {
        panic!("{err}");
    }
    let facts = found(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert_eq!(facts.cuda_version.as_deref(), Some("13.0.1"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_budget_past_any_clock_is_no_panic() {
    let registry = FakeRegistry::start(Auth::None).await;
    registry.push_image("nvidia/cuda", "13.0.1-base", &cuda_config("13.0.1", REQUIRE_13_1));
    let resolver = resolver(options(&registry));
    let image = format!("{}/nvidia/cuda:13.0.1-base", registry.host());
    let answers =
        resolver.resolve_all("ml", [image.as_str()], &Platform::default(), Duration::MAX).await;
    assert_eq!(found(answers[0].1.clone()).cuda_version.as_deref(), Some("13.0.1"));
}
