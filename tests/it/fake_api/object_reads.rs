//! One object read by name while a claim's review waits
//! (`gpu_policy::cluster::{pod_text, claim_text}`): the Pod a claim is made
//! for, whole, and the claims and templates it names; each a plain GET,
//! bounded in time and in bytes, every failure one line.

use gpu_policy::cluster::{MAX_OBJECT_BYTES, claim_text, pod_text};
use gpu_policy::policy::dra::claims::ClaimKind;
use tokio::time::Instant;

use super::*;

const BUDGET: Duration = Duration::from_millis(500);

fn deadline() -> Instant {
    Instant::now() + BUDGET
}

/// The GETs received of `path` (watches excluded).
fn gets(fake: &FakeApi, path: &str) -> usize {
    fake.requests()
        .iter()
        .filter(|(method, sent)| method == "GET" && sent.split('?').next() == Some(path))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_is_read_whole_once_within_its_budget() {
    let fake = FakeApi::start().await;
    fake.insert(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "ml", "uid": "uid-trainer"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "eight"}],
            "containers": [{"name": "ctr", "image": "nvcr.io/nvidia/pytorch:25.12-py3"}]}}));
    let client = fake.client();

    let text = pod_text(&client, "ml", "trainer", deadline(), BUDGET).await;
    let pod: Value = serde_json::from_str(&text.expect("read").expect("found")).expect("JSON");
    assert_eq!(pod["metadata"]["uid"], "uid-trainer");
    // The spec comes whole: the rules read its images and claims.
    assert_eq!(pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"], "eight");
    assert_eq!(fake.pod_gets("ml", "trainer"), 1);
    assert!(fake.metadata_requests().is_empty());

    assert_eq!(pod_text(&client, "ml", "gone", deadline(), BUDGET).await, Ok(None));
    // A name no pod may have asks nothing (it would change the path).
    let before = fake.requests().len();
    for (namespace, name) in [("ml", "../secrets/x"), ("ML", "trainer"), ("ml", "")] {
        assert_eq!(pod_text(&client, namespace, name, deadline(), BUDGET).await, Ok(None));
    }
    assert_eq!(fake.requests().len(), before);

    fake.fail_pod_get("ml", "trainer", 500, 1);
    let reason = pod_text(&client, "ml", "trainer", deadline(), BUDGET)
        .await
        .expect_err("a 500 is an error")
        .to_string();
    assert!(reason.starts_with("the API server answered 500 "), "{reason}");
    assert!(!reason.contains('\n'), "{reason}");

    fake.hang_pod_get("ml", "trainer", 1);
    let started = Instant::now();
    let reason = pod_text(&client, "ml", "trainer", deadline(), BUDGET)
        .await
        .expect_err("no answer by the deadline is an error")
        .to_string();
    fake.release_hangs();
    assert_eq!(reason, format!("no answer within {BUDGET:?}"));
    assert!(started.elapsed() < LIMIT, "{:?}", started.elapsed());

    // The faults are spent: the pod is read again.
    assert!(matches!(pod_text(&client, "ml", "trainer", deadline(), BUDGET).await, Ok(Some(_))));
    assert_eq!(fake.pod_gets("ml", "trainer"), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_and_templates_are_read_by_name_in_resource_k8s_io_v1() {
    let fake = FakeApi::start().await;
    let spec = json!({"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 8}}]}});
    fake.insert(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "eight", "namespace": "ml"}, "spec": {"spec": spec}}));
    fake.insert(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "trainer-gpu-x1", "namespace": "ml"}, "spec": spec}));
    let client = fake.client();

    let template =
        claim_text(&client, "v1", "ml", ClaimKind::Template, "eight", deadline(), BUDGET)
            .await
            .expect("read")
            .expect("found");
    let template: Value = serde_json::from_str(&template).expect("JSON");
    assert_eq!(template["spec"]["spec"], spec);
    let claim =
        claim_text(&client, "v1", "ml", ClaimKind::Claim, "trainer-gpu-x1", deadline(), BUDGET)
            .await
            .expect("read")
            .expect("found");
    let claim: Value = serde_json::from_str(&claim).expect("JSON");
    assert_eq!(claim["spec"], spec);
    assert_eq!(
        gets(&fake, "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates/eight"),
        1
    );
    assert_eq!(
        gets(&fake, "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/trainer-gpu-x1"),
        1
    );

    // A template of that name as a claim, or in another namespace: none.
    assert_eq!(
        claim_text(&client, "v1", "ml", ClaimKind::Claim, "eight", deadline(), BUDGET).await,
        Ok(None)
    );
    assert_eq!(
        claim_text(&client, "v1", "other", ClaimKind::Template, "eight", deadline(), BUDGET).await,
        Ok(None)
    );
    fake.fail_next(
        "GET",
        "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates/eight",
        403,
        1,
    );
    let reason = claim_text(&client, "v1", "ml", ClaimKind::Template, "eight", deadline(), BUDGET)
        .await
        .expect_err("a 403 is an error")
        .to_string();
    assert!(reason.starts_with("the API server answered 403 "), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_the_bound_is_not_read_to_its_end() {
    let fake = FakeApi::start().await;
    // More than the bound in one annotation: no pod etcd stores is so large.
    let large = "x".repeat(MAX_OBJECT_BYTES);
    fake.insert(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "large", "namespace": "ml", "uid": "uid-large",
            "annotations": {"example.com/large": large}},
        "spec": {"containers": [{"name": "ctr", "image": "busybox"}]}}));
    let client = fake.client();
    let reason = pod_text(&client, "ml", "large", Instant::now() + LIMIT, LIMIT)
        .await
        .expect_err("too large")
        .to_string();
    assert_eq!(reason, format!("the API server's answer is over {} MiB", MAX_OBJECT_BYTES >> 20));
}
