use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::document::Json;
use crate::policy::READ_ENV_NAMES;

/// Each place that keeps some of its members, and which: the allowlist.
/// A member not named here is left out; a place not here keeps all of
/// its members as [`Place::member`] says.
const KEPT: &[(Place, &[&str])] = &[
    (Place::Root, &["apiVersion", "kind", "metadata", "spec", "template"]),
    (
        Place::Metadata,
        &["annotations", "generateName", "labels", "name", "namespace", "ownerReferences", "uid"],
    ),
    (
        Place::Spec,
        &[
            // A pod's.
            "affinity",
            "containers",
            "ephemeralContainers",
            "initContainers",
            "nodeName",
            "nodeSelector",
            "overhead",
            "resourceClaims",
            "runtimeClassName",
            "schedulerName",
            "schedulingGates",
            "tolerations",
            "volumes",
            // A workload's.
            "jobTemplate",
            "template",
            // A claim's, and a claim template's.
            "devices",
            "metadata",
            "spec",
        ],
    ),
    (
        Place::Container,
        &["env", "image", "name", "resources", "restartPolicy", "securityContext", "volumeMounts"],
    ),
    (Place::ContainerSecurity, &["privileged"]),
    (Place::Mount, &["mountPath", "name"]),
    (Place::Volume, &["hostPath", "name"]),
];

/// The members `place` keeps; None when it keeps every one.
fn kept(place: Place) -> Option<&'static [&'static str]> {
    KEPT.iter().find(|(row, _)| *row == place).map(|(_, keys)| *keys)
}

fn tree(text: &str) -> Value {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    read(text, &mut deserializer, &Budget::unlimited())
        .unwrap_or_else(|err| panic!("{err}: {text}"))
        .root()
        .to_value()
}

/// Container fields no rule reads.
const UNREAD_CONTAINER_FIELDS: &[&str] = &[
    "args",
    "command",
    "envFrom",
    "imagePullPolicy",
    "lifecycle",
    "livenessProbe",
    "ports",
    "readinessProbe",
    "resizePolicy",
    "startupProbe",
    "stdin",
    "terminationMessagePath",
    "workingDir",
    "aFieldOfANewerKubernetes",
];

/// Every unread field, with a value of some size.
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
    let mut sent = with_unread_fields(kept.clone());
    sent["securityContext"]["capabilities"] = json!({"add": ["SYS_ADMIN"]});
    sent["volumeMounts"][0]["readOnly"] = json!(true);
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"a": "b"}, "resourceVersion": "7",
            "managedFields": [{"manager": "kubectl"}], "ownerReferences": []},
        "spec": {
            "containers": [sent.clone()],
            "initContainers": [sent.clone()],
            "ephemeralContainers": [sent],
            "securityContext": {"supplementalGroups": [1, 2, 3]},
            "hostNetwork": true,
            "volumes": [{"name": "dev", "hostPath": {"path": "/dev"}, "emptyDir": {}}],
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
fn subtrees_a_rule_may_copy_are_kept_whole() {
    // Below `affinity`, any name; a container list that is a map (the
    // rules report it); the members of an env entry that is kept.
    let object = json!({"spec": {
        "affinity": {"status": {"x": 1}, "managedFields": [1], "futureField": {"args": 2}},
        "tolerations": [{"key": "k", "newerField": [{}]}],
        "containers": {"args": ["kept: not a list element"]},
        "initContainers": [{"name": "i",
            "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "command", "args": 1}]}]}});
    assert_eq!(tree(&object.to_string()), object);
}

#[test]
fn numbers_and_escapes_read_as_serde_json_reads_them() {
    let text = r#"{"spec": {"affinity": {"a": [1, -2, 18446744073709551615, 1.5e300, 0.1, -0.0,
        1e-400], "b": "\u00e9\ud83c\udf89\n\"", "c": null, "d": true, "e": {}, "f": [],
        "a": "last"}}}"#;
    let expected: Value = serde_json::from_str(text).expect("JSON");
    assert_eq!(tree(text), expected);
}

#[test]
fn invalid_json_is_an_error_even_in_a_skipped_field() {
    let text = r#"{"spec": {"containers": [{"args": [1,]}]}}"#;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    assert!(read(text, &mut deserializer, &Budget::unlimited()).is_err());
}

/// The reference: the whole tree, then what the places leave out taken
/// out, one value at a time (the reader does it as it parses).
fn pruned(value: &Value, place: Place) -> Value {
    match value {
        Value::Array(items) => {
            let element = place.element();
            Value::Array(
                items
                    .iter()
                    .map(|item| {
                        let kept = pruned(item, element);
                        let document = crate::document::Document::from_value(&kept);
                        if element.keeps(document.root()) { kept } else { Value::Null }
                    })
                    .collect(),
            )
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| !Unread::skips(place, key))
                .map(|(key, value)| (key.clone(), pruned(value, place.member(key))))
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
        "template",
        "affinity",
        "resources",
        "claims",
        "volumeMounts",
        "securityContext",
        "privileged",
        "é\"\\",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,8}".prop_map(Value::String),
        prop::sample::select(READ_ENV_NAMES.to_vec()).prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys.clone(), inner), 0..5).prop_map(|entries| Value::Object(
                entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

#[test]
fn env_entries_no_rule_reads_are_left_out_in_their_place() {
    let pod = json!({"spec": {"containers": [{"name": "c", "env": [
        {"name": "A", "value": "1"},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
        {"name": 3},
        "not an entry",
        {"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=12.0"},
        {}, {"value": "no name"}, {"name": null}, {"name": "C"}]}]}});
    let text = pod.to_string();
    let mut deserializer = serde_json::Deserializer::from_str(&text);
    let document = read(&text, &mut deserializer, &Budget::unlimited()).expect("JSON");
    let env = document.root().pointer("/spec/containers/0/env").expect("env");
    let left_out: Vec<bool> = env.as_array().into_iter().flatten().map(Json::is_left_out).collect();
    assert_eq!(left_out, [true, false, true, false, false, false, true, true, true, true]);
    assert_eq!(env.as_array().map(|list| list.len()), Some(10));
    assert_eq!(env.pointer("/5/value").and_then(Json::as_str), Some("cuda>=12.0"));
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
        prop_assert_eq!(tree(&text), pruned(&whole, Place::Root));
    }
}

/// Keys the request path reads below a subtree the allowlist keeps whole
/// ([`Place::Whole`]), or in a list element kept whole: each with where.
const READ_IN_WHOLE_SUBTREES: &[&str] = &[
    // metadata.annotations, labels, ownerReferences[]
    "apiVersion",
    "controller",
    "kind",
    // env[]: an entry kept is kept whole.
    "configMapKeyRef",
    "key",
    "value",
    "valueFrom",
    // resources
    "claims",
    "limits",
    "requests",
    "request",
    // volumes[].hostPath
    "path",
    // resourceClaims[]
    "resourceClaimName",
    "resourceClaimTemplateName",
    // affinity, nodeSelector, tolerations
    "matchExpressions",
    "nodeAffinity",
    "nodeSelectorTerms",
    "operator",
    "requiredDuringSchedulingIgnoredDuringExecution",
    "tolerationSeconds",
    "effect",
    "values",
    // a claim's devices
    "adminAccess",
    "allocationMode",
    "cel",
    "count",
    "deviceClassName",
    "exactly",
    "expression",
    "firstAvailable",
    "selectors",
];

/// Keys read by a file of the request path from the cluster's objects (a
/// `serde_json::Value` the API served), never from a review's object.
/// (`read_allocation`: a claim's status; `read_slice`: a ResourceSlice;
/// the checker of `check` and `audit`, which read whole objects; a pull
/// secret's Docker config.)
const READ_FROM_THE_CLUSTER: &[(&str, &[&str])] = &[
    (
        "dra/allocation.rs",
        &[
            "status",
            "allocation",
            "results",
            "driver",
            "pool",
            "attributes",
            "basic",
            "version",
            "productName",
            "string",
        ],
    ),
    ("admission/checker.rs", &["status", "resourceClaimStatuses"]),
    ("registry/credentials.rs", &["auths"]),
];

/// A rule that starts reading a field must find it kept: every key the
/// source files of the request path read (`get("..")`, `fields(.., [..])`,
/// `optional_str(.., "..", ..)`, pointers, ...) is on the allowlist
/// ([`KEPT`]) or read below a subtree kept whole.
#[test]
fn every_key_the_request_path_reads_is_kept() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for room in ["crates/policy-core/src/policy", "src/admission", "src/registry"] {
        collect_sources(&root.join(room), &mut files);
    }
    assert!(files.len() > 20, "{files:?}");
    let kept: Vec<&str> = KEPT
        .iter()
        .flat_map(|(_, keys)| keys.iter().copied())
        .chain(READ_IN_WHOLE_SUBTREES.iter().copied())
        .collect();
    let reads = regex::Regex::new(concat!(
        r#"(?:\.get|contains_key|optional_\w+|str_field|array_field|object_field|member)"#,
        r#"\((?:\w+, )?"([A-Za-z]+)""#,
        r#"|pointer\("(/[A-Za-z/~0-9]+)"\)|from_static\("(/[A-Za-z/]+)"\)"#,
    ))
    .expect("a regex");
    let lists = regex::Regex::new(r#"fields\(\s*\w+,\s*\[([^\]]*)\]"#).expect("a regex");
    let word = regex::Regex::new(r#""([A-Za-z]+)""#).expect("a regex");
    let mut seen = 0;
    let mut left_out = Vec::new();
    for file in files {
        let name = file.to_string_lossy();
        if name.contains("test") || name.contains("/dra/tables") {
            // Tests build objects; the cluster's tables and check's input
            // are read from the API, not from a review.
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("readable source");
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let mut keys: Vec<String> = Vec::new();
        for found in reads.captures_iter(code) {
            if let Some(key) = found.get(1) {
                keys.push(key.as_str().to_owned());
            }
            for pointer in [found.get(2), found.get(3)].into_iter().flatten() {
                keys.extend(pointer.as_str().split('/').map(str::to_owned));
            }
        }
        for list in lists.captures_iter(code) {
            for key in word.captures_iter(&list[1]) {
                keys.push(key[1].to_owned());
            }
        }
        let from_the_cluster: &[&str] = READ_FROM_THE_CLUSTER
            .iter()
            .find(|(suffix, _)| name.ends_with(suffix))
            .map_or(&[], |(_, keys)| keys);
        for key in keys.iter().filter(|k| {
            !k.is_empty()
                && !k.starts_with(char::is_numeric)
                && !from_the_cluster.contains(&k.as_str())
        }) {
            seen += 1;
            if !kept.contains(&key.as_str()) {
                left_out.push(format!("{} reads {key:?}", file.display()));
            }
        }
    }
    assert!(
        left_out.is_empty(),
        "read, but left out by the review decoder (src/admission/object_tree/tests.rs: KEPT, and Place::skips):\n{}",
        left_out.join("\n")
    );
    assert!(seen > 50, "the patterns found only {seen} keys read");
}

/// Every place: one with a row of `KEPT` keeps its keys and leaves out
/// others; one without keeps every key.
const PLACES: [Place; 18] = [
    Place::Root,
    Place::Metadata,
    Place::Spec,
    Place::ContainerList,
    Place::Container,
    Place::ContainerSecurity,
    Place::Resources,
    Place::EnvList,
    Place::EnvEntry,
    Place::MountList,
    Place::Mount,
    Place::VolumeList,
    Place::Volume,
    Place::PodClaimList,
    Place::PodClaim,
    Place::ClaimUseList,
    Place::ClaimUse,
    Place::Whole,
];

#[test]
fn each_place_keeps_its_row_of_the_allowlist() {
    for place in PLACES {
        match kept(place) {
            Some(keys) => {
                for key in keys {
                    assert!(!place.skips(key), "{place:?} {key}");
                }
                assert!(place.skips("notAField"), "{place:?}");
            }
            None => assert!(!place.skips("notAField"), "{place:?}"),
        }
    }
}

/// Every workload kind's template, the claim kinds and the Namespace are
/// reached by the places: their read paths are kept.
#[test]
fn the_read_paths_of_every_kind_are_kept() {
    let container = json!({"name": "c", "image": "i", "env": [{"name": "NVIDIA_VISIBLE_DEVICES",
        "value": "all"}], "resources": {"limits": {"nvidia.com/gpu": 1}, "claims": [{"name": "g"}]}});
    let pod_spec = json!({"containers": [container], "runtimeClassName": "nvidia",
        "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}]});
    let template = json!({"metadata": {"annotations": {"a": "b"}}, "spec": pod_spec});
    for object in [
        json!({"kind": "Deployment", "spec": {"template": template}}),
        json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": template}}}}),
        json!({"kind": "PodTemplate", "template": template}),
        json!({"kind": "ResourceClaim", "metadata": {"ownerReferences": [{"kind": "Pod"}]},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"count": 1}}]}}}),
        json!({"kind": "ResourceClaimTemplate",
            "spec": {"metadata": {"labels": {"a": "b"}}, "spec": {"devices": {"requests": []}}}}),
        json!({"kind": "Namespace", "metadata": {"labels": {"gpu-policy.io/mode": "enforce"}}}),
    ] {
        assert_eq!(tree(&object.to_string()), object);
    }
}

/// The policy decides the same on every fixture read through the review
/// decoder as on the whole object: nothing it reads was left out.
#[test]
fn the_fixtures_are_decided_alike_on_the_whole_object() {
    use crate::admission::{Endpoint, Mode, RawObject, decode, respond, subject};
    use crate::document::Document;
    use crate::policy::Evaluator;
    use crate::settings::Settings;
    use gpu_policy_test_support::review::Review;

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("the fixtures")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    let objects = crate::manifest::load(&paths, &mut std::io::empty()).expect("fixtures");
    assert!(objects.len() > 20, "{}", objects.len());
    let settings = Settings::default();
    let namespace_settings = crate::admission::namespace_settings(&settings, None, Some("ml"));
    let evaluator = Evaluator::of_cluster(&settings, &namespace_settings, None, None);
    for loaded in &objects {
        let body = Review::create(&loaded.object, "ml").body();
        let mut request = decode(&body).expect("a review");
        for endpoint in [Endpoint::Mutate, Endpoint::Validate(Mode::Warn)] {
            let pruned = respond(&request, endpoint, &subject(&request, endpoint), &evaluator);
            let whole_object =
                request.object.replace(RawObject::new(Document::from_value(&loaded.object)));
            let whole = respond(&request, endpoint, &subject(&request, endpoint), &evaluator);
            request.object = whole_object;
            assert_eq!(pruned, whole, "{}: {:?}", loaded.source, loaded.object.get("kind"));
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

/// An object denser than the budget of its body allows is read to the
/// end, kept as nothing, and denied on one line, on the pod endpoints and
/// on the namespace guard alike; a body of the same size with room is read.
#[test]
fn an_object_over_the_budget_is_denied_unread() {
    use crate::admission::{Endpoint, Mode, decode, respond, subject};
    use crate::policy::Evaluator;
    use crate::settings::Settings;
    use gpu_policy_test_support::review::Review;

    let unread = crate::admission::Unread::OverBudget.to_string();
    let settings = Settings::default();
    let namespace_settings = crate::admission::namespace_settings(&settings, None, Some("ml"));
    let evaluator = Evaluator::of_cluster(&settings, &namespace_settings, None, None);
    let pod = |tolerations: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], "tolerations": tolerations}})
    };
    // 3 bytes a node: past 1.25 bodies and 1 MiB from about 800 KB on.
    let dense = pod(Value::Array(vec![json!({}); 400_000]));
    // As many bytes, in one string a node.
    let sparse = pod(json!([{"key": "k".repeat(1_200_000)}]));
    let namespace = |labels: serde_json::Map<String, Value>| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": labels}});
    // A forged namespace: its labels are read whole.
    let labels = [("l".to_owned(), Value::Array(vec![json!({}); 400_000]))];
    let dense_namespace = namespace(labels.into_iter().collect());

    for (object, endpoints, dense) in [
        (&dense, &[Endpoint::Mutate, Endpoint::Validate(Mode::Enforce)][..], true),
        (&sparse, &[Endpoint::Mutate, Endpoint::Validate(Mode::Enforce)][..], false),
        (&dense_namespace, &[Endpoint::Namespace][..], true),
    ] {
        let body = Review::create(object, "ml").body();
        let request = decode(&body).expect("a review");
        let read = request.object.as_ref().expect("an object");
        assert_eq!(read.exceeds_budget(), dense, "{} bytes", body.len());
        assert_eq!(read.json().is_null(), dense);
        for endpoint in endpoints {
            let answer = respond(&request, *endpoint, &subject(&request, *endpoint), &evaluator);
            let message = answer.denial.as_deref().unwrap_or_default();
            if dense {
                assert!(!answer.allowed, "{endpoint:?}");
                assert!(message.contains(&unread), "{endpoint:?}: {message}");
                assert!(!message.contains('\n'), "{message}");
            } else {
                assert!(!message.contains(&unread), "{endpoint:?}: {message}");
            }
        }
    }
}
