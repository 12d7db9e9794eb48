//! Certificates for the webhook's HTTPS server: the serving pair (from
//! files, self-signed, or a Secret shared by every replica), client
//! certificates, and the one rustls server configuration.

pub mod client_auth;
mod error;
mod files;
pub mod pki;
pub mod secret;
pub mod self_signed;
pub mod serving_pair;
#[cfg(test)]
mod testing;
pub mod tls;

pub use error::{CertError, ParseError, PkiError, X509Error};
pub use files::Reload;
pub use pki::{DEFAULT_DNS_NAMES, DEFAULT_IP, PemPair, generate_ca, issue};
pub use self_signed::{SelfSigned, ensure_self_signed};
pub use serving_pair::CertificateResolver;
pub use tls::server_config;

/// File names of the serving pair and its CA, as in a `kubernetes.io/tls`
/// Secret (the CA is what the webhook configuration's `caBundle` carries).
pub const CA_FILE: &str = "ca.crt";
pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";
