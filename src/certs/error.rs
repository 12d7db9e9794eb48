use std::io;
use std::path::PathBuf;

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

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error(transparent)]
    Rcgen(#[from] rcgen::Error),
    #[error("CA key: {0}")]
    CaKey(#[source] rcgen::Error),
    #[error("CA certificate: {0}")]
    CaCertificate(#[source] rcgen::Error),
    #[error("validity of {days} days from {now} is out of range")]
    Validity { days: i64, now: i64 },
}
