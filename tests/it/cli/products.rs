//! `check` with a namespace restricted to GPU products: the globs expand against the products
//! `--node-products` (and `--nodes`) say the GPU nodes carry, and a GPU pod pinned to another
//! product is denied.

use super::*;

const ONLY_H100: &str = "gpu-policy.io/gpu-products=NVIDIA-H100*";
const NODE_PRODUCTS: &str = "NVIDIA-H100-80GB-HBM3,NVIDIA-A10";
const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";

fn restricted(extra: &[&str], input: &str) -> Run {
    let mut args = vec!["--namespace-annotation", ONLY_H100, "--node-products", NODE_PRODUCTS];
    args.extend_from_slice(extra);
    check_stdin(&args, input)
}

fn pod() -> String {
    gpu_pod().container("app").name("train").gpus(1).manifest()
}

/// The same pod, pinned by its node selector to the A10.
fn pinned_pod() -> String {
    let mut pod = gpu_pod().container("app").name("pinned").gpus(1).json();
    pod["spec"]["nodeSelector"] = json!({"nvidia.com/gpu.product": "NVIDIA-A10"});
    format!("{pod}\n")
}

const DENIAL: &str = "gpu-policy: the pod asks for GPU product NVIDIA-A10 \
    (spec.nodeSelector[nvidia.com/gpu.product]), which this namespace does not allow: it allows \
    NVIDIA-H100* (namespace annotation gpu-policy.io/gpu-products); ask for an allowed product, \
    or leave nvidia.com/gpu.product out and the allowed products are required for you";

#[test]
fn the_glob_expands_to_the_listed_products() {
    let out = restricted(&[], &pod());
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            "change     [compute-affinity] require GPU product in [NVIDIA-H100-80GB-HBM3] \
             (namespace annotation gpu-policy.io/gpu-products)"
        ),
        "{}",
        out.stdout
    );
    let yaml = restricted(&["-o", "yaml"], &pod());
    assert_eq!(yaml.code, 0, "{}", yaml.stderr);
    let objects: Vec<Value> = serde_saphyr::from_multiple(&yaml.stdout).expect("YAML out");
    assert_eq!(
        objects[0]["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"],
        json!([{"matchExpressions": [
            {"key": "nvidia.com/gpu.compute.major", "operator": "Gt", "values": ["4"]},
            {"key": "nvidia.com/gpu.product", "operator": "In",
             "values": ["NVIDIA-H100-80GB-HBM3"]}]}])
    );
}

#[test]
fn a_pod_pinned_to_another_product_is_denied() {
    let out = restricted(&[], &pinned_pod());
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(&format!("violation  [compute-affinity] {DENIAL}")),
        "{}",
        out.stdout
    );

    // warn: allowed, with the denial as a warning.
    let warn = restricted(&["--mode", "warn", "-o", "json"], &pinned_pod());
    assert_eq!(warn.code, 0, "{}\n{}", warn.stdout, warn.stderr);
    assert_eq!(warn.json()[0]["violations"][0]["message"], DENIAL);
}

/// A workload's template is judged as its pods: denied when applied.
#[test]
fn a_template_pinned_to_another_product_is_denied() {
    let template = gpu_pod().container("app").gpus(1).json();
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "trainers"},
        "spec": {"selector": {"matchLabels": {"app": "t"}}, "template": {
            "metadata": {"labels": {"app": "t"}},
            "spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A10"},
                     "containers": template["spec"]["containers"]}}}});
    let out = restricted(&["-o", "json"], &format!("{deployment}\n"));
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.json()[0]["violations"][0]["message"], DENIAL);
}

/// Without products to expand against, a glob is not written: a warning says so.
#[test]
fn a_glob_without_node_products_is_not_written() {
    let out = check_stdin(&["--namespace-annotation", ONLY_H100, "-o", "yaml"], &pod());
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("nvidia.com/gpu.product"), "{}", out.stdout);
    let text = check_stdin(&["--namespace-annotation", ONLY_H100], &pod());
    assert!(
        text.stdout.contains(
            "warning    gpu-policy: compute-affinity: no node is known to expand the GPU \
             products NVIDIA-H100* (namespace annotation gpu-policy.io/gpu-products) against"
        ),
        "{}",
        text.stdout
    );
}

#[test]
fn node_products_are_products_not_globs() {
    let out = check_stdin(&["--node-products", "NVIDIA-H100*"], &pod());
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("--node-products"), "{}", out.stderr);
}
