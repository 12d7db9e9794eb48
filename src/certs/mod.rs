//! Certificates for the webhook's HTTPS server.
//!
//! - [`pki`]: a CA and the serving certificates it issues, and the checks a
//!   client makes of them (chain, names, validity);
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

use std::io;
use std::path::PathBuf;

pub mod client_auth;
mod files;
pub mod pki;
pub mod resolver;
pub mod secret;
pub mod self_signed;
#[cfg(test)]
mod testing;
pub mod tls;

pub use pki::{DEFAULT_DNS_NAMES, DEFAULT_IP, PemPair, PkiError, generate_ca, issue};
pub use resolver::{CertificateResolver, Reload};
pub use self_signed::{SelfSigned, ensure_self_signed};
pub use tls::server_config;

/// File names of the serving pair and its CA, as in a `kubernetes.io/tls`
/// Secret (the CA is what the webhook configuration's `caBundle` carries).
pub const CA_FILE: &str = "ca.crt";
pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";

/// Why a certificate could not be read, parsed, generated or written.
///
/// The message names the file and ends with the cause's own text, so it
/// reads whole on one line; the cause is also kept as the error's source.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot parse {}: {source}", .path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: ParseError,
    },
    #[error(
        "private key {} does not match certificate {}: {source}",
        .key.display(),
        .cert.display()
    )]
    KeyMismatch {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("cannot generate certificates in {}: {source}", .dir.display())]
    Generate {
        dir: PathBuf,
        #[source]
        source: PkiError,
    },
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("--client-name {name:?}: a client name must not be blank")]
    BlankClientName { name: String },
    #[error("invalid TLS configuration: {source}")]
    Tls {
        #[source]
        source: rustls::Error,
    },
}

/// Why the PEM text of a certificate chain or a private key does not load.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error(transparent)]
    Pem(#[from] rustls::pki_types::pem::Error),
    #[error("no CERTIFICATE block")]
    NoCertificate,
    #[error("no PRIVATE KEY block")]
    NoPrivateKey,
    #[error(transparent)]
    X509(#[from] X509Error),
    /// A certificate after the leaf (`position` counts from 1).
    #[error("certificate {position} of the chain: {source}")]
    Chain {
        position: usize,
        #[source]
        source: X509Error,
    },
    /// A certificate of a CA file (`position` counts from 1).
    #[error("certificate {position}: {source}")]
    Certificate {
        position: usize,
        #[source]
        source: X509Error,
    },
    /// A certificate of a CA file that is not a CA: a client certificate
    /// given by mistake is refused rather than trusted.
    #[error("certificate {position} ({subject}) is not a CA certificate")]
    NotCa { position: usize, subject: String },
    #[error("certificate {position}: {source}")]
    TrustAnchor {
        position: usize,
        #[source]
        source: rustls::Error,
    },
    #[error(transparent)]
    Verifier(#[from] rustls::server::VerifierBuilderError),
    /// The key is of a type ring cannot sign with.
    #[error(transparent)]
    Key(rustls::Error),
}

/// What x509-parser reports for DER that is not a certificate.
pub type X509Error = x509_parser::nom::Err<x509_parser::error::X509Error>;
