//! Writes the seed corpora of the fuzz targets:
//!
//! - `corpus/review/`: an AdmissionReview v1 body around every object of
//!   `tests/fixtures/` and `examples/` (pods as pods, workloads as their
//!   kind), a pod made from each workload's template, an ephemeral-container
//!   update of each pod, Namespace reviews, and `examples/review-gpu-pod.json`;
//! - `corpus/config/`: `examples/config.yaml`, the `config.yaml` of the
//!   ConfigMap `gpu-policy manifests` prints, the `config:` block of the
//!   chart's values, and namespace annotation values.
//!
//! Run from anywhere: `cargo run --manifest-path fuzz/Cargo.toml --example seed`.

use std::fs;
use std::path::{Path, PathBuf};

use gpu_policy::install::{self, InstallOptions};
use gpu_policy::manifest;
use gpu_policy::settings::{Config, MODE_LABEL};
use serde_json::{Value, json};

/// The tests' review builder and pod of a workload, so that there is one
/// of each.
#[allow(dead_code)]
#[path = "../../tests/it/support/review.rs"]
mod review;
#[path = "../../tests/it/support/workloads.rs"]
mod workloads;

use review::Review;
use workloads::pod_of_workload;

fn main() -> Result<(), String> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = fuzz.parent().ok_or("the fuzz crate has no parent folder")?;
    let reviews = seed_reviews(root)?;
    let configs = seed_configs(root)?;
    write(&fuzz.join("corpus/review"), &reviews)?;
    write(&fuzz.join("corpus/config"), &configs)?;
    println!(
        "{} review bodies in fuzz/corpus/review, {} configs in fuzz/corpus/config",
        reviews.len(),
        configs.len()
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
