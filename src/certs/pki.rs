//! A CA, the serving certificates it issues, the checks a client makes of
//! them, and the one rustls crypto provider of `certs` ([`provider`]). No files, no network.

use std::collections::HashSet;
use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::RootCertStore;
use rustls::client::verify_server_cert_signed_by_trust_anchor;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::sign::CertifiedKey;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::time::ASN1Time;

use super::{CertError, ParseError, PkiError};

/// DNS names a serving certificate always covers: local runs and the
/// in-cluster Service `gpu-policy` in namespace `gpu-policy`.
pub const DEFAULT_DNS_NAMES: &[&str] =
    &["localhost", "gpu-policy", "gpu-policy.gpu-policy", "gpu-policy.gpu-policy.svc"];
pub const DEFAULT_IP: &str = "127.0.0.1";

pub(super) const SERVING_COMMON_NAME: &str = "gpu-policy.gpu-policy.svc";
const CA_COMMON_NAME: &str = "gpu-policy CA";
pub(super) const DAY: i64 = 24 * 60 * 60;
pub(super) const CA_VALIDITY_DAYS: i64 = 3650;
pub(super) const SERVING_VALIDITY_DAYS: i64 = 365;
/// Existing files are reused only if they stay valid at least this long, so
/// a restart well before expiry renews them.
const MIN_REMAINING_DAYS: i64 = 30;
/// Backdating `notBefore` tolerates clocks of clients slightly behind ours.
const BACKDATE_SECS: i64 = 60 * 60;

#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("no certificate")]
    NoCertificate,
    #[error("CA: {0}")]
    Ca(#[source] rustls::Error),
    #[error(transparent)]
    Verify(#[from] rustls::Error),
}

/// A certificate and its private key, both PEM (the key PKCS#8).
#[derive(Clone, PartialEq, Eq)]
pub struct PemPair {
    pub cert: String,
    pub key: String,
}

impl fmt::Debug for PemPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key.
        f.debug_struct("PemPair").field("cert", &self.cert).finish_non_exhaustive()
    }
}

/// A new self-signed CA (`CN=gpu-policy CA`, path length 0) valid `days`
/// days from `now` (unix seconds, `notBefore` backdated one hour), with a
/// fresh ECDSA P-256 key.
pub fn generate_ca(now: i64, days: i64) -> Result<PemPair, PkiError> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.distinguished_name = common_name(CA_COMMON_NAME);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    set_validity(&mut ca_params, now, days)?;
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    Ok(PemPair { cert: ca_cert.pem(), key: ca_key.serialize_pem() })
}

/// A serving certificate (server auth, CN `gpu-policy.gpu-policy.svc`) for
/// `names` (an entry that parses as an IP address becomes an IP SAN),
/// signed by the CA in `ca_cert_pem` / `ca_key_pem`, valid `days` days from
/// `now` (unix seconds, `notBefore` backdated one hour), with a fresh ECDSA
/// P-256 key.
pub fn issue(
    ca_cert_pem: &str,
    ca_key_pem: &str,
    names: &[String],
    now: i64,
    days: i64,
) -> Result<PemPair, PkiError> {
    let ca_key = KeyPair::from_pem(ca_key_pem).map_err(PkiError::CaKey)?;
    let issuer = Issuer::from_ca_cert_pem(ca_cert_pem, ca_key).map_err(PkiError::CaCertificate)?;

    let mut params = CertificateParams::new(names.to_vec())?;
    params.distinguished_name = common_name(SERVING_COMMON_NAME);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, now, days)?;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(PemPair { cert: cert.pem(), key: key.serialize_pem() })
}

/// Always the explicit ring provider: nothing in `certs` relies on a process-wide
/// default being installed.
pub fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

fn common_name(cn: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, cn);
    name
}

fn set_validity(params: &mut CertificateParams, now: i64, days: i64) -> Result<(), PkiError> {
    let at = |unix: Option<i64>| {
        unix.and_then(|secs| ASN1Time::from_timestamp(secs).ok())
            .map(|time| time.to_datetime())
            .ok_or(PkiError::Validity { days, now })
    };
    params.not_before = at(now.checked_sub(BACKDATE_SECS))?;
    params.not_after = at(days.checked_mul(DAY).and_then(|len| now.checked_add(len)))?;
    Ok(())
}

pub(super) struct Pair {
    pub(super) key: CertifiedKey,
    /// Unix seconds.
    pub(super) not_after: i64,
}

/// Parses a PEM chain (leaf first) and its PEM private key (PKCS#8, PKCS#1
/// or SEC1), and checks that they belong together. The paths only name the
/// files in errors.
pub(super) fn parse_pair(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_path: &Path,
    key_path: &Path,
) -> Result<Pair, CertError> {
    let cert_err = |source: ParseError| CertError::Parse { path: cert_path.to_path_buf(), source };
    let key_err = |source: ParseError| CertError::Parse { path: key_path.to_path_buf(), source };

    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| cert_err(err.into()))?;
    let Some(leaf) = chain.first() else {
        return Err(cert_err(ParseError::NoCertificate));
    };
    let not_after = {
        let (_, x509) =
            x509_parser::parse_x509_certificate(leaf).map_err(|err| cert_err(err.into()))?;
        x509.validity().not_after.timestamp()
    };
    for (i, cert) in chain.iter().enumerate().skip(1) {
        x509_parser::parse_x509_certificate(cert)
            .map_err(|source| cert_err(ParseError::Chain { position: i + 1, source }))?;
    }

    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|err| {
        key_err(match err {
            rustls::pki_types::pem::Error::NoItemsFound => ParseError::NoPrivateKey,
            err => err.into(),
        })
    })?;
    let signing_key = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|err| key_err(ParseError::Key(err)))?;

    let key = CertifiedKey::new(chain, signing_key);
    key.keys_match().map_err(|source| CertError::KeyMismatch {
        cert: cert_path.to_path_buf(),
        key: key_path.to_path_buf(),
        source,
    })?;
    Ok(Pair { key, not_after })
}

/// Checks `chain` (leaf first) the way a client trusting only `ca` does at
/// `now`: signature, validity and server-auth usage.
pub(super) fn verify_chain(
    ca: CertificateDer<'_>,
    chain: &[CertificateDer<'_>],
    now: i64,
) -> Result<(), ChainError> {
    let Some(leaf) = chain.first() else {
        return Err(ChainError::NoCertificate);
    };
    let mut roots = RootCertStore::empty();
    roots.add(ca).map_err(ChainError::Ca)?;
    let parsed = ParsedCertificate::try_from(leaf)?;
    let provider = provider();
    let unix_now = UnixTime::since_unix_epoch(Duration::from_secs(u64::try_from(now).unwrap_or(0)));
    verify_server_cert_signed_by_trust_anchor(
        &parsed,
        &roots,
        chain.get(1..).unwrap_or(&[]),
        unix_now,
        provider.signature_verification_algorithms.all,
    )?;
    Ok(())
}

/// One line.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("caBundle is not PEM: {0}")]
    NotPem(#[source] rustls::pki_types::pem::Error),
    #[error("caBundle holds no certificate")]
    NoCertificate,
    #[error("the serving certificate is not PEM: {0}")]
    ChainNotPem(#[source] rustls::pki_types::pem::Error),
    #[error("no certificate of caBundle verifies the serving certificate: {0}")]
    Unverified(#[source] ChainError),
}

/// Whether a client that trusts the certificates of `bundle` (PEM, as a
/// webhook's `caBundle` holds them) accepts the serving chain `chain_pem`
/// (leaf first) at `now`: Ok when one of them verifies it.
pub fn bundle_trusts(bundle: &[u8], chain_pem: &[u8], now: i64) -> Result<(), BundleError> {
    let cas = CertificateDer::pem_slice_iter(bundle)
        .collect::<Result<Vec<_>, _>>()
        .map_err(BundleError::NotPem)?;
    if cas.is_empty() {
        return Err(BundleError::NoCertificate);
    }
    let chain = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(BundleError::ChainNotPem)?;
    let mut last = Ok(());
    for ca in cas {
        last = verify_chain(ca, &chain, now).map_err(BundleError::Unverified);
        if last.is_ok() {
            break;
        }
    }
    last
}

/// One line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    #[error("not valid yet")]
    NotValidYet,
    #[error("expires in {days} days, fewer than {MIN_REMAINING_DAYS}")]
    ExpiresSoon { days: i64 },
    #[error("subjectAltName: {0}")]
    SubjectAltName(String),
    #[error("does not cover {0}")]
    Uncovered(String),
}

pub(super) fn check_validity(cert: &X509Certificate<'_>, now: i64) -> Result<(), Unfit> {
    let validity = cert.validity();
    if validity.not_before.timestamp() > now {
        return Err(Unfit::NotValidYet);
    }
    let remaining = validity.not_after.timestamp().saturating_sub(now);
    if remaining < MIN_REMAINING_DAYS * DAY {
        let days = remaining / DAY;
        return Err(Unfit::ExpiresSoon { days });
    }
    Ok(())
}

pub(super) fn check_names(cert: &X509Certificate<'_>, names: &[String]) -> Result<(), Unfit> {
    let san =
        cert.subject_alternative_name().map_err(|err| Unfit::SubjectAltName(err.to_string()))?;
    let general_names = san.map(|ext| ext.value.general_names.as_slice()).unwrap_or(&[]);
    let missing: Vec<&str> = names
        .iter()
        .filter(|name| !general_names.iter().any(|gn| san_matches(gn, name)))
        .map(String::as_str)
        .collect();
    if missing.is_empty() { Ok(()) } else { Err(Unfit::Uncovered(missing.join(", "))) }
}

fn san_matches(general_name: &GeneralName<'_>, wanted: &str) -> bool {
    match (general_name, wanted.parse::<IpAddr>()) {
        (GeneralName::IPAddress(bytes), Ok(IpAddr::V4(ip))) => *bytes == ip.octets(),
        (GeneralName::IPAddress(bytes), Ok(IpAddr::V6(ip))) => *bytes == ip.octets(),
        (GeneralName::DNSName(dns), Err(_)) => dns.eq_ignore_ascii_case(wanted),
        _ => false,
    }
}

/// [`DEFAULT_DNS_NAMES`], [`DEFAULT_IP`], then the extra names, as
/// [`dedup_names`] leaves them.
pub(super) fn wanted_names(extra: &[String]) -> Vec<String> {
    let defaults = DEFAULT_DNS_NAMES.iter().chain([&DEFAULT_IP]).map(|name| (*name).to_owned());
    dedup_names(defaults.chain(extra.iter().cloned()).collect())
}

/// Case-insensitive, order kept.
pub(super) fn dedup_names(names: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    names
        .into_iter()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty() && seen.insert(name.to_ascii_lowercase()))
        .collect()
}

/// The DNS and IP subject alternative names of the first certificate in
/// `cert_pem` (none when it does not parse).
pub(super) fn san_strings(cert_pem: &[u8]) -> Vec<String> {
    let Ok(der) = CertificateDer::from_pem_slice(cert_pem) else {
        return Vec::new();
    };
    let Ok((_, x509)) = x509_parser::parse_x509_certificate(&der) else {
        return Vec::new();
    };
    let Ok(Some(san)) = x509.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some((*dns).to_owned()),
            GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => <[u8; 4]>::try_from(*bytes).ok().map(|ip| IpAddr::from(ip).to_string()),
                16 => <[u8; 16]>::try_from(*bytes).ok().map(|ip| IpAddr::from(ip).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

pub(super) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| i64::try_from(since.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
