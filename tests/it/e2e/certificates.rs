//! Serving certificates: rotation under load, and the generated pair kept
//! across a restart.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::time::{Instant, sleep};

use crate::support::fixtures::fixture;
use crate::support::server::{
    Connection, MUTATE, Options, Server, body_of, next_uid, review, write_atomically,
};
use crate::support::tls::{test_ca, test_leaf};

/// One request of the rotation client: which leaf the handshake presented,
/// or what failed.
type Outcome = Result<Vec<u8>, String>;

/// Sends requests, each on a fresh TLS connection, until `stop`.
fn spawn_fresh_connection_client(
    server: &Server,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<Outcome>> {
    let addr = server.admission;
    let config = server.client_config();
    let pod = fixture("11");
    tokio::spawn(async move {
        let mut outcomes = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let outcome = async {
                let mut connection = Connection::tls(addr, Arc::clone(&config)).await?;
                let uid = next_uid();
                let reply = connection.post(MUTATE, body_of(&review(&pod, &uid, false))).await?;
                let review: Value = serde_json::from_slice(&reply.body)
                    .map_err(|e| format!("status {}: {e}: {}", reply.status, reply.text()))?;
                if reply.status != 200 || review["response"]["uid"] != uid.as_str() {
                    return Err(format!("status {}: {}", reply.status, reply.text()));
                }
                Ok(connection.peer_certificate)
            }
            .await;
            outcomes.push(outcome);
            sleep(Duration::from_millis(20)).await;
        }
        outcomes
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn certificate_rotation_is_seamless_and_a_broken_file_is_refused() {
    let tls_dir = tempfile::tempdir().expect("tempdir");
    let cert_path = tls_dir.path().join("tls.crt");
    let key_path = tls_dir.path().join("tls.key");
    let (issuer, ca_pem) = test_ca();
    let (cert1, key1, der1) = test_leaf(&issuer, 1);
    let (cert2, key2, der2) = test_leaf(&issuer, 2);
    assert_ne!(der1, der2);
    write_atomically(&key_path, key1.as_bytes());
    write_atomically(&cert_path, cert1.as_bytes());

    let server = Server::start(
        Options { tls: Some((cert_path.clone(), key_path.clone())), ..Options::default() },
        Some(ca_pem.into_bytes()),
    )
    .await;
    assert!(
        !server.certs_dir.join("ca.crt").exists(),
        "no self-signed CA is generated when --tls-cert is given"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let client = spawn_fresh_connection_client(&server, Arc::clone(&stop));
    sleep(Duration::from_millis(1500)).await;

    // Rotate: the key first, then the certificate, each renamed into place
    // (a poll in between sees a mismatched pair and keeps the old one).
    write_atomically(&key_path, key2.as_bytes());
    write_atomically(&cert_path, cert2.as_bytes());
    // Wait until a fresh handshake presents leaf 2, then keep the load on.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let connection = server.connect().await;
        if connection.peer_certificate == der2 {
            break;
        }
        assert_eq!(connection.peer_certificate, der1, "an unknown leaf");
        assert!(Instant::now() < deadline, "leaf 2 not served within 10 s; log:\n{}", server.log());
        sleep(Duration::from_millis(100)).await;
    }
    sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Relaxed);
    let outcomes = client.await.expect("client task");

    let failures: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert!(failures.is_empty(), "failed requests: {failures:?}");
    let leaves: Vec<u8> = outcomes
        .iter()
        .map(|o| {
            let der = o.as_ref().expect("no failure");
            if *der == der1 {
                1
            } else if *der == der2 {
                2
            } else {
                panic!("a leaf that is neither 1 nor 2")
            }
        })
        .collect();
    assert_eq!(leaves.first(), Some(&1), "leaf 1 served first: {leaves:?}");
    assert_eq!(leaves.last(), Some(&2), "leaf 2 served last: {leaves:?}");
    let switch = leaves.iter().position(|&l| l == 2).expect("leaf 2 seen");
    assert!(
        leaves[switch..].iter().all(|&l| l == 2),
        "once leaf 2 is served, leaf 1 never comes back: {leaves:?}"
    );
    assert!(server.log().contains("serving certificate reloaded"));

    // A broken certificate file is refused; leaf 2 keeps serving.
    let stop = Arc::new(AtomicBool::new(false));
    let client = spawn_fresh_connection_client(&server, Arc::clone(&stop));
    write_atomically(&cert_path, b"garbage\n");
    server.wait_for_metric_line(r#"gpu_policy_reload_success{source="certificate"} 0"#).await;
    // One more poll interval with the broken file in place.
    sleep(Duration::from_millis(1200)).await;
    stop.store(true, Ordering::Relaxed);
    let outcomes = client.await.expect("client task");
    assert!(!outcomes.is_empty());
    for outcome in &outcomes {
        let der = outcome
            .as_ref()
            .unwrap_or_else(|err| panic!("a request failed with a broken tls.crt: {err}"));
        assert!(*der == der2, "the old pair (leaf 2) keeps serving");
    }
    assert!(server.log().contains("new certificate refused"), "{}", server.log());
}

// ---------------------------------------------------------------------------
// 7. The generated certificate survives a restart.

#[tokio::test(flavor = "multi_thread")]
async fn generated_certificate_is_reused_on_restart() {
    let certs = tempfile::tempdir().expect("tempdir");
    let options = || Options { certs_dir: Some(certs.path().to_path_buf()), ..Options::default() };
    let mut first = Server::start(options(), None).await;
    let ca = std::fs::read(certs.path().join("ca.crt")).expect("ca.crt");
    let cert = std::fs::read(certs.path().join("tls.crt")).expect("tls.crt");
    let key = std::fs::read(certs.path().join("tls.key")).expect("tls.key");
    let served_first = first.connect().await.peer_certificate;
    first.terminate();
    let status = first.wait_exit(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0), "log:\n{}", first.log());
    drop(first);

    // The second server is trusted with the CA bytes of the first run.
    let second = Server::start(options(), Some(ca.clone())).await;
    assert_eq!(std::fs::read(certs.path().join("ca.crt")).expect("ca.crt"), ca, "ca.crt unchanged");
    assert_eq!(std::fs::read(certs.path().join("tls.crt")).expect("tls.crt"), cert);
    assert_eq!(std::fs::read(certs.path().join("tls.key")).expect("tls.key"), key);
    let mut connection = second.connect().await;
    assert_eq!(connection.peer_certificate, served_first);
    let response = connection.admit(MUTATE, &fixture("11")).await;
    assert_eq!(response["allowed"], true);
    assert!(second.log().contains(r#""reused":true"#), "{}", second.log());
}
