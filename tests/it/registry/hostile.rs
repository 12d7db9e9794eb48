//! The registry client against registries that misbehave on purpose
//! (`support/fake_registry/hostile.rs`): what they send is cut at its
//! bound, content must be its digest, and nothing is contacted that the
//! lists and the address rules do not allow ([`Tarpit`] counts every
//! connection made where none may be).

use std::time::Duration;

use gpu_policy::registry::{Lookup, Platform, ResolverMetrics, ResolverOptions};
use prometheus_client::registry::Registry;

use super::{BUDGET, REQUIRE_13_1, cuda_config, failed, found, options, resolver};
use crate::support::fake_registry::hostile::{Fault, Tarpit};
use crate::support::fake_registry::{Auth, FakeRegistry};

/// What a bounded endless body may cost the fake before the client's
/// hang-up reaches it: the bound and the sockets' buffers, far below the
/// gigabytes it would otherwise send.
const STREAMED_AFTER_HANG_UP: u64 = 32 << 20;

fn too_large(lookup: Lookup) -> String {
    super::reason(lookup, "too_large")
}

fn refused(lookup: Lookup) -> String {
    super::reason(lookup, "refused")
}

async fn pushed(repository: &str) -> (FakeRegistry, String) {
    let registry = FakeRegistry::start(Auth::None).await;
    registry.push_image(repository, "1", &cuda_config("13.0.1", REQUIRE_13_1));
    let image = format!("{}/{repository}:1", registry.host());
    (registry, image)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_streamed_past_its_declared_size_is_cut_there() {
    let (registry, image) = pushed("team/endless-config").await;
    registry.set_fault("team/endless-config", Fault::EndlessConfig);
    let resolver = resolver(options(&registry));
    let reason = too_large(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert!(
        reason.starts_with("image config larger than the ")
            && reason.ends_with(" bytes its descriptor declares"),
        "{reason}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(registry.streamed() < STREAMED_AFTER_HANG_UP, "{} bytes sent", registry.streamed());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_manifest_that_never_ends_is_cut_at_4_mib() {
    let (registry, image) = pushed("team/endless-manifest").await;
    registry.set_fault("team/endless-manifest", Fault::EndlessManifest);
    let resolver = resolver(options(&registry));
    let reason = too_large(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert_eq!(reason, "manifest larger than 4 MiB");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let streamed = registry.streamed();
    assert!((4 << 20..STREAMED_AFTER_HANG_UP).contains(&streamed), "{streamed} bytes sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn content_that_is_not_its_digest_fails_and_nothing_of_it_is_kept() {
    let (registry, image) = pushed("team/tampered").await;
    registry.set_fault("team/tampered", Fault::WrongContent);
    let resolver = resolver(ResolverOptions {
        negative_ttl: Duration::from_millis(200),
        ..options(&registry)
    });
    let reason = failed(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert!(reason.contains("does not match its digest sha256:"), "{reason}");
    assert_eq!(registry.blob_gets("team/tampered"), 0, "stopped at the manifest");

    // Neither the tag nor anything else was kept: once the registry tells
    // the truth, the manifest is read again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    registry.clear_faults("team/tampered");
    let gets = registry.manifest_gets("team/tampered");
    let facts = found(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert_eq!(facts.cuda_version.as_deref(), Some("13.0.1"));
    assert_eq!(registry.manifest_gets("team/tampered"), gets + 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_blob_that_is_not_its_digest_fails() {
    let (registry, image) = pushed("team/tampered-config").await;
    // The manifest is true, the blob is not: the redirect target serves
    // the same path with every blob tampered.
    let liar = FakeRegistry::start(Auth::None).await;
    liar.push_image("team/tampered-config", "1", &cuda_config("13.0.1", REQUIRE_13_1));
    liar.set_fault("team/tampered-config", Fault::WrongContent);
    registry.set_fault(
        "team/tampered-config",
        Fault::RedirectBlobs(format!(
            "http://{}/v2/team/tampered-config/blobs/{}",
            liar.host(),
            config_digest(&registry, "team/tampered-config")
        )),
    );
    let resolver = resolver(ResolverOptions {
        registries: vec![registry.host(), liar.host()],
        insecure_registries: vec![registry.host(), liar.host()],
        ..options(&registry)
    });
    let reason = failed(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert!(reason.contains("the image config does not match its digest"), "{reason}");
    assert_eq!(liar.blob_gets("team/tampered-config"), 1);
}

/// The digest of the config blob the registry's only image names.
fn config_digest(registry: &FakeRegistry, repository: &str) -> String {
    registry
        .config_digest(repository, "1")
        .unwrap_or_else(|| panic!("{repository}:1 has no config"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_to_an_unlisted_loopback_host_is_not_followed() {
    let (registry, image) = pushed("team/redirected").await;
    let tarpit = Tarpit::start().await;
    registry.set_fault(
        "team/redirected",
        Fault::RedirectBlobs(format!("http://{}/blob", tarpit.host())),
    );
    let resolver = resolver(options(&registry));
    let reason = refused(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert_eq!(
        reason,
        format!(
            "redirect to http://{}: plain HTTP to a host not in insecureRegistries",
            tarpit.host()
        )
    );
    // Over https too, the address decides.
    registry.set_fault(
        "team/redirected",
        Fault::RedirectBlobs(format!("https://{}/blob", tarpit.host())),
    );
    let other = format!("{}/team/redirected:1", registry.host());
    let resolver = super::resolver(options(&registry));
    let reason = refused(resolver.resolve(&other, &Platform::default(), BUDGET).await);
    assert!(reason.contains("a loopback address, not in imageResolution.registries"), "{reason}");
    assert_eq!(tarpit.connections(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_to_a_listed_host_are_followed_without_the_credentials() {
    let registry = FakeRegistry::start(Auth::Basic {
        user: "robot".to_owned(),
        password: "s3cret".to_owned(),
    })
    .await;
    registry.push_image("team/cdn", "1", &cuda_config("13.0.1", REQUIRE_13_1));
    let cdn = FakeRegistry::start(Auth::None).await;
    cdn.push_image("team/cdn", "1", &cuda_config("13.0.1", REQUIRE_13_1));
    let blob = config_digest(&registry, "team/cdn");
    registry.set_fault(
        "team/cdn",
        Fault::RedirectBlobs(format!("http://{}/v2/team/cdn/blobs/{blob}", cdn.host())),
    );
    let credentials = gpu_policy::registry::Credentials::from_docker_config(
        serde_json::json!({"auths": {registry.host(): {"username": "robot", "password": "s3cret"}}})
            .to_string()
            .as_bytes(),
    )
    .unwrap_or_else(|err| panic!("{err}"));
    let resolver = resolver(ResolverOptions {
        registries: vec![registry.host(), cdn.host()],
        insecure_registries: vec![registry.host(), cdn.host()],
        credentials,
        ..options(&registry)
    });
    let image = format!("{}/team/cdn:1", registry.host());
    let facts = found(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert_eq!(facts.cuda_version.as_deref(), Some("13.0.1"));
    let at_cdn = cdn.requests();
    assert_eq!(at_cdn.len(), 1, "{at_cdn:?}");
    assert_eq!(at_cdn[0].authorization, None, "credentials left the registry");
    assert!(
        registry
            .requests()
            .iter()
            .any(|r| r.authorization.as_deref().is_some_and(|a| a.starts_with("Basic "))),
        "the registry itself got them"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn more_than_three_redirects_are_not_followed() {
    let (registry, image) = pushed("team/loop").await;
    let blob = config_digest(&registry, "team/loop");
    registry.set_fault(
        "team/loop",
        Fault::RedirectBlobs(format!("http://{}/v2/team/loop/blobs/{blob}", registry.host())),
    );
    let resolver = resolver(options(&registry));
    let reason = failed(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert!(reason.contains("more than 3 redirects"), "{reason}");
    assert_eq!(registry.blob_gets("team/loop"), 4, "the first request and three hops");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_realm_on_an_unlisted_host_is_not_contacted() {
    let (registry, image) = pushed("team/realm").await;
    let tarpit = Tarpit::start().await;
    registry
        .set_fault("team/realm", Fault::RealmElsewhere(format!("http://{}/token", tarpit.host())));
    let resolver = resolver(options(&registry));
    let reason = refused(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert_eq!(
        reason,
        format!(
            "token realm http://{}: plain HTTP to a host not in insecureRegistries",
            tarpit.host()
        )
    );
    assert_eq!(tarpit.connections(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_on_an_unlisted_host_is_answered_without_a_connection() {
    let tarpit = Tarpit::start().await;
    let mut metrics_registry = Registry::with_prefix("gpu_policy");
    let metrics = ResolverMetrics::register(&mut metrics_registry);
    // Listed as plain HTTP nowhere and as a registry nowhere: the
    // defaults, the public registries.
    let resolver = gpu_policy::registry::Resolver::new(ResolverOptions::default(), Some(metrics))
        .unwrap_or_else(|err| panic!("{err}"));
    for image in [
        format!("{}/team/trainer:1", tarpit.host()),
        "169.254.169.254/latest/meta-data:1".to_owned(),
        "kubernetes.default.svc/x:1".to_owned(),
    ] {
        let reason = refused(resolver.resolve(&image, &Platform::default(), BUDGET).await);
        let host = image.split('/').next().unwrap_or_default();
        assert_eq!(reason, format!("registry {host} is not in imageResolution.registries"));
    }
    assert_eq!(tarpit.connections(), 0);
    let mut text = String::new();
    if let Err(err) = prometheus_client::encoding::text::encode(&mut text, &metrics_registry) {
        panic!("encode: {err}");
    }
    assert!(
        text.lines().any(|l| l == "gpu_policy_image_lookups_total{result=\"refused\"} 3"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_listed_name_that_resolves_to_loopback_is_not_contacted() {
    let (registry, _) = pushed("team/named").await;
    let port = registry.host().rsplit_once(':').map(|(_, p)| p.to_owned()).unwrap_or_default();
    let named = format!("localhost:{port}");
    let resolver = resolver(ResolverOptions {
        registries: vec![named.clone()],
        insecure_registries: vec![named.clone()],
        ..options(&registry)
    });
    let image = format!("{named}/team/named:1");
    let reason = refused(resolver.resolve(&image, &Platform::default(), BUDGET).await);
    assert_eq!(
        reason,
        "localhost resolves only to loopback addresses, which only a literal \
         imageResolution.registries entry may reach"
    );
    assert!(registry.requests().is_empty(), "{:?}", registry.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registry_that_never_answers_holds_a_bounded_number_of_lookups() {
    let silent = FakeRegistry::start(Auth::None).await;
    silent.set_fault("team/silent", Fault::Silent);
    let (healthy, healthy_image) = pushed("team/healthy").await;
    let resolver = resolver(ResolverOptions {
        registries: vec![silent.host(), healthy.host()],
        insecure_registries: vec![silent.host(), healthy.host()],
        max_concurrent_fetches: 4,
        max_pending_lookups: 16,
        max_lookups_per_registry: 2,
        ..options(&silent)
    });
    let budget = Duration::from_millis(100);
    let mut timed_out = 0;
    let mut full = 0;
    for n in 0..300 {
        let image = format!("{}/team/silent:{n}", silent.host());
        match resolver.resolve(&image, &Platform::default(), budget).await {
            Lookup::TimedOut => timed_out += 1,
            Lookup::Refused(reason) => {
                assert_eq!(
                    reason,
                    format!("the lookup queue of registry {} is full", silent.host())
                );
                full += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((timed_out, full), (2, 298));
    assert_eq!(silent.requests().len(), 2, "{:?}", silent.requests());

    // The silent registry holds its places only: another one is answered.
    let facts = found(resolver.resolve(&healthy_image, &Platform::default(), BUDGET).await);
    assert_eq!(facts.cuda_version.as_deref(), Some("13.0.1"));
}

#[tokio::test(flavor = "multi_thread")]
async fn past_the_lookups_in_flight_no_new_lookup_starts() {
    let registries: Vec<FakeRegistry> =
        futures::future::join_all((0..3).map(|_| FakeRegistry::start(Auth::None))).await;
    let hosts: Vec<String> = registries.iter().map(FakeRegistry::host).collect();
    for registry in &registries {
        registry.set_fault("team/silent", Fault::Silent);
    }
    let resolver = resolver(ResolverOptions {
        registries: hosts.clone(),
        insecure_registries: hosts.clone(),
        max_pending_lookups: 4,
        max_lookups_per_registry: 2,
        ..options(&registries[0])
    });
    let mut answers = Vec::new();
    for host in &hosts {
        for n in 0..2 {
            let image = format!("{host}/team/silent:{n}");
            let lookup =
                resolver.resolve(&image, &Platform::default(), Duration::from_millis(50)).await;
            answers.push(lookup.result());
        }
    }
    assert_eq!(answers, ["timed_out", "timed_out", "timed_out", "timed_out", "refused", "refused"]);
    let last = format!("{}/team/silent:9", hosts[2]);
    let reason = refused(resolver.resolve(&last, &Platform::default(), BUDGET).await);
    assert_eq!(reason, "the lookup queue is full");
}

/// A pod's strings are checked before anything is looked up: a platform
/// that is no label value and an image that is no reference are refused
/// with a reason that quotes a prefix of them, and the registry hears
/// nothing.
#[tokio::test(flavor = "multi_thread")]
async fn pod_strings_past_kubernetes_limits_are_refused_before_any_request() {
    let (registry, image) = pushed("team/strings").await;
    let resolver = resolver(options(&registry));
    let huge = "a".repeat(1_400_000);

    let platform = Platform::linux(&huge);
    let reason = refused(resolver.resolve(&image, &platform, BUDGET).await);
    assert!(
        reason.starts_with("platform architecture \"aaaa")
            && reason.contains("(1400000 bytes)")
            && reason.ends_with("a label value has at most 63 characters"),
        "{reason}"
    );
    assert!(reason.len() < 200, "{} bytes", reason.len());
    let answers = resolver.refuse_all([&image, &image], &reason);
    assert_eq!(answers, [(image.clone(), Lookup::Refused(reason.clone()))]);

    let long_image = format!("{}/team/strings:1{huge}", registry.host());
    let reason = refused(resolver.resolve(&long_image, &Platform::default(), BUDGET).await);
    assert!(
        reason.ends_with(
            " bytes) is not an image reference: longer than the 520 characters of the \
             longest image reference"
        ),
        "{reason}"
    );
    assert!(reason.len() < 200, "{} bytes", reason.len());
    assert!(registry.requests().is_empty(), "{:?}", registry.requests());
}
