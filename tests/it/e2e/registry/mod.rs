//! `imageResolution.mode: registry` through the binary: what an image's
//! own config says reaches the pod's affinity, within the time budget; a
//! slow or absent registry leaves the pod to the image table, and says so;
//! `check --resolve-images` gives the webhook's patch. Registries are the
//! in-test fake (`support/fake_registry.rs`), on loopback.

use crate::support::gpu_pod;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::fake_registry::{Auth, FakeRegistry, image_config, registry_config};
use crate::support::server::{
    ENFORCE, MUTATE, Options, Server, WARN, free_port, patch_of, patched, write_atomically,
};

/// The `NVIDIA_REQUIRE_CUDA` of the `nvidia/cuda:13.0.2` images.
const REQUIRE_13_0: &str = "cuda>=13.0 brand=unknown,driver>=535,driver<536 \
    brand=grid,driver>=535,driver<536 brand=tesla,driver>=535,driver<536 \
    brand=nvidia,driver>=535,driver<536 brand=quadro,driver>=535,driver<536";

mod claims;
mod hostile;

const FALLBACK: &str = "table used for";

fn cuda_13_config() -> Value {
    image_config(
        &[
            "PATH=/usr/local/cuda/bin:/usr/bin:/bin",
            &format!("NVIDIA_REQUIRE_CUDA={REQUIRE_13_0}"),
            "CUDA_VERSION=13.0.2",
        ],
        &[("com.nvidia.cuda.version", "13.0.2")],
    )
}

async fn start(config: &Path) -> Server {
    Server::start(Options { config: Some(config.to_path_buf()), ..Options::default() }, None).await
}

fn affinity(pod: &Value) -> String {
    pod["spec"]["affinity"].to_string()
}

/// compute capability >= 7.5: `(major Gt 7)` OR `(major In [7] AND minor Gt 4)`.
fn requires_7_5(affinity: &str) -> bool {
    affinity.contains(r#"{"key":"nvidia.com/gpu.compute.major","operator":"Gt","values":["7"]}"#)
        && affinity
            .contains(r#"{"key":"nvidia.com/gpu.compute.minor","operator":"Gt","values":["4"]}"#)
}

fn warnings(response: &Value) -> Vec<String> {
    response["warnings"]
        .as_array()
        .map(|all| all.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// `gpu-policy check -o json` of `pod`; its one report.
fn check(dir: &Path, pod: &Value, args: &[&str]) -> (Value, String) {
    let file = dir.join("pod.json");
    std::fs::write(&file, pod.to_string()).expect("write the pod");
    let output = Command::new(env!("CARGO_BIN_EXE_gpu-policy"))
        .arg("check")
        .arg("-f")
        .arg(&file)
        .args(["-o", "json", "--namespace", "ml"])
        .args(args)
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let reports: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|err| panic!("{err}: {stdout}\nstderr: {stderr}"));
    (reports[0].clone(), stderr)
}

/// An in-house image the table does not know, built on CUDA 13.0: its
/// config gives the compute 7.5 floor and the driver floor; `check
/// --resolve-images` gives the same patch, and `check` without it none.
#[tokio::test(flavor = "multi_thread")]
async fn an_image_config_gives_the_affinity_and_check_agrees() {
    let registry = FakeRegistry::start(Auth::AnonymousBearer).await;
    registry.push_image("team/trainer", "2026.1", &cuda_13_config());
    let image = format!("{}/team/trainer:2026.1", registry.host());
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.yaml");
    write_atomically(&config, registry_config(&[registry.host()], "2s", "").as_bytes());
    let server = start(&config).await;
    let mut connection = server.connect().await;

    let pod = gpu_pod().namespace("ml").image(&image).json();
    let response = connection.admit(MUTATE, &pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    let patch = patch_of(&response).unwrap_or_else(|| panic!("a patch: {response}"));
    let mutated = patched(&pod, &patch);
    let affinity = affinity(&mutated);
    assert!(requires_7_5(&affinity), "{affinity}");
    assert!(
        affinity.contains("nvidia.com/cuda.driver-version.major")
            && affinity.contains("nvidia.com/cuda.runtime-version.major"),
        "the driver floor of cuda>=13.0: {affinity}"
    );
    assert!(warnings(&response).is_empty(), "{response}");
    assert_eq!(registry.blob_gets("team/trainer"), 1);

    let webhook_patch = serde_json::to_value(&patch).expect("a patch serialises");
    let config_arg = config.to_string_lossy().into_owned();
    let (pod_c, dir_c) = (pod.clone(), dir.path().to_path_buf());
    let (resolved, stderr) = tokio::task::spawn_blocking(move || {
        check(&dir_c, &pod_c, &["--config", &config_arg, "--resolve-images"])
    })
    .await
    .expect("check ran");
    assert_eq!(resolved["patch"], webhook_patch, "stderr: {stderr}");
    let config_arg = config.to_string_lossy().into_owned();
    let dir_c = dir.path().to_path_buf();
    let (table, _) =
        tokio::task::spawn_blocking(move || check(&dir_c, &pod, &["--config", &config_arg]))
            .await
            .expect("check ran");
    assert!(
        !table["patch"].to_string().contains("gpu.compute.major"),
        "the table does not know the image: {table}"
    );
}

/// A registry that answers after 2 s costs the admission its budget (1 s)
/// and no more: the table applies, with a warning, an audit annotation and
/// a log line; the lookup finishes in the background, and a later
/// admission gets the registry's answer without fetching the config again.
#[tokio::test(flavor = "multi_thread")]
async fn a_slow_registry_costs_the_budget_and_answers_the_next_admission() {
    let registry = FakeRegistry::start(Auth::None).await;
    registry.push_image("team/slow", "1", &cuda_13_config());
    registry.set_delay("team/slow", Duration::from_secs(2));
    let image = format!("{}/team/slow:1", registry.host());
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.yaml");
    write_atomically(&config, registry_config(&[registry.host()], "1s", "").as_bytes());
    let server = start(&config).await;
    let mut connection = server.connect().await;
    let pod = gpu_pod().namespace("ml").image(&image).json();

    let started = Instant::now();
    let first = connection.admit(WARN, &pod).await;
    let took = started.elapsed();
    assert!(took < Duration::from_millis(2500), "answered in {took:?}, budget 1 s");
    assert_eq!(first["allowed"], true, "{first}");
    let first_warnings = warnings(&first);
    assert!(
        first_warnings.iter().any(|w| w.contains(&image)
            && w.contains("no registry answer in 1s")
            && w.contains(FALLBACK)),
        "{first}"
    );
    assert!(
        !first_warnings.iter().any(|w| w.contains("compute capability")),
        "the table does not know the image: {first}"
    );
    let annotation = first["auditAnnotations"]["image-resolution"].as_str().unwrap_or_default();
    assert!(annotation.contains(&image), "{first}");
    server.wait_for_log("image registry gave no usable answer", Duration::from_secs(5)).await;

    let deadline = Instant::now() + Duration::from_secs(20);
    let second = loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let response = connection.admit(WARN, &pod).await;
        if !warnings(&response).iter().any(|w| w.contains(FALLBACK)) {
            break response;
        }
        assert!(Instant::now() < deadline, "no registry answer after 20 s: {response}");
    };
    assert!(
        warnings(&second).iter().any(|w| w.contains("would require GPU compute capability >= 7.5")),
        "{second}"
    );
    assert!(second["auditAnnotations"]["image-resolution"].is_null());
    assert_eq!(registry.blob_gets("team/slow"), 1, "one fetch in all");
    let metrics = server.metrics().await;
    assert!(metrics.contains(r#"gpu_policy_image_lookups_total{result="timed_out"}"#), "{metrics}");
}

/// A registry nobody answers for: `/mutate` still admits and mutates by
/// the table, and says the table applied.
#[tokio::test(flavor = "multi_thread")]
async fn a_registry_down_leaves_the_pod_to_the_table() {
    let down = format!("127.0.0.1:{}", free_port());
    let image = format!("{down}/team/trainer:12.8");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.yaml");
    let table = "  table:\n    - pattern: '^127\\.0\\.0\\.1:\\d+/team/trainer:12\\.8$'\n      \
                 cudaVersion: '12.8'\n";
    write_atomically(&config, registry_config(&[down], "1s", table).as_bytes());
    let server = start(&config).await;
    let mut connection = server.connect().await;
    let pod = gpu_pod().namespace("ml").image(&image).json();
    let response = connection.admit(MUTATE, &pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    let patch = patch_of(&response).unwrap_or_else(|| panic!("a patch: {response}"));
    let affinity = affinity(&patched(&pod, &patch));
    assert!(
        affinity
            .contains(r#"{"key":"nvidia.com/gpu.compute.major","operator":"Gt","values":["4"]}"#),
        "the table's CUDA 12.8 floor (5.0): {affinity}"
    );
    // The validating webhook, which sees the mutated pod, says the table
    // applied (the mutating one only mutates).
    let validated = connection.admit(ENFORCE, &patched(&pod, &patch)).await;
    assert_eq!(validated["allowed"], true, "{validated}");
    assert!(
        warnings(&validated)
            .iter()
            .any(|w| w.contains("registry lookup failed") && w.contains(FALLBACK)),
        "{validated}"
    );
    assert!(
        validated["auditAnnotations"]["image-resolution"]
            .as_str()
            .is_some_and(|a| a.contains(&image)),
        "{validated}"
    );
    let metrics = server.metrics().await;
    assert!(metrics.contains(r#"gpu_policy_image_lookups_total{result="failed"}"#), "{metrics}");
}

/// Admits `pod` on the validating warn endpoint until `done` holds of the
/// response, for at most 15 s.
async fn warn_until(
    server: &Server,
    pod: &Value,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let mut connection = server.connect().await;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let response = connection.admit(WARN, pod).await;
        if done(&response) {
            return response;
        }
        assert!(Instant::now() < deadline, "{what} not within 15 s: {response}\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Registry mode turned on by a config reload, credentials from the
/// dockerconfigjson file, and the file read again when it changes (as a
/// mounted Secret is updated in place).
#[tokio::test(flavor = "multi_thread")]
async fn reload_turns_registry_mode_on_and_credentials_follow_their_file() {
    use base64::Engine;
    let auth = Auth::Bearer { user: "robot".to_owned(), password: "s3cret".to_owned() };
    let registry = FakeRegistry::start(auth).await;
    registry.push_image("team/private", "1", &cuda_13_config());
    let image = format!("{}/team/private:1", registry.host());
    let pod = gpu_pod().namespace("ml").image(&image).json();
    let dir = tempfile::tempdir().expect("tempdir");
    let credentials = dir.path().join(".dockerconfigjson");
    let write_credentials = |password: &str| {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("robot:{password}"));
        let file = json!({"auths": {registry.host(): {"auth": auth}}});
        write_atomically(&credentials, file.to_string().as_bytes());
    };
    write_credentials("wrong");
    let config = dir.path().join("config.yaml");
    write_atomically(&config, b"imageResolution: {mode: table}\n");
    let server = start(&config).await;

    // Table mode: nobody asks the registry.
    let table = server.connect().await.admit(WARN, &pod).await;
    assert!(
        !warnings(&table).iter().any(|w| w.contains(FALLBACK) || w.contains("compute capability")),
        "{table}"
    );
    assert!(registry.requests().is_empty());

    // Registry mode, the wrong password: the table, said so.
    let extra = format!("  credentialsFile: {:?}\n", credentials.display().to_string());
    write_atomically(&config, registry_config(&[registry.host()], "2s", &extra).as_bytes());
    warn_until(&server, &pod, "registry mode after the reload", |r| {
        warnings(r).iter().any(|w| w.contains("registry lookup failed") && w.contains(FALLBACK))
    })
    .await;

    // The right password in the file: the registry's answer.
    write_credentials("s3cret");
    let found = warn_until(&server, &pod, "the new credentials", |r| {
        warnings(r).iter().any(|w| w.contains("would require GPU compute capability >= 7.5"))
    })
    .await;
    assert!(found["auditAnnotations"]["image-resolution"].is_null(), "{found}");
    server.wait_for_log("registry credentials reloaded", Duration::from_secs(5)).await;
}
