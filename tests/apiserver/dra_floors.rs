//! R4 on GPUs that come through DRA claims (docs/policy.md, "GPUs that come
//! through DRA claims"), against the real API server: a pod whose GPUs come
//! only through claims records its images' needs in
//! `gpu-policy.io/gpu-needs` instead of getting node affinity; a claim made
//! for it gets the selector on its GPU requests, which the API server
//! compiles and accepts; and a pod on a claim already allocated a device
//! below those needs is denied, from what the webhook's watches saw of the
//! claim and the device's ResourceSlice.
//!
//! No controller-manager and no scheduler run: the claims the resource
//! claim controller would make, and the allocations the scheduler would
//! write, are written with kubectl here. No DeviceClass is created: the API
//! server does not look one up when it validates a claim, and
//! `gpu.nvidia.com` is a GPU class by its name (`gpuDeviceClasses`).

use serde_json::{Value, json};

use crate::support::control_plane::{ControlPlane, Webhook, WebhookOptions, denial, policy_fields};
use crate::support::fixtures::objects_of;
use crate::support::process::Run;

/// The NGC PyTorch image: CUDA 13.1, compute capability 7.5, no driver
/// floor (its entrypoint checks the driver).
const PYTORCH: &str = "nvcr.io/nvidia/pytorch:25.12-py3";
const GPU_NEEDS: &str = "gpu-policy.io/gpu-needs";
/// What R4 records for [`PYTORCH`].
const NEEDS: &str = r#"{"computeCapability":"7.5","images":["nvcr.io/nvidia/pytorch:25.12-py3"]}"#;
/// The selector R4 adds to the GPU requests of a claim made for a pod that
/// needs compute capability 7.5.
const SELECTOR: &str = r#"device.driver != "gpu.nvidia.com" || ((!("cudaComputeCapability" in device.attributes["gpu.nvidia.com"]) || device.attributes["gpu.nvidia.com"].cudaComputeCapability.compareTo(semver("7.5.0")) >= 0))"#;

/// The webhook installed and in effect for pods of the enforce namespace
/// `namespace` (created).
async fn install(cluster: &ControlPlane, namespace: &str) -> Webhook {
    let webhook = Webhook::install(cluster, WebhookOptions::default()).await;
    cluster.namespace(namespace, Some("enforce"));
    webhook.wait_effective(cluster, namespace);
    webhook
}

/// The stored object's `gpu-policy.io/gpu-needs`.
fn needs_of(object: &Value) -> &Value {
    &object["metadata"]["annotations"][GPU_NEEDS]
}

/// The `selectors` of request `pointer` (e.g. `/0/exactly`) of a claim.
pub(crate) fn selectors<'a>(claim: &'a Value, pointer: &str) -> &'a Value {
    let requests = &claim["spec"]["devices"]["requests"];
    requests.pointer(&format!("{pointer}/selectors")).unwrap_or(&Value::Null)
}

/// The warnings kubectl printed.
fn warnings(run: &Run) -> Vec<&str> {
    run.stderr.lines().filter(|l| l.starts_with("Warning: ")).collect()
}

/// The ResourceClaim the resource claim controller makes for pod `namespace/pod` (stored, `uid`)
/// from its pod claim `gpu`, with the claim spec `spec`.
pub(crate) fn claim_made_for(namespace: &str, pod: &str, uid: &str, spec: Value) -> Value {
    let owner = json!({"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid,
                       "controller": true, "blockOwnerDeletion": true});
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
           "metadata": {"generateName": format!("{pod}-gpu-"), "namespace": namespace,
                        "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                        "ownerReferences": [owner]},
           "spec": spec})
}

#[tokio::test]
async fn dra_pods_record_their_needs_and_the_claims_made_for_them_get_the_selector() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let _webhook = install(&cluster, "gpu-test1").await;

    // The DRA driver's quickstart gpu-test1 (its namespace, opted in,
    // created above) with the NGC PyTorch image.
    let mut objects: Vec<Value> =
        objects_of("20").into_iter().filter(|o| o["kind"] != "Namespace").collect();
    for object in objects.iter_mut().filter(|o| o["kind"] == "Pod") {
        object["spec"]["containers"][0]["image"] = json!(PYTORCH);
    }
    let template = objects[0].clone();
    assert_eq!(template["kind"], "ResourceClaimTemplate");
    // Applied as the quickstart says (`kubectl apply -f`), the template
    // first.
    let apply = |objects: &[Value]| {
        let stream: Vec<String> = objects.iter().map(Value::to_string).collect();
        let stream = stream.join("\n---\n");
        let run = cluster.kubectl_stdin(&["apply", "-f", "-"], Some(&stream));
        assert!(warnings(&run).is_empty(), "{}", run.stderr);
        run.success()
    };
    apply(&objects[..1]);

    // Once the webhook's watches have the template, a dry run of each pod
    // comes back with its needs recorded, and no node affinity.
    let mut dry_runs = Vec::new();
    for pod in &objects[1..] {
        let mut dry_run = Value::Null;
        cluster.eventually("the webhook resolves the pod's template", || {
            let run = cluster.dry_run(&pod.to_string());
            dry_run = if run.code == 0 { run.value() } else { Value::Null };
            *needs_of(&dry_run) == NEEDS
        });
        assert!(dry_run["spec"]["affinity"].is_null(), "{dry_run}");
        dry_runs.push(dry_run);
    }

    // Then all of it, for real.
    apply(&objects);
    let mut uids = Vec::new();
    for (pod, dry_run) in ["pod1", "pod2"].into_iter().zip(&dry_runs) {
        let stored = cluster.get(&["pod", "-n", "gpu-test1", pod]);
        assert_eq!(*needs_of(&stored), NEEDS, "{pod}: {stored}");
        assert!(stored["spec"]["affinity"].is_null(), "{pod}: {stored}");
        // Its GPU comes through CDI: no runtime class, not pinned.
        assert!(stored["spec"]["runtimeClassName"].is_null(), "{pod}");
        assert!(stored["spec"]["containers"][0]["env"].is_null(), "{pod}");
        assert_eq!(policy_fields(&stored), policy_fields(dry_run), "{pod}");
        uids.push(stored["metadata"]["uid"].as_str().expect("uid").to_owned());
    }

    // The claim the resource claim controller makes for pod1 from its
    // template: its GPU request gets the selector, which the API server
    // compiled when it validated the claim, and stored.
    let spec = template["spec"]["spec"].clone();
    let created = cluster.create(&claim_made_for("gpu-test1", "pod1", &uids[0], spec).to_string());
    assert!(warnings(&created).is_empty(), "{}", created.stderr);
    let name = created.success().value()["metadata"]["name"].clone();
    let name = name.as_str().expect("a generated name");
    let stored = cluster.get(&["resourceclaim", "-n", "gpu-test1", name]);
    let want = json!([{"cel": {"expression": SELECTOR}}]);
    assert_eq!(*selectors(&stored, "/0/exactly"), want, "{stored}");

    // A claim with a `firstAvailable` request (made for pod2): only the
    // subrequest of the GPU class gets it. `firstAvailable` is served from
    // 1.34 (1.33: behind an alpha gate).
    if cluster.minor() < 34 {
        return;
    }
    let first_available = json!({"devices": {"requests": [{"name": "gpu", "firstAvailable": [
        {"name": "full", "deviceClassName": "gpu.nvidia.com"},
        {"name": "nic", "deviceClassName": "rdma.example.com"}]}]}});
    let created =
        cluster.create(&claim_made_for("gpu-test1", "pod2", &uids[1], first_available).to_string());
    assert!(warnings(&created).is_empty(), "{}", created.stderr);
    let name = created.success().value()["metadata"]["name"].clone();
    let name = name.as_str().expect("a generated name");
    let stored = cluster.get(&["resourceclaim", "-n", "gpu-test1", name]);
    assert_eq!(*selectors(&stored, "/0/firstAvailable/0"), want, "{stored}");
    assert!(selectors(&stored, "/0/firstAvailable/1").is_null(), "{stored}");
}

/// The NVIDIA DRA driver's slice of node-1: gpu-0 a P100 (6.0), gpu-1 an
/// A100 (8.0). A slice needs one of nodeName, nodeSelector, allNodes or
/// perDeviceNodeSelection; the node need not exist.
const SLICE: &str = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-gpu.nvidia.com}
spec:
  driver: gpu.nvidia.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes:
      cudaComputeCapability: {version: "6.0.0"}
      cudaDriverVersion: {version: "13.0.0"}
      driverVersion: {version: "580.126.20"}
  - name: gpu-1
    attributes:
      cudaComputeCapability: {version: "8.0.0"}
      cudaDriverVersion: {version: "13.0.0"}
      driverVersion: {version: "580.126.20"}
"#;

/// Claim `name` in `ml`, created, then allocated `device` of pool node-1 as
/// the scheduler would write it. The smallest status the API server takes:
/// `allocation.devices.results[]` of `request` (a request of the claim),
/// `driver`, `pool` and `device`; no `nodeSelector` or
/// `allocationTimestamp` is needed. An allocation cannot change once set
/// ("status.allocation: field cannot be modified once set"), so each
/// allocation is a claim of its own.
fn allocated_claim(cluster: &ControlPlane, name: &str, device: &str) {
    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}});
    cluster.create(&claim.to_string()).success();
    let result = json!({"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1",
                        "device": device});
    let status = json!({"status": {"allocation": {"devices": {"results": [result]}}}});
    let patch = ["patch", "resourceclaim", "-n", "ml", name, "--subresource=status"];
    let status = status.to_string();
    let args = [&patch[..], &["--type=merge", "-p", &status]].concat();
    cluster.kubectl(&args).success();
}

/// A pod in `ml` whose one container (PyTorch) uses the claim `claim`.
fn pod_on(name: &str, claim: &str) -> String {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
           "spec": {"containers": [{"name": "ctr", "image": PYTORCH,
                                    "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}})
    .to_string()
}

#[tokio::test]
async fn a_pod_on_a_claim_allocated_a_device_below_its_needs_is_denied() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let _webhook = install(&cluster, "ml").await;
    cluster.create(SLICE).success();
    allocated_claim(&cluster, "shared-gpu", "gpu-0");

    // Denied once the webhook's watches have the allocation and the slice
    // (before, the claim is unknown or unallocated, and the pod admitted).
    let pod = pod_on("trainer", "shared-gpu");
    let dry_run = ["create", "--dry-run=server", "-o", "json", "-f", "-"];
    cluster.eventually("the webhook judges the allocated device", || {
        denial(&cluster.kubectl_stdin(&dry_run, Some(&pod))).is_some()
    });
    let refused = cluster.create(&pod);
    assert_eq!(
        denial(&refused),
        Some(
            "gpu-policy: [compute-affinity] container \"ctr\" uses ResourceClaim \
             \"shared-gpu\", allocated a device below what its image needs (compute \
             capability >= 7.5): gpu-0 of pool node-1 has compute capability 6.0; use a \
             claim whose devices meet it"
        ),
        "{refused:?}"
    );
    let missing = cluster.kubectl(&["get", "pod", "-n", "ml", "trainer"]);
    assert_ne!(missing.code, 0, "the denied pod was stored");

    // On a claim allocated the A100, the same pod is created. Awaited
    // until the webhook has the allocation: before, an unknown claim holds
    // no GPU as far as the webhook knows (no needs recorded), and an
    // unallocated one gets a warning that it may get a GPU below the floor.
    allocated_claim(&cluster, "shared-a100", "gpu-1");
    let pod = pod_on("trainer", "shared-a100");
    cluster.eventually("the webhook finds the allocated device enough", || {
        let run = cluster.kubectl_stdin(&dry_run, Some(&pod));
        run.code == 0 && warnings(&run).is_empty() && *needs_of(&run.value()) == NEEDS
    });
    let created = cluster.create(&pod);
    assert!(warnings(&created).is_empty(), "{}", created.stderr);
    let stored = created.success().value();
    assert_eq!(*needs_of(&stored), NEEDS, "{stored}");
    assert!(stored["spec"]["affinity"].is_null(), "{stored}");
}
