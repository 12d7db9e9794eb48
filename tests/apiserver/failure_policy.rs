//! Failure policy: with the webhook down, `enforce` namespaces fail closed
//! (Fail) and `warn` namespaces fail open (Ignore); after a restart both
//! work again.

use crate::support::control_plane::{ControlPlane, Webhook, WebhookOptions};
use crate::support::gpu_pod;

#[tokio::test]
async fn a_stopped_webhook_fails_enforce_closed_and_warn_open() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let mut webhook = Webhook::install(&cluster, WebhookOptions::default()).await;
    cluster.namespace("strict", Some("enforce"));
    cluster.namespace("lenient", Some("warn"));
    webhook.wait_effective(&cluster, "strict");

    webhook.stop().await;
    let refused = cluster.create(&gpu_pod().name("while-down").namespace("strict").manifest());
    assert_ne!(refused.code, 0, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("failed calling webhook \"mutate.gpu-policy.io\": failed to call webhook")
            && refused.stderr.contains("connection refused"),
        "the API server's own error: {}",
        refused.stderr
    );
    let admitted =
        cluster.create(&gpu_pod().name("while-down").namespace("lenient").manifest()).success();
    assert!(
        !admitted.stderr.contains("gpu-policy"),
        "no warning without the webhook: {}",
        admitted.stderr
    );

    webhook.restart(&cluster).await;
    webhook.wait_effective(&cluster, "strict");
    let stored = cluster
        .create(&gpu_pod().name("after-restart").namespace("strict").manifest())
        .success()
        .value();
    assert_eq!(stored["spec"]["runtimeClassName"], "nvidia");
    // The warn webhook is back too: a pod asking for more cards than a
    // container may have is admitted with the warning it earns.
    let warned = cluster
        .create(&gpu_pod().name("after-restart").namespace("lenient").gpus(99).manifest())
        .success();
    assert!(warned.stderr.contains("Warning: gpu-policy:"), "{}", warned.stderr);
}
