//! Registry mode against hostile registries, through the binary: whatever
//! a registry named by a pod does (endless bodies, no answer, redirects
//! and token realms to hosts nobody listed, content that is not its
//! digest), the pod is admitted with the table's answer and a warning
//! that says why, nothing is contacted that may not be, and the process's
//! peak RSS (`VmHWM`) stays at or under 100 MiB. Each case runs its own
//! server, so each peak is that case's.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{FALLBACK, check, cuda_13_config, start, warnings};
use crate::support::fake_registry::hostile::{Fault, Tarpit};
use crate::support::fake_registry::{Auth, FakeRegistry, registry_config};
use crate::support::gpu_pod;
use crate::support::server::{ENFORCE, Server, write_atomically};

/// The most the webhook may hold, whatever a registry does.
const PEAK_RSS: u64 = 100 << 20;
/// The registry budget of these servers.
const BUDGET: &str = "1s";

/// A registry whose repository `team/app` misbehaves as `fault` says
/// (none: the image is on `tarpit`, a host nobody listed), and a server
/// listing that registry only.
struct Case {
    registry: FakeRegistry,
    tarpit: Tarpit,
    server: Server,
    config: std::path::PathBuf,
    dir: tempfile::TempDir,
}

impl Case {
    async fn start(fault: impl FnOnce(&Tarpit) -> Option<Fault>) -> Case {
        let registry = FakeRegistry::start(Auth::None).await;
        registry.push_image("team/app", "1", &cuda_13_config());
        let tarpit = Tarpit::start().await;
        if let Some(fault) = fault(&tarpit) {
            registry.set_fault("team/app", fault);
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("config.yaml");
        write_atomically(&config, registry_config(&[registry.host()], BUDGET, "").as_bytes());
        let server = start(&config).await;
        Case { registry, tarpit, server, config, dir }
    }

    fn image(&self) -> String {
        format!("{}/team/app:1", self.registry.host())
    }

    /// Admits a GPU pod of `image` on `/validate/enforce`: allowed, with
    /// the table's fallback warned and the full reason in the audit
    /// annotation. Returns the annotation.
    async fn admitted(&self, image: &str) -> String {
        self.admitted_pod(&gpu_pod().namespace("ml").image(image).json(), image).await
    }

    /// [`Case::admitted`] of `pod`, a GPU pod of `image`.
    async fn admitted_pod(&self, pod: &Value, image: &str) -> String {
        let mut connection = self.server.connect().await;
        let started = Instant::now();
        let response: Value = connection.admit(ENFORCE, pod).await;
        eprintln!("{image}: answered in {:?}", started.elapsed());
        assert_eq!(response["allowed"], true, "{response}");
        assert!(
            warnings(&response).iter().any(|w| w.contains(FALLBACK) && w.contains(image)),
            "{response}"
        );
        response["auditAnnotations"]["image-resolution"].as_str().unwrap_or_default().to_owned()
    }

    /// The process's peak RSS so far, at or under [`PEAK_RSS`].
    fn peak_within_bound(&self, case: &str) {
        let peak = self.server.memory("VmHWM");
        eprintln!("{case}: peak RSS {:.1} MiB", peak as f64 / (1 << 20) as f64);
        assert!(peak <= PEAK_RSS, "{case}: peak RSS {peak} bytes");
        assert_eq!(self.tarpit.connections(), 0, "{case}: a connection to the tarpit");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_streamed_past_its_declared_size() {
    let case = Case::start(|_| Some(Fault::EndlessConfig)).await;
    let annotation = case.admitted(&case.image()).await;
    assert!(
        annotation.contains("image config larger than the ")
            && annotation.contains(" bytes its descriptor declares"),
        "{annotation}"
    );
    case.peak_within_bound("config streamed past its declared size");
    assert!(case.registry.streamed() < 32 << 20, "{} bytes sent", case.registry.streamed());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_manifest_that_never_ends() {
    let case = Case::start(|_| Some(Fault::EndlessManifest)).await;
    let annotation = case.admitted(&case.image()).await;
    assert!(annotation.contains("manifest larger than 4 MiB"), "{annotation}");
    case.peak_within_bound("manifest that never ends");
    assert!(case.registry.streamed() < 32 << 20, "{} bytes sent", case.registry.streamed());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_on_a_host_nobody_listed() {
    let case = Case::start(|_| None).await;
    let image = format!("{}/team/app:1", case.tarpit.host());
    let annotation = case.admitted(&image).await;
    assert!(
        annotation.contains(&format!(
            "registry {} is not in imageResolution.registries",
            case.tarpit.host()
        )),
        "{annotation}"
    );
    case.peak_within_bound("image on a host nobody listed");
    let metrics = case.server.metrics().await;
    assert!(metrics.contains(r#"gpu_policy_image_lookups_total{result="refused"} 1"#), "{metrics}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_to_a_loopback_port_nobody_listed() {
    let case =
        Case::start(|tarpit| Some(Fault::RedirectBlobs(format!("http://{}/blob", tarpit.host()))))
            .await;
    let annotation = case.admitted(&case.image()).await;
    assert!(
        annotation.contains(&format!("redirect to http://{}", case.tarpit.host())),
        "{annotation}"
    );
    case.peak_within_bound("redirect to an unlisted loopback port");
}

#[tokio::test(flavor = "multi_thread")]
async fn content_that_is_not_its_digest() {
    let case = Case::start(|_| Some(Fault::WrongContent)).await;
    let annotation = case.admitted(&case.image()).await;
    assert!(annotation.contains("registry lookup failed"), "{annotation}");
    case.server.wait_for_log("does not match its digest", Duration::from_secs(5)).await;
    case.peak_within_bound("content that is not its digest");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_realm_on_another_host() {
    let case = Case::start(|tarpit| {
        Some(Fault::RealmElsewhere(format!("http://{}/token", tarpit.host())))
    })
    .await;
    let annotation = case.admitted(&case.image()).await;
    assert!(
        annotation.contains(&format!("token realm http://{}", case.tarpit.host())),
        "{annotation}"
    );
    case.peak_within_bound("token realm on another host");
}

/// 300 admissions, each of another image, on a registry that never
/// answers: each is answered within the budget, the lookups in flight stay
/// at the registry's share, and the rest are left to the table at once.
#[tokio::test(flavor = "multi_thread")]
async fn three_hundred_images_on_a_registry_that_never_answers() {
    let case = Case::start(|_| Some(Fault::Silent)).await;
    let mut connection = case.server.connect().await;
    let mut slowest = Duration::ZERO;
    let mut reasons = std::collections::BTreeMap::<String, usize>::new();
    for n in 0..300 {
        let image = format!("{}/team/app:{n}", case.registry.host());
        let started = Instant::now();
        let response =
            connection.admit(ENFORCE, &gpu_pod().namespace("ml").image(&image).json()).await;
        slowest = slowest.max(started.elapsed());
        assert_eq!(response["allowed"], true, "{response}");
        let annotation =
            response["auditAnnotations"]["image-resolution"].as_str().unwrap_or_default();
        let reason = annotation.rsplit(": ").next().unwrap_or_default().to_owned();
        *reasons.entry(reason).or_default() += 1;
    }
    eprintln!("300 admissions: slowest {slowest:?}, reasons {reasons:?}");
    let queue_full = format!("the lookup queue of registry {} is full", case.registry.host());
    // Each lookup that started is one request the registry holds, and
    // one admission that waited its budget; the registry's share is 4 at
    // a time (a held request is given up after 5 s, freeing its place).
    let waited = reasons.get("no registry answer in 1s").copied().unwrap_or(0);
    let full = reasons.get(&queue_full).copied().unwrap_or(0);
    assert_eq!(waited + full, 300, "{reasons:?}");
    assert!(waited >= 4 && full >= 200, "{reasons:?}");
    assert_eq!(case.registry.requests().len(), waited, "one request per lookup");
    case.peak_within_bound("300 images on a registry that never answers");
}

/// `check --resolve-images` reads the same configuration and follows the
/// same rules: the unlisted host is not contacted, the digest is checked,
/// and the report says why the table answered.
#[tokio::test(flavor = "multi_thread")]
async fn check_follows_the_same_rules() {
    let case = Case::start(|_| Some(Fault::WrongContent)).await;
    let unlisted = format!("{}/team/app:1", case.tarpit.host());
    let config = case.config.to_string_lossy().into_owned();
    for (image, reason) in [
        (unlisted, format!("registry {} is not in imageResolution.registries", case.tarpit.host())),
        (case.image(), "does not match its digest".to_owned()),
    ] {
        let (pod, dir, config) = (
            gpu_pod().namespace("ml").image(&image).json(),
            case.dir.path().to_path_buf(),
            config.clone(),
        );
        let (report, stderr) = tokio::task::spawn_blocking(move || {
            check(&dir, &pod, &["--config", &config, "--resolve-images"])
        })
        .await
        .expect("check ran");
        // The warning is cut at 119 characters; stderr has the whole reason.
        assert!(report.to_string().contains(FALLBACK), "{image}: {report}");
        assert!(stderr.contains(&reason), "{image}: {report}\n{stderr}");
    }
    assert_eq!(case.tarpit.connections(), 0, "check connected to the tarpit");
}

/// A pod whose `kubernetes.io/arch` node selector is 1.4 MB long names no
/// platform (a label value has at most 63 characters): its image is left
/// to the table with a reason that quotes a prefix of the value, and
/// nothing is asked of the registry, by the webhook or by `check
/// --resolve-images`.
#[tokio::test(flavor = "multi_thread")]
async fn a_node_selector_of_megabytes_is_refused_before_any_lookup() {
    let case = Case::start(|_| None).await;
    let mut pod = gpu_pod().namespace("ml").image(&case.image()).json();
    pod["spec"]["nodeSelector"] = json!({"kubernetes.io/arch": "a".repeat(1_400_000)});
    let refusal = "(1400000 bytes) is not a label value: a label value has at most 63 characters";

    let annotation = case.admitted_pod(&pod, &case.image()).await;
    assert!(
        annotation.contains("nodeSelector kubernetes.io/arch \"aaaa")
            && annotation.contains(refusal),
        "{annotation}"
    );
    assert!(annotation.len() < 512, "{} bytes", annotation.len());
    let metrics = case.server.metrics().await;
    assert!(metrics.contains(r#"gpu_policy_image_lookups_total{result="refused"} 1"#), "{metrics}");
    case.peak_within_bound("node selector of 1.4 MB");

    let (dir, config) = (case.dir.path().to_path_buf(), case.config.to_string_lossy().into_owned());
    let (report, stderr) = tokio::task::spawn_blocking(move || {
        check(&dir, &pod, &["--config", &config, "--resolve-images"])
    })
    .await
    .expect("check ran");
    assert!(report.to_string().contains(FALLBACK), "{report}");
    assert!(stderr.contains(refusal), "{stderr}");
    assert!(stderr.len() < 1024, "{} bytes on stderr", stderr.len());
    assert!(case.registry.requests().is_empty(), "{:?}", case.registry.requests());
}
