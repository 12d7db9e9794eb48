//! What `check` prints: JSON, YAML and text.

use super::*;

// ---------------------------------------------------------------------------
// JSON output

#[test]
fn json_output_has_the_documented_shape() {
    let dir = fixtures::dir().display().to_string();
    let out = check(&["-f", &dir, "-o", "json"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let reports = out.json();
    // 15 objects of fixtures 00-12, 16 of the DRA fixtures 20-24, 20 of
    // sharing/.
    assert_eq!(reports.len(), 51);
    // One report per object, in the order of the files and the documents.
    let kinds: Vec<&Value> = reports.iter().map(|r| &r["kind"]).collect();
    let objects = fixtures::all_objects();
    let expected: Vec<&Value> = objects.iter().map(|(_, o)| &o["kind"]).collect();
    assert_eq!(kinds, expected);
    let expected_keys = [
        "allowed",
        "apiVersion",
        "ignored",
        "kind",
        "name",
        "namespace",
        "patch",
        "violations",
        "warnings",
    ];
    for report in &reports {
        let object = report.as_object().expect("each element is an object");
        let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, expected_keys, "{report}");
        for key in ["apiVersion", "kind", "namespace", "name"] {
            assert!(report[key].is_string(), "{key}: {report}");
        }
        assert!(report["allowed"].is_boolean() && report["ignored"].is_boolean());
        for violation in report["violations"].as_array().expect("violations") {
            let violation = violation.as_object().expect("violation object");
            let mut keys: Vec<&str> = violation.keys().map(String::as_str).collect();
            keys.sort_unstable();
            assert_eq!(keys, ["message", "rule"]);
            assert!(violation["message"].as_str().is_some_and(|m| m.starts_with("gpu-policy: ")));
        }
        for warning in report["warnings"].as_array().expect("warnings") {
            assert!(warning.is_string(), "{warning}");
        }
        for op in report["patch"].as_array().expect("patch") {
            let name = op["op"].as_str().expect("op is a string");
            assert!(["add", "remove", "replace", "move", "copy", "test"].contains(&name), "{op}");
            assert!(op["path"].as_str().is_some_and(|p| p.starts_with('/')), "{op}");
            if ["add", "replace", "test"].contains(&name) {
                assert!(op.get("value").is_some(), "{op}");
            }
        }
    }
    // The whole report of the seed pod, including its RFC 6902 patch.
    let train = reports.iter().find(|r| r["name"] == "train").expect("the train pod");
    assert_eq!(
        train,
        &json!({
            "apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "train",
            "allowed": true, "ignored": false, "violations": [], "warnings": [],
            "patch": [
                {"op": "add", "path": "/spec/runtimeClassName", "value": "nvidia"},
                {"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "nvidia.com/gpu.compute.major",
                                               "operator": "Gt", "values": ["4"]}]}]}}}},
                {"op": "add", "path": "/metadata/annotations",
                 "value": {"gpu-policy.io/mutations": "runtime-class,compute-affinity"}}
            ]
        })
    );
}

/// The binary prints what the library computes: the `report` parts of the
/// golden files (tests/it/golden.rs) are exactly `check -o json` of the folder.
#[test]
fn json_output_matches_the_golden_reports() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    for mode in ["enforce", "warn"] {
        let mut expected = Vec::new();
        for fixture in fixtures::all_files() {
            let relative = fixture
                .strip_prefix(fixtures::dir())
                .expect("under tests/fixtures")
                .with_extension(format!("{mode}.json"));
            let path = golden.join(relative);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            let entries: Vec<Value> = serde_json::from_str(&text).expect("golden JSON");
            expected.extend(entries.into_iter().map(|mut e| e["report"].take()));
        }
        let out =
            check(&["-f", &fixtures::dir().display().to_string(), "--mode", mode, "-o", "json"]);
        assert_eq!(out.json(), expected, "{mode}");
    }
}

#[test]
fn name_falls_back_to_generate_name() {
    let input = "\
apiVersion: v1
kind: Pod
metadata: {generateName: job-runner-}
spec:
  containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Pod
metadata: {name: named, generateName: ignored-}
spec:
  containers: [{name: c, image: busybox}]
";
    let out = check_stdin(&["-o", "json"], input);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(names(&out.json()), vec!["job-runner-", "named"]);
    let text = check_stdin(&[], input);
    assert!(
        text.stdout.starts_with("Pod default/job-runner-: allowed, mutated  (-)\n"),
        "{}",
        text.stdout
    );
}

#[test]
fn namespace_flag_applies_only_to_objects_without_one() {
    let input = format!(
        "{}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: pinned, namespace: team-a}}\n\
         spec:\n  containers: [{{name: c, image: busybox}}]\n",
        gpu_pod().container("app").name("free").gpus(1).manifest()
    );
    let out = check_stdin(&["--namespace", "ml", "-o", "json"], &input);
    assert_eq!(out.code, 0, "{out:?}");
    let reports = out.json();
    assert_eq!(reports[0]["namespace"], "ml");
    assert_eq!(reports[1]["namespace"], "team-a");
    let default = check_stdin(&["-o", "json"], &input);
    assert_eq!(default.json()[0]["namespace"], "default");
}

#[test]
fn namespace_flag_decides_the_allowlist() {
    // 04 names no namespace: in kube-system it is the allowlisted exporter.
    let exporter = fixtures::path("04-nvidia-gpu-exporter-daemonset.yaml");
    let out = check(&["-f", &exporter, "--namespace", "kube-system", "-o", "json"]);
    assert_eq!(out.code, 0, "{out:?}");
    let report = &out.json()[0];
    assert_eq!(report["namespace"], "kube-system");
    assert_eq!(report["allowed"], true);
    assert_eq!(report["violations"], json!([]));
    assert_eq!(report["warnings"], json!([]));
}

#[test]
fn namespace_annotation_lowers_the_pod_maximum() {
    let pod = gpu_pod().container("app").name("pair").gpus(2).manifest();
    let out = check_stdin(
        &["--namespace-annotation", "gpu-policy.io/max-gpus-per-pod=1", "-o", "json"],
        &pod,
    );
    assert_eq!(out.code, 1, "{out:?}");
    let report = &out.json()[0];
    assert_eq!(report["allowed"], false);
    assert_eq!(report["violations"][0]["rule"], "bounded-requests");
    let message = report["violations"][0]["message"].as_str().unwrap_or("");
    assert!(message.contains("needs 2 nvidia.com/gpu"), "{message}");
    assert!(message.contains("maximum of 1 per pod"), "{message}");

    // Without the annotation the cluster maximum (8) applies.
    let out = check_stdin(&[], &pod);
    assert_eq!(out.code, 0, "{out:?}");

    // One GPU is within the lowered maximum.
    let out = check_stdin(
        &["--namespace-annotation", "gpu-policy.io/max-gpus-per-pod=1"],
        &gpu_pod().container("app").name("single").gpus(1).manifest(),
    );
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn invalid_namespace_annotation_warns_and_the_cluster_maximum_applies() {
    let out = check_stdin(
        &["--namespace-annotation", "gpu-policy.io/max-gpus-per-pod=abc", "-o", "json"],
        &gpu_pod().container("app").name("pair").gpus(2).manifest(),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let report = &out.json()[0];
    assert_eq!(report["allowed"], true);
    assert_eq!(
        report["warnings"],
        json!([
            "gpu-policy: namespace annotation gpu-policy.io/max-gpus-per-pod=\"abc\" ignored: not a whole number"
        ])
    );
    // 9 GPUs are still above the cluster maximum of 8.
    let out = check_stdin(
        &["--namespace-annotation", "gpu-policy.io/max-gpus-per-pod=abc", "-o", "json"],
        &gpu_pod().container("app").name("nine").gpus(9).manifest(),
    );
    assert_eq!(out.code, 1, "{out:?}");

    // Raising it above the cluster maximum is ignored too.
    let out = check_stdin(
        &["--namespace-annotation", "gpu-policy.io/max-gpus-per-pod=16", "-o", "json"],
        &gpu_pod().container("app").name("nine").gpus(9).manifest(),
    );
    assert_eq!(out.code, 1, "{out:?}");
    let warnings = out.json()[0]["warnings"].clone();
    assert!(
        warnings[0].as_str().is_some_and(|w| w.contains("may only lower the cluster maximum 8")),
        "{warnings}"
    );
}

// ---------------------------------------------------------------------------
// YAML output

#[test]
fn yaml_output_prints_the_mutated_objects() {
    let input = format!(
        "{}---\n{}",
        gpu_pod().container("app").name("trainer").gpus(1).manifest(),
        CUDA_NO_GPU_POD
    );
    let out = check_stdin(&["-o", "yaml"], &input);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    let documents: Vec<&str> =
        out.stdout.split("\n---\n").filter(|d| !d.trim().is_empty()).collect();
    assert_eq!(documents.len(), 2, "{}", out.stdout);
    assert!(documents[0].contains("name: trainer"), "{}", documents[0]);
    assert!(documents[0].contains("runtimeClassName: nvidia"), "{}", documents[0]);
    assert!(documents[0].contains("nvidia.com/gpu.compute.major"), "{}", documents[0]);
    assert!(documents[1].contains("name: cpu-only"), "{}", documents[1]);
    assert!(documents[1].contains("NVIDIA_VISIBLE_DEVICES"), "{}", documents[1]);
    assert!(documents[1].contains("value: void"), "{}", documents[1]);
    assert!(!documents[1].contains("runtimeClassName"), "{}", documents[1]);

    // The output is itself valid input, and checking it again changes nothing.
    let again = check_stdin(&["-o", "json"], &out.stdout);
    assert_eq!(again.code, 0, "{again:?}");
    let reports = again.json();
    assert_eq!(names(&reports), vec!["trainer", "cpu-only"]);
    for report in &reports {
        assert_eq!(report["patch"], json!([]), "{report}");
    }
}

#[test]
fn yaml_output_leaves_denied_and_ignored_objects_as_written() {
    let input = format!(
        "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm}}\ndata: {{a: b}}\n",
        half_card_pod()
    );
    let out = check_stdin(&["-o", "yaml"], &input);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(!out.stdout.contains("runtimeClassName"), "{}", out.stdout);
    assert!(!out.stdout.contains("gpu-policy.io/mutations"), "{}", out.stdout);
    assert!(out.stdout.contains("kind: ConfigMap"), "{}", out.stdout);
}

// ---------------------------------------------------------------------------
// Text output

#[test]
fn text_output_blocks_and_summary() {
    let dir = fixtures::dir().display().to_string();
    let out = check(&["-f", &dir]);
    assert!(!out.stdout.contains('\x1b'), "no colour when not a terminal");
    let lines = out.lines();
    let kinds = [
        "Pod ",
        "DaemonSet ",
        "Deployment ",
        "Job ",
        "Service ",
        "Namespace ",
        "ResourceClaimTemplate ",
        "ResourceClaim ",
    ];
    let mut blocks = 0;
    for line in &lines[..lines.len() - 1] {
        if line.starts_with("  ") {
            continue;
        }
        blocks += 1;
        assert!(
            kinds.iter().any(|kind| line.starts_with(kind)),
            "a block starts with the kind: {line}"
        );
        assert!(line.ends_with(".yaml)"), "and ends with its source: {line}");
    }
    assert_eq!(blocks, 51);
    assert_eq!(
        lines[lines.len() - 1],
        "51 objects (enforce mode): 37 allowed, 7 denied, 7 ignored"
    );
    // The Deployment's pods will be pinned: shown as a pod change.
    assert!(
        out.stdout.contains(
            "  pod change [visible-devices] pin NVIDIA_VISIBLE_DEVICES=void in container \"vllm\" (no GPU limit)\n"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "Service default/dcgm-exporter: ignored  ({})\n",
            fixtures::path("03-dcgm-exporter-daemonset-service.yaml")
        )),
        "{}",
        out.stdout
    );
}

#[test]
fn text_output_of_a_single_pod() {
    let out = check_stdin(&[], &gpu_pod().container("app").name("train").gpus(1).manifest());
    assert_eq!(
        out.stdout,
        "Pod default/train: allowed, mutated  (-)\n\
         \x20 change     [runtime-class] set runtimeClassName: nvidia (GPU pod)\n\
         \x20 change     [compute-affinity] require GPU compute capability >= 5.0 \
         (image nvidia/cuda:12.6.3-base-ubuntu24.04)\n\
         1 objects (enforce mode): 1 allowed, 0 denied, 0 ignored\n"
    );
}
