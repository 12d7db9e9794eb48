//! `serve --kubeconfig` with Dynamic Resource Allocation: a pod's claims
//! resolve from the cluster, including a template created after the pod was
//! first admitted, and a cluster without `resource.k8s.io/v1` is served.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::{Instant, sleep};

use super::visible_devices;
use crate::dra_cluster::{claimed_pod, template};
use crate::support::fake_api::FakeApi;
use crate::support::server::{
    Connection, ENFORCE, MUTATE, POLL, Server, body_of, next_uid, opt_in_review, patch_of, patched,
};

const DRA_RESOURCES: [&str; 4] =
    ["resourceclaims", "resourceclaimtemplates", "deviceclasses", "resourceslices"];

async fn serve(api: &FakeApi) -> (Server, tempfile::TempDir) {
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "ml", "labels": {"gpu-policy.io/mode": "enforce"}}}));
    Server::start_in_cluster(api).await
}

/// The containers `/mutate` pins, and the warnings of
/// `/validate/enforce`, as the API server would call them for `pod`.
async fn outcome(connection: &mut Connection, pod: &Value) -> (Vec<String>, String) {
    let response = connection.admit(MUTATE, pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    let after = patch_of(&response).map_or_else(|| pod.clone(), |patch| patched(pod, &patch));
    let pinned = after["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| visible_devices(c).iter().any(|e| e["value"] == "void"))
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect();
    let validated = connection.admit(ENFORCE, &after).await;
    assert_eq!(validated["allowed"], true, "{validated}");
    (pinned, validated["warnings"].to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_template_created_after_the_first_admission_is_picked_up() {
    let api = FakeApi::start().await;
    let (server, _scratch) = serve(&api).await;
    let mut connection = server.connect().await;
    let pod = claimed_pod("early", "single-gpu");

    let (pinned, warnings) = outcome(&mut connection, &pod).await;
    assert_eq!(pinned, ["ctr", "sidecar"]);
    assert!(warnings.contains("claim \\\"gpu\\\" unresolved"), "{warnings}");

    api.insert(template("single-gpu", "gpu.nvidia.com", 1));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (pinned, warnings) = outcome(&mut connection, &pod).await;
        if pinned == ["sidecar"] && !warnings.contains("unresolved") {
            break;
        }
        assert!(Instant::now() < deadline, "still {pinned:?} {warnings}; log:\n{}", server.log());
        sleep(POLL).await;
    }
    for resource in DRA_RESOURCES {
        server
            .wait_for_metric_line(&format!(
                "gpu_policy_cluster_cache_stale{{resource=\"{resource}\"}} 0"
            ))
            .await;
        server
            .wait_for_metric_line(&format!(
                "gpu_policy_cluster_cache_watched{{resource=\"{resource}\",version=\"v1\"}} 1"
            ))
            .await;
    }
}

/// Kubernetes 1.32 and 1.33 with DRA on: the server watches
/// `resource.k8s.io/v1beta1`, says so once, and a pod's v1beta1 claim
/// resolves (its GPU container is not pinned).
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_serving_dra_as_v1beta1_is_watched_in_that_version() {
    let api = FakeApi::start().await;
    api.serve_dra_as("v1beta1");
    api.insert(json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "single-gpu", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 1}]}}}}));
    let (server, _scratch) = serve(&api).await;
    let mut connection = server.connect().await;
    let pod = claimed_pod("dra", "single-gpu");
    let (pinned, warnings) = outcome(&mut connection, &pod).await;
    assert_eq!(pinned, ["sidecar"], "{warnings}");
    assert!(!warnings.contains("unresolved"), "{warnings}");
    let log = server.log();
    assert!(
        log.lines().any(|line| line.contains("watching Dynamic Resource Allocation")
            && line.contains("resource.k8s.io/v1beta1")),
        "{log}"
    );
    for resource in DRA_RESOURCES {
        server
            .wait_for_metric_line(&format!(
                "gpu_policy_cluster_cache_watched{{resource=\"{resource}\",version=\"v1beta1\"}} 1"
            ))
            .await;
    }
}

/// Opting a namespace in warns about its pods with their claims resolved
/// from the cache, and about its claims that would be denied: how many
/// (no client certificate is required, so no names).
#[tokio::test(flavor = "multi_thread")]
async fn opting_in_warns_about_claims_and_pods_that_claim_too_much() {
    let api = FakeApi::start().await;
    api.insert(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "six", "namespace": "lab"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 6}}]}}}}));
    api.insert(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "every-gpu", "namespace": "lab"},
        "spec": {"devices": {"requests": [
            {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}]}}}));
    api.insert(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ten", "namespace": "lab"},
        "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "six"}],
            "containers": [
                {"name": "dra", "image": "x", "resources": {"claims": [{"name": "gpus"}]}},
                {"name": "plugin", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}));
    let (server, _scratch) = serve(&api).await;
    let mut connection = server.connect().await;

    let uid = next_uid();
    let body = opt_in_review("lab", "enforce", &uid);
    let reply = connection
        .post("/validate/namespace?timeout=10s", body_of(&body))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let response = reply.admission(&uid);
    assert_eq!(response["allowed"], true, "{response}");
    let warnings = response["warnings"].to_string();
    for expected in [
        "1 existing pod(s) in lab violate enforce mode; `gpu-policy audit -n lab` names them",
        "1 existing claim(s) in lab violate enforce mode; `gpu-policy audit -n lab` names them",
    ] {
        assert!(warnings.contains(expected), "{warnings}");
    }
    assert!(!warnings.contains("ten") && !warnings.contains("every-gpu"), "{warnings}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_without_dra_is_served_and_says_so_once() {
    let api = FakeApi::start().await;
    api.unregister_group_version("resource.k8s.io", "v1");
    // Server::start waits for /readyz: the DRA sources do not hold it.
    let (server, _scratch) = serve(&api).await;
    let mut connection = server.connect().await;
    let pod = claimed_pod("dra", "single-gpu");
    let (pinned, warnings) = outcome(&mut connection, &pod).await;
    assert_eq!(pinned, ["ctr", "sidecar"]);
    assert!(warnings.contains("unresolved"), "{warnings}");

    sleep(Duration::from_secs(2)).await;
    let log = server.log();
    let said: Vec<&str> = log.lines().filter(|line| line.contains("resource.k8s.io")).collect();
    assert_eq!(said.len(), 1, "{log}");
    assert!(
        said[0].contains("\"level\":\"INFO\"")
            && said[0].contains("does not serve Dynamic Resource Allocation"),
        "{log}"
    );
    for resource in DRA_RESOURCES {
        server
            .wait_for_metric_line(&format!(
                "gpu_policy_cluster_cache_stale{{resource=\"{resource}\"}} 0"
            ))
            .await;
        server
            .wait_for_metric_line(&format!(
                "gpu_policy_cluster_cache_watched{{resource=\"{resource}\",version=\"\"}} 0"
            ))
            .await;
    }
}
