//! Client certificates (`serve --client-ca FILE [--client-name NAME...]`),
//! checked in the TLS handshake: a certificate that chains to a CA of the
//! file (rustls' [`WebPkiClientVerifier`]) and, when names are given,
//! whose subject CN or a DNS SAN is one of them. The CA file is reloaded
//! like the serving pair; a file that does not load leaves the previous CAs
//! in force.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use x509_parser::extensions::GeneralName;

use super::files::{Reloading, read, spawn_poller};
use super::pki::provider;
use super::{CertError, ParseError, Reload};
use crate::policy::message::{LISTED_NAMES, MAX_LISTED_NAME_BYTES, prefix_within};

pub struct ClientAuth {
    ca_path: PathBuf,
    /// Empty: any certificate of the CAs is accepted.
    names: Vec<String>,
    /// rustls' chain verifier over the CAs last loaded; a file put back
    /// as it was after a refusal is reported as reloaded.
    chain: Reloading<Vec<u8>, ChainVerifier>,
}

/// Why a client certificate's names were refused. The message of the log
/// line stays the same for every refusal of one kind; what the certificate
/// carries goes into its fields.
enum NameRefusal {
    /// The certificate or its subjectAltName could not be read.
    Unreadable(String),
    /// None of its CN and DNS names is a `--client-name`.
    NoneAllowed { presented: String },
}

/// Sized, so that the `dyn` verifier can be swapped.
struct ChainVerifier {
    verifier: Arc<dyn ClientCertVerifier>,
    cas: usize,
}

impl ClientAuth {
    /// Loads the CA certificates (PEM, one or more) of `ca_path`; `names`
    /// are the allowed CN / DNS SAN values (none: any name).
    pub fn load(ca_path: &Path, names: &[String]) -> Result<Self, CertError> {
        if let Some(blank) = names.iter().find(|name| name.trim().is_empty()) {
            return Err(CertError::BlankClientName { name: blank.clone() });
        }
        let bytes = read(ca_path)?;
        let chain = parse_cas(&bytes, ca_path)?;
        Ok(Self {
            ca_path: ca_path.to_path_buf(),
            names: names.to_vec(),
            chain: Reloading::new(bytes, chain, true),
        })
    }

    pub fn ca_count(&self) -> usize {
        self.chain.current().cas
    }

    /// Polls the CA file every `every` (at least 10 ms); a file that cannot
    /// be read or parsed keeps the previous CAs.
    pub fn spawn_poller(
        self: Arc<Self>,
        every: Duration,
        on_reload: impl Fn(&Reload) + Send + Sync + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let path = self.ca_path.clone();
        let loaded = self.chain.loaded_bytes();
        let load = move |bytes: &Vec<u8>| {
            self.chain.load_if_changed(bytes, |bytes| parse_cas(bytes, &self.ca_path))
        };
        spawn_poller(every, loaded, move || read(&path), load, on_reload)
    }

    /// Ok when `names` is empty or the certificate's subject CN or one of
    /// its DNS SANs equals one of them (DNS names ignoring ASCII case).
    fn check_names(&self, end_entity: &CertificateDer<'_>) -> Result<(), NameRefusal> {
        if self.names.is_empty() {
            return Ok(());
        }
        let (_, cert) = x509_parser::parse_x509_certificate(end_entity).map_err(|err| {
            NameRefusal::Unreadable(format!("cannot parse the client certificate: {err}"))
        })?;
        let san = cert.subject_alternative_name().map_err(|err| {
            NameRefusal::Unreadable(format!("subjectAltName of the client certificate: {err}"))
        })?;
        let common_names =
            cert.subject().iter_common_name().filter_map(|attribute| attribute.as_str().ok());
        let dns_names =
            san.iter().flat_map(|san| &san.value.general_names).filter_map(|name| match name {
                GeneralName::DNSName(dns) => Some(*dns),
                _ => None,
            });
        // A certificate may carry thousands of names: the log line names
        // the first few, each cut, and counts the rest.
        let mut presented = Vec::new();
        let mut more = 0usize;
        let mut note = |kind: &str, name: &str| {
            if presented.len() < LISTED_NAMES {
                presented.push(format!("{kind}{}", prefix_within(name, MAX_LISTED_NAME_BYTES)));
            } else {
                more += 1;
            }
        };
        for cn in common_names {
            if self.names.iter().any(|wanted| wanted == cn) {
                return Ok(());
            }
            note("CN=", cn);
        }
        for dns in dns_names {
            if self.names.iter().any(|wanted| wanted.eq_ignore_ascii_case(dns)) {
                return Ok(());
            }
            note("DNS:", dns);
        }
        let mut presented = presented.join(", ");
        if more > 0 {
            presented.push_str(&format!(" and {more} more"));
        }
        Err(NameRefusal::NoneAllowed { presented })
    }
}

impl ClientCertVerifier for ClientAuth {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    /// No hints: some clients (Go's crypto/tls with a fixed certificate)
    /// send no certificate when theirs was not issued by a hinted CA, and
    /// hints borrowed from the verifier could not follow a reload. With
    /// none, a client sends the certificate it has, and the verifier
    /// decides.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let chain = self.chain.current();
        if let Err(error) = chain.verifier.verify_client_cert(end_entity, intermediates, now) {
            tracing::warn!(
                %error,
                ca = %self.ca_path.display(),
                "client certificate refused: not signed by a --client-ca CA"
            );
            return Err(error);
        }
        match self.check_names(end_entity) {
            Ok(()) => Ok(ClientCertVerified::assertion()),
            Err(refusal) => {
                match refusal {
                    NameRefusal::Unreadable(reason) => {
                        tracing::warn!(%reason, "client certificate refused");
                    }
                    NameRefusal::NoneAllowed { presented } => tracing::warn!(
                        %presented,
                        allowed = %self.names.join(", "),
                        "client certificate refused: no CN or DNS name is a --client-name"
                    ),
                }
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::ApplicationVerificationFailure,
                ))
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.current().verifier.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.current().verifier.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chain.current().verifier.supported_verify_schemes()
    }
}

impl fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientAuth")
            .field("ca_path", &self.ca_path)
            .field("cas", &self.ca_count())
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

/// Every CERTIFICATE block of `pem` as a trust anchor; each must be a CA
/// certificate (basicConstraints cA), so that a client certificate given
/// by mistake is refused rather than trusted.
fn parse_cas(pem: &[u8], path: &Path) -> Result<ChainVerifier, CertError> {
    parse_ca_file(pem).map_err(|source| CertError::Parse { path: path.to_path_buf(), source })
}

fn parse_ca_file(pem: &[u8]) -> Result<ChainVerifier, ParseError> {
    let certificates = CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>()?;
    if certificates.is_empty() {
        return Err(ParseError::NoCertificate);
    }
    let mut roots = RootCertStore::empty();
    for (i, der) in certificates.iter().enumerate() {
        let position = i + 1;
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|source| ParseError::Certificate { position, source })?;
        if !cert.is_ca() {
            return Err(ParseError::NotCa { position, subject: cert.subject().to_string() });
        }
        roots.add(der.clone()).map_err(|source| ParseError::TrustAnchor { position, source })?;
    }
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::new(provider()))
            .build()?;
    Ok(ChainVerifier { verifier, cas: certificates.len() })
}

#[cfg(test)]
mod tests;
