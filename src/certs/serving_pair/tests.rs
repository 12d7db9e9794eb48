use std::fs;
use std::sync::{Mutex, mpsc};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

use super::*;
use crate::certs::pki::{DAY, unix_now};
use crate::certs::server_config;
use crate::certs::testing::{generate_into, handshake, read};

#[tokio::test]
async fn resolver_serves_a_chain_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = generate_into(tmp.path());
    let chain_path = tmp.path().join("chain.crt");
    let mut chain = read(&files.cert);
    chain.extend_from_slice(&read(&files.ca));
    fs::write(&chain_path, &chain).expect("write");

    let resolver = Arc::new(CertificateResolver::load(&chain_path, &files.key).expect("load"));
    assert_eq!(resolver.current().cert.len(), 2);

    let config = Arc::new(server_config(resolver, None).expect("config"));
    let (presented, _) = handshake(config, &read(&files.ca)).await.expect("handshake");
    assert_eq!(presented.len(), 2);
    let ca_der = CertificateDer::from_pem_slice(&read(&files.ca)).expect("pem");
    assert_eq!(presented[1].as_ref(), ca_der.as_ref());
}

#[tokio::test]
async fn reload_swaps_pairs_and_keeps_the_old_one_on_failure() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let served = tmp.path().join("served");
    let files = generate_into(&served);
    let resolver = Arc::new(CertificateResolver::load(&files.cert, &files.key).expect("load"));
    let config = Arc::new(server_config(resolver.clone(), None).expect("config"));
    let first_leaf = resolver.current().cert[0].clone();
    let first_not_after = resolver.not_after();
    assert!(first_not_after > unix_now() + 364 * DAY);

    assert!(matches!(resolver.reload_if_changed(), Reload::Unchanged));

    // A new pair from another CA, as cert-manager would write it.
    let next = generate_into(&tmp.path().join("next"));
    fs::copy(&next.cert, &files.cert).expect("copy");
    fs::copy(&next.key, &files.key).expect("copy");
    let reload = resolver.reload_if_changed();
    assert!(matches!(reload, Reload::Reloaded), "{reload:?}");
    let second_leaf = resolver.current().cert[0].clone();
    assert_ne!(second_leaf, first_leaf);
    assert!(resolver.not_after() >= first_not_after);
    assert!(matches!(resolver.reload_if_changed(), Reload::Unchanged));
    // The next handshake presents the new certificate.
    let (presented, _) = handshake(config.clone(), &read(&next.ca)).await.expect("handshake");
    assert_eq!(presented[0], second_leaf);

    fs::write(&files.cert, b"garbage").expect("write");
    match resolver.reload_if_changed() {
        Reload::Failed(CertError::Parse { path, .. }) => assert_eq!(path, files.cert),
        other => panic!("expected a parse failure, got {other:?}"),
    }
    assert_eq!(resolver.current().cert[0], second_leaf);
    let (presented, _) = handshake(config, &read(&next.ca)).await.expect("old pair still served");
    assert_eq!(presented[0], second_leaf);
    // Still broken: reported again rather than taken as unchanged.
    assert!(matches!(resolver.reload_if_changed(), Reload::Failed(_)));

    fs::copy(&next.cert, &files.cert).expect("copy");
    assert!(matches!(resolver.reload_if_changed(), Reload::Unchanged));
}

#[test]
fn half_updated_pair_fails_then_recovers() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = generate_into(&tmp.path().join("served"));
    let resolver = CertificateResolver::load(&files.cert, &files.key).expect("load");
    let next = generate_into(&tmp.path().join("next"));

    fs::copy(&next.cert, &files.cert).expect("copy");
    assert!(matches!(resolver.reload_if_changed(), Reload::Failed(CertError::KeyMismatch { .. })));
    fs::copy(&next.key, &files.key).expect("copy");
    assert!(matches!(resolver.reload_if_changed(), Reload::Reloaded));
    let expected = CertificateDer::from_pem_slice(&read(&next.cert)).expect("pem");
    assert_eq!(resolver.current().cert[0], expected);
}

#[test]
fn mismatched_key_is_an_error_at_load() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let one = generate_into(&tmp.path().join("one"));
    let two = generate_into(&tmp.path().join("two"));
    let err = CertificateResolver::load(&one.cert, &two.key).expect_err("mismatch");
    assert!(matches!(err, CertError::KeyMismatch { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(&two.key.display().to_string()), "{message}");
    assert!(message.contains(&one.cert.display().to_string()), "{message}");
}

#[test]
fn empty_garbage_or_missing_files_name_the_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = generate_into(&tmp.path().join("good"));
    let empty = tmp.path().join("empty.pem");
    let garbage = tmp.path().join("garbage.pem");
    let truncated = tmp.path().join("truncated.pem");
    fs::write(&empty, b"").expect("write");
    fs::write(&garbage, b"not a certificate\n").expect("write");
    fs::write(&truncated, b"-----BEGIN CERTIFICATE-----\nMIIB\n").expect("write");

    for bad in [&empty, &garbage, &truncated] {
        let err = CertificateResolver::load(bad, &files.key).expect_err("bad cert");
        assert!(matches!(&err, CertError::Parse { path, .. } if path == bad), "{err:?}");
        assert!(err.to_string().contains(&bad.display().to_string()));

        let err = CertificateResolver::load(&files.cert, bad).expect_err("bad key");
        assert!(matches!(&err, CertError::Parse { path, .. } if path == bad), "{err:?}");
    }
    // The certificate file holds a key, not a certificate.
    let err = CertificateResolver::load(&files.key, &files.key).expect_err("key as cert");
    assert!(err.to_string().contains("no CERTIFICATE block"), "{err}");

    let missing = tmp.path().join("missing.pem");
    let err = CertificateResolver::load(&missing, &files.key).expect_err("missing");
    assert!(matches!(&err, CertError::Read { path, .. } if *path == missing), "{err:?}");
}

#[tokio::test]
async fn poller_reports_reloads_but_not_unchanged_polls() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = generate_into(&tmp.path().join("served"));
    let resolver = Arc::new(CertificateResolver::load(&files.cert, &files.key).expect("load"));
    let (tx, rx) = mpsc::channel::<String>();
    let tx = Mutex::new(tx);
    let poller = resolver.clone().spawn_poller(Duration::from_millis(20), move |reload| {
        let _ = tx.lock().expect("lock").send(format!("{reload:?}"));
    });

    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(rx.try_recv().ok(), None, "unchanged polls are not reported");

    let next = generate_into(&tmp.path().join("next"));
    fs::copy(&next.key, &files.key).expect("copy");
    fs::copy(&next.cert, &files.cert).expect("copy");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while !seen.iter().any(|r: &String| r == "Reloaded") {
        assert!(tokio::time::Instant::now() < deadline, "no reload seen: {seen:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
        seen.extend(rx.try_iter());
    }
    poller.abort();
    let expected = CertificateDer::from_pem_slice(&read(&next.cert)).expect("pem");
    assert_eq!(resolver.current().cert[0], expected);
}

#[test]
fn debug_shows_paths_not_key_material() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = generate_into(tmp.path());
    let resolver = CertificateResolver::load(&files.cert, &files.key).expect("load");
    let debug = format!("{resolver:?}");
    assert!(debug.contains("tls.key") && debug.contains("chain_len: 1"), "{debug}");
    assert!(!debug.contains("PRIVATE"));
}
