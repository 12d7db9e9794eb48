//! Writes the seed corpora of the fuzz targets:
//!
//! - `corpus/review/`: an AdmissionReview v1 body around every object of
//!   `tests/fixtures/` and `examples/` (pods as pods, workloads as their
//!   kind), a pod made from each workload's template, an ephemeral-container
//!   update of each pod, Namespace reviews, and `examples/review-gpu-pod.json`;
//! - `corpus/config/`: `examples/config.yaml`, the `config.yaml` of the
//!   ConfigMap `gpu-policy manifests` prints, the `config:` block of the
//!   chart's values, and namespace annotation values;
//! - `corpus/registry/`: what a registry sends, as the tests' fake registry
//!   (`tests/it/support/fake_registry/`) stores it: image configs with and
//!   without the CUDA envs and label, OCI and Docker image manifests, an
//!   OCI image index and a Docker manifest list with platform entries, and
//!   an index written as JSON arrays (serde reads structs from arrays too).
//!
//! Run from anywhere: `cargo run --manifest-path fuzz/Cargo.toml --example seed`.

use std::fs;
use std::path::{Path, PathBuf};

use gpu_policy::install::{self, InstallOptions};
use gpu_policy::manifest;
use gpu_policy::settings::{Config, MODE_LABEL};
use serde_json::{Value, json};

/// The tests' pod of a workload, so that there is one.
#[path = "../../tests/it/support/workloads.rs"]
mod workloads;

use gpu_policy_test_support::review::Review;
use workloads::pod_of_workload;

fn main() -> Result<(), String> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = fuzz.parent().ok_or("the fuzz crate has no parent folder")?;
    let reviews = seed_reviews(root)?;
    let configs = seed_configs(root)?;
    let documents = seed_registry()?;
    write(&fuzz.join("corpus/review"), &reviews)?;
    write(&fuzz.join("corpus/config"), &configs)?;
    write(&fuzz.join("corpus/registry"), &documents)?;
    println!(
        "{} review bodies in fuzz/corpus/review, {} configs in fuzz/corpus/config, \
         {} registry documents in fuzz/corpus/registry",
        reviews.len(),
        configs.len(),
        documents.len()
    );
    Ok(())
}

fn write(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (name, bytes) in files {
        let path = dir.join(name);
        fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn seed_reviews(root: &Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    let paths: Vec<PathBuf> = ["tests/fixtures", "examples"]
        .iter()
        .map(|dir| root.join(dir))
        .collect();
    let documents = manifest::load(&paths, &mut std::io::empty()).map_err(|e| e.to_string())?;
    let mut files = Vec::new();
    for (index, document) in documents.iter().enumerate() {
        let object = &document.object;
        let stem = Path::new(&document.source)
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        let Some(kind) = object["kind"].as_str() else {
            continue; // examples/config.yaml
        };
        let name = format!("{stem}-{index}-{}", kind.to_lowercase());
        if kind == "AdmissionReview" {
            files.push((format!("{name}.json"), to_json(object)));
            continue;
        }
        files.push((format!("{name}.json"), created(object).body()));
        if kind == "Pod" {
            files.push((format!("{name}-ephemeral.json"), ephemeral_update(object)));
        }
        if let Some(pod) = pod_of_workload(object, "x7k2p", "00000000-0000-0000-0000-000000000001")
        {
            files.push((format!("{name}-pod.json"), created(&pod).body()));
            files.push((format!("{name}-pod-ephemeral.json"), ephemeral_update(&pod)));
        }
    }
    let namespace = |labels: Value| {
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "ml", "labels": labels, "annotations": {
                "gpu-policy.io/max-gpus-per-pod": "2",
                "gpu-policy.io/min-compute-capability": "8.0"}}})
    };
    let enforced = namespace(json!({MODE_LABEL: "enforce"}));
    let plain = namespace(json!({}));
    // Namespaces are cluster-scoped: their reviews carry no namespace.
    let namespace_review =
        |object: &Value, old: &Value| Review::update(object, old, "").set("namespace", Value::Null);
    let namespaces = [
        ("create", created(&enforced)),
        ("opt-in", namespace_review(&enforced, &plain)),
        (
            "opt-in-admin",
            namespace_review(&enforced, &plain).user("admin", &["system:masters"]),
        ),
        ("opt-out", namespace_review(&plain, &enforced)),
    ];
    for (name, review) in namespaces {
        files.push((format!("namespace-{name}.json"), review.body()));
    }
    Ok(files)
}

/// A CREATE of `object` as the API server sends it: in the object's own
/// namespace (`default` without one), none for a Namespace.
fn created(object: &Value) -> Review {
    if object["kind"] == "Namespace" {
        return Review::create(object, "").set("namespace", Value::Null);
    }
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    Review::create(object, namespace)
}

/// `kubectl debug`: an UPDATE of `pods/ephemeralcontainers` that adds one.
fn ephemeral_update(pod: &Value) -> Vec<u8> {
    let mut updated = pod.clone();
    if let Some(spec) = updated.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert(
            "ephemeralContainers".to_owned(),
            json!([{"name": "debugger", "image": "nvidia/cuda:12.6.3-base-ubuntu24.04",
                "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]),
        );
    }
    let namespace = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    Review::update(&updated, pod, namespace)
        .sub_resource("ephemeralcontainers")
        .body()
}

fn to_json(value: &Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

fn seed_configs(root: &Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    let read = |path: &str| fs::read_to_string(root.join(path)).map_err(|e| format!("{path}: {e}"));
    let mut files = vec![(
        "examples-config.yaml".to_owned(),
        read("examples/config.yaml")?.into_bytes(),
    )];

    // What `gpu-policy manifests` puts in the ConfigMap.
    let objects = install::objects(&InstallOptions::default(), &Config::default())?;
    let configmap = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap")
        .and_then(|o| o.pointer("/data/config.yaml"))
        .and_then(Value::as_str)
        .ok_or("`manifests` has no ConfigMap with a config.yaml")?;
    files.push((
        "manifests-configmap.yaml".to_owned(),
        configmap.as_bytes().to_vec(),
    ));

    // The chart's `config:` block, as written (with its comments), and as
    // JSON, which the parser reads too.
    let values = read("charts/gpu-policy/values.yaml")?;
    let block: Vec<&str> = values
        .lines()
        .skip_while(|line| *line != "config:")
        .skip(1)
        .take_while(|line| line.is_empty() || line.starts_with(' '))
        .map(|line| line.strip_prefix("  ").unwrap_or(line))
        .collect();
    if block.is_empty() {
        return Err("charts/gpu-policy/values.yaml has no `config:` block".to_owned());
    }
    let chart = block.join("\n") + "\n";
    let parsed: Value = serde_saphyr::from_str(&chart).map_err(|e| format!("chart config: {e}"))?;
    files.push(("chart-values-config.yaml".to_owned(), chart.into_bytes()));
    files.push(("chart-values-config.json".to_owned(), to_json(&parsed)));

    // Each line is also tried as a namespace annotation value.
    files.push((
        "annotations.txt".to_owned(),
        b"2\n8.0\n 16 \n7.5\n".to_vec(),
    ));
    Ok(files)
}

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
const DOCKER_LAYER: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";

/// Image configs, manifests and indexes. Each descriptor has the size of
/// the document it names; digests are stand-ins (the readers do not hash).
fn seed_registry() -> Result<Vec<(String, Vec<u8>)>, String> {
    const REQUIRE_13_0: &str = "cuda>=13.0 brand=unknown,driver>=535,driver<536 \
        brand=grid,driver>=535,driver<536 brand=tesla,driver>=535,driver<536";
    const REQUIRE_12_8: &str = "cuda>=12.8 brand=unknown,driver>=470,driver<471 \
        brand=tesla,driver>=470,driver<471 brand=tesla,driver>=535,driver<536";
    let cuda = |version: &str, require: &str, arch: &str| {
        let nvarch = if arch == "arm64" { "sbsa" } else { "x86_64" };
        image_config(
            arch,
            &[
                "PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin:/bin",
                &format!("NVARCH={nvarch}"),
                &format!("NVIDIA_REQUIRE_CUDA={require}"),
                &format!("CUDA_VERSION={version}"),
                "LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64",
                "NVIDIA_VISIBLE_DEVICES=all",
                "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            ],
            &json!({"com.nvidia.cuda.version": version, "maintainer": "NVIDIA CORPORATION"}),
        )
    };
    let configs = [
        (
            "config-cuda-13.0.1-amd64",
            cuda("13.0.1", REQUIRE_13_0, "amd64"),
        ),
        (
            "config-cuda-13.0.1-arm64",
            cuda("13.0.1", REQUIRE_13_0, "arm64"),
        ),
        (
            "config-cuda-12.8.1-amd64",
            cuda("12.8.1", REQUIRE_12_8, "amd64"),
        ),
        // A framework image on a CUDA base: the label only, a later env.
        (
            "config-label-only",
            image_config(
                "amd64",
                &["PATH=/opt/conda/bin:/usr/bin:/bin", "PYTORCH_VERSION=2.7.0"],
                &json!({"com.nvidia.cuda.version": "12.6.3",
                    "org.opencontainers.image.source": "https://github.com/pytorch/pytorch"}),
            ),
        ),
        // No CUDA at all, and labels as Docker writes none.
        (
            "config-ubuntu",
            image_config("amd64", &["PATH=/usr/bin:/bin"], &Value::Null),
        ),
        (
            "config-attestation",
            json!({"architecture": "unknown", "os": "unknown"}),
        ),
    ];
    let mut files: Vec<(String, Vec<u8>)> = configs
        .iter()
        .map(|(name, config)| (format!("{name}.json"), to_json(config)))
        .collect();

    let mut images = Vec::new();
    for (name, config) in &configs {
        let config = to_json(config);
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": stand_in_digest(&config),
                "size": config.len()},
            "layers": [{"mediaType": OCI_LAYER, "digest": stand_in_digest(name.as_bytes()),
                "size": 31_457_280}],
        });
        images.push((name.trim_start_matches("config-"), to_json(&manifest)));
    }
    // The same image as Docker v2 writes it, and as an OCI manifest that
    // leaves `mediaType` out (the fields tell).
    let config = &files[0].1;
    let docker = json!({
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST,
        "config": {"mediaType": DOCKER_CONFIG, "size": config.len(),
            "digest": stand_in_digest(config)},
        "layers": [
            {"mediaType": DOCKER_LAYER, "size": 29_754_290, "digest": stand_in_digest(b"base")},
            {"mediaType": DOCKER_LAYER, "size": 4_620_166, "digest": stand_in_digest(b"cuda")},
        ],
    });
    let bare = json!({
        "schemaVersion": 2,
        "config": {"mediaType": OCI_CONFIG, "digest": stand_in_digest(config),
            "size": config.len()},
        "layers": [],
        "annotations": {"org.opencontainers.image.created": "2025-09-01T00:00:00Z"},
    });
    files.push(("manifest-docker-v2.json".to_owned(), to_json(&docker)));
    files.push(("manifest-oci-no-media-type.json".to_owned(), to_json(&bare)));

    // An OCI index as buildx writes it (with an attestation entry) and a
    // Docker manifest list.
    let entry = |media_type: &str, image: &str, platform: Value| {
        let (_, manifest) = images
            .iter()
            .find(|(name, _)| *name == image)
            .ok_or(format!("no seed image {image}"))?;
        Ok::<_, String>(
            json!({"mediaType": media_type, "digest": stand_in_digest(manifest),
            "size": manifest.len(), "platform": platform}),
        )
    };
    let mut attestation = entry(
        OCI_MANIFEST,
        "attestation",
        json!({"os": "unknown", "architecture": "unknown"}),
    )?;
    attestation["annotations"] = json!({
        "vnd.docker.reference.digest": stand_in_digest(&images[0].1),
        "vnd.docker.reference.type": "attestation-manifest",
    });
    let index = json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            entry(OCI_MANIFEST, "cuda-13.0.1-amd64",
                json!({"os": "linux", "architecture": "amd64"}))?,
            entry(OCI_MANIFEST, "cuda-13.0.1-arm64",
                json!({"os": "linux", "architecture": "arm64", "variant": "v8"}))?,
            attestation,
        ],
    });
    let list = json!({
        "schemaVersion": 2,
        "mediaType": DOCKER_LIST,
        "manifests": [
            entry(DOCKER_MANIFEST, "cuda-12.8.1-amd64",
                json!({"os": "linux", "architecture": "amd64"}))?,
            entry(DOCKER_MANIFEST, "cuda-13.0.1-arm64",
                json!({"os": "linux", "architecture": "arm64", "variant": "v8"}))?,
            entry(DOCKER_MANIFEST, "ubuntu",
                json!({"os": "linux", "architecture": "ppc64le"}))?,
        ],
    });
    files.push(("index-oci.json".to_owned(), to_json(&index)));
    // serde reads a struct from a JSON array as well: the index as
    // [schemaVersion, mediaType, config, manifests], its entries as
    // [digest, size, platform], the shortest ones `["",0]`.
    let mut entries = vec![json!(["", 0]); 16];
    entries.push(json!([
        stand_in_digest(b"arm64"),
        406,
        ["linux", "arm64", "v8"]
    ]));
    files.push((
        "index-as-arrays.json".to_owned(),
        to_json(&json!([2, OCI_INDEX, null, entries])),
    ));
    files.push(("index-docker-list.json".to_owned(), to_json(&list)));
    for (name, manifest) in images {
        files.push((format!("manifest-oci-{name}.json"), manifest));
    }
    Ok(files)
}

/// An image config (OCI image spec), as the fake registry's
/// `image_config` builds it, for `architecture`.
fn image_config(architecture: &str, env: &[&str], labels: &Value) -> Value {
    json!({
        "architecture": architecture,
        "os": "linux",
        "config": {"Env": env, "Cmd": ["/bin/bash"], "WorkingDir": "/", "Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": [stand_in_digest(architecture.as_bytes())]},
        "history": [{"created": "2025-09-01T00:00:00Z", "created_by": "CMD [\"/bin/bash\"]"}],
    })
}

/// `sha256:` and 64 hex digits that depend on `bytes` (FNV-1a, not sha256).
fn stand_in_digest(bytes: &[u8]) -> String {
    let hex: String = (0..4u64)
        .map(|round| {
            let hash = bytes
                .iter()
                .fold(0xcbf2_9ce4_8422_2325 ^ round, |hash, byte| {
                    (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
                });
            format!("{hash:016x}")
        })
        .collect();
    format!("sha256:{hex}")
}
