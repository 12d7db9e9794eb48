//! `serve --kubeconfig` on the claims of a pod created before its
//! templates (`kubectl apply -f dir/` in name order, Helm's install order):
//! each claim the resource claim controller makes for it is counted with
//! the pod's other claims against `maxPerPod`, and gets the floors of the
//! pod's images, whatever the pod's `gpu-policy.io/gpu-needs` annotation
//! says.

use serde_json::{Value, json};

use crate::support::fake_api::FakeApi;
use crate::support::fake_api::dra::{claim_for_pod, eight_gpu_template, eight_gpus};
use crate::support::server::{ENFORCE, MUTATE, Server, WARN, patch_of, patched};

const NAMESPACE: &str = "ml";
const POD_UID: &str = "3f0c9d2e-7a41-4b8e-9c5d-1e2f3a4b5c6d";
/// NGC PyTorch 25.12: CUDA 13.1, so compute capability 7.5.
const PYTORCH: &str = "nvcr.io/nvidia/pytorch:25.12-py3";
/// What a claim of a pod of [`PYTORCH`] gets in its GPU requests.
const SELECTOR: &str = r#"device.driver != "gpu.nvidia.com" || ((!("cudaComputeCapability" in device.attributes["gpu.nvidia.com"]) || device.attributes["gpu.nvidia.com"].cudaComputeCapability.compareTo(semver("7.5.0")) >= 0))"#;
const DENIAL: &str = "gpu-policy: [bounded-requests] pod \"trainer\" would get 16 GPUs from its \
                      claims \"second\" 8 (this claim), \"first\" 8, above the maximum of 8 per \
                      pod here; lower the claims' counts or split the pod";

/// The pod `trainer` as stored, admitted before its templates existed
/// (nothing recorded), its annotation since written by its author.
fn trainer() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": NAMESPACE, "uid": POD_UID,
            "annotations": {"gpu-policy.io/gpu-needs":
                "{\"computeCapability\":\"3.5\",\"images\":[\"busybox\"]}"}},
        "spec": {
            "resourceClaims": [
                {"name": "first", "resourceClaimTemplateName": "eight-a"},
                {"name": "second", "resourceClaimTemplateName": "eight-b"}],
            "containers": [{"name": "train", "image": PYTORCH,
                "resources": {"claims": [{"name": "first"}, {"name": "second"}]}}]}})
}

/// The claim the resource claim controller makes for trainer's `pod_claim`.
fn made_for_trainer(pod_claim: &str) -> Value {
    let mut claim = claim_for_pod(
        NAMESPACE,
        &format!("trainer-{pod_claim}-x7k2p"),
        "trainer",
        POD_UID,
        pod_claim,
    );
    claim["spec"] = eight_gpus();
    claim
}

fn warnings(response: &Value) -> Vec<&str> {
    response["warnings"].as_array().into_iter().flatten().filter_map(Value::as_str).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_made_after_the_pod_are_counted_together_and_get_the_pods_floors() {
    let api = FakeApi::start().await;
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {"gpu-policy.io/mode": "enforce"}}}));
    api.insert(trainer());
    let (server, _scratch) = Server::start_in_cluster(&api).await;
    let mut connection = server.connect().await;

    // The first template is created; the controller makes its claim.
    api.insert(eight_gpu_template(NAMESPACE, "eight-a"));
    let first = made_for_trainer("first");
    let response = connection.admit(MUTATE, &first).await;
    assert_eq!(response["allowed"], true, "{response}");
    let patch = patch_of(&response).unwrap_or_else(|| panic!("no patch: {response}"));
    let first = patched(&first, &patch);
    // The floors of the pod's image, not the annotation's 3.5.
    assert_eq!(
        first["spec"]["devices"]["requests"][0]["exactly"]["selectors"],
        json!([{"cel": {"expression": SELECTOR}}]),
        "{first}"
    );
    let validated = connection.admit(ENFORCE, &first).await;
    assert_eq!(validated["allowed"], true, "{validated}");
    // The second template does not exist yet: the claim is counted
    // without it, and told so.
    assert_eq!(
        warnings(&validated),
        ["gpu-policy: bounded-requests: claim \"second\" not counted: ResourceClaimTemplate \
          \"eight-b\" not found"],
        "{validated}"
    );
    api.insert(first);

    // The second template, then its claim: 16 GPUs in all, denied.
    api.insert(eight_gpu_template(NAMESPACE, "eight-b"));
    let second = connection.mutated(&made_for_trainer("second")).await;
    let denied = connection.admit(ENFORCE, &second).await;
    assert_eq!(denied["allowed"], false, "{denied}");
    assert_eq!(denied["status"]["code"], 403, "{denied}");
    assert_eq!(denied["status"]["message"], DENIAL, "{denied}");

    // The same in a namespace in warn mode: admitted, with the denial as a
    // warning.
    let warned = connection.admit(WARN, &second).await;
    assert_eq!(warned["allowed"], true, "{warned}");
    let body = DENIAL.trim_start_matches("gpu-policy: [bounded-requests] ");
    let expected = format!("gpu-policy: [bounded-requests] would deny: {body}");
    // kubectl's line: the warning cut as every answer cuts it.
    let shown = gpu_policy::admission::warning(&expected);
    assert!(warnings(&warned).iter().any(|w| *w == shown), "{warned}");
    // One GET of the pod for each review that reads it.
    assert_eq!(api.pod_gets(NAMESPACE, "trainer"), 5);
}
