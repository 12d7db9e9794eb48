//! Client certificates (`--client-ca`, `--client-name`): checked in the
//! TLS handshake, so a refused client never reaches a handler, and the CA
//! file reloaded like the serving certificate.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use tokio::time::{Instant, sleep};

use crate::support::server::{
    IO_TIMEOUT, Options, POLL, READY_TIMEOUT, Server, admit_as, write_atomically,
};
use crate::support::tls::{client_config_as, test_ca, test_client};

/// A client presenting `identity` (or none), trusting the server's CA.
fn identity_config(server: &Server, identity: Option<&(String, String)>) -> Arc<ClientConfig> {
    client_config_as(&server.ca_pem, identity.map(|(cert, key)| (cert.as_str(), key.as_str())))
}

/// The sum of every `gpu_policy_admission_requests_total` sample: requests
/// a handler answered.
async fn answered(server: &Server) -> f64 {
    server
        .metrics()
        .await
        .lines()
        .filter(|line| line.starts_with("gpu_policy_admission_requests_total{"))
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn client_certificates_are_checked_in_the_handshake() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (issuer, ca_pem) = test_ca();
    let (other_issuer, _) = test_ca();
    let ca_path = dir.path().join("client-ca.crt");
    write_atomically(&ca_path, ca_pem.as_bytes());
    let server = Server::start(
        Options {
            client_auth: Some((
                ca_path,
                vec!["kube-apiserver".to_owned(), "apiserver.example".to_owned()],
            )),
            ..Options::default()
        },
        None,
    )
    .await;

    let refused = [
        ("no client certificate", None),
        ("a certificate of another CA", Some(test_client(&other_issuer, "kube-apiserver", &[]))),
        (
            "the right CA, a wrong name",
            Some(test_client(&issuer, "intruder", &["intruder.example"])),
        ),
    ];
    for (label, identity) in &refused {
        let outcome = admit_as(&server, identity_config(&server, identity.as_ref())).await;
        assert!(outcome.is_err(), "{label}: served: {outcome:?}; log:\n{}", server.log());
    }
    assert_eq!(answered(&server).await, 0.0, "a refused client reached a handler");
    // The log is written off the request path: wait for the lines.
    for line in [
        "client certificate refused: not signed by a --client-ca CA",
        "client certificate refused: no CN or DNS name is a --client-name",
    ] {
        server.wait_for_log(line, Duration::from_secs(10)).await;
    }

    for (label, identity) in [
        ("the CN", test_client(&issuer, "kube-apiserver", &[])),
        ("a DNS name", test_client(&issuer, "other", &["apiserver.example"])),
    ] {
        let response = admit_as(&server, identity_config(&server, Some(&identity)))
            .await
            .unwrap_or_else(|err| panic!("{label}: refused: {err}; log:\n{}", server.log()));
        assert_eq!(response["allowed"], true, "{label}: {response}");
    }
    assert_eq!(answered(&server).await, 2.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotated_client_ca_is_picked_up_and_a_broken_one_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (old_issuer, old_ca) = test_ca();
    let (new_issuer, new_ca) = test_ca();
    let ca_path = dir.path().join("client-ca.crt");
    write_atomically(&ca_path, old_ca.as_bytes());
    let server = Server::start(
        Options {
            client_auth: Some((ca_path.clone(), vec!["kube-apiserver".to_owned()])),
            ..Options::default()
        },
        None,
    )
    .await;
    let old_client =
        identity_config(&server, Some(&test_client(&old_issuer, "kube-apiserver", &[])));
    let new_client =
        identity_config(&server, Some(&test_client(&new_issuer, "kube-apiserver", &[])));
    server.wait_for_metric_line(r#"gpu_policy_reload_success{source="client_ca"} 1"#).await;
    admit_as(&server, Arc::clone(&old_client))
        .await
        .expect("a client of the CA in force is served");
    assert!(admit_as(&server, Arc::clone(&new_client)).await.is_err());

    write_atomically(&ca_path, new_ca.as_bytes());
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(err) = admit_as(&server, Arc::clone(&new_client)).await {
        assert!(
            Instant::now() < deadline,
            "the new client CA is not in force within 10 s ({err}); log:\n{}",
            server.log()
        );
        sleep(Duration::from_millis(100)).await;
    }
    assert!(
        admit_as(&server, Arc::clone(&old_client)).await.is_err(),
        "a client of the replaced CA is still served"
    );
    server.wait_for_log("client CA reloaded", IO_TIMEOUT).await;

    // A broken file is refused; the CA in force stays.
    write_atomically(&ca_path, b"garbage\n");
    server.wait_for_metric_line(r#"gpu_policy_reload_success{source="client_ca"} 0"#).await;
    admit_as(&server, Arc::clone(&new_client))
        .await
        .expect("the CA in force stays after a broken file");
    assert!(admit_as(&server, old_client).await.is_err());
    assert!(server.log().contains("new client CA refused"));

    // Put back as it was: the reload metric recovers.
    write_atomically(&ca_path, new_ca.as_bytes());
    server.wait_for_metric_line(r#"gpu_policy_reload_success{source="client_ca"} 1"#).await;
    admit_as(&server, new_client).await.expect("a client of the CA in force is served");
}

/// `serve` does not start without the CAs of --client-ca: it exits 1 with
/// the reason, so the pod never becomes ready.
#[tokio::test(flavor = "multi_thread")]
async fn an_unusable_client_ca_stops_serve_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let garbage = dir.path().join("garbage.crt");
    std::fs::write(&garbage, b"not a certificate\n").expect("write");
    let (issuer, _) = test_ca();
    let (leaf, _) = test_client(&issuer, "kube-apiserver", &[]);
    let leaf_path = dir.path().join("leaf.crt");
    std::fs::write(&leaf_path, leaf).expect("write");
    for (ca, reason) in [
        (garbage, "no CERTIFICATE block"),
        (leaf_path, "is not a CA certificate"),
        (dir.path().join("missing.crt"), "cannot read"),
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gpu-policy"))
            .args(["serve", "--no-cluster", "--log-format", "text"])
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .arg("--certs-dir")
            .arg(dir.path().join("certs"))
            .arg("--client-ca")
            .arg(&ca)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        let deadline = Instant::now() + READY_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("serve with --client-ca {} kept running", ca.display());
            }
            sleep(POLL).await;
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr piped"), &mut stderr)
            .expect("read stderr");
        assert_eq!(status.code(), Some(1), "{stderr}");
        // The one-line reason (the log lines may come after it).
        assert!(
            stderr.lines().any(|line| line.starts_with("gpu-policy: ")
                && line.contains(&ca.display().to_string())
                && line.contains(reason)),
            "{stderr}"
        );
    }
}
