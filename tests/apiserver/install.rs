//! Install and RBAC: what `manifests --webhook-url` renders applies
//! cleanly, the server runs on exactly the RBAC it ships, and its Secret
//! route makes the API server trust it.

use crate::support::control_plane::{ControlPlane, NAME, Webhook, WebhookOptions};
use crate::support::gpu_pod;

#[tokio::test]
async fn the_rendered_install_applies_and_its_rbac_is_enough() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let webhook = Webhook::install(&cluster, WebhookOptions::default()).await;
    // Ready means every watch has listed; a missing verb shows as forbidden.
    let log = webhook.log();
    assert!(!log.to_lowercase().contains("forbidden"), "{log}");
    // The Secret route filled the Secret the install made empty in the
    // webhook's namespace (and every caBundle from it: `install` waits for
    // that).
    let secret = cluster.get(&["secret", "-n", NAME, "gpu-policy-tls"]);
    assert_eq!(secret["type"], "Opaque");
    let mut keys: Vec<&String> =
        secret["data"].as_object().into_iter().flatten().map(|(k, _)| k).collect();
    keys.sort();
    assert_eq!(keys, ["ca.crt", "ca.key", "tls.crt", "tls.key"]);
    // The API server's calls succeed: a GPU pod in an enforce namespace is
    // mutated on a server-side dry run.
    cluster.namespace("ml", Some("enforce"));
    webhook.wait_effective(&cluster, "ml");
    let stored =
        cluster.dry_run(&gpu_pod().name("train").namespace("ml").manifest()).success().value();
    assert_eq!(stored["spec"]["runtimeClassName"], "nvidia");
    // The CUDA 12.6 image needs compute capability 5.0: the affinity too.
    assert_eq!(
        stored["metadata"]["annotations"]["gpu-policy.io/mutations"],
        "runtime-class,compute-affinity"
    );
}
