//! The rustls server configuration: the one place a `ServerConfig` is
//! built, so every listener negotiates the same way.

use std::sync::Arc;

use rustls::server::NoServerSessionStorage;
use rustls::server::danger::ClientCertVerifier;

use super::pki::provider;
use super::{CertError, CertificateResolver};

/// TLS 1.3 and 1.2 with ring, HTTP/1.1 over ALPN; client certificates
/// asked for only with `client_auth`.
pub fn server_config(
    resolver: Arc<CertificateResolver>,
    client_auth: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<rustls::ServerConfig, CertError> {
    let builder = rustls::ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|source| CertError::Tls { source })?;
    let checks_clients = client_auth.is_some();
    let mut config = match client_auth {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    }
    .with_cert_resolver(resolver);
    if checks_clients {
        // A resumed session skips the client-certificate check: without
        // resumption every connection is checked against the CA and names
        // in force now (the API server does not resume sessions anyway).
        config.session_storage = Arc::new(NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
    }
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests;
