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

use gpu_policy::admission::{ObjectKind, Workload};
use gpu_policy::install::{self, InstallOptions};
use gpu_policy::manifest;
use gpu_policy::settings::{Config, MODE_LABEL};
use serde_json::{Value, json};

const UID: &str = "705ab4f5-6393-11e8-b7cc-42010a800002";

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
        files.push((
            format!("{name}.json"),
            to_json(&review(object, "CREATE", None, None)),
        ));
        if kind == "Pod" {
            files.push((format!("{name}-ephemeral.json"), ephemeral_update(object)));
        }
        if let Some(pod) = pod_of_template(object) {
            files.push((
                format!("{name}-pod.json"),
                to_json(&review(&pod, "CREATE", None, None)),
            ));
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
    let namespaces = [
        ("create", review(&enforced, "CREATE", None, None)),
        ("opt-in", review(&enforced, "UPDATE", Some(&plain), None)),
        (
            "opt-in-admin",
            review(&enforced, "UPDATE", Some(&plain), Some("system:masters")),
        ),
        ("opt-out", review(&plain, "UPDATE", Some(&enforced), None)),
    ];
    for (name, body) in namespaces {
        files.push((format!("namespace-{name}.json"), to_json(&body)));
    }
    Ok(files)
}

/// An AdmissionReview v1 request for `object`, as the API server sends it.
fn review(object: &Value, operation: &str, old: Option<&Value>, group: Option<&str>) -> Value {
    let kind = object["kind"].as_str().unwrap_or("");
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group_name, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = match ObjectKind::of(group_name, kind) {
        ObjectKind::Pod => "pods".to_owned(),
        ObjectKind::Workload(workload) => workload.resource().to_owned(),
        ObjectKind::Ignored => format!("{}s", kind.to_lowercase()),
    };
    let gvk = json!({"group": group_name, "version": version, "kind": kind});
    let gvr = json!({"group": group_name, "version": version, "resource": resource});
    let mut request = json!({
        "uid": UID,
        "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "name": object.pointer("/metadata/name").cloned().unwrap_or(json!("")),
        "operation": operation,
        "userInfo": {"username": "alice", "groups": [group.unwrap_or("system:authenticated")]},
        "object": object,
        "dryRun": false,
    });
    if kind != "Namespace" {
        let namespace = object
            .pointer("/metadata/namespace")
            .cloned()
            .unwrap_or(json!("default"));
        request["namespace"] = namespace;
    }
    if let Some(old) = old {
        request["oldObject"] = old.clone();
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
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
    let mut review = review(&updated, "UPDATE", Some(pod), None);
    review["request"]["subResource"] = json!("ephemeralcontainers");
    to_json(&review)
}

/// A pod as a workload's controller creates it from the template.
fn pod_of_template(workload: &Value) -> Option<Value> {
    let kind = workload["kind"].as_str()?;
    let api_version = workload["apiVersion"].as_str()?;
    if !matches!(ObjectKind::of_manifest(api_version, kind), ObjectKind::Workload(w) if w != Workload::PodTemplate)
    {
        return None;
    }
    let template = workload
        .pointer("/spec/template")
        .or_else(|| workload.pointer("/spec/jobTemplate/spec/template"))?;
    let mut metadata = template.get("metadata").cloned().unwrap_or(json!({}));
    let name = workload
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(json!("web"));
    metadata["generateName"] = json!(format!("{}-", name.as_str().unwrap_or("web")));
    metadata["ownerReferences"] = json!([{"apiVersion": api_version, "kind": kind, "name": name,
        "uid": "00000000-0000-0000-0000-000000000001", "controller": true}]);
    if let Some(namespace) = workload.pointer("/metadata/namespace") {
        metadata["namespace"] = namespace.clone();
    }
    Some(json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}))
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
