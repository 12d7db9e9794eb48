//! End-to-end tests of `gpu-policy check`: the built binary, run as a
//! process, its exit status, stdout and stderr.
//!
//! Exit status contract (SPEC.md section 5): 0 when every object is allowed,
//! 1 when something is denied, 2 for bad input (unreadable path, YAML or
//! JSON error, bad flags, bad config).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::fixtures;

/// What one run of the binary gave.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Vec<Value> {
        let value: Value = serde_json::from_str(&self.stdout)
            .unwrap_or_else(|err| panic!("stdout is not JSON ({err}):\n{}", self.stdout));
        match value {
            Value::Array(items) => items,
            other => panic!("expected one JSON array, got {other}"),
        }
    }

    fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }

    fn last_line(&self) -> &str {
        self.stdout.lines().last().unwrap_or("")
    }
}

/// Runs the binary with `args`, feeding `stdin` (empty when `None`).
fn run(args: &[&str], stdin: Option<&str>) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpu-policy"))
        .args(args)
        .env_remove("NO_COLOR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    {
        let mut input = child.stdin.take().expect("stdin is piped");
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).expect("write stdin");
        }
    }
    let output = child.wait_with_output().expect("the binary finishes");
    Run {
        code: output.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

fn check(args: &[&str]) -> Run {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    run(&all, None)
}

fn check_stdin(args: &[&str], input: &str) -> Run {
    let mut all = vec!["check", "-f", "-"];
    all.extend_from_slice(args);
    run(&all, Some(input))
}

fn write(dir: &Path, relative: &str, text: &str) -> String {
    let path = dir.join(relative);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create folder");
    }
    std::fs::write(&path, text).expect("write file");
    path.display().to_string()
}

/// A pod named `name` with one container `app` asking for `gpus` (a YAML
/// scalar, e.g. `1` or `"500m"`) as a limit.
fn gpu_pod(name: &str, gpus: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  \
         - name: app\n    image: nvidia/cuda:12.6.3-base-ubuntu24.04\n    resources:\n      \
         limits:\n        nvidia.com/gpu: {gpus}\n"
    )
}

/// A pod without GPU whose image (a CUDA base) would see every card.
const CUDA_NO_GPU_POD: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: cpu-only
spec:
  containers:
  - name: app
    image: nvidia/cuda:12.6.3-base-ubuntu24.04
";

fn names(reports: &[Value]) -> Vec<&str> {
    reports
        .iter()
        .map(|r| r["name"].as_str().expect("name is a string"))
        .collect()
}

// ---------------------------------------------------------------------------
// Exit status

#[test]
fn allowed_gpu_pod_exits_0() {
    let out = check(&["-f", &fixtures::path("11-seed-train-pod.yaml")]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    assert!(
        out.lines()[0].starts_with("Pod default/train: allowed, mutated  ("),
        "{}",
        out.stdout
    );
    assert_eq!(
        out.last_line(),
        "1 objects (enforce mode): 1 allowed, 0 denied, 0 ignored"
    );
}

#[test]
fn fractional_gpu_limit_is_denied_with_exit_1() {
    let out = check_stdin(&["-o", "json"], &gpu_pod("half", "\"500m\""));
    assert_eq!(out.code, 1, "{out:?}");
    let reports = out.json();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0]["allowed"], false);
    assert_eq!(
        reports[0]["patch"],
        json!([]),
        "denied pods are not patched"
    );
    assert_eq!(
        reports[0]["violations"],
        json!([{
            "rule": "bounded-requests",
            "message": "gpu-policy: container \"app\": limits.nvidia.com/gpu is not a whole number; \
                        GPUs are whole devices: use an integer such as \"1\""
        }])
    );
    // The same in text.
    let text = check_stdin(&[], &gpu_pod("half", "\"500m\""));
    assert_eq!(text.code, 1);
    assert!(
        text.stdout.starts_with("Pod default/half: DENIED  (-)\n"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("  violation  [bounded-requests] gpu-policy: container \"app\"")
    );
}

#[test]
fn one_denied_object_makes_the_whole_run_exit_1() {
    let input = format!("{}---\n{}", gpu_pod("fine", "1"), gpu_pod("too-many", "9"));
    let out = check_stdin(&["-o", "json"], &input);
    assert_eq!(out.code, 1, "{out:?}");
    let reports = out.json();
    assert_eq!(names(&reports), vec!["fine", "too-many"]);
    assert_eq!(reports[0]["allowed"], true);
    assert_eq!(reports[1]["allowed"], false);
    assert_eq!(reports[1]["violations"][0]["rule"], "bounded-requests");
}

#[test]
fn fixture_folder_exits_1_because_the_exporter_outside_kube_system_is_denied() {
    let dir = fixtures::dir().display().to_string();
    let out = check(&["-f", &dir]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(
        out.last_line(),
        "13 objects (enforce mode): 11 allowed, 1 denied, 1 ignored"
    );
    let denied: Vec<&str> = out
        .lines()
        .into_iter()
        .filter(|line| line.contains("DENIED"))
        .collect();
    assert_eq!(
        denied,
        vec![format!(
            "DaemonSet default/nvidia-gpu-exporter: DENIED  ({})",
            fixtures::path("04-nvidia-gpu-exporter-daemonset.yaml")
        )]
    );
    // README.md in the folder is not a manifest: not read (it would not parse).
    assert!(!out.stdout.contains("README"), "{}", out.stdout);

    let warn = check(&["-f", &dir, "--mode", "warn"]);
    assert_eq!(warn.code, 0, "{warn:?}");
    assert_eq!(
        warn.last_line(),
        "13 objects (warn mode): 12 allowed, 0 denied, 1 ignored"
    );
}

#[test]
fn missing_path_exits_2() {
    let out = check(&["-f", "/nonexistent/gpu-policy/pod.yaml"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr
            .starts_with("gpu-policy: cannot read /nonexistent/gpu-policy/pod.yaml: "),
        "{}",
        out.stderr
    );
}

#[test]
fn broken_yaml_exits_2_naming_the_file_and_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(
        dir.path(),
        "broken.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n",
    );
    let out = check(&["-f", &path]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    let stderr = out.stderr.trim_end();
    assert!(!stderr.contains('\n'), "one line: {stderr}");
    assert!(
        stderr.starts_with(&format!("gpu-policy: {path}: invalid YAML")),
        "{stderr}"
    );
    assert!(stderr.contains("line"), "{stderr}");
}

#[test]
fn broken_yaml_in_a_folder_names_that_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "a-good.yaml", &gpu_pod("good", "1"));
    let bad = write(
        dir.path(),
        "sub/b-bad.yml",
        "kind: Pod\nspec: {containers: [\n",
    );
    let out = check(&["-f", &dir.path().display().to_string()]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains(&bad), "{}", out.stderr);
    assert!(out.stderr.contains("line"), "{}", out.stderr);
}

#[test]
fn broken_json_exits_2_naming_the_file_and_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(
        dir.path(),
        "broken.json",
        "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": }\n}\n",
    );
    let out = check(&["-f", &path]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.starts_with(&format!(
            "gpu-policy: {path}: invalid JSON at line 4, column"
        )),
        "{}",
        out.stderr
    );
    // From stdin too.
    let out = check_stdin(&[], "{\"kind\": \"Pod\",");
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr
            .starts_with("gpu-policy: -: invalid YAML: error: line 1"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_scalar_document_is_bad_input() {
    let out = check_stdin(&[], "kind: Pod\nmetadata: {name: a}\n---\njust some text\n");
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        out.stderr.trim_end(),
        "gpu-policy: -: document 2 is not a Kubernetes object (found a string)"
    );
}

#[test]
fn bad_flags_exit_2() {
    let pod = fixtures::path("11-seed-train-pod.yaml");
    for args in [
        vec!["check", "-f", &pod, "--no-such-flag"],
        vec!["check", "-f", &pod, "--mode", "strict"],
        vec!["check", "-f", &pod, "-o", "xml"],
        vec![
            "check",
            "-f",
            &pod,
            "--namespace-annotation",
            "no-equals-sign",
        ],
        vec!["check"],
        vec!["no-such-command"],
        vec![],
    ] {
        let out = run(&args, None);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
        assert!(!out.stderr.is_empty(), "{args:?}: nothing on stderr");
    }
    let out = run(&["check", "-f", &pod, "--mode", "strict"], None);
    assert!(out.stderr.contains("strict"), "{}", out.stderr);
}

#[test]
fn help_and_version_exit_0() {
    let help = run(&["check", "--help"], None);
    assert_eq!(help.code, 0, "{help:?}");
    assert!(
        help.stdout.contains("--namespace-annotation"),
        "{}",
        help.stdout
    );
    let version = run(&["--version"], None);
    assert_eq!(version.code, 0, "{version:?}");
    assert_eq!(
        version.stdout.trim_end(),
        format!("gpu-policy {}", env!("CARGO_PKG_VERSION"))
    );
}

// ---------------------------------------------------------------------------
// Input

#[test]
fn stdin_multi_document_yaml() {
    let input = format!(
        "# leading comment\n{}---\n---\n{}...\n",
        gpu_pod("first", "1"),
        CUDA_NO_GPU_POD
    );
    let out = check_stdin(&["-o", "json"], &input);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(names(&out.json()), vec!["first", "cpu-only"]);

    let text = check_stdin(&[], &input);
    assert_eq!(text.code, 0, "{text:?}");
    assert_eq!(text.lines()[0], "Pod default/first: allowed, mutated  (-)");
    assert_eq!(
        text.last_line(),
        "2 objects (enforce mode): 2 allowed, 0 denied, 0 ignored"
    );
}

#[test]
fn stdin_json_object_and_array() {
    let object = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}"#;
    let out = check_stdin(&["-o", "json"], object);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(names(&out.json()), vec!["j"]);

    let array = format!("[{object}, {}]", object.replace("\"j\"", "\"k\""));
    let out = check_stdin(&["-o", "json"], &array);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(names(&out.json()), vec!["j", "k"]);
}

#[test]
fn folders_are_walked_recursively_for_manifest_extensions_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "b.yaml", &gpu_pod("from-yaml", "1"));
    write(dir.path(), "a/c.yml", &gpu_pod("from-yml", "1"));
    write(
        dir.path(),
        "a/deeper/d.json",
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "from-json"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}"#,
    );
    // Not manifests: never read, although they would not parse.
    write(dir.path(), "notes.txt", "kind: [broken\n");
    write(dir.path(), "a/README.md", "# {{ not yaml: [\n");
    write(dir.path(), "a/deeper/pod.yaml.bak", "kind: [broken\n");
    write(dir.path(), "Makefile", "all:\n\t{broken\n");
    let out = check(&["-f", &dir.path().display().to_string(), "-o", "json"]);
    assert_eq!(out.code, 0, "{out:?}");
    // Sorted by path: a/c.yml, a/deeper/d.json, b.yaml.
    assert_eq!(
        names(&out.json()),
        vec!["from-yml", "from-json", "from-yaml"]
    );

    // A folder and a file together, in the order given.
    let file = dir.path().join("b.yaml").display().to_string();
    let out = check(&[
        "-f",
        &file,
        "-f",
        &dir.path().join("a").display().to_string(),
        "-o",
        "json",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        names(&out.json()),
        vec!["from-yaml", "from-yml", "from-json"]
    );
}

#[test]
fn an_empty_folder_checks_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "ignored.txt", "hello");
    let out = check(&["-f", &dir.path().display().to_string()]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.stdout,
        "0 objects (enforce mode): 0 allowed, 0 denied, 0 ignored\n"
    );
}

#[test]
fn kind_list_is_flattened() {
    let input = "\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: listed-gpu}
  spec:
    containers:
    - {name: app, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}
- apiVersion: v1
  kind: Pod
  metadata: {name: listed-cpu}
  spec:
    containers:
    - {name: app, image: busybox}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: listed-config}
";
    let out = check_stdin(&["-o", "json"], input);
    assert_eq!(out.code, 0, "{out:?}");
    let reports = out.json();
    assert_eq!(
        names(&reports),
        vec!["listed-gpu", "listed-cpu", "listed-config"]
    );
    assert_eq!(reports[2]["ignored"], true);
    assert!(
        reports.iter().all(|r| r["kind"] != "List"),
        "the List itself is not an object"
    );
}

// ---------------------------------------------------------------------------
// JSON output

#[test]
fn json_output_has_the_documented_shape() {
    let dir = fixtures::dir().display().to_string();
    let out = check(&["-f", &dir, "-o", "json"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let reports = out.json();
    assert_eq!(reports.len(), 13);
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
            assert!(
                violation["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("gpu-policy: "))
            );
        }
        for warning in report["warnings"].as_array().expect("warnings") {
            assert!(warning.is_string(), "{warning}");
        }
        for op in report["patch"].as_array().expect("patch") {
            let name = op["op"].as_str().expect("op is a string");
            assert!(
                ["add", "remove", "replace", "move", "copy", "test"].contains(&name),
                "{op}"
            );
            assert!(
                op["path"].as_str().is_some_and(|p| p.starts_with('/')),
                "{op}"
            );
            if ["add", "replace", "test"].contains(&name) {
                assert!(op.get("value").is_some(), "{op}");
            }
        }
    }
    // The whole report of the seed pod, including its RFC 6902 patch.
    let train = reports
        .iter()
        .find(|r| r["name"] == "train")
        .expect("the train pod");
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
/// golden files (tests/golden.rs) are exactly `check -o json` of the folder.
#[test]
fn json_output_matches_the_golden_reports() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut stems: Vec<String> = std::fs::read_dir(fixtures::dir())
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            p.file_stem()
                .and_then(|s| s.to_str())
                .expect("stem")
                .to_owned()
        })
        .collect();
    stems.sort();
    for mode in ["enforce", "warn"] {
        let mut expected = Vec::new();
        for stem in &stems {
            let path = golden.join(format!("{stem}.{mode}.json"));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            let entries: Vec<Value> = serde_json::from_str(&text).expect("golden JSON");
            expected.extend(entries.into_iter().map(|mut e| e["report"].take()));
        }
        let out = check(&[
            "-f",
            &fixtures::dir().display().to_string(),
            "--mode",
            mode,
            "-o",
            "json",
        ]);
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
        text.stdout
            .starts_with("Pod default/job-runner-: allowed, mutated  (-)\n"),
        "{}",
        text.stdout
    );
}

#[test]
fn namespace_flag_applies_only_to_objects_without_one() {
    let input = format!(
        "{}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: pinned, namespace: team-a}}\n\
         spec:\n  containers: [{{name: c, image: busybox}}]\n",
        gpu_pod("free", "1")
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
    let pod = gpu_pod("pair", "2");
    let out = check_stdin(
        &[
            "--namespace-annotation",
            "gpu-policy.io/max-gpus-per-pod=1",
            "-o",
            "json",
        ],
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
        &gpu_pod("single", "1"),
    );
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn invalid_namespace_annotation_warns_and_the_cluster_maximum_applies() {
    let out = check_stdin(
        &[
            "--namespace-annotation",
            "gpu-policy.io/max-gpus-per-pod=abc",
            "-o",
            "json",
        ],
        &gpu_pod("pair", "2"),
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
        &[
            "--namespace-annotation",
            "gpu-policy.io/max-gpus-per-pod=abc",
            "-o",
            "json",
        ],
        &gpu_pod("nine", "9"),
    );
    assert_eq!(out.code, 1, "{out:?}");

    // Raising it above the cluster maximum is ignored too.
    let out = check_stdin(
        &[
            "--namespace-annotation",
            "gpu-policy.io/max-gpus-per-pod=16",
            "-o",
            "json",
        ],
        &gpu_pod("nine", "9"),
    );
    assert_eq!(out.code, 1, "{out:?}");
    let warnings = out.json()[0]["warnings"].clone();
    assert!(
        warnings[0]
            .as_str()
            .is_some_and(|w| w.contains("may only lower the cluster maximum 8")),
        "{warnings}"
    );
}

// ---------------------------------------------------------------------------
// Modes

#[test]
fn warn_mode_exits_0_with_short_prefixed_warnings() {
    let input = format!("{}---\n{}", gpu_pod("half", "\"500m\""), CUDA_NO_GPU_POD);
    let out = check_stdin(&["--mode", "warn", "-o", "json"], &input);
    assert_eq!(out.code, 0, "{out:?}");
    let reports = out.json();
    let mut all = Vec::new();
    for report in &reports {
        assert_eq!(report["allowed"], true, "{report}");
        assert_eq!(report["patch"], json!([]), "warn mode changes nothing");
        for warning in report["warnings"].as_array().expect("warnings") {
            let warning = warning.as_str().expect("a string");
            assert!(warning.starts_with("gpu-policy:"), "{warning}");
            assert!(warning.chars().count() < 120, "{warning}");
            all.push(warning.to_owned());
        }
    }
    assert_eq!(
        all,
        vec![
            "gpu-policy: [bounded-requests] would deny: container \"app\": limits.nvidia.com/gpu is not a whole number; GPUs are whol…",
            "gpu-policy: [runtime-class] would set runtimeClassName: nvidia (GPU pod)",
            "gpu-policy: [compute-affinity] would require GPU compute capability >= 5.0 (image nvidia/cuda:12.6.3-base-ubuntu24.04)",
            "gpu-policy: [visible-devices] would pin NVIDIA_VISIBLE_DEVICES=void in container \"app\" (no GPU limit)",
        ]
    );
    let text = check_stdin(&["--mode", "warn"], &input);
    assert_eq!(text.code, 0);
    assert_eq!(
        text.last_line(),
        "2 objects (warn mode): 2 allowed, 0 denied, 0 ignored"
    );
}

#[test]
fn audit_mode_exits_0_without_warnings_or_patch() {
    let input = format!("{}---\n{}", gpu_pod("half", "\"500m\""), CUDA_NO_GPU_POD);
    let out = check_stdin(&["--mode", "audit", "-o", "json"], &input);
    assert_eq!(out.code, 0, "{out:?}");
    let reports = out.json();
    assert_eq!(reports.len(), 2);
    for report in &reports {
        assert_eq!(report["allowed"], true, "{report}");
        assert_eq!(report["warnings"], json!([]), "{report}");
        assert_eq!(report["patch"], json!([]), "{report}");
    }
    // The violation is still reported, for the audit trail.
    assert_eq!(reports[0]["violations"][0]["rule"], "bounded-requests");
    let yaml = check_stdin(&["--mode", "audit", "-o", "yaml"], CUDA_NO_GPU_POD);
    assert_eq!(yaml.code, 0);
    assert!(
        !yaml.stdout.contains("NVIDIA_VISIBLE_DEVICES"),
        "{}",
        yaml.stdout
    );
}

// ---------------------------------------------------------------------------
// YAML output

#[test]
fn yaml_output_prints_the_mutated_objects() {
    let input = format!("{}---\n{}", gpu_pod("trainer", "1"), CUDA_NO_GPU_POD);
    let out = check_stdin(&["-o", "yaml"], &input);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    let documents: Vec<&str> = out
        .stdout
        .split("\n---\n")
        .filter(|d| !d.trim().is_empty())
        .collect();
    assert_eq!(documents.len(), 2, "{}", out.stdout);
    assert!(documents[0].contains("name: trainer"), "{}", documents[0]);
    assert!(
        documents[0].contains("runtimeClassName: nvidia"),
        "{}",
        documents[0]
    );
    assert!(
        documents[0].contains("nvidia.com/gpu.compute.major"),
        "{}",
        documents[0]
    );
    assert!(documents[1].contains("name: cpu-only"), "{}", documents[1]);
    assert!(
        documents[1].contains("NVIDIA_VISIBLE_DEVICES"),
        "{}",
        documents[1]
    );
    assert!(documents[1].contains("value: void"), "{}", documents[1]);
    assert!(
        !documents[1].contains("runtimeClassName"),
        "{}",
        documents[1]
    );

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
        gpu_pod("half", "\"500m\"")
    );
    let out = check_stdin(&["-o", "yaml"], &input);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(!out.stdout.contains("runtimeClassName"), "{}", out.stdout);
    assert!(
        !out.stdout.contains("gpu-policy.io/mutations"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("kind: ConfigMap"), "{}", out.stdout);
}

// ---------------------------------------------------------------------------
// Config

#[test]
fn config_file_changes_decisions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write(dir.path(), "config.yaml", "maxPerContainer: 1\n");
    let pod = gpu_pod("pair", "2");
    assert_eq!(check_stdin(&[], &pod).code, 0);
    let out = check_stdin(&["--config", &config, "-o", "json"], &pod);
    assert_eq!(out.code, 1, "{out:?}");
    let message = out.json()[0]["violations"][0]["message"].clone();
    assert_eq!(
        message,
        "gpu-policy: container \"app\" must not ask for more than 1 nvidia.com/gpu per container; \
         split the work or lower the limit"
    );

    // A configured pin value is what gets pinned.
    let config = write(dir.path(), "pin.yaml", "visibleDevicesPin: none\n");
    let out = check_stdin(&["--config", &config, "-o", "yaml"], CUDA_NO_GPU_POD);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("value: none"), "{}", out.stdout);
}

#[test]
fn config_with_an_unknown_field_exits_2_naming_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write(dir.path(), "typo.yaml", "maxPerContainers: 1\n");
    let out = check(&[
        "-f",
        &fixtures::path("11-seed-train-pod.yaml"),
        "--config",
        &config,
    ]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr
            .starts_with(&format!("gpu-policy: config file {config}: ")),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("maxPerContainers"), "{}", out.stderr);
}

#[test]
fn invalid_or_missing_config_exits_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pod = fixtures::path("11-seed-train-pod.yaml");
    let config = write(dir.path(), "all.yaml", "visibleDevicesPin: all\n");
    let out = check(&["-f", &pod, "--config", &config]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("visibleDevicesPin"), "{}", out.stderr);

    let missing = dir.path().join("absent.yaml").display().to_string();
    let out = check(&["-f", &pod, "--config", &missing]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains(&missing), "{}", out.stderr);
}

// ---------------------------------------------------------------------------
// Text output

#[test]
fn text_output_blocks_and_summary() {
    let dir = fixtures::dir().display().to_string();
    let out = check(&["-f", &dir]);
    assert!(
        !out.stdout.contains('\x1b'),
        "no colour when not a terminal"
    );
    let lines = out.lines();
    let kinds = ["Pod ", "DaemonSet ", "Deployment ", "Job ", "Service "];
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
    assert_eq!(blocks, 13);
    assert_eq!(
        lines[lines.len() - 1],
        "13 objects (enforce mode): 11 allowed, 1 denied, 1 ignored"
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
    let out = check_stdin(&[], &gpu_pod("train", "1"));
    assert_eq!(
        out.stdout,
        "Pod default/train: allowed, mutated  (-)\n\
         \x20 change     [runtime-class] set runtimeClassName: nvidia (GPU pod)\n\
         \x20 change     [compute-affinity] require GPU compute capability >= 5.0 \
         (image nvidia/cuda:12.6.3-base-ubuntu24.04)\n\
         1 objects (enforce mode): 1 allowed, 0 denied, 0 ignored\n"
    );
}

// ---------------------------------------------------------------------------
// Known bugs in src/ (reported, not fixed here). Run with
// `cargo test --test cli -- --ignored`; remove the `ignore` once fixed.

#[test]
fn yaml_flow_style_and_json_documents_in_a_yaml_file_are_yaml() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Valid YAML (flow style), not valid JSON.
    let flow = write(
        dir.path(),
        "flow.yaml",
        "{apiVersion: v1, kind: Pod, metadata: {name: flow}, \
         spec: {containers: [{name: c, image: busybox}]}}\n",
    );
    let out = check(&["-f", &flow, "-o", "json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(names(&out.json()), vec!["flow"]);
    // A YAML stream of JSON documents, as `kubectl apply -f` accepts.
    let stream = write(
        dir.path(),
        "stream.yaml",
        "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"a\"}, \
         \"spec\": {\"containers\": [{\"name\": \"c\"}]}}\n---\n\
         {\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"b\"}, \
         \"spec\": {\"containers\": [{\"name\": \"c\"}]}}\n",
    );
    let out = check(&["-f", &stream, "-o", "json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(names(&out.json()), vec!["a", "b"]);
}

#[cfg(unix)]
#[test]
fn a_symlink_cycle_does_not_repeat_manifests() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "a/pod.yaml", &gpu_pod("once", "1"));
    std::os::unix::fs::symlink("..", dir.path().join("a/loop")).expect("symlink");
    let out = check(&["-f", &dir.path().display().to_string(), "-o", "json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(names(&out.json()), vec!["once"]);
}
