//! End-to-end tests of `gpu-policy check`: the built binary, run as a
//! process, its exit status, stdout and stderr.
//!
//! Exit status contract (docs/policy.md#decisions): 0 when every object is allowed,
//! 1 when something is denied, 2 for bad input (unreadable path, YAML or
//! JSON error, bad flags, bad config).

use std::path::Path;

use serde_json::{Value, json};

use crate::support::fixtures;
use crate::support::process::{self, Run};

mod dra_floors;
mod dra_products;
mod input;
mod modes;
mod nodes;
mod output;
mod products;
mod updates;

/// Runs the binary with `args`, feeding `stdin` (empty when `None`).
fn run(args: &[&str], stdin: Option<&str>) -> Run {
    process::gpu_policy(args, stdin)
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

use crate::support::gpu_pod;

/// The CLI tests' GPU pod: a container `app` asking for half a card.
fn half_card_pod() -> String {
    gpu_pod().container("app").name("half").gpus("500m").manifest()
}

/// [`half_card_pod`], and a CUDA pod asking for no GPU.
fn half_card_and_cuda_pods() -> String {
    format!("{}---\n{CUDA_NO_GPU_POD}", half_card_pod())
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
    reports.iter().map(|r| r["name"].as_str().expect("name is a string")).collect()
}

// ---------------------------------------------------------------------------
// Exit status

#[test]
fn allowed_gpu_pod_exits_0() {
    let out = check(&["-f", &fixtures::path("11-seed-train-pod.yaml")]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    assert!(out.lines()[0].starts_with("Pod default/train: allowed, mutated  ("), "{}", out.stdout);
    assert_eq!(out.last_line(), "1 objects (enforce mode): 1 allowed, 0 denied, 0 ignored");
}

#[test]
fn fractional_gpu_limit_is_denied_with_exit_1() {
    let out = check_stdin(&["-o", "json"], &half_card_pod());
    assert_eq!(out.code, 1, "{out:?}");
    let reports = out.json();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0]["allowed"], false);
    assert_eq!(reports[0]["patch"], json!([]), "denied pods are not patched");
    assert_eq!(
        reports[0]["violations"],
        json!([{
            "rule": "bounded-requests",
            "message": "gpu-policy: container \"app\": limits.nvidia.com/gpu is not a whole number; \
                        GPUs are whole devices: use an integer such as \"1\""
        }])
    );
    // The same in text.
    let text = check_stdin(&[], &half_card_pod());
    assert_eq!(text.code, 1);
    assert!(text.stdout.starts_with("Pod default/half: DENIED  (-)\n"), "{}", text.stdout);
    assert!(text.stdout.contains("  violation  [bounded-requests] gpu-policy: container \"app\""));
}

#[test]
fn one_denied_object_makes_the_whole_run_exit_1() {
    let input = format!(
        "{}---\n{}",
        gpu_pod().container("app").name("fine").gpus(1).manifest(),
        gpu_pod().container("app").name("too-many").gpus(9).manifest()
    );
    let out = check_stdin(&["-o", "json"], &input);
    assert_eq!(out.code, 1, "{out:?}");
    let reports = out.json();
    assert_eq!(names(&reports), vec!["fine", "too-many"]);
    assert_eq!(reports[0]["allowed"], true);
    assert_eq!(reports[1]["allowed"], false);
    assert_eq!(reports[1]["violations"][0]["rule"], "bounded-requests");
}

/// A template asking for every GPU of a node, and a pod using it: the
/// template is denied (R2), the pod resolves its claim from it and is allowed
/// without a pin; another pod naming a template missing from the input is
/// warned and pinned, never denied.
#[test]
fn dra_claims_are_bounded_and_resolved_from_the_same_input() {
    let input = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: every-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All}
---
apiVersion: v1
kind: Pod
metadata: {name: user, namespace: ml}
spec:
  containers:
  - name: ctr
    image: ubuntu:22.04
    resources:
      claims: [{name: gpu}]
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: every-gpu}
---
apiVersion: v1
kind: Pod
metadata: {name: orphan, namespace: ml}
spec:
  containers:
  - name: ctr
    image: ubuntu:22.04
    resources:
      claims: [{name: gpu}]
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: elsewhere}
"#;
    let out = check_stdin(&["-o", "json"], input);
    assert_eq!(out.code, 1, "{out:?}");
    let reports = out.json();
    assert_eq!(names(&reports), vec!["every-gpu", "user", "orphan"]);
    assert_eq!(reports[0]["allowed"], false);
    assert_eq!(reports[0]["violations"][0]["rule"], "bounded-requests");
    assert_eq!(
        reports[0]["violations"][0]["message"],
        "gpu-policy: request \"gpu\" asks for every GPU of a node (allocationMode: All); \
         use allocationMode: ExactCount with a count"
    );
    // The pod's count is unbounded too: above maxPerPod.
    assert_eq!(reports[1]["allowed"], false);
    assert_eq!(reports[1]["violations"][0]["rule"], "bounded-requests");
    assert_eq!(reports[1]["patch"], serde_json::json!([]));
    assert_eq!(reports[2]["allowed"], true);
    assert_eq!(
        reports[2]["warnings"][0],
        "gpu-policy: claim \"gpu\" unresolved, container \"ctr\" stays pinned: \
         ResourceClaimTemplate \"elsewhere\" not found"
    );
    assert_eq!(
        reports[2]["patch"][0]["value"],
        serde_json::json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}])
    );
}

#[test]
fn fixture_folder_exits_1_because_the_exporter_and_gfd_outside_kube_system_are_denied() {
    let dir = fixtures::dir().display().to_string();
    let out = check(&["-f", &dir]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(
        out.last_line(),
        // 15 objects of 00-12 and 16 of the DRA fixtures 20-24: their 7 pods
        // and 4 claims and templates are allowed, their 5 Namespaces ignored;
        // and the 20 of sharing/ (18 pods, a template, a Namespace), of which
        // the 5 that KAI-Scheduler and HAMi refuse are denied.
        "51 objects (enforce mode): 37 allowed, 7 denied, 7 ignored"
    );
    let denied: Vec<&str> =
        out.lines().into_iter().filter(|line| line.contains("DENIED")).collect();
    assert_eq!(
        denied,
        vec![
            // privileged without a GPU request
            format!(
                "DaemonSet default/gpu-feature-discovery: DENIED  ({})",
                fixtures::path("02-gpu-feature-discovery-daemonset.yaml")
            ),
            // the reserved runtime class without a GPU request
            format!(
                "DaemonSet default/nvidia-gpu-exporter: DENIED  ({})",
                fixtures::path("04-nvidia-gpu-exporter-daemonset.yaml")
            ),
            // what KAI-Scheduler and HAMi refuse themselves
            format!(
                "Pod default/fraction-too-big: DENIED  ({})",
                fixtures::path("sharing/34-kai-denied-fraction-above-one.yaml")
            ),
            format!(
                "Pod default/fraction-and-memory: DENIED  ({})",
                fixtures::path("sharing/35-kai-denied-fraction-and-memory.yaml")
            ),
            format!(
                "Pod default/fraction-and-whole-gpu: DENIED  ({})",
                fixtures::path("sharing/36-kai-denied-fraction-and-whole-gpu.yaml")
            ),
            format!(
                "Pod default/gpumem-percentage-101: DENIED  ({})",
                fixtures::path("sharing/47-hami-denied-gpumem-percentage-101.yaml")
            ),
            format!(
                "Pod default/mixed-pod: DENIED  ({})",
                fixtures::path("sharing/48-hami-denied-privileged-sidecar.yaml")
            ),
        ]
    );
    // README.md in the folder is not a manifest: not read (it would not parse).
    assert!(!out.stdout.contains("README"), "{}", out.stdout);

    let warn = check(&["-f", &dir, "--mode", "warn"]);
    assert_eq!(warn.code, 0, "{warn:?}");
    assert_eq!(warn.last_line(), "51 objects (warn mode): 44 allowed, 0 denied, 7 ignored");
}

#[test]
fn missing_path_exits_2() {
    let out = check(&["-f", "/nonexistent/gpu-policy/pod.yaml"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr.starts_with("gpu-policy: cannot read /nonexistent/gpu-policy/pod.yaml: "),
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
    assert!(stderr.starts_with(&format!("gpu-policy: {path}: invalid YAML")), "{stderr}");
    assert!(stderr.contains("line"), "{stderr}");
}

#[test]
fn broken_yaml_in_a_folder_names_that_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "a-good.yaml", &gpu_pod().container("app").name("good").gpus(1).manifest());
    let bad = write(dir.path(), "sub/b-bad.yml", "kind: Pod\nspec: {containers: [\n");
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
        out.stderr.starts_with(&format!("gpu-policy: {path}: invalid JSON at line 4, column")),
        "{}",
        out.stderr
    );
    // From stdin too.
    let out = check_stdin(&[], "{\"kind\": \"Pod\",");
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.starts_with("gpu-policy: -: invalid YAML: error: line 1"), "{}", out.stderr);
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
        vec!["check", "-f", &pod, "--namespace-annotation", "no-equals-sign"],
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
    assert!(help.stdout.contains("--namespace-annotation"), "{}", help.stdout);
    let version = run(&["--version"], None);
    assert_eq!(version.code, 0, "{version:?}");
    assert_eq!(version.stdout.trim_end(), format!("gpu-policy {}", env!("CARGO_PKG_VERSION")));
}
