//! `serve --kubeconfig` in a namespace restricted to GPU products (`gpu-policy.io/gpu-products`):
//! the claim the resource claim controller makes for a pod gets the products' selector beside
//! its floors, the patched claim lets the scheduler pick only allowed products, a claim created on
//! its own gets it too, and a pod on a shared claim allocated another product is denied.

use std::time::Duration;

use kubernetes_cel::{Device, DeviceSelector};
use serde_json::{Value, json};
use tokio::time::{Instant, sleep};

use super::dra_floors::{
    NAMESPACE, POD_UID, claim_for_pod1, pod_on_shared_claim, quickstart, serve_annotated,
};
use crate::support::fake_api::FakeApi;
use crate::support::fake_api::dra::{NVIDIA_DRIVER, allocated, resource_slice, shared_claim};
use crate::support::server::{ENFORCE, MUTATE, POLL, patch_of, patched};

const PRODUCTS: &str = "NVIDIA-H100*";
/// What every GPU request of a claim in the namespace gets.
const PRODUCTS_SELECTOR: &str = r#"device.driver != "gpu.nvidia.com" || !("productName" in device.attributes["gpu.nvidia.com"]) || (device.attributes["gpu.nvidia.com"].productName.matches('^NVIDIA[- ]H100.*$'))"#;
/// What the claims made for a PyTorch pod get too: its floors.
const FLOORS_SELECTOR: &str = r#"device.driver != "gpu.nvidia.com" || ((!("cudaComputeCapability" in device.attributes["gpu.nvidia.com"]) || device.attributes["gpu.nvidia.com"].cudaComputeCapability.compareTo(semver("7.5.0")) >= 0))"#;
/// The denial of a pod on a shared claim allocated an A100.
const OUTSIDE: &str = "gpu-policy: [compute-affinity] container \"ctr\" uses ResourceClaim \
                       \"shared-gpu\", allocated a GPU of a product namespace \"gpu-test1\" does \
                       not allow (NVIDIA-H100*): gpu-0 of pool node-2 is \"NVIDIA A100-SXM4-40GB\"; \
                       use a claim whose devices are of those products";

/// A device of the NVIDIA DRA driver's slice, named `product` as the driver names it.
fn device(name: &str, product: &str, compute_capability: &str) -> Value {
    json!({"name": name, "attributes": {
        "type": {"string": "gpu"},
        "productName": {"string": product},
        "cudaComputeCapability": {"version": compute_capability},
        "cudaDriverVersion": {"version": "13.0.0"},
        "driverVersion": {"version": "580.126.20"}}})
}

/// An H100 as `gpu-0` of pool `node-1`, an A100 as `gpu-0` of pool `node-2`.
fn h100_and_a100_devices() -> [Value; 2] {
    [
        device("gpu-0", "NVIDIA H100 80GB HBM3", "9.0.0"),
        device("gpu-0", "NVIDIA A100-SXM4-40GB", "8.0.0"),
    ]
}

fn h100_and_a100_slices() -> [Value; 2] {
    let [h100, a100] = h100_and_a100_devices();
    [
        resource_slice("node-1-gpu.nvidia.com", NVIDIA_DRIVER, "node-1", &[h100]),
        resource_slice("node-2-gpu.nvidia.com", NVIDIA_DRIVER, "node-2", &[a100]),
    ]
}

/// Whether the scheduler may pick `device` for the first request of `claim`: every selector of
/// it compiles and matches, as the DRA selector evaluator runs them.
fn may_pick(claim: &Value, device: &Value) -> bool {
    let device = Device::from_slice_device(NVIDIA_DRIVER, device);
    let selectors = claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"]
        .as_array()
        .unwrap_or_else(|| panic!("no selectors: {claim}"));
    selectors.iter().all(|selector| {
        let text = selector["cel"]["expression"].as_str().expect("a CEL selector");
        let compiled = DeviceSelector::compile(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        compiled.matches(&device).unwrap_or_else(|e| panic!("{text}: {e}"))
    })
}

/// `claim` through `/mutate`: the claim the patch makes, which re-invocation leaves alone.
async fn mutated_once(connection: &mut crate::support::server::Connection, claim: &Value) -> Value {
    let response = connection.admit(MUTATE, claim).await;
    assert_eq!(response["allowed"], true, "{response}");
    let patch = patch_of(&response).unwrap_or_else(|| panic!("no patch: {response}"));
    let after = patched(claim, &patch);
    let again = connection.admit(MUTATE, &after).await;
    assert_eq!(again["allowed"], true, "{again}");
    assert!(patch_of(&again).is_none(), "{again}");
    after
}

#[tokio::test(flavor = "multi_thread")]
async fn the_claim_made_for_a_pod_gets_the_products_beside_its_floors() {
    let api = FakeApi::start().await;
    let (template, pod) = quickstart();
    let (server, _scratch) =
        serve_annotated(&api, &template, json!({"gpu-policy.io/gpu-products": PRODUCTS})).await;
    let mut connection = server.connect().await;

    let mut created = connection.mutated(&pod).await;
    created["metadata"]["uid"] = json!(POD_UID);
    api.insert(created);
    let claim = claim_for_pod1(&template, POD_UID);

    let after = mutated_once(&mut connection, &claim).await;
    let mut expected = claim.clone();
    expected["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = json!([
        {"cel": {"expression": FLOORS_SELECTOR}},
        {"cel": {"expression": PRODUCTS_SELECTOR}},
    ]);
    assert_eq!(after, expected);
    let [h100, a100] = h100_and_a100_devices();
    assert!(may_pick(&after, &h100), "{after}");
    assert!(!may_pick(&after, &a100), "{after}");
    // Before the patch, the scheduler could pick either.
    assert!(claim["spec"]["devices"]["requests"][0]["exactly"].get("selectors").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_created_on_its_own_gets_the_products() {
    let api = FakeApi::start().await;
    let (template, _) = quickstart();
    let (server, _scratch) =
        serve_annotated(&api, &template, json!({"gpu-policy.io/gpu-products": PRODUCTS})).await;
    let mut connection = server.connect().await;

    let claim = shared_claim(NAMESPACE, "shared-gpu");
    let after = mutated_once(&mut connection, &claim).await;
    assert_eq!(
        after["spec"]["devices"]["requests"][0]["exactly"]["selectors"],
        json!([{"cel": {"expression": PRODUCTS_SELECTOR}}])
    );
    // No pod to read: a claim made on its own never costs a GET.
    assert!(
        api.requests().iter().all(|(_, sent)| !sent.contains("/pods/")),
        "{:?}",
        api.requests()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_on_a_claim_allocated_another_product_is_denied() {
    let api = FakeApi::start().await;
    for slice in h100_and_a100_slices() {
        api.insert(slice);
    }
    api.insert(allocated(shared_claim(NAMESPACE, "shared-gpu"), &[("node-2", "gpu-0")]));
    let (template, _) = quickstart();
    let (server, _scratch) =
        serve_annotated(&api, &template, json!({"gpu-policy.io/gpu-products": PRODUCTS})).await;
    let mut connection = server.connect().await;
    let pod = pod_on_shared_claim();

    let after = connection.mutated(&pod).await;
    let denied = connection.admit(ENFORCE, &after).await;
    assert_eq!(denied["allowed"], false, "{denied}");
    assert_eq!(denied["status"]["code"], 403, "{denied}");
    assert_eq!(denied["status"]["message"], OUTSIDE, "{denied}");

    // The claim allocated the H100 instead: allowed once the cache has it.
    api.insert(allocated(shared_claim(NAMESPACE, "shared-gpu"), &[("node-1", "gpu-0")]));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let after = connection.mutated(&pod).await;
        let response = connection.admit(ENFORCE, &after).await;
        if response["allowed"] == true {
            break;
        }
        assert_eq!(response["status"]["message"], OUTSIDE, "{response}");
        assert!(Instant::now() < deadline, "still denied: {response}; log:\n{}", server.log());
        sleep(POLL).await;
    }
}
