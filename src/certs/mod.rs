//! Certificates for the webhook's HTTPS server.
//!
//! - [`pki`]: a CA and the serving certificates it issues, and the checks a
//!   client makes of them (chain, names, validity), and the crypto provider;
//! - [`self_signed`]: the embedded default, so `gpu-policy serve` runs with
//!   no setup ([`ensure_self_signed`]);
//! - [`resolver`]: the serving pair behind rustls' `ResolvesServerCert`,
//!   looked up on every handshake and swapped in place when the files change
//!   ([`CertificateResolver`]);
//! - [`tls`]: the rustls server configuration around a resolver
//!   ([`server_config`]);
//! - [`client_auth`]: client certificates checked in the handshake
//!   (`--client-ca`, `--client-name`), their CA reloaded like the serving
//!   pair;
//! - [`secret`]: one CA and serving pair shared by every replica through a
//!   `kubernetes.io/tls` Secret, and the webhook configurations' `caBundle`.

pub mod client_auth;
mod error;
mod files;
pub mod pki;
pub mod resolver;
pub mod secret;
pub mod self_signed;
#[cfg(test)]
mod testing;
pub mod tls;

pub use error::{CertError, ParseError, PkiError, X509Error};
pub use pki::{DEFAULT_DNS_NAMES, DEFAULT_IP, PemPair, generate_ca, issue};
pub use resolver::{CertificateResolver, Reload};
pub use self_signed::{SelfSigned, ensure_self_signed};
pub use tls::server_config;

/// File names of the serving pair and its CA, as in a `kubernetes.io/tls`
/// Secret (the CA is what the webhook configuration's `caBundle` carries).
pub const CA_FILE: &str = "ca.crt";
pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";
