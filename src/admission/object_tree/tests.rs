use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::document::Json;
use crate::policy::READ_ENV_NAMES;

fn tree(text: &str) -> Value {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    read(&mut deserializer)
        .unwrap_or_else(|err| panic!("{err}: {text}"))
        .root()
        .to_value()
}

/// Every skipped field, with a value of some size.
fn unread_container_fields() -> Value {
    let mut container = serde_json::Map::new();
    for field in UNREAD_CONTAINER_FIELDS {
        container.insert((*field).to_owned(), json!({"exec": {"command": ["x"]}}));
    }
    Value::Object(container)
}

fn with_unread_fields(container: Value) -> Value {
    let mut merged = unread_container_fields();
    if let (Some(all), Value::Object(kept)) = (merged.as_object_mut(), container) {
        all.extend(kept);
    }
    merged
}

#[test]
fn a_pod_keeps_what_the_rules_read_and_nothing_else() {
    let kept = json!({"name": "app", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "1"}],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
        "volumeMounts": [{"name": "dev", "mountPath": "/dev/nvidia0"}],
        "securityContext": {"privileged": true}, "restartPolicy": "Always"});
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"a": "b"},
            "managedFields": [{"manager": "kubectl"}], "ownerReferences": []},
        "spec": {
            "containers": [with_unread_fields(kept.clone())],
            "initContainers": [with_unread_fields(kept.clone())],
            "ephemeralContainers": [with_unread_fields(kept.clone())],
            "volumes": [{"name": "dev", "hostPath": {"path": "/dev"}}],
            "nodeSelector": {"kubernetes.io/arch": "arm64"}},
        "status": {"phase": "Pending"}});
    let expected = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"a": "b"}, "ownerReferences": []},
        "spec": {
            "containers": [kept.clone()],
            "initContainers": [kept.clone()],
            "ephemeralContainers": [kept],
            "volumes": [{"name": "dev", "hostPath": {"path": "/dev"}}],
            "nodeSelector": {"kubernetes.io/arch": "arm64"}}});
    assert_eq!(tree(&pod.to_string()), expected);
}

#[test]
fn pod_templates_lose_the_same_fields_at_any_depth() {
    let cron_job = json!({"kind": "CronJob", "metadata": {"name": "c"}, "spec": {
        "jobTemplate": {"spec": {"template": {
            "metadata": {"managedFields": [], "labels": {"a": "b"}},
            "spec": {"containers": [with_unread_fields(json!({"name": "a"}))]}}}}}});
    assert_eq!(
        tree(&cron_job.to_string()),
        json!({"kind": "CronJob", "metadata": {"name": "c"}, "spec": {
            "jobTemplate": {"spec": {"template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "a"}]}}}}}})
    );
}

#[test]
fn the_same_names_elsewhere_are_kept() {
    // `args` of a container's env value, `status` below the top,
    // `managedFields` outside metadata, a container list that is a map.
    let object = json!({"spec": {
        "status": {"x": 1},
        "managedFields": [1],
        "containers": {"args": ["kept: not a list element"]},
        "initContainers": [{"name": "i",
            "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "command", "args": 1}]}]}});
    assert_eq!(tree(&object.to_string()), object);
}

#[test]
fn numbers_and_escapes_read_as_serde_json_reads_them() {
    let text = r#"{"a": [1, -2, 18446744073709551615, 1.5e300, 0.1, -0.0, 1e-400],
        "b": "\u00e9\ud83c\udf89\n\"", "c": null, "d": true, "e": {}, "f": [], "a": "last"}"#;
    let expected: Value = serde_json::from_str(text).expect("JSON");
    assert_eq!(tree(text), expected);
}

#[test]
fn invalid_json_is_an_error_even_in_a_skipped_field() {
    let text = r#"{"spec": {"containers": [{"args": [1,]}]}}"#;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    assert!(read(&mut deserializer).is_err());
}

/// The reference: the whole tree, then the skipped fields taken out.
fn pruned(value: &Value, place: &str) -> Value {
    match value {
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| match place {
                    "list" => pruned(item, "container"),
                    "env" => left_out_or_kept(item),
                    _ => pruned(item, ""),
                })
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| {
                    let key = key.as_str();
                    !match place {
                        "root" => key == "status",
                        "metadata" => key == "managedFields",
                        "container" => UNREAD_CONTAINER_FIELDS.contains(&key),
                        _ => false,
                    }
                })
                .map(|(key, value)| {
                    let child = match key.as_str() {
                        "env" if place == "container" => "env",
                        "metadata" => "metadata",
                        "containers" | "initContainers" | "ephemeralContainers" => "list",
                        _ => "",
                    };
                    (key.clone(), pruned(value, child))
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let keys = prop::sample::select(vec![
        "metadata",
        "containers",
        "initContainers",
        "ephemeralContainers",
        "managedFields",
        "status",
        "args",
        "livenessProbe",
        "env",
        "name",
        "spec",
        "é\"\\",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys.clone(), inner), 0..5).prop_map(|entries| Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect()
            )),
        ]
    })
}

/// An env entry as the reading keeps it: null when it is an object whose
/// name is a string no rule reads.
fn left_out_or_kept(entry: &Value) -> Value {
    match entry.get("name").and_then(Value::as_str) {
        Some(name) if entry.is_object() && !READ_ENV_NAMES.contains(&name) => Value::Null,
        _ => pruned(entry, ""),
    }
}

#[test]
fn env_entries_no_rule_reads_are_left_out_in_their_place() {
    let pod = json!({"spec": {"containers": [{"name": "c", "env": [
        {"name": "A", "value": "1"},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
        {"name": 3},
        "not an entry",
        {"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=12.0"}]}]}});
    let text = pod.to_string();
    let mut deserializer = serde_json::Deserializer::from_str(&text);
    let document = read(&mut deserializer).expect("JSON");
    let env = document
        .root()
        .pointer("/spec/containers/0/env")
        .expect("env");
    let left_out: Vec<bool> = env
        .as_array()
        .into_iter()
        .flatten()
        .map(Json::is_left_out)
        .collect();
    assert_eq!(left_out, [true, false, true, false, false, false]);
    assert_eq!(
        env.pointer("/5/value").and_then(Json::as_str),
        Some("cuda>=12.0")
    );
    // A left-out entry keeps its place: what follows keeps its index.
    let view = crate::policy::PodView::parse(
        document.root(),
        crate::policy::Shape::Pod,
        &crate::settings::Settings::default(),
    );
    assert!(view.is_err(), "the malformed entries are still reported");
}

proptest! {
    #[test]
    fn the_tree_is_serde_json_s_without_the_skipped_fields(value in json_value()) {
        let text = value.to_string();
        let whole: Value = serde_json::from_str(&text).expect("JSON");
        prop_assert_eq!(tree(&text), pruned(&whole, "root"));
    }
}

/// A rule that starts reading a skipped field must take it off the lists:
/// no source file of the request path names one.
#[test]
fn no_code_on_the_request_path_reads_a_skipped_field() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for room in ["policy", "admission", "server", "registry"] {
        collect_sources(&root.join(room), &mut files);
    }
    assert!(files.len() > 20, "{files:?}");
    let skipped = UNREAD_CONTAINER_FIELDS
        .iter()
        .chain(UNREAD_METADATA_FIELDS)
        .chain(UNREAD_OBJECT_FIELDS);
    let skipped: Vec<&str> = skipped.copied().collect();
    for file in files {
        let name = file.to_string_lossy();
        // This room, and tests, which build objects with these fields.
        if name.contains("object_tree") || name.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("readable source");
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for field in &skipped {
            // A key inside JSON text being written (`"status":`, the
            // answer's own status in admission/wire.rs) reads nothing.
            let code = code.replace(&format!("\"{field}\":"), "");
            assert!(
                !code.contains(&format!("\"{field}\"")),
                "{} names {field:?}, which the review decoder skips (src/admission/object_tree.rs)",
                file.display()
            );
        }
    }
}

fn collect_sources(dir: &std::path::Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            collect_sources(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}
