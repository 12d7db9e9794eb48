//! Registry mode on a claim made for a pod: the floors the claim gets are
//! those the registry gives the pod's image, as at the pod's admission (the
//! image table does not know an in-house image).

use serde_json::json;

use super::cuda_13_config;
use crate::support::fake_api::FakeApi;
use crate::support::fake_api::dra::claim_for_pod;
use crate::support::fake_registry::{Auth, FakeRegistry, registry_config};
use crate::support::server::{MUTATE, Options, Server, patch_of, patched, write_atomically};

const POD_UID: &str = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d";

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_gets_the_floors_the_registry_gives_its_pods_image() {
    let registry = FakeRegistry::start(Auth::AnonymousBearer).await;
    registry.push_image("team/trainer", "2026.1", &cuda_13_config());
    let image = format!("{}/team/trainer:2026.1", registry.host());
    let api = FakeApi::start().await;
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "ml", "labels": {"gpu-policy.io/mode": "enforce"}}}));
    // Admitted before its template existed: nothing recorded.
    api.insert(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "ml", "uid": POD_UID},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single"}],
            "containers": [{"name": "train", "image": image,
                "resources": {"claims": [{"name": "gpu"}]}}]}}));
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.yaml");
    write_atomically(&config, registry_config(&[registry.host()], "2s", "").as_bytes());
    let options = Options { config: Some(config), ..Options::default() };
    let (server, _scratch) = Server::start_in_cluster_with(&api, options).await;
    let mut connection = server.connect().await;

    let claim = claim_for_pod("ml", "trainer-gpu-x7k2p", "trainer", POD_UID, "gpu");
    let response = connection.admit(MUTATE, &claim).await;
    assert_eq!(response["allowed"], true, "{response}");
    let patch = patch_of(&response).unwrap_or_else(|| panic!("no patch: {response}"));
    let claimed = patched(&claim, &patch);
    let selector =
        claimed["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
            .as_str()
            .unwrap_or_default();
    // CUDA 13.0 as its config says: compute capability 7.5, and a driver
    // for CUDA 13.0 or of the 535 branch.
    assert!(selector.contains(r#"semver("7.5.0")"#), "{selector}");
    assert!(selector.contains(r#"cudaDriverVersion.compareTo(semver("13.0.0"))"#), "{selector}");
    assert!(response["warnings"].as_array().is_none_or(Vec::is_empty), "{response}");
    assert_eq!(registry.blob_gets("team/trainer"), 1);
}
