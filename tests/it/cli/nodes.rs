//! `check --nodes FILE`: R4 told what the cluster's nodes carry, as the
//! webhook reads them from its cache. A GPU node without GPU Feature
//! Discovery's labels gets no affinity it can never meet; without the file,
//! every floor is written.

use super::*;

/// `kubectl get nodes -o yaml` of one node offering 4 GPUs, with `labels`
/// (YAML mapping lines, indented for `metadata.labels`).
fn node_list(labels: &str) -> String {
    format!(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    \
         name: gpu-1\n    labels:\n      kubernetes.io/hostname: gpu-1\n{labels}  status:\n    \
         capacity: {{cpu: \"8\", nvidia.com/gpu: \"4\"}}\n    allocatable: {{cpu: \"8\", \
         nvidia.com/gpu: \"4\"}}\n    conditions: [{{type: Ready, status: \"True\"}}]\n"
    )
}

const GFD_LABELS: &str = "      nvidia.com/gpu.compute.major: \"8\"\n      \
    nvidia.com/gpu.compute.minor: \"0\"\n      nvidia.com/cuda.driver-version.major: \"580\"\n";

/// The pod `check -o yaml` prints, after its changes.
fn patched_pod(out: &Run) -> Value {
    let objects: Vec<Value> = serde_saphyr::from_multiple(&out.stdout).expect("YAML out");
    objects.into_iter().next().expect("the pod")
}

#[test]
fn a_fleet_without_gfd_labels_gets_no_compute_affinity() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nodes = write(dir.path(), "nodes.yaml", &node_list(""));
    let pod = gpu_pod().container("app").name("train").gpus(1).manifest();

    let out = check_stdin(&["--nodes", &nodes], &pod);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            "warning    gpu-policy: compute-affinity: no GPU node carries GPU Feature \
             Discovery's labels, so compute capability >= 5.0 is not required; deploy GPU \
             Feature Discovery, or set nvidia.com/gpu.compute.* on the GPU nodes"
        ),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("require GPU compute capability"), "{}", out.stdout);
    let yaml = check_stdin(&["--nodes", &nodes, "-o", "yaml"], &pod);
    assert_eq!(yaml.code, 0, "{}", yaml.stderr);
    assert_eq!(patched_pod(&yaml)["spec"].get("affinity"), None);

    // Labelled by GFD: the floor comes back.
    let labelled = write(dir.path(), "labelled.yaml", &node_list(GFD_LABELS));
    let yaml = check_stdin(&["--nodes", &labelled, "-o", "yaml"], &pod);
    assert_eq!(yaml.code, 0, "{}", yaml.stderr);
    let terms = &patched_pod(&yaml)["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    assert_eq!(
        *terms,
        json!([{"matchExpressions": [
            {"key": "nvidia.com/gpu.compute.major", "operator": "Gt", "values": ["4"]}]}])
    );

    // Without the file, as the webhook without a cluster: the floor.
    let yaml = check_stdin(&["-o", "yaml"], &pod);
    assert!(patched_pod(&yaml)["spec"]["affinity"].is_object(), "{}", yaml.stdout);
}

/// JSON, and a Node alone rather than a List, are read too.
#[test]
fn nodes_are_read_as_manifests_are() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1"},
                      "status": {"allocatable": {"nvidia.com/gpu": "4"}}});
    let nodes = write(dir.path(), "nodes.json", &node.to_string());
    let out = check_stdin(
        &["--nodes", &nodes, "-o", "json"],
        &gpu_pod().container("app").name("train").gpus(1).manifest(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let reports: Vec<Value> = serde_json::from_str(&out.stdout).expect("JSON out");
    let warnings = reports[0]["warnings"].to_string();
    assert!(warnings.contains("GPU Feature Discovery"), "{warnings}");
}

#[test]
fn a_file_that_is_not_nodes_is_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pod = gpu_pod().container("app").name("train").gpus(1).manifest();
    let not_nodes = write(dir.path(), "pods.yaml", &pod);
    let out = check_stdin(&["--nodes", &not_nodes], &pod);
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert_eq!(
        out.stderr.trim(),
        format!("gpu-policy: --nodes {not_nodes}: object 1: not a Node (Pod)")
    );
    let missing = dir.path().join("missing.yaml").display().to_string();
    let out = check_stdin(&["--nodes", &missing], &pod);
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(out.stderr.contains("--nodes: cannot read"), "{}", out.stderr);
    // One stdin for two inputs.
    let out = check_stdin(&["--nodes", "-"], &pod);
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(out.stderr.contains("cannot both read stdin"), "{}", out.stderr);
    // The generated policies read no nodes.
    let out = check_stdin(&["--nodes", &not_nodes, "--engine", "cel"], &pod);
    assert_eq!(out.code, 2, "{}", out.stdout);
}
