//! The embedded default, so `gpu-policy serve` runs with no setup: a
//! throw-away CA and a serving certificate in a directory, reused across
//! restarts while they stay valid and cover the wanted names.

use std::path::{Path, PathBuf};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::files::{create_dir, read, write_atomically};
use super::pki::{
    CA_VALIDITY_DAYS, ChainError, SERVING_VALIDITY_DAYS, Unfit, check_names, check_validity,
    generate_ca, issue, parse_pair, unix_now, verify_chain, wanted_names,
};
use super::{CA_FILE, CERT_FILE, CertError, KEY_FILE, ParseError, PemPair, PkiError};

/// The files [`ensure_self_signed`] left in its directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfSigned {
    /// The CA certificate (PEM), for the webhook configuration's `caBundle`.
    pub ca: PathBuf,
    pub cert: PathBuf,
    /// The serving private key (PEM, PKCS#8), mode 0600 on unix.
    pub key: PathBuf,
    /// The files already there were good enough and were kept.
    pub reused: bool,
}

/// Covers [`DEFAULT_DNS_NAMES`](super::DEFAULT_DNS_NAMES),
/// [`DEFAULT_IP`](super::DEFAULT_IP) and `extra_dns_names` (an entry that
/// parses as an IP address becomes an IP SAN).
///
/// Files already there are reused when they parse, stay valid at least 30
/// more days, the serving certificate chains to the CA and covers every
/// wanted name, and the key matches it. Otherwise a fresh pair is written.
/// The CA's private key is never written: nothing can be signed with it
/// later, so regeneration always replaces all three files.
pub fn ensure_self_signed(dir: &Path, extra_dns_names: &[String]) -> Result<SelfSigned, CertError> {
    let files = SelfSigned {
        ca: dir.join(CA_FILE),
        cert: dir.join(CERT_FILE),
        key: dir.join(KEY_FILE),
        reused: false,
    };
    let names = wanted_names(extra_dns_names);
    let now = unix_now();
    match check_existing(&files, &names, now) {
        Ok(()) => {
            tracing::debug!(dir = %dir.display(), "reusing self-signed certificate");
            return Ok(SelfSigned { reused: true, ..files });
        }
        Err(reason) => {
            tracing::info!(dir = %dir.display(), %reason, "generating self-signed certificate");
        }
    }
    let (ca, leaf) = generate(&names, now, SERVING_VALIDITY_DAYS)
        .map_err(|source| CertError::Generate { dir: dir.to_path_buf(), source })?;
    create_dir(dir)?;
    // The key first: a reader that sees the new tls.crt with the old key
    // rejects the pair and retries; the reverse order gives the same result.
    write_atomically(&files.key, leaf.key.as_bytes(), true)?;
    write_atomically(&files.cert, leaf.cert.as_bytes(), false)?;
    write_atomically(&files.ca, ca.cert.as_bytes(), false)?;
    Ok(files)
}

#[derive(Debug, thiserror::Error)]
enum NotReusable {
    /// Missing, unreadable, or not a certificate or key that loads.
    #[error(transparent)]
    Unloadable(#[from] CertError),
    /// Loads, but expires too soon or misses a wanted name.
    #[error("{}: {reason}", .path.display())]
    Unfit { path: PathBuf, reason: Unfit },
    #[error("{} is not signed by {}: {source}", .cert.display(), .ca.display())]
    NotSigned {
        cert: PathBuf,
        ca: PathBuf,
        #[source]
        source: ChainError,
    },
}

fn check_existing(files: &SelfSigned, names: &[String], now: i64) -> Result<(), NotReusable> {
    let ca_pem = read(&files.ca)?;
    let cert_pem = read(&files.cert)?;
    let key_pem = read(&files.key)?;

    let ca_err = |source: ParseError| CertError::Parse { path: files.ca.clone(), source };
    let ca = CertificateDer::from_pem_slice(&ca_pem).map_err(|err| ca_err(err.into()))?;
    let (_, ca_x509) =
        x509_parser::parse_x509_certificate(&ca).map_err(|err| ca_err(err.into()))?;
    check_validity(&ca_x509, now).map_err(|reason| unfit(&files.ca, reason))?;

    let pair = parse_pair(&cert_pem, &key_pem, &files.cert, &files.key)?;
    let leaf_err = |source: ParseError| CertError::Parse { path: files.cert.clone(), source };
    let leaf = pair.key.cert.first().ok_or_else(|| leaf_err(ParseError::NoCertificate))?;
    let (_, leaf_x509) =
        x509_parser::parse_x509_certificate(leaf).map_err(|err| leaf_err(err.into()))?;
    check_validity(&leaf_x509, now).map_err(|reason| unfit(&files.cert, reason))?;
    check_names(&leaf_x509, names).map_err(|reason| unfit(&files.cert, reason))?;

    // Signature, validity and server-auth usage against the CA on disk, the
    // way an API server holding ca.crt as caBundle will check it.
    verify_chain(ca, &pair.key.cert, now).map_err(|source| NotReusable::NotSigned {
        cert: files.cert.clone(),
        ca: files.ca.clone(),
        source,
    })
}

fn unfit(path: &Path, reason: Unfit) -> NotReusable {
    NotReusable::Unfit { path: path.to_path_buf(), reason }
}

/// A CA (10 years) and a serving pair it signs for `names`, valid
/// `serving_days` days from `now`.
pub(super) fn generate(
    names: &[String],
    now: i64,
    serving_days: i64,
) -> Result<(PemPair, PemPair), PkiError> {
    let ca = generate_ca(now, CA_VALIDITY_DAYS)?;
    let leaf = issue(&ca.cert, &ca.key, names, now, serving_days)?;
    Ok((ca, leaf))
}

#[cfg(test)]
mod tests;
