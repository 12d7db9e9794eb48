//! GPU placement (docs/policy.md, "GPU placement") against the real API server: a namespace
//! restricted to H100s by its `gpu-policy.io/gpu-products` annotation, on a fleet of an H100
//! node and an A10 node, with `gpuTolerations` for the GPU nodes' taint. A GPU pod is stored
//! with the product affinity (the glob expanded from the webhook's node cache) and the
//! toleration; a CPU pod with neither, and warned when it tolerates the GPU taint; a GPU pod
//! pinned to the A10 is denied; a claim made for a pod carries the `productName` selector,
//! which the API server compiles and accepts.
//!
//! No kubelet, no scheduler and no controller manager run: Nodes and their capacity, and the
//! claim the resource claim controller would make, are written with kubectl.

use serde_json::{Value, json};

use super::dra_floors::{claim_made_for, selectors};
use crate::support::control_plane::{ControlPlane, Webhook, WebhookOptions, denial};
use crate::support::gpu_pod;
use crate::support::process::Run;

const NAMESPACE: &str = "fleet";
const H100: &str = "NVIDIA-H100-80GB-HBM3";
const A10: &str = "NVIDIA-A10";
const PRODUCT: &str = "nvidia.com/gpu.product";
const CONFIG: &str = "gpuTolerations:\n\
    - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n";

/// The toleration of [`CONFIG`], as the pod spec holds it.
fn gpu_toleration() -> Value {
    json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
}

/// A GPU node labelled by GPU Feature Discovery with `product`, four GPUs allocatable.
fn gpu_node(cluster: &ControlPlane, name: &str, product: &str) {
    let node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, PRODUCT: product,
            "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0"}}});
    cluster.create(&node.to_string()).success();
    let status = json!({"status": {"capacity": {"nvidia.com/gpu": "4"},
                                   "allocatable": {"nvidia.com/gpu": "4"}}});
    let status = status.to_string();
    cluster
        .kubectl(&["patch", "node", name, "--subresource=status", "--type=merge", "-p", &status])
        .success();
}

/// The values of every `nvidia.com/gpu.product` requirement of the pod's required node
/// affinity, one list per term (an empty list: the term has none).
fn product_terms(pod: &Value) -> Vec<Vec<Value>> {
    let terms = pod
        .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array);
    terms
        .into_iter()
        .flatten()
        .map(|term| {
            let expressions = term["matchExpressions"].as_array().into_iter().flatten();
            expressions
                .filter(|e| e["key"] == PRODUCT && e["operator"] == "In")
                .flat_map(|e| e["values"].as_array().cloned().unwrap_or_default())
                .collect()
        })
        .collect()
}

fn tolerations(pod: &Value) -> Vec<Value> {
    pod["spec"]["tolerations"].as_array().cloned().unwrap_or_default()
}

/// The warnings kubectl printed.
fn warnings(run: &Run) -> Vec<&str> {
    run.stderr.lines().filter(|l| l.starts_with("Warning: ")).collect()
}

#[tokio::test]
async fn gpu_pods_land_on_the_namespaces_products_with_the_gpu_toleration() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let scratch = tempfile::tempdir().expect("tempdir");
    let config = scratch.path().join("config.yaml");
    std::fs::write(&config, CONFIG).expect("write the config");
    let webhook =
        Webhook::install(&cluster, WebhookOptions { config: Some(config), ..Default::default() })
            .await;
    cluster.namespace(NAMESPACE, Some("enforce"));
    let annotation = "gpu-policy.io/gpu-products=NVIDIA-H100*";
    cluster.kubectl(&["annotate", "namespace", NAMESPACE, annotation]).success();
    webhook.wait_effective(&cluster, NAMESPACE);
    gpu_node(&cluster, "h100-1", H100);
    gpu_node(&cluster, "a10-1", A10);

    // Once the webhook's caches hold the annotation and the nodes, the glob is expanded to the
    // H100 the fleet has.
    let pod = |name: &str| gpu_pod().name(name).namespace(NAMESPACE);
    cluster.eventually("the webhook expands the namespace's products", || {
        let run = cluster.dry_run(&pod("probe").manifest());
        run.code == 0 && product_terms(&run.value()) == [vec![json!(H100)]]
    });

    let created = cluster.create(&pod("train").manifest());
    let stored = created.success().value();
    assert_eq!(product_terms(&stored), [vec![json!(H100)]], "{stored}");
    assert!(tolerations(&stored).contains(&gpu_toleration()), "{stored}");

    // A pod that asks for no GPU gets neither.
    let cpu = gpu_pod().name("web").namespace(NAMESPACE).gpus(0);
    let stored = cluster.create(&cpu.manifest()).success().value();
    assert!(product_terms(&stored).is_empty(), "{stored}");
    assert!(!tolerations(&stored).contains(&gpu_toleration()), "{stored}");

    // One that tolerates the GPU taint is created, and warned that it would take GPU nodes.
    let mut tolerating = cpu.name("batch").json();
    tolerating["spec"]["tolerations"] = json!([gpu_toleration()]);
    let created = cluster.create(&tolerating.to_string());
    let said = warnings(&created);
    assert!(said.iter().any(|w| w.contains("nvidia.com/gpu:NoSchedule")), "{said:?}");
    created.success();

    // A GPU pod pinned to the A10 is denied, naming both lists.
    let mut pinned = pod("pinned").json();
    pinned["spec"]["nodeSelector"] = json!({PRODUCT: A10});
    let refused = cluster.create(&pinned.to_string());
    let reason = denial(&refused).unwrap_or_default().to_owned();
    assert!(reason.contains(A10) && reason.contains("NVIDIA-H100*"), "{refused:?}");
    assert_ne!(cluster.kubectl(&["get", "pod", "-n", NAMESPACE, "pinned"]).code, 0);

    // The claim the resource claim controller makes for a pod gets the selector on the DRA
    // driver's productName; the API server compiles it when it validates the claim.
    let owner = cluster.get(&["pod", "-n", NAMESPACE, "train"]);
    let uid = owner["metadata"]["uid"].as_str().expect("uid");
    let spec = json!({"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}});
    let created = cluster.create(&claim_made_for(NAMESPACE, "train", uid, spec).to_string());
    let name = created.success().value()["metadata"]["name"].clone();
    let name = name.as_str().expect("a generated name");
    let stored = cluster.get(&["resourceclaim", "-n", NAMESPACE, name]);
    let selectors = selectors(&stored, "/0/exactly").to_string();
    assert!(selectors.contains("productName") && selectors.contains("H100"), "{stored}");
}
