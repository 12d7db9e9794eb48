//! `check --old PATH`: the pods of `-f` checked as updates of the pods of
//! `--old` with the same namespace and name, as the webhook answers a
//! second `kubectl apply` or `kubectl set image` (`--dry-run=server`).

use serde_json::json;

use super::*;
use crate::support::fake_api::dra::{allocated, p100_and_a100_slices, shared_claim};

/// The pods `check -o yaml` prints, after their changes.
fn printed(out: &Run) -> Vec<Value> {
    serde_saphyr::from_multiple(&out.stdout).expect("YAML out")
}

/// A GPU pod bound to `gpu-1`, and a sidecar whose author asked for every
/// card.
fn authored() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "ml", "uid": "uid-1"},
        "spec": {"nodeName": "gpu-1", "containers": [
            {"name": "train", "image": "nvidia/cuda:12.6.3-base-ubuntu24.04",
             "resources": {"limits": {"nvidia.com/gpu": 1}}},
            {"name": "sidecar", "image": "busybox",
             "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]},
        ]},
    })
}

/// Node `gpu-1` with 4 GPUs of compute capability 6.0.
const NODES: &str = "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-1\n  labels:\n    \
    nvidia.com/gpu.compute.major: \"6\"\n    nvidia.com/gpu.compute.minor: \"0\"\n\
    status:\n  allocatable: {nvidia.com/gpu: \"4\"}\n";

/// `authored()` as the webhook stores it.
fn stored(dir: &Path) -> Value {
    let file = write(dir, "authored.json", &authored().to_string());
    let out = check(&["-f", &file, "-o", "yaml"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    printed(&out).remove(0)
}

#[test]
fn a_reapply_checked_offline_is_the_stored_pod() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stored = stored(dir.path());
    let old = write(dir.path(), "stored.json", &stored.to_string());
    let mut reapplied = stored.clone();
    reapplied["spec"]["containers"][1]["env"][0]["value"] = json!("all");
    let new = write(dir.path(), "new.json", &reapplied.to_string());

    let out = check(&["-f", &new, "--old", &old, "-o", "yaml"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(printed(&out), vec![stored.clone()]);
    let text = check(&["-f", &new, "--old", &old]);
    assert!(
        text.stdout
            .contains("change     [visible-devices] replace NVIDIA_VISIBLE_DEVICES with void"),
        "{}",
        text.stdout
    );
    // Without --old the same pod is a creation, pinned as one.
    let created = check(&["-f", &new, "-o", "yaml"]);
    assert_eq!(created.code, 0, "{}", created.stderr);
    assert_eq!(
        printed(&created)[0]["spec"]["containers"][1]["env"],
        stored["spec"]["containers"][1]["env"]
    );

    // The CEL engine puts the webhook's annotation back too.
    let mut annotated = stored.clone();
    annotated["metadata"]["annotations"]["gpu-policy.io/mutations"] = json!("");
    let annotated = write(dir.path(), "annotated.json", &annotated.to_string());
    for engine in ["webhook", "cel"] {
        let out = check(&["--engine", engine, "-f", &annotated, "--old", &old, "-o", "yaml"]);
        assert_eq!(out.code, 0, "{engine}: {}", out.stderr);
        assert_eq!(
            printed(&out)[0]["metadata"]["annotations"]["gpu-policy.io/mutations"],
            stored["metadata"]["annotations"]["gpu-policy.io/mutations"],
            "{engine}"
        );
    }
}

#[test]
fn an_image_changed_in_place_is_held_to_the_bound_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nodes = write(dir.path(), "nodes.yaml", NODES);
    let stored = stored(dir.path());
    let old = write(dir.path(), "stored.json", &stored.to_string());
    let mut updated = stored.clone();
    updated["spec"]["containers"][0]["image"] = json!("nvidia/cuda:13.0.1-base-ubuntu24.04");
    let new = write(dir.path(), "new.json", &updated.to_string());

    let out = check(&["-f", &new, "--old", &old, "--nodes", &nodes]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            "[compute-affinity] gpu-policy: container \"train\": image nvidia/cuda:13.0.1-base-ubuntu24.04 \
             needs GPU compute capability >= 7.5, but node gpu-1 has 6.0"
        ),
        "{}",
        out.stdout
    );
    // A CUDA 12 image that the node runs passes.
    updated["spec"]["containers"][0]["image"] = json!("nvidia/cuda:12.8.1-base-ubuntu24.04");
    let new = write(dir.path(), "new.json", &updated.to_string());
    let out = check(&["-f", &new, "--old", &old, "--nodes", &nodes]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
}

/// A container whose GPU comes through a shared claim already allocated a
/// P100: a CUDA 13 image is below what that device offers.
#[test]
fn an_image_changed_in_place_is_held_to_its_claims_devices() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pod = |image: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "trainer", "namespace": "ml", "uid": "uid-1"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "shared-gpu"}],
                "containers": [{"name": "ctr", "image": image,
                    "resources": {"claims": [{"name": "gpu"}]}}]}})
    };
    let claim = allocated(shared_claim("ml", "shared-gpu"), &[("node-1", "gpu-0")]);
    let [p100, _] = p100_and_a100_slices();
    let cluster = write(
        dir.path(),
        "cluster.json",
        &json!({"apiVersion": "v1", "kind": "List", "items": [claim, p100]}).to_string(),
    );
    let old =
        write(dir.path(), "old.json", &pod("nvidia/cuda:12.6.3-base-ubuntu24.04").to_string());
    let new = write(dir.path(), "new.json", &pod("nvcr.io/nvidia/pytorch:25.12-py3").to_string());
    let out = check(&["-f", &new, "-f", &cluster, "--old", &old]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            "container \"ctr\" uses ResourceClaim \"shared-gpu\", allocated a device below what \
             its image needs (compute capability >= 7.5): gpu-0 of pool node-1 has compute \
             capability 6.0"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn old_and_new_cannot_both_read_stdin() {
    let out =
        check_stdin(&["--old", "-"], &gpu_pod().container("app").name("train").gpus(1).manifest());
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(out.stderr.trim(), "gpu-policy: --old and -f cannot both read stdin (-)");
}
