//! TLS as the API server speaks it to the webhook: the client side
//! (a CA as the only root, SNI [`SERVER_NAME`], ALPN `http/1.1`) and the
//! test CA and serving certificates the tests make.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SerialNumber,
};
use rustls::ClientConfig;
use rustls::RootCertStore;
use rustls::client::Resumption;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The name the API server uses for the in-cluster Service.
pub const SERVER_NAME: &str = "gpu-policy.gpu-policy.svc";

/// The client side of the API server: the given CA as the only root, ALPN
/// http/1.1, ring as the provider.
pub fn client_config(ca_pem: &[u8]) -> Arc<ClientConfig> {
    client_config_as(ca_pem, None)
}

/// [`client_config`], presenting `identity` (certificate PEM, key PEM) when
/// the server asks for a client certificate.
pub fn client_config_as(ca_pem: &[u8], identity: Option<(&str, &str)>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.expect("CA PEM parses")).expect("CA is a valid root");
    }
    assert!(!roots.is_empty(), "no certificate in the CA file");
    let config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("ring supports the default versions")
            .with_root_certificates(roots);
    let mut config = match identity {
        Some((cert_pem, key_pem)) => {
            let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .expect("client certificate PEM parses");
            let key =
                PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).expect("client key PEM parses");
            config.with_client_auth_cert(chain, key).expect("client certificate and key match")
        }
        None => config.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Like the API server (Go's transport has no session cache by default):
    // every connection makes a full handshake, so it sees the certificate
    // being served now rather than the one of a resumed session.
    config.resumption = Resumption::disabled();
    Arc::new(config)
}

pub fn distinguished_name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

/// A test CA: its issuer and its certificate (PEM).
pub fn test_ca() -> (Issuer<'static, KeyPair>, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name = distinguished_name("gpu-policy e2e test CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().expect("CA key");
    let cert = params.self_signed(&key).expect("CA certificate");
    (Issuer::new(params, key), cert.pem())
}

/// A serving certificate for [`SERVER_NAME`] signed by `issuer`: (cert
/// PEM, key PEM, cert DER).
pub fn test_leaf(issuer: &Issuer<'static, KeyPair>, serial: u64) -> (String, String, Vec<u8>) {
    let mut params = CertificateParams::new(vec![SERVER_NAME.to_owned()]).expect("params");
    params.distinguished_name = distinguished_name(SERVER_NAME);
    params.serial_number = Some(SerialNumber::from(serial));
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().expect("leaf key");
    let cert = params.signed_by(&key, issuer).expect("leaf certificate");
    (cert.pem(), key.serialize_pem(), cert.der().to_vec())
}

/// A client certificate signed by `issuer` with subject CN `common_name`
/// and DNS SANs `dns_names`: (cert PEM, key PEM).
pub fn test_client(
    issuer: &Issuer<'static, KeyPair>,
    common_name: &str,
    dns_names: &[&str],
) -> (String, String) {
    let names: Vec<String> = dns_names.iter().map(|n| (*n).to_owned()).collect();
    let mut params = CertificateParams::new(names).expect("params");
    params.distinguished_name = distinguished_name(common_name);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().expect("client key");
    let cert = params.signed_by(&key, issuer).expect("client certificate");
    (cert.pem(), key.serialize_pem())
}
