use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

use super::*;
use crate::certs::testing::{generate_into, handshake, read};

#[tokio::test]
async fn handshake_verifies_against_the_generated_ca_only() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = generate_into(tmp.path());
    let resolver = Arc::new(CertificateResolver::load(&files.cert, &files.key).expect("load"));
    let config = Arc::new(server_config(resolver, None).expect("config"));

    let (chain, alpn) =
        handshake(config.clone(), &read(&files.ca)).await.expect("handshake with the generated CA");
    assert_eq!(chain.len(), 1);
    assert_eq!(
        chain[0].as_ref(),
        CertificateDer::from_pem_slice(&read(&files.cert)).expect("pem").as_ref()
    );
    assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));

    let other = tempfile::tempdir().expect("tempdir");
    let other = generate_into(other.path());
    let err = handshake(config, &read(&other.ca)).await.expect_err("another CA must not verify");
    // Same CA name, other key: the signature check is what rejects it.
    assert!(err.contains("invalid peer certificate: BadSignature"), "{err}");
}
