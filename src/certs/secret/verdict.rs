//! The pure verdicts on a certificate Secret: may this route manage it,
//! and does its pair serve, or must the serving certificate be renewed or
//! everything regenerated. No API calls, no files, no clock.

use std::fmt;
use std::path::Path;

use k8s_openapi::api::core::v1::Secret;
use rcgen::{KeyPair, PublicKeyData as _};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::certs::pki::{
    DAY, SERVING_VALIDITY_DAYS, check_names, dedup_names, parse_pair, san_strings, verify_chain,
};
use crate::certs::{CA_FILE, CERT_FILE, KEY_FILE};

#[derive(Clone, PartialEq, Eq)]
pub(super) struct TlsData {
    pub(super) ca_crt: Vec<u8>,
    pub(super) ca_key: Vec<u8>,
    pub(super) tls_crt: Vec<u8>,
    pub(super) tls_key: Vec<u8>,
}

impl fmt::Debug for TlsData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsData")
            .field("ca_crt", &String::from_utf8_lossy(&self.ca_crt))
            .field("tls_crt", &String::from_utf8_lossy(&self.tls_crt))
            .finish_non_exhaustive()
    }
}

impl TlsData {
    /// Every entry empty: the Secret as the install creates it.
    pub(super) fn is_empty(&self) -> bool {
        self.entries().iter().all(|(_, value)| value.is_empty())
    }

    pub(super) fn entries(&self) -> [(&'static str, &[u8]); 4] {
        [
            (CA_FILE, &self.ca_crt),
            (CA_KEY, &self.ca_key),
            (CERT_FILE, &self.tls_crt),
            (KEY_FILE, &self.tls_key),
        ]
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Good,
    /// Nothing in it yet: a new CA and serving certificate fill it.
    Empty,
    RenewLeaf(String),
    RegenerateAll(String),
}

/// The Secret types the route fills: `Opaque`, as the install creates the
/// Secret, and `kubernetes.io/tls`.
pub(super) const OPAQUE_SECRET_TYPE: &str = "Opaque";
pub(super) const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";
/// Data key of the CA's private key (the other keys are [`CA_FILE`],
/// [`CERT_FILE`] and [`KEY_FILE`]).
pub(super) const CA_KEY: &str = "ca.key";

/// The data keys the route writes; a Secret with any other is not its own.
const KEYS: [&str; 4] = [CA_FILE, CA_KEY, CERT_FILE, KEY_FILE];

/// One line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unmanageable {
    #[error(
        "its type is {0}, not {OPAQUE_SECRET_TYPE} or {TLS_SECRET_TYPE}; delete it or name \
         another Secret"
    )]
    Type(String),
    #[error("it holds {0}, which gpu-policy never writes; name another Secret")]
    ForeignKey(String),
    #[error(
        "it holds no {CA_KEY}, so gpu-policy did not make it (cert-manager?); mount it and \
         pass --tls-cert/--tls-key instead"
    )]
    NoCaKey,
    #[error("deleted while being written")]
    Deleted,
}

/// The Secret's data, if this route may manage it: of type `Opaque` (as
/// the install creates it) or `kubernetes.io/tls`, with no key but the
/// route's own.
pub(super) fn read_data(secret: &Secret) -> Result<TlsData, Unmanageable> {
    let type_ = secret.type_.as_deref().unwrap_or(OPAQUE_SECRET_TYPE);
    if type_ != OPAQUE_SECRET_TYPE && type_ != TLS_SECRET_TYPE {
        return Err(Unmanageable::Type(type_.to_owned()));
    }
    let foreign =
        secret.data.iter().flatten().map(|(key, _)| key.as_str()).find(|key| !KEYS.contains(key));
    if let Some(key) = foreign {
        return Err(Unmanageable::ForeignKey(key.to_owned()));
    }
    let get = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|data| data.get(key))
            .map(|value| value.0.clone())
            .unwrap_or_default()
    };
    let data = TlsData {
        ca_crt: get(CA_FILE),
        ca_key: get(CA_KEY),
        tls_crt: get(CERT_FILE),
        tls_key: get(KEY_FILE),
    };
    if data.ca_key.is_empty() && !(data.ca_crt.is_empty() && data.tls_crt.is_empty()) {
        return Err(Unmanageable::NoCaKey);
    }
    Ok(data)
}

pub(super) fn evaluate(data: &TlsData, names: &[String], now: i64) -> Verdict {
    if data.is_empty() {
        return Verdict::Empty;
    }
    if data.ca_crt.is_empty() && data.ca_key.is_empty() {
        return Verdict::RegenerateAll("the Secret holds no CA".to_owned());
    }
    let ca = match check_ca(data, now) {
        Ok(ca) => ca,
        Err(reason) => return Verdict::RegenerateAll(reason),
    };
    match check_leaf(data, ca, names, now) {
        Ok(()) => Verdict::Good,
        Err(reason) => Verdict::RenewLeaf(reason),
    }
}

/// The names a renewed serving certificate covers: the wanted ones and
/// those the current one already covers, so no client loses its name.
pub(super) fn renewal_names(wanted: &[String], data: &TlsData) -> Vec<String> {
    let mut names = wanted.to_vec();
    names.extend(san_strings(&data.tls_crt));
    dedup_names(names)
}

/// The CA certificate, when it and its key can sign a full-length serving
/// certificate.
fn check_ca(data: &TlsData, now: i64) -> Result<CertificateDer<'static>, String> {
    let ca = CertificateDer::from_pem_slice(&data.ca_crt).map_err(|e| format!("{CA_FILE}: {e}"))?;
    let (_, x509) =
        x509_parser::parse_x509_certificate(&ca).map_err(|e| format!("{CA_FILE}: {e}"))?;
    if !x509.is_ca() {
        return Err(format!("{CA_FILE} is not a CA certificate"));
    }
    let validity = x509.validity();
    if validity.not_before.timestamp() > now {
        return Err(format!("{CA_FILE} is not valid yet"));
    }
    let remaining = validity.not_after.timestamp().saturating_sub(now);
    if remaining < SERVING_VALIDITY_DAYS * DAY {
        return Err(format!(
            "{CA_FILE} expires in {} days, before a new serving certificate would",
            remaining / DAY
        ));
    }
    let key = std::str::from_utf8(&data.ca_key)
        .map_err(|e| e.to_string())
        .and_then(|pem| KeyPair::from_pem(pem).map_err(|e| e.to_string()))
        .map_err(|e| format!("{CA_KEY}: {e}"))?;
    if key.der_bytes() != x509.public_key().subject_public_key.data.as_ref() {
        return Err(format!("{CA_KEY} does not match {CA_FILE}"));
    }
    Ok(ca.clone())
}

/// Ok when the serving pair loads, verifies against `ca`, covers `names`
/// and has at least a third of its life left.
fn check_leaf(
    data: &TlsData,
    ca: CertificateDer<'_>,
    names: &[String],
    now: i64,
) -> Result<(), String> {
    let pair = parse_pair(&data.tls_crt, &data.tls_key, Path::new(CERT_FILE), Path::new(KEY_FILE))
        .map_err(|e| e.to_string())?;
    verify_chain(ca, &pair.key.cert, now)
        .map_err(|e| format!("{CERT_FILE} does not verify against {CA_FILE}: {e}"))?;
    let Some(leaf) = pair.key.cert.first() else {
        return Err(format!("{CERT_FILE}: no certificate"));
    };
    let (_, x509) =
        x509_parser::parse_x509_certificate(leaf).map_err(|e| format!("{CERT_FILE}: {e}"))?;
    check_names(&x509, names).map_err(|e| format!("{CERT_FILE} {e}"))?;
    let validity = x509.validity();
    let (not_before, not_after) = (validity.not_before.timestamp(), validity.not_after.timestamp());
    let life = not_after.saturating_sub(not_before);
    let remaining = not_after.saturating_sub(now);
    if remaining.saturating_mul(3) < life {
        return Err(format!(
            "{CERT_FILE} has less than a third of its life left ({} hours of {} days)",
            remaining / 3600,
            life / DAY
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
