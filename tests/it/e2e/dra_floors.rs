//! `serve --kubeconfig` with R4's DRA half (`draComputeAffinity: claims`,
//! the default): a pod whose GPUs come through a claim template records
//! what its image needs instead of getting node affinity; the claim the
//! resource claim controller then makes for it gets the selector, from one
//! metadata-only GET of the pod; a claim whose pod is missing, cannot be
//! read or is another pod is admitted unchanged with a warning (and a log
//! line when the read fails); and a pod on a shared claim already allocated
//! a device below its needs is denied.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::{Instant, sleep};

use crate::support::fake_api::FakeApi;
use crate::support::fake_api::dra::{allocated, claim_for_pod, p100_and_a100_slices, shared_claim};
use crate::support::fixtures;
use crate::support::server::{
    Connection, ENFORCE, MUTATE, POLL, Server, body_of, next_uid, patch_of, patched, review,
};

/// The namespace of the DRA quickstart's gpu-test1.
pub(super) const NAMESPACE: &str = "gpu-test1";
/// NGC PyTorch 25.12: CUDA 13.1, so compute capability 7.5; its entrypoint
/// checks the driver, so no driver floor.
pub(super) const PYTORCH: &str = "nvcr.io/nvidia/pytorch:25.12-py3";
const NEEDS_ANNOTATION: &str = "gpu-policy.io/gpu-needs";
const NEEDS: &str = r#"{"computeCapability":"7.5","images":["nvcr.io/nvidia/pytorch:25.12-py3"]}"#;
/// What the claims made for such a pod get in their GPU requests.
const SELECTOR: &str = r#"device.driver != "gpu.nvidia.com" || ((!("cudaComputeCapability" in device.attributes["gpu.nvidia.com"]) || device.attributes["gpu.nvidia.com"].cudaComputeCapability.compareTo(semver("7.5.0")) >= 0))"#;
/// The UID the API server gave pod1, and another pod's.
pub(super) const POD_UID: &str = "6d1f6a34-0c4e-4f51-9a2b-5e8c3f0d7a11";
const OTHER_UID: &str = "0b9e2c71-58d4-4c3a-8f6e-2a7d9c1b4e22";
/// The claim the resource claim controller makes for pod1's claim `gpu`.
const CLAIM: &str = "pod1-gpu-x7k2p";
const UNCHANGED: &str = "gpu-policy: compute-affinity: claim unchanged: ";
/// Why, when pod1 is missing or is another pod of that name.
const NOT_FOUND: &str = "its pod \"pod1\" was not found with the UID it was made for";
const ANOTHER_POD_LOG: &str = "the pod of that name is not the one the ResourceClaim was made for; \
    the claim is admitted unchanged";
const NOT_FOUND_LOG: &str =
    "the pod a ResourceClaim is made for was not found; the claim is admitted unchanged";
const UNREADABLE_LOG: &str =
    "cannot read the pod a ResourceClaim is made for; the claim is admitted unchanged";
/// The denial of a pod on a claim allocated a P100.
const BELOW: &str = "gpu-policy: [compute-affinity] container \"ctr\" uses ResourceClaim \
                     \"shared-gpu\", allocated a device below what its image needs (compute \
                     capability >= 7.5): gpu-0 of pool node-1 has compute capability 6.0; use a \
                     claim whose devices meet it";

/// The DRA quickstart's gpu-test1 (`tests/fixtures/20`): its template, and
/// its pod1 with the PyTorch image.
pub(super) fn quickstart() -> (Value, Value) {
    let objects = fixtures::objects_of("20");
    let template = objects
        .iter()
        .find(|o| o["kind"] == "ResourceClaimTemplate")
        .cloned()
        .expect("the template single-gpu");
    let mut pod = objects
        .into_iter()
        .find(|o| o["kind"] == "Pod" && o["metadata"]["name"] == "pod1")
        .expect("pod1");
    pod["spec"]["containers"][0]["image"] = json!(PYTORCH);
    (template, pod)
}

/// The server reading `api`, where gpu-test1 is in enforce mode and the
/// template exists; ready, so its caches hold what `api` holds now.
async fn serve(api: &FakeApi, template: &Value) -> (Server, tempfile::TempDir) {
    serve_annotated(api, template, json!({})).await
}

/// [`serve`], gpu-test1 with the namespace `annotations`.
pub(super) async fn serve_annotated(
    api: &FakeApi,
    template: &Value,
    annotations: Value,
) -> (Server, tempfile::TempDir) {
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {"gpu-policy.io/mode": "enforce"},
            "annotations": annotations}}));
    api.insert(template.clone());
    Server::start_in_cluster(api).await
}

/// The ResourceClaim the resource claim controller makes for pod1 (UID
/// `pod_uid`) from the template: owned by the pod, annotated with the pod
/// claim's name, the template's spec.
pub(super) fn claim_for_pod1(template: &Value, pod_uid: &str) -> Value {
    let mut claim = claim_for_pod(NAMESPACE, CLAIM, "pod1", pod_uid, "gpu");
    claim["spec"] = template["spec"]["spec"].clone();
    claim
}

/// pod1 as `/mutate` left it, created: the API server gave it `POD_UID`.
async fn create_pod1(api: &FakeApi, connection: &mut Connection, pod: &Value) {
    let mut created = connection.mutated(pod).await;
    assert_eq!(created["metadata"]["annotations"][NEEDS_ANNOTATION], NEEDS, "{created}");
    created["metadata"]["uid"] = json!(POD_UID);
    api.insert(created);
}

/// `claim` on `/mutate`, which must admit it unchanged with one warning:
/// the warning, and the request's WARN log lines.
async fn admitted_unchanged(
    server: &Server,
    connection: &mut Connection,
    claim: &Value,
) -> (String, Vec<Value>) {
    let uid = next_uid();
    let reply = connection
        .post(MUTATE, body_of(&review(claim, &uid, false)))
        .await
        .unwrap_or_else(|err| panic!("the webhook answers: {err}; log:\n{}", server.log()));
    let response = reply.admission(&uid);
    assert_eq!(response["allowed"], true, "{response}");
    assert!(patch_of(&response).is_none(), "{response}");
    let warnings = response["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{response}");
    let warning = warnings[0].as_str().expect("a string").to_owned();
    let logged =
        server.request_log(&uid).await.into_iter().filter(|line| line["level"] == "WARN").collect();
    (warning, logged)
}

/// `claim` on `/mutate` gets the selector in its one request.
async fn assert_gets_the_selector(connection: &mut Connection, claim: &Value) -> Value {
    let response = connection.admit(MUTATE, claim).await;
    assert_eq!(response["allowed"], true, "{response}");
    let patch = patch_of(&response).unwrap_or_else(|| panic!("no patch: {response}"));
    let after = patched(claim, &patch);
    let mut expected = claim.clone();
    expected["spec"]["devices"]["requests"][0]["exactly"]["selectors"] =
        json!([{"cel": {"expression": SELECTOR}}]);
    assert_eq!(after, expected);
    after
}

#[tokio::test(flavor = "multi_thread")]
async fn a_template_pods_needs_are_recorded_and_go_into_the_claim_made_for_it() {
    let api = FakeApi::start().await;
    let (template, pod) = quickstart();
    let (server, _scratch) = serve(&api, &template).await;
    let mut connection = server.connect().await;

    // The pod: its needs recorded, no node affinity.
    let response = connection.admit(MUTATE, &pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    let patch = patch_of(&response).unwrap_or_else(|| panic!("no patch: {response}"));
    let after = patched(&pod, &patch);
    assert!(after["spec"].get("affinity").is_none(), "{after}");
    let annotations = &after["metadata"]["annotations"];
    assert_eq!(annotations[NEEDS_ANNOTATION], NEEDS, "{after}");
    let mutations = annotations["gpu-policy.io/mutations"].as_str().unwrap_or_default();
    assert!(mutations.split(',').any(|rule| rule == "compute-affinity"), "{after}");
    let again = connection.admit(MUTATE, &after).await;
    assert_eq!(again["allowed"], true, "{again}");
    assert!(patch_of(&again).is_none(), "{again}");
    let validated = connection.admit(ENFORCE, &after).await;
    assert_eq!(validated["allowed"], true, "{validated}");

    // The pod is created; the resource claim controller makes its claim.
    let mut created = after.clone();
    created["metadata"]["uid"] = json!(POD_UID);
    api.insert(created);
    assert_eq!(api.pod_gets(NAMESPACE, "pod1"), 0);
    let claim = claim_for_pod1(&template, POD_UID);
    let with_selector = assert_gets_the_selector(&mut connection, &claim).await;
    // One GET of the pod, whole (its images give the floors); nothing else:
    // the caches know its template.
    assert_eq!(api.pod_gets(NAMESPACE, "pod1"), 1);
    let path = crate::support::fake_api::pod_path(NAMESPACE, "pod1");
    assert!(
        !api.metadata_requests().iter().any(|(_, sent)| sent.starts_with(&path)),
        "{:?}",
        api.metadata_requests()
    );
    let named_gets = api
        .requests()
        .into_iter()
        .filter(|(method, sent)| {
            method == "GET" && sent.contains("/namespaces/gpu-test1/resourceclaim")
        })
        .count();
    assert_eq!(named_gets, 0, "{:?}", api.requests());

    // Re-invocation: the selector is there already.
    let again = connection.admit(MUTATE, &with_selector).await;
    assert_eq!(again["allowed"], true, "{again}");
    assert!(patch_of(&again).is_none(), "{again}");
}

/// A pod on a claim of its own (`resourceClaimName`).
pub(super) fn pod_on_shared_claim() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "shared-user", "namespace": NAMESPACE},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "shared-gpu"}],
            "containers": [{"name": "ctr", "image": PYTORCH,
                "resources": {"claims": [{"name": "gpu"}]}}]}})
}

/// `pod` through `/mutate` then `/validate/enforce`, as the API server
/// calls them: the validating webhook's answer.
async fn validated(connection: &mut Connection, pod: &Value) -> Value {
    let after = connection.mutated(pod).await;
    connection.admit(ENFORCE, &after).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_on_a_claim_allocated_a_device_below_its_needs_is_denied() {
    let api = FakeApi::start().await;
    for slice in p100_and_a100_slices() {
        api.insert(slice);
    }
    api.insert(allocated(shared_claim(NAMESPACE, "shared-gpu"), &[("node-1", "gpu-0")]));
    let (template, _) = quickstart();
    // Ready: the claim and the slices are in the caches.
    let (server, _scratch) = serve(&api, &template).await;
    let mut connection = server.connect().await;
    let pod = pod_on_shared_claim();

    let denied = validated(&mut connection, &pod).await;
    assert_eq!(denied["allowed"], false, "{denied}");
    assert_eq!(denied["status"]["code"], 403, "{denied}");
    assert_eq!(denied["status"]["message"], BELOW, "{denied}");

    // The claim allocated the A100 instead: allowed once the cache has it.
    api.insert(allocated(shared_claim(NAMESPACE, "shared-gpu"), &[("node-2", "gpu-0")]));
    let deadline = Instant::now() + Duration::from_secs(15);
    let allowed = loop {
        let response = validated(&mut connection, &pod).await;
        if response["allowed"] == true {
            break response;
        }
        assert_eq!(response["status"]["message"], BELOW, "{response}");
        assert!(Instant::now() < deadline, "still denied: {response}; log:\n{}", server.log());
        sleep(POLL).await;
    };
    assert!(!allowed["warnings"].to_string().contains("shared-gpu"), "{allowed}");
}

/// The one WARN line of a request whose claim was admitted unchanged: its
/// message `message`, naming the pod.
fn the_log_line<'a>(logged: &'a [Value], message: &str) -> &'a Value {
    let [line] = logged else { panic!("one WARN line: {logged:?}") };
    assert_eq!(line["message"], message, "{line}");
    assert_eq!(line["namespace"], NAMESPACE, "{line}");
    assert_eq!(line["pod"], "pod1", "{line}");
    line
}

/// The webhook serving the quickstart's template, pod1 admitted and stored
/// with [`POD_UID`], and a connection: where each fault case of a claim
/// made for pod1 starts.
struct Pod1 {
    api: FakeApi,
    server: Server,
    _scratch: tempfile::TempDir,
    connection: Connection,
    template: Value,
}

async fn pod1_stored() -> Pod1 {
    let api = FakeApi::start().await;
    let (template, pod) = quickstart();
    let (server, scratch) = serve(&api, &template).await;
    let mut connection = server.connect().await;
    create_pod1(&api, &mut connection, &pod).await;
    Pod1 { api, server, _scratch: scratch, connection, template }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_whose_pod_answers_500_is_admitted_unchanged() {
    let Pod1 { api, server, _scratch, mut connection, template } = pod1_stored().await;
    let claim = claim_for_pod1(&template, POD_UID);

    api.fail_pod_get(NAMESPACE, "pod1", 500, 1);
    let (warning, logged) = admitted_unchanged(&server, &mut connection, &claim).await;
    assert_eq!(api.pod_gets(NAMESPACE, "pod1"), 1);
    assert!(warning.starts_with(&format!("{UNCHANGED}cannot read its pod \"pod1\"")), "{warning}");
    let line = the_log_line(&logged, UNREADABLE_LOG);
    let error = line["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("the API server answered 500 "), "{line}");
    // The reason reaches the warning whole enough to act on.
    assert!(
        warning.starts_with(&format!(
            "{UNCHANGED}cannot read its pod \"pod1\": the API server answered 500"
        )),
        "{warning}"
    );

    // The fault spent, the same claim gets its selector.
    assert_gets_the_selector(&mut connection, &claim).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_whose_pod_does_not_answer_is_admitted_unchanged_in_time() {
    let Pod1 { api, server, _scratch, mut connection, template } = pod1_stored().await;
    let claim = claim_for_pod1(&template, POD_UID);

    // The GET hangs until released: the webhook answers anyway, before
    // the API server's timeout (the connection's own bound is 15 s).
    api.hang_pod_get(NAMESPACE, "pod1", 1);
    let (warning, logged) = admitted_unchanged(&server, &mut connection, &claim).await;
    api.release_hangs();
    assert!(warning.starts_with(&format!("{UNCHANGED}cannot read its pod \"pod1\"")), "{warning}");
    let line = the_log_line(&logged, UNREADABLE_LOG);
    assert_eq!(line["error"], "no answer within 2s", "{line}");
    assert_eq!(warning, format!("{UNCHANGED}cannot read its pod \"pod1\": no answer within 2s"));

    assert_gets_the_selector(&mut connection, &claim).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_whose_pod_is_missing_is_admitted_unchanged() {
    let api = FakeApi::start().await;
    let (template, _) = quickstart();
    let (server, _scratch) = serve(&api, &template).await;
    let mut connection = server.connect().await;
    let claim = claim_for_pod1(&template, POD_UID);

    let (warning, logged) = admitted_unchanged(&server, &mut connection, &claim).await;
    assert_eq!(api.pod_gets(NAMESPACE, "pod1"), 1);
    assert_eq!(warning, format!("{UNCHANGED}{NOT_FOUND}"));
    let line = the_log_line(&logged, NOT_FOUND_LOG);
    assert!(line.get("error").is_none(), "{line}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_made_for_another_pod_of_the_same_name_is_admitted_unchanged() {
    let Pod1 { api, server, _scratch, mut connection, template } = pod1_stored().await;
    // Made for an earlier pod1, since deleted and created again.
    let claim = claim_for_pod1(&template, OTHER_UID);

    let (warning, logged) = admitted_unchanged(&server, &mut connection, &claim).await;
    assert_eq!(api.pod_gets(NAMESPACE, "pod1"), 1);
    // The answer of a missing pod: a forged claim cannot tell them apart.
    assert_eq!(warning, format!("{UNCHANGED}{NOT_FOUND}"));
    // The log line tells them apart, naming both UIDs.
    let line = the_log_line(&logged, ANOTHER_POD_LOG);
    assert_eq!(line["pod_uid"], POD_UID, "{line}");
    assert_eq!(line["claim_pod_uid"], OTHER_UID, "{line}");

    // The claim made for this pod1 gets its selector.
    assert_gets_the_selector(&mut connection, &claim_for_pod1(&template, POD_UID)).await;
}
