//! The claims of a pod created before its templates (docs/policy.md, "A pod
//! created before its templates"), against the real API server: the pod is
//! admitted with a warning, since nothing about its claims is known; the
//! claims the resource claim controller then makes for it are judged with
//! the whole pod: counted together against `maxPerPod`, and given the
//! floors of the pod's image, not of the pod's annotation, which its author
//! can edit. A pod created after its templates gets the same limits at its
//! own admission.
//!
//! No controller-manager runs: the claims the resource claim controller
//! would make (owned by the pod, annotated with the pod claim's name, the
//! template's spec) are created with kubectl. The webhook reads the pod,
//! and the templates its caches do not know yet, with its own
//! ServiceAccount's RBAC.

use serde_json::json;

use crate::support::control_plane::{ControlPlane, Webhook, WebhookOptions, denial};
use crate::support::fake_api::dra::{eight_gpu_template, eight_gpus};

const NAMESPACE: &str = "ml";
/// NGC PyTorch 25.12: CUDA 13.1, compute capability 7.5.
const PYTORCH: &str = "nvcr.io/nvidia/pytorch:25.12-py3";
const GPU_NEEDS: &str = "gpu-policy.io/gpu-needs";
/// What the pod's author writes on it after its admission: a lower floor.
const LOWERED: &str = r#"{"computeCapability":"3.5","images":["busybox"]}"#;
/// The selector a claim made for a pod of [`PYTORCH`] gets (the one a pod
/// created after its template records: tests/apiserver/dra_floors.rs).
const SELECTOR: &str = r#"device.driver != "gpu.nvidia.com" || ((!("cudaComputeCapability" in device.attributes["gpu.nvidia.com"]) || device.attributes["gpu.nvidia.com"].cudaComputeCapability.compareTo(semver("7.5.0")) >= 0))"#;
const DENIAL: &str = "gpu-policy: [bounded-requests] pod \"trainer\" would get 16 GPUs from its \
                      claims \"second\" 8 (this claim), \"first\" 8, above the maximum of 8 per \
                      pod here; lower the claims' counts or split the pod";
const POD_DENIAL: &str = "gpu-policy: [bounded-requests] the pod's resource claims hold 16 GPUs, \
                          above the maximum of 8 per pod here; claim fewer devices";

/// A pod whose one container holds two claims, each from a template of 8
/// GPUs.
fn pod(name: &str) -> String {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "resourceClaims": [
                {"name": "first", "resourceClaimTemplateName": "eight-a"},
                {"name": "second", "resourceClaimTemplateName": "eight-b"}],
            "containers": [{"name": "train", "image": PYTORCH,
                "resources": {"claims": [{"name": "first"}, {"name": "second"}]}}]}})
    .to_string()
}

/// The ResourceClaim the resource claim controller makes for pod `trainer`
/// (`uid`) from its pod claim `pod_claim`.
fn made_for_trainer(uid: &str, pod_claim: &str) -> String {
    let owner = json!({"apiVersion": "v1", "kind": "Pod", "name": "trainer", "uid": uid,
                       "controller": true, "blockOwnerDeletion": true});
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"generateName": format!("trainer-{pod_claim}-"), "namespace": NAMESPACE,
            "annotations": {"resource.kubernetes.io/pod-claim-name": pod_claim},
            "ownerReferences": [owner]},
        "spec": eight_gpus()})
    .to_string()
}

#[tokio::test]
async fn claims_made_after_their_pod_are_counted_with_it_and_get_its_floors() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let webhook = Webhook::install(&cluster, WebhookOptions::default()).await;
    cluster.namespace(NAMESPACE, Some("enforce"));
    webhook.wait_effective(&cluster, NAMESPACE);

    // The pod first (`kubectl apply -f dir/` applies pod.yaml before
    // templates.yaml; Helm installs every Pod before any template): its
    // templates do not exist, so it is admitted, with a warning.
    let created = cluster.create(&pod("trainer"));
    assert!(created.stderr.contains("unresolved"), "{}", created.stderr);
    let stored = created.success().value();
    let uid = stored["metadata"]["uid"].as_str().expect("uid").to_owned();
    // Nothing about its claims was known: nothing recorded. Its author then
    // writes a lower floor on it; no webhook sees a pod's metadata change.
    assert!(stored["metadata"]["annotations"][GPU_NEEDS].is_null(), "{stored}");
    let lowered = format!("{GPU_NEEDS}={LOWERED}");
    let annotate = ["annotate", "pod", "-n", NAMESPACE, "trainer", &lowered];
    cluster.kubectl(&annotate).success();

    // The first template (within the maxima on its own), and the claim the
    // controller makes from it: the floors of the pod's image, and a
    // warning that the second pod claim is not counted yet.
    cluster.create(&eight_gpu_template(NAMESPACE, "eight-a").to_string()).success();
    let first = cluster.create(&made_for_trainer(&uid, "first"));
    assert!(
        first.stderr.contains(
            "bounded-requests: claim \"second\" not counted: ResourceClaimTemplate \"eight-b\" \
             not found"
        ),
        "{}",
        first.stderr
    );
    let first = first.success().value();
    let selectors = &first["spec"]["devices"]["requests"][0]["exactly"]["selectors"];
    assert_eq!(*selectors, json!([{"cel": {"expression": SELECTOR}}]), "{first}");

    cluster.create(&eight_gpu_template(NAMESPACE, "eight-b").to_string()).success();
    // The second: 16 GPUs with the first, denied.
    let second = cluster.create(&made_for_trainer(&uid, "second"));
    assert_eq!(denial(&second), Some(DENIAL), "{second:?}");
    let claims = cluster.get(&["resourceclaims", "-n", NAMESPACE]);
    assert_eq!(claims["items"].as_array().map(Vec::len), Some(1), "{claims}");

    // A pod created after its templates is held to the same maximum at
    // its own admission.
    let late = cluster.create(&pod("late"));
    assert_eq!(denial(&late), Some(POD_DENIAL), "{late:?}");
    let log = webhook.log();
    assert!(!log.contains("forbidden"), "{log}");
}
