//! `check` on the DRA driver's quickstart with a CUDA 13 image: the floors
//! go into the claims, which `check` reports, not onto node labels.

use super::*;

/// Fixture 20 (`gpu-test1`: two pods, each with a claim from the template
/// `single-gpu`), its image an NGC CUDA 13.1 one.
fn quickstart_on_cuda_13() -> String {
    let text =
        std::fs::read_to_string(fixtures::dir().join("20-dra-gpu-test1-template-per-pod.yaml"))
            .expect("fixture 20");
    assert!(text.contains("image: ubuntu:22.04"));
    text.replace("image: ubuntu:22.04", "image: nvcr.io/nvidia/pytorch:25.12-py3")
}

const SELECTOR: &str = "device.driver != \"gpu.nvidia.com\" || ((!(\"cudaComputeCapability\" in \
    device.attributes[\"gpu.nvidia.com\"]) || device.attributes[\"gpu.nvidia.com\"]\
    .cudaComputeCapability.compareTo(semver(\"7.5.0\")) >= 0))";

#[test]
fn check_reports_the_selector_the_claims_will_get() {
    let out = check_stdin(&[], &quickstart_on_cuda_13());
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    for pod in ["pod1", "pod2"] {
        let line = format!(
            "change     [compute-affinity] give the claims made for {pod} from single-gpu: request \"gpu\" the selector {SELECTOR}"
        );
        assert!(out.stdout.contains(&line), "{line}\n{}", out.stdout);
    }
    assert!(
        out.stdout.contains(
            "change     [compute-affinity] require compute capability >= 7.5 of the GPUs of the \
             claims made for the pod (image nvcr.io/nvidia/pytorch:25.12-py3), recorded in \
             gpu-policy.io/gpu-needs"
        ),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("require GPU compute capability"), "{}", out.stdout);
}

#[test]
fn check_yaml_prints_the_annotation_and_no_node_affinity() {
    let out = check_stdin(&["-o", "yaml"], &quickstart_on_cuda_13());
    assert_eq!(out.code, 0, "{}", out.stderr);
    let pods: Vec<Value> = serde_saphyr::from_multiple(&out.stdout)
        .expect("multi-document YAML")
        .into_iter()
        .filter(|o: &Value| o["kind"] == "Pod")
        .collect();
    assert_eq!(pods.len(), 2);
    for pod in &pods {
        assert_eq!(pod["spec"].get("affinity"), None, "{pod}");
        assert_eq!(
            pod["metadata"]["annotations"]["gpu-policy.io/gpu-needs"],
            json!(
                "{\"computeCapability\":\"7.5\",\"images\":[\"nvcr.io/nvidia/pytorch:25.12-py3\"]}"
            )
        );
    }
}

#[test]
fn node_labels_mode_keeps_todays_affinity() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write(dir.path(), "config.yaml", "draComputeAffinity: nodeLabels\n");
    let out = check_stdin(&["--config", &config, "-o", "yaml"], &quickstart_on_cuda_13());
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("nvidia.com/gpu.compute.major"), "{}", out.stdout);
    assert!(!out.stdout.contains("gpu-policy.io/gpu-needs"), "{}", out.stdout);
}
