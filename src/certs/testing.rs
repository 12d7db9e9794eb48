//! Helpers of the certificate unit tests.

use std::fs;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::pki::SERVING_COMMON_NAME;
use super::pki::provider;
use super::{SelfSigned, ensure_self_signed};

use gpu_policy_test_support::x509;

pub const EXTRA: &str = "webhook.example.com";

pub fn generate_into(dir: &Path) -> SelfSigned {
    ensure_self_signed(dir, &[]).expect("generate")
}

pub fn sans(cert_pem: &[u8]) -> (Vec<String>, Vec<IpAddr>) {
    x509::with_certificate(cert_pem, x509::sans)
}

pub fn read(path: &Path) -> Vec<u8> {
    fs::read(path).expect("read")
}

/// TLS handshake against `config` over a real socket, trusting only the
/// CA in `ca_pem`; returns the chain the server presented and the ALPN.
pub async fn handshake(
    config: Arc<rustls::ServerConfig>,
    ca_pem: &[u8],
) -> Result<(Vec<CertificateDer<'static>>, Option<Vec<u8>>), String> {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        let _ = TlsAcceptor::from(config).accept(stream).await;
    });

    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca_pem).expect("ca pem")).expect("root");
    let mut client = rustls::ClientConfig::builder_with_provider(Arc::new(provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from(SERVING_COMMON_NAME).expect("server name");
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        TlsConnector::from(Arc::new(client)).connect(name, tcp),
    )
    .await
    .expect("handshake timed out");
    let _ = server.await;
    let tls = result.map_err(|err| err.to_string())?;
    let (_, conn) = tls.get_ref();
    let chain = conn.peer_certificates().unwrap_or_default().to_vec();
    Ok((chain, conn.alpn_protocol().map(<[u8]>::to_vec)))
}
