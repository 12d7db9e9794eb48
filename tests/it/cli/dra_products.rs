//! `check` on the DRA driver's quickstart `gpu-test3` (one claim shared by two pods) in a
//! namespace restricted to GPU products: the claim gets the products' selector, and the pods of a
//! claim allocated another product are denied.

use super::*;

/// Fixture 22: the ResourceClaim `gpu-test3/single-gpu`, used by `pod1` and `pod2`.
fn shared_claim_quickstart() -> String {
    std::fs::read_to_string(fixtures::dir().join("22-dra-gpu-test3-shared-resourceclaim.yaml"))
        .expect("fixture 22")
}

const PRODUCTS: &str = "gpu-policy.io/gpu-products=NVIDIA-H100*";

const SELECTOR: &str = "device.driver != \"gpu.nvidia.com\" || !(\"productName\" in \
    device.attributes[\"gpu.nvidia.com\"]) || \
    (device.attributes[\"gpu.nvidia.com\"].productName.matches('^NVIDIA[- ]H100.*$'))";

#[test]
fn check_shows_the_claim_getting_the_products() {
    let out = check_stdin(&["--namespace-annotation", PRODUCTS], &shared_claim_quickstart());
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            "ResourceClaim gpu-test3/single-gpu: allowed, mutated  (-)\n  change     \
             [compute-affinity] require a GPU product of NVIDIA-H100* of the devices of request \
             \"gpu\" (namespace gpu-test3)\n"
        ),
        "{}",
        out.stdout
    );
    // The claim as written in the input does not carry it yet: its pods are warned.
    assert!(
        out.stdout.contains(
            "ResourceClaim \"single-gpu\" (container \"ctr\") may get a GPU of a product \
             namespace \"gpu-test3\" does not allow (NVIDIA-H100*)"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn check_yaml_prints_the_claim_with_the_selector() {
    let out = check_stdin(
        &["--namespace-annotation", PRODUCTS, "-o", "yaml"],
        &shared_claim_quickstart(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let objects: Vec<Value> =
        serde_saphyr::from_multiple(&out.stdout).expect("multi-document YAML");
    let claim = objects
        .iter()
        .find(|o| o["kind"] == "ResourceClaim")
        .unwrap_or_else(|| panic!("no claim in {}", out.stdout));
    assert_eq!(
        claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"],
        json!([{"cel": {"expression": SELECTOR}}])
    );
}

#[test]
fn without_the_annotation_the_claim_is_left_alone() {
    let out = check_stdin(&[], &shared_claim_quickstart());
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("ResourceClaim gpu-test3/single-gpu: allowed  (-)\n"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("GPU product"), "{}", out.stdout);
}

#[test]
fn pods_of_a_claim_allocated_another_product_are_denied() {
    let allocated = shared_claim_quickstart().replace(
        "        deviceClassName: gpu.nvidia.com\n",
        "        deviceClassName: gpu.nvidia.com\nstatus:\n  allocation:\n    devices:\n      \
         results:\n      - {request: gpu, driver: gpu.nvidia.com, pool: node-1, device: gpu-0}\n",
    );
    assert!(allocated.contains("pool: node-1"));
    let slice = "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: \
                 node-1-gpu.nvidia.com\nspec:\n  driver: gpu.nvidia.com\n  nodeName: node-1\n  \
                 pool: {name: node-1, generation: 1, resourceSliceCount: 1}\n  devices:\n  - name: \
                 gpu-0\n    attributes:\n      productName: {string: NVIDIA A100-SXM4-40GB}\n";
    let input = format!("{allocated}{slice}");
    let out = check_stdin(&["--namespace-annotation", PRODUCTS], &input);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    for pod in ["pod1", "pod2"] {
        assert!(out.stdout.contains(&format!("Pod gpu-test3/{pod}: DENIED")), "{}", out.stdout);
    }
    assert!(
        out.stdout.contains(
            "violation  [compute-affinity] gpu-policy: container \"ctr\" uses ResourceClaim \"single-gpu\", \
             allocated a GPU of a product namespace \"gpu-test3\" does not allow (NVIDIA-H100*): \
             gpu-0 of pool node-1 is \"NVIDIA A100-SXM4-40GB\""
        ),
        "{}",
        out.stdout
    );
    // An allowed product passes.
    let allowed = input.replace("NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3");
    let out = check_stdin(&["--namespace-annotation", PRODUCTS], &allowed);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
}
