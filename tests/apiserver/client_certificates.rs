//! Client certificates: the API server presents the certificate its
//! admission configuration names (`DIR/webhook-kubeconfig.yaml`); with
//! `serve --client-ca` and `--client-name` its calls are served and a client
//! with another certificate is refused.

use crate::support::control_plane::{ControlPlane, NAME, Webhook, WebhookOptions};
use crate::support::gpu_pod;
use crate::support::server::admit_as;
use crate::support::tls::{client_config_as, test_ca, test_client};

#[tokio::test]
async fn only_the_api_servers_client_certificate_is_served() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let webhook = Webhook::install(
        &cluster,
        WebhookOptions { client_auth: true, ..WebhookOptions::default() },
    )
    .await;
    cluster.namespace("ml", Some("enforce"));
    // The API server's calls are served: the pod comes back mutated.
    webhook.wait_effective(&cluster, "ml");
    let stored =
        cluster.create(&gpu_pod().name("train").namespace("ml").manifest()).success().value();
    assert_eq!(stored["spec"]["runtimeClassName"], "nvidia");

    // Another client, trusting the server's CA from its Secret.
    let secret = cluster.get(&["secret", "-n", NAME, "gpu-policy-tls"]);
    let ca_pem = {
        use base64::Engine as _;
        let encoded = secret["data"]["ca.crt"].as_str().expect("ca.crt");
        base64::engine::general_purpose::STANDARD.decode(encoded).expect("base64")
    };
    // With the right name from another CA, and with no certificate at all.
    let (other_issuer, _) = test_ca();
    let impostor = test_client(&other_issuer, "kube-apiserver-webhook-client", &[]);
    let refused =
        admit_as(&webhook.server, client_config_as(&ca_pem, Some((&impostor.0, &impostor.1))))
            .await;
    assert!(refused.is_err(), "another CA's certificate: {refused:?}");
    let anonymous = admit_as(&webhook.server, client_config_as(&ca_pem, None)).await;
    assert!(anonymous.is_err(), "no certificate: {anonymous:?}");
    // The API server's calls still are served afterwards.
    cluster.create(&gpu_pod().name("after").namespace("ml").manifest()).success();
}
