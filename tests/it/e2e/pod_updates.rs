//! A pod's own UPDATE through the binary, as the API server sends it after
//! a second `kubectl apply` and after `kubectl annotate --overwrite`: the
//! mutating webhook's patch, applied to the update, gives back the stored
//! pod; the validating webhooks then allow it; an update of nothing the
//! policy governs comes back untouched. (The API server sends only the
//! updates its `matchConditions` pass: `tests/apiserver/pod_updates.rs`.)

use serde_json::{Value, json};

use crate::support::review::Review;
use crate::support::server::{
    ENFORCE, MUTATE, Options, Server, WARN, body_of, next_uid, patch_of, patched,
};

const NAMESPACE: &str = "ml";

fn authored() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": NAMESPACE, "uid": "4f0c8a52-2f5e-4b8e-9d59-1d1b0c3c0a01"},
        "spec": {"containers": [
            {"name": "train", "image": "nvidia/cuda:12.6.3-base-ubuntu24.04",
             "resources": {"limits": {"nvidia.com/gpu": 1}}},
            {"name": "sidecar", "image": "busybox",
             "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]},
        ]},
    })
}

/// The admission response of `review` sent to `path`.
async fn answer(server: &Server, path: &str, review: Review) -> Value {
    let uid = next_uid();
    let mut connection = server.connect().await;
    let reply = connection
        .post(path, body_of(&review.uid(&uid).json()))
        .await
        .unwrap_or_else(|err| panic!("{path}: {err}"));
    reply.admission(&uid)
}

#[tokio::test]
async fn a_reapply_and_an_annotation_overwrite_leave_the_stored_pod_as_it_was() {
    let server = Server::start(Options::default(), None).await;
    let mut connection = server.connect().await;
    let stored = connection.mutated(&authored()).await;
    assert_eq!(
        stored["spec"]["containers"][1]["env"],
        json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]),
        "{stored}"
    );

    // The second apply sends the author's `all` back.
    let mut reapplied = stored.clone();
    reapplied["spec"]["containers"][1]["env"][0]["value"] = json!("all");
    // `kubectl annotate --overwrite pod/trainer gpu-policy.io/mutations=`.
    let mut annotated = stored.clone();
    annotated["metadata"]["annotations"]["gpu-policy.io/mutations"] = json!("");
    for update in [reapplied, annotated] {
        let response = answer(&server, MUTATE, Review::update(&update, &stored, NAMESPACE)).await;
        assert_eq!(response["allowed"], true, "{response}");
        let patch = patch_of(&response).unwrap_or_else(|| panic!("a patch: {response}"));
        let after = patched(&update, &patch);
        assert_eq!(after, stored);
        let validated = answer(&server, ENFORCE, Review::update(&after, &stored, NAMESPACE)).await;
        assert_eq!(validated["allowed"], true, "{validated}");
        assert!(validated.get("warnings").is_none(), "{validated}");
        // In a warn namespace nothing is changed, and the update is warned.
        let warned = answer(&server, WARN, Review::update(&update, &stored, NAMESPACE)).await;
        assert_eq!(warned["allowed"], true, "{warned}");
        assert!(patch_of(&warned).is_none(), "{warned}");
        assert!(
            warned["warnings"]
                .as_array()
                .is_some_and(|w| w.iter().any(|w| w.as_str().is_some_and(|w| w.contains("would")))),
            "{warned}"
        );
    }

    // A label changes nothing the policy governs: no patch, no warning.
    let mut labelled = stored.clone();
    labelled["metadata"]["labels"] = json!({"team": "vision"});
    let response = answer(&server, MUTATE, Review::update(&labelled, &stored, NAMESPACE)).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(patch_of(&response).is_none(), "{response}");
}

/// A pod the webhook never mutated (created before its namespace opted
/// in): an update gets no pin its spec cannot take.
#[tokio::test]
async fn a_pod_created_before_its_namespace_opted_in_gets_nothing_new() {
    let server = Server::start(Options::default(), None).await;
    let old = authored();
    let mut new = old.clone();
    new["spec"]["containers"][0]["image"] = json!("nvidia/cuda:12.8.1-base-ubuntu24.04");
    let response = answer(&server, MUTATE, Review::update(&new, &old, NAMESPACE)).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(patch_of(&response).is_none(), "{response}");
}
