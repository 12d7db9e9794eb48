//! Certificates for the webhook's HTTPS server.
//!
//! - [`ensure_self_signed`]: the embedded default, so `gpu-policy serve` runs
//!   with no setup: a throw-away CA and a serving certificate in a directory,
//!   reused across restarts while they stay valid and cover the wanted names.
//! - [`CertificateResolver`]: the serving pair behind rustls'
//!   [`ResolvesServerCert`], looked up on every handshake and swapped in place
//!   when the files change (cert-manager, Stackable).
//! - [`server_config`]: the rustls server configuration around a resolver.
//! - [`client_auth`]: client certificates (`--client-ca`, `--client-name`).

use std::collections::HashSet;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::RootCertStore;
use rustls::client::verify_server_cert_signed_by_trust_anchor;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, NoServerSessionStorage, ParsedCertificate, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::time::ASN1Time;

pub mod client_auth;
pub mod secret;

/// DNS names the self-signed serving certificate always covers: local runs
/// and the in-cluster Service `gpu-policy` in namespace `gpu-policy`.
pub const DEFAULT_DNS_NAMES: &[&str] = &[
    "localhost",
    "gpu-policy",
    "gpu-policy.gpu-policy",
    "gpu-policy.gpu-policy.svc",
];
/// IP address the self-signed serving certificate always covers.
pub const DEFAULT_IP: &str = "127.0.0.1";

/// File names inside the self-signed directory, as in a `kubernetes.io/tls`
/// Secret (plus the CA for the webhook configuration's `caBundle`).
pub const CA_FILE: &str = "ca.crt";
pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";

const SERVING_COMMON_NAME: &str = "gpu-policy.gpu-policy.svc";
const CA_COMMON_NAME: &str = "gpu-policy CA";
const DAY: i64 = 24 * 60 * 60;
const CA_VALIDITY_DAYS: i64 = 3650;
const SERVING_VALIDITY_DAYS: i64 = 365;
/// Existing files are reused only if they stay valid at least this long, so
/// a restart well before expiry renews them.
const MIN_REMAINING_DAYS: i64 = 30;
/// Backdating `notBefore` tolerates clocks of clients slightly behind ours.
const BACKDATE_SECS: i64 = 60 * 60;
/// `tokio::time::interval` panics on a zero period.
const MIN_POLL: Duration = Duration::from_millis(10);

/// Why a certificate could not be read, parsed, generated or written.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CertError {
    #[error("cannot read {}: {reason}", .path.display())]
    Read { path: PathBuf, reason: String },
    #[error("cannot parse {}: {reason}", .path.display())]
    Parse { path: PathBuf, reason: String },
    #[error(
        "private key {} does not match certificate {}: {reason}",
        .key.display(),
        .cert.display()
    )]
    KeyMismatch {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
    #[error("cannot generate certificates in {}: {reason}", .dir.display())]
    Generate { dir: PathBuf, reason: String },
    #[error("cannot write {}: {reason}", .path.display())]
    Write { path: PathBuf, reason: String },
    #[error("invalid TLS configuration: {reason}")]
    Tls { reason: String },
}

/// The files [`ensure_self_signed`] left in its directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfSigned {
    /// The CA certificate (PEM), for the webhook configuration's `caBundle`.
    pub ca: PathBuf,
    /// The serving certificate (PEM).
    pub cert: PathBuf,
    /// The serving private key (PEM, PKCS#8), mode 0600 on unix.
    pub key: PathBuf,
    /// The files already there were good enough and were kept.
    pub reused: bool,
}

/// Makes sure `dir` holds a CA certificate and a serving certificate signed
/// by it that covers [`DEFAULT_DNS_NAMES`], [`DEFAULT_IP`] and
/// `extra_dns_names` (an entry that parses as an IP address becomes an IP
/// SAN; blank entries are ignored).
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
            return Ok(SelfSigned {
                reused: true,
                ..files
            });
        }
        Err(reason) => {
            tracing::info!(dir = %dir.display(), %reason, "generating self-signed certificate");
        }
    }
    let generated =
        generate(&names, now, SERVING_VALIDITY_DAYS).map_err(|reason| CertError::Generate {
            dir: dir.to_path_buf(),
            reason,
        })?;
    fs::create_dir_all(dir).map_err(|err| CertError::Write {
        path: dir.to_path_buf(),
        reason: err.to_string(),
    })?;
    // The key first: a reader that sees the new tls.crt with the old key
    // rejects the pair and retries; the reverse order gives the same result.
    write_atomically(&files.key, generated.key.as_bytes(), true)?;
    write_atomically(&files.cert, generated.cert.as_bytes(), false)?;
    write_atomically(&files.ca, generated.ca.as_bytes(), false)?;
    Ok(files)
}

/// DEFAULT_DNS_NAMES, DEFAULT_IP, then the extra names, without blanks or
/// duplicates (DNS names compare case-insensitively).
fn wanted_names(extra: &[String]) -> Vec<String> {
    let mut seen = HashSet::new();
    DEFAULT_DNS_NAMES
        .iter()
        .copied()
        .chain([DEFAULT_IP])
        .chain(extra.iter().map(|name| name.trim()))
        .filter(|name| !name.is_empty())
        .filter(|name| seen.insert(name.to_ascii_lowercase()))
        .map(str::to_owned)
        .collect()
}

/// Ok when the files in `files` can be reused, else why not.
fn check_existing(files: &SelfSigned, names: &[String], now: i64) -> Result<(), String> {
    let read = |path: &Path| fs::read(path).map_err(|err| format!("{}: {err}", path.display()));
    let ca_pem = read(&files.ca)?;
    let cert_pem = read(&files.cert)?;
    let key_pem = read(&files.key)?;

    let ca = CertificateDer::from_pem_slice(&ca_pem)
        .map_err(|err| format!("{}: {err}", files.ca.display()))?;
    let (_, ca_x509) = x509_parser::parse_x509_certificate(&ca)
        .map_err(|err| format!("{}: {err}", files.ca.display()))?;
    check_validity(&ca_x509, now).map_err(|reason| format!("{}: {reason}", files.ca.display()))?;

    let pair =
        parse_pair(&cert_pem, &key_pem, &files.cert, &files.key).map_err(|e| e.to_string())?;
    let Some(leaf) = pair.key.cert.first() else {
        return Err(format!("{}: no certificate", files.cert.display()));
    };
    let (_, leaf_x509) = x509_parser::parse_x509_certificate(leaf)
        .map_err(|err| format!("{}: {err}", files.cert.display()))?;
    check_validity(&leaf_x509, now)
        .map_err(|reason| format!("{}: {reason}", files.cert.display()))?;
    check_names(&leaf_x509, names)
        .map_err(|reason| format!("{}: {reason}", files.cert.display()))?;

    // Signature, validity and server-auth usage against the CA on disk, the
    // way an API server holding ca.crt as caBundle will check it.
    verify_chain(ca, &pair.key.cert, now).map_err(|err| {
        format!(
            "{} is not signed by {}: {err}",
            files.cert.display(),
            files.ca.display()
        )
    })
}

/// Checks `chain` (leaf first) the way a client trusting only `ca` does at
/// `now`: signature, validity and server-auth usage.
fn verify_chain(
    ca: CertificateDer<'_>,
    chain: &[CertificateDer<'_>],
    now: i64,
) -> Result<(), String> {
    let Some(leaf) = chain.first() else {
        return Err("no certificate".to_owned());
    };
    let mut roots = RootCertStore::empty();
    roots.add(ca).map_err(|err| format!("CA: {err}"))?;
    let parsed = ParsedCertificate::try_from(leaf).map_err(|err| err.to_string())?;
    let provider = provider();
    let unix_now = UnixTime::since_unix_epoch(Duration::from_secs(u64::try_from(now).unwrap_or(0)));
    verify_server_cert_signed_by_trust_anchor(
        &parsed,
        &roots,
        chain.get(1..).unwrap_or(&[]),
        unix_now,
        provider.signature_verification_algorithms.all,
    )
    .map_err(|err| err.to_string())
}

fn check_validity(cert: &X509Certificate<'_>, now: i64) -> Result<(), String> {
    let validity = cert.validity();
    if validity.not_before.timestamp() > now {
        return Err("not valid yet".to_owned());
    }
    let remaining = validity.not_after.timestamp().saturating_sub(now);
    if remaining < MIN_REMAINING_DAYS * DAY {
        return Err(format!(
            "expires in {} days, fewer than {MIN_REMAINING_DAYS}",
            remaining / DAY
        ));
    }
    Ok(())
}

fn check_names(cert: &X509Certificate<'_>, names: &[String]) -> Result<(), String> {
    let san = cert
        .subject_alternative_name()
        .map_err(|err| format!("subjectAltName: {err}"))?;
    let general_names = san
        .map(|ext| ext.value.general_names.as_slice())
        .unwrap_or(&[]);
    let missing: Vec<&str> = names
        .iter()
        .filter(|name| !general_names.iter().any(|gn| san_matches(gn, name)))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("does not cover {}", missing.join(", ")))
    }
}

fn san_matches(general_name: &GeneralName<'_>, wanted: &str) -> bool {
    match (general_name, wanted.parse::<IpAddr>()) {
        (GeneralName::IPAddress(bytes), Ok(IpAddr::V4(ip))) => *bytes == ip.octets(),
        (GeneralName::IPAddress(bytes), Ok(IpAddr::V6(ip))) => *bytes == ip.octets(),
        (GeneralName::DNSName(dns), Err(_)) => dns.eq_ignore_ascii_case(wanted),
        _ => false,
    }
}

/// PEM texts of a freshly generated CA and serving pair.
struct Generated {
    ca: String,
    cert: String,
    key: String,
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
        f.debug_struct("PemPair")
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

/// A CA (10 years) and a serving certificate it signs for `names`, valid
/// `serving_days` days from `now`. ECDSA P-256 keys.
fn generate(names: &[String], now: i64, serving_days: i64) -> Result<Generated, String> {
    let ca = generate_ca(now, CA_VALIDITY_DAYS)?;
    let leaf = issue(&ca.cert, &ca.key, names, now, serving_days)?;
    Ok(Generated {
        ca: ca.cert,
        cert: leaf.cert,
        key: leaf.key,
    })
}

/// A new self-signed CA (`CN=gpu-policy CA`, path length 0) valid `days`
/// days from `now` (unix seconds, `notBefore` backdated one hour), with a
/// fresh ECDSA P-256 key.
pub fn generate_ca(now: i64, days: i64) -> Result<PemPair, String> {
    let err = |err: rcgen::Error| err.to_string();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca_params.distinguished_name = common_name(CA_COMMON_NAME);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    set_validity(&mut ca_params, now, days)?;
    let ca_key = KeyPair::generate().map_err(err)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(err)?;
    Ok(PemPair {
        cert: ca_cert.pem(),
        key: ca_key.serialize_pem(),
    })
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
) -> Result<PemPair, String> {
    let err = |err: rcgen::Error| err.to_string();
    let ca_key = KeyPair::from_pem(ca_key_pem).map_err(|e| format!("CA key: {e}"))?;
    let issuer = Issuer::from_ca_cert_pem(ca_cert_pem, ca_key)
        .map_err(|e| format!("CA certificate: {e}"))?;

    let mut params = CertificateParams::new(names.to_vec()).map_err(err)?;
    params.distinguished_name = common_name(SERVING_COMMON_NAME);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, now, days)?;
    let key = KeyPair::generate().map_err(err)?;
    let cert = params.signed_by(&key, &issuer).map_err(err)?;
    Ok(PemPair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

fn common_name(cn: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, cn);
    name
}

fn set_validity(params: &mut CertificateParams, now: i64, days: i64) -> Result<(), String> {
    let at = |unix: Option<i64>| {
        unix.and_then(|secs| ASN1Time::from_timestamp(secs).ok())
            .map(|time| time.to_datetime())
            .ok_or_else(|| format!("validity of {days} days from {now} is out of range"))
    };
    params.not_before = at(now.checked_sub(BACKDATE_SECS))?;
    params.not_after = at(days.checked_mul(DAY).and_then(|len| now.checked_add(len)))?;
    Ok(())
}

/// Writes `bytes` to a temporary file next to `path` and renames it over
/// `path`, so a reader sees the old file or the new one, never a part.
fn write_atomically(path: &Path, bytes: &[u8], private: bool) -> Result<(), CertError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let write_err = |path: &Path, err: std::io::Error| CertError::Write {
        path: path.to_path_buf(),
        reason: err.to_string(),
    };
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(
        ".{file_name}.tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(if private { 0o600 } else { 0o644 });
    }
    #[cfg(not(unix))]
    let _ = private;
    let result = options.open(&tmp).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    let result = result.and_then(|()| fs::rename(&tmp, path));
    if let Err(err) = result {
        let _ = fs::remove_file(&tmp);
        return Err(write_err(path, err));
    }
    Ok(())
}

/// Whether [`CertificateResolver::reload_if_changed`] found something to do.
#[derive(Debug)]
pub enum Reload {
    /// Both files hold the bytes last loaded.
    Unchanged,
    /// A new pair was loaded and is served from the next handshake on.
    Reloaded,
    /// The files changed but could not be loaded; the previous pair is still
    /// served.
    Failed(CertError),
}

/// The serving certificate chain and key, looked up by rustls on every
/// handshake and replaced atomically when the files on disk change.
pub struct CertificateResolver {
    cert_path: PathBuf,
    key_path: PathBuf,
    current: ArcSwap<CertifiedKey>,
    /// The file contents behind `current`; also serialises reloads.
    loaded: Mutex<LoadedBytes>,
    not_after: AtomicI64,
    last_load_ok: AtomicBool,
}

struct LoadedBytes {
    cert: Vec<u8>,
    key: Vec<u8>,
}

/// A parsed certificate chain with its key.
struct Pair {
    key: CertifiedKey,
    not_after: i64,
}

impl CertificateResolver {
    /// Loads a PEM certificate chain (leaf first, then intermediates) and
    /// its PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub fn load(cert_path: &Path, key_path: &Path) -> Result<Self, CertError> {
        let (cert, key) = read_pair(cert_path, key_path)?;
        let pair = parse_pair(&cert, &key, cert_path, key_path)?;
        Ok(Self {
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
            current: ArcSwap::from_pointee(pair.key),
            loaded: Mutex::new(LoadedBytes { cert, key }),
            not_after: AtomicI64::new(pair.not_after),
            last_load_ok: AtomicBool::new(true),
        })
    }

    /// Re-reads both files and swaps in the new pair if their bytes changed.
    ///
    /// Kubernetes updates a mounted Secret by repointing the `..data`
    /// symlink of the volume, which file-watch events on `tls.crt` itself
    /// miss; comparing bytes on a timer sees every update. A failed load
    /// keeps serving the previous pair and is reported again on every call
    /// until the files are fixed (a half-updated pair fixes itself on the
    /// next call).
    pub fn reload_if_changed(&self) -> Reload {
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        let result = read_pair(&self.cert_path, &self.key_path).and_then(|(cert, key)| {
            if cert == loaded.cert && key == loaded.key {
                return Ok(None);
            }
            let pair = parse_pair(&cert, &key, &self.cert_path, &self.key_path)?;
            Ok(Some((pair, cert, key)))
        });
        match result {
            Ok(None) => {
                self.last_load_ok.store(true, Ordering::Relaxed);
                Reload::Unchanged
            }
            Ok(Some((pair, cert, key))) => {
                self.current.store(Arc::new(pair.key));
                self.not_after.store(pair.not_after, Ordering::Relaxed);
                *loaded = LoadedBytes { cert, key };
                self.last_load_ok.store(true, Ordering::Relaxed);
                Reload::Reloaded
            }
            Err(err) => {
                self.last_load_ok.store(false, Ordering::Relaxed);
                Reload::Failed(err)
            }
        }
    }

    /// `notAfter` of the leaf being served, in unix seconds.
    pub fn not_after(&self) -> i64 {
        self.not_after.load(Ordering::Relaxed)
    }

    /// Whether the last load or reload succeeded (for readiness).
    pub fn last_load_ok(&self) -> bool {
        self.last_load_ok.load(Ordering::Relaxed)
    }

    /// Calls [`reload_if_changed`](Self::reload_if_changed) every `every`
    /// (at least 10 ms) and hands `on_reload` each `Reloaded` or `Failed`.
    pub fn spawn_poller(
        self: Arc<Self>,
        every: Duration,
        on_reload: impl Fn(&Reload) + Send + Sync + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(every.max(MIN_POLL));
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // The first tick completes at once; the files were just loaded.
            interval.tick().await;
            loop {
                interval.tick().await;
                // Two small files: reading them inline is cheaper than a
                // blocking-pool hop.
                let reload = self.reload_if_changed();
                if !matches!(reload, Reload::Unchanged) {
                    on_reload(&reload);
                }
            }
        })
    }

    fn current(&self) -> Arc<CertifiedKey> {
        self.current.load_full()
    }
}

impl ResolvesServerCert for CertificateResolver {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

impl fmt::Debug for CertificateResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateResolver")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .field("chain_len", &self.current.load().cert.len())
            .field("not_after", &self.not_after())
            .field("last_load_ok", &self.last_load_ok())
            .finish_non_exhaustive()
    }
}

fn read_pair(cert_path: &Path, key_path: &Path) -> Result<(Vec<u8>, Vec<u8>), CertError> {
    let read = |path: &Path| {
        fs::read(path).map_err(|err| CertError::Read {
            path: path.to_path_buf(),
            reason: err.to_string(),
        })
    };
    Ok((read(cert_path)?, read(key_path)?))
}

fn parse_pair(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_path: &Path,
    key_path: &Path,
) -> Result<Pair, CertError> {
    let cert_err = |reason: String| CertError::Parse {
        path: cert_path.to_path_buf(),
        reason,
    };
    let key_err = |reason: String| CertError::Parse {
        path: key_path.to_path_buf(),
        reason,
    };

    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| cert_err(err.to_string()))?;
    let Some(leaf) = chain.first() else {
        return Err(cert_err("no CERTIFICATE block".to_owned()));
    };
    let not_after = {
        let (_, x509) =
            x509_parser::parse_x509_certificate(leaf).map_err(|err| cert_err(err.to_string()))?;
        x509.validity().not_after.timestamp()
    };
    for (i, cert) in chain.iter().enumerate().skip(1) {
        x509_parser::parse_x509_certificate(cert)
            .map_err(|err| cert_err(format!("certificate {} of the chain: {err}", i + 1)))?;
    }

    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|err| {
        key_err(match err {
            rustls::pki_types::pem::Error::NoItemsFound => "no PRIVATE KEY block".to_owned(),
            err => err.to_string(),
        })
    })?;
    let signing_key = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|err| key_err(err.to_string()))?;

    let key = CertifiedKey::new(chain, signing_key);
    key.keys_match().map_err(|err| CertError::KeyMismatch {
        cert: cert_path.to_path_buf(),
        key: key_path.to_path_buf(),
        reason: err.to_string(),
    })?;
    Ok(Pair { key, not_after })
}

/// The rustls server configuration: TLS 1.3 and 1.2 with ring, the
/// certificate from `resolver`, HTTP/1.1 over ALPN; client certificates
/// checked by `client_auth` when given, else not asked for.
pub fn server_config(
    resolver: Arc<CertificateResolver>,
    client_auth: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<rustls::ServerConfig, CertError> {
    let builder = rustls::ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|err| CertError::Tls {
            reason: err.to_string(),
        })?;
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

/// Always the explicit ring provider: no process-wide default is installed.
fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| i64::try_from(since.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use rustls::pki_types::ServerName;
    use tokio::net::{TcpListener, TcpStream};
    use tokio_rustls::{TlsAcceptor, TlsConnector};

    use super::*;

    const EXTRA: &str = "webhook.example.com";

    fn generate_into(dir: &Path) -> SelfSigned {
        ensure_self_signed(dir, &[]).expect("generate")
    }

    fn sans(cert_pem: &[u8]) -> (Vec<String>, Vec<IpAddr>) {
        let der = CertificateDer::from_pem_slice(cert_pem).expect("pem");
        let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("x509");
        let san = cert
            .subject_alternative_name()
            .expect("san ext")
            .expect("san present");
        let mut dns = Vec::new();
        let mut ips = Vec::new();
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(name) => dns.push((*name).to_owned()),
                GeneralName::IPAddress(bytes) => {
                    let octets: [u8; 4] = (*bytes).try_into().expect("ipv4");
                    ips.push(IpAddr::from(octets));
                }
                other => panic!("unexpected SAN {other:?}"),
            }
        }
        (dns, ips)
    }

    fn read(path: &Path) -> Vec<u8> {
        fs::read(path).expect("read")
    }

    /// TLS handshake against `config` over a real socket, trusting only the
    /// CA in `ca_pem`; returns the chain the server presented and the ALPN.
    async fn handshake(
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
        roots
            .add(CertificateDer::from_pem_slice(ca_pem).expect("ca pem"))
            .expect("root");
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

    #[test]
    fn generates_three_files_with_a_private_key() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("certs");
        let files = generate_into(&dir);

        assert!(!files.reused);
        assert_eq!(files.ca, dir.join("ca.crt"));
        assert_eq!(files.cert, dir.join("tls.crt"));
        assert_eq!(files.key, dir.join("tls.key"));
        for path in [&files.ca, &files.cert, &files.key] {
            assert!(path.is_file(), "{} missing", path.display());
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = fs::metadata(&files.key).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Only the three files: no temporary file is left behind.
        assert_eq!(fs::read_dir(&dir).expect("ls").count(), 3);
    }

    #[test]
    fn serving_cert_covers_default_names_ip_and_extra_name() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let files = ensure_self_signed(tmp.path(), &[EXTRA.to_owned()]).expect("generate");
        let (dns, ips) = sans(&read(&files.cert));
        for name in DEFAULT_DNS_NAMES.iter().copied().chain([EXTRA]) {
            assert!(dns.iter().any(|d| d == name), "{name} not in {dns:?}");
        }
        assert_eq!(ips, vec![IpAddr::from([127, 0, 0, 1])]);

        let der = CertificateDer::from_pem_slice(&read(&files.cert)).expect("pem");
        let (_, leaf) = x509_parser::parse_x509_certificate(&der).expect("x509");
        let ca_der = CertificateDer::from_pem_slice(&read(&files.ca)).expect("pem");
        let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).expect("x509");
        assert_eq!(leaf.issuer().to_string(), ca.subject().to_string());
        assert_eq!(ca.subject().to_string(), "CN=gpu-policy CA");
        assert!(ca.is_ca());
        assert!(!leaf.is_ca());
        let lifetime = leaf.validity().not_after.timestamp() - unix_now();
        assert!((364 * DAY..=366 * DAY).contains(&lifetime), "{lifetime}");
        let ca_lifetime = ca.validity().not_after.timestamp() - unix_now();
        assert!((3649 * DAY..=3651 * DAY).contains(&ca_lifetime));
    }

    #[tokio::test]
    async fn handshake_verifies_against_the_generated_ca_only() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let files = generate_into(tmp.path());
        let resolver = Arc::new(CertificateResolver::load(&files.cert, &files.key).expect("load"));
        let config = Arc::new(server_config(resolver, None).expect("config"));

        let (chain, alpn) = handshake(config.clone(), &read(&files.ca))
            .await
            .expect("handshake with the generated CA");
        assert_eq!(chain.len(), 1);
        assert_eq!(
            chain[0].as_ref(),
            CertificateDer::from_pem_slice(&read(&files.cert))
                .expect("pem")
                .as_ref()
        );
        assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));

        let other = tempfile::tempdir().expect("tempdir");
        let other = generate_into(other.path());
        let err = handshake(config, &read(&other.ca))
            .await
            .expect_err("another CA must not verify");
        // Same CA name, other key: the signature check is what rejects it.
        assert!(
            err.contains("invalid peer certificate: BadSignature"),
            "{err}"
        );
    }

    #[test]
    fn second_call_reuses_the_files() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let extra = [EXTRA.to_owned()];
        let first = ensure_self_signed(tmp.path(), &extra).expect("first");
        let before = [read(&first.ca), read(&first.cert), read(&first.key)];

        let second = ensure_self_signed(tmp.path(), &extra).expect("second");
        assert!(second.reused);
        assert_eq!(
            [read(&second.ca), read(&second.cert), read(&second.key)],
            before
        );

        // Default names are always wanted, so asking for fewer still reuses.
        assert!(ensure_self_signed(tmp.path(), &[]).expect("third").reused);
    }

    #[test]
    fn uncovered_extra_name_regenerates() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let first = generate_into(tmp.path());
        let before = read(&first.cert);

        let second = ensure_self_signed(tmp.path(), &[EXTRA.to_owned()]).expect("second");
        assert!(!second.reused);
        assert_ne!(read(&second.cert), before);
        assert!(sans(&read(&second.cert)).0.iter().any(|d| d == EXTRA));
    }

    #[test]
    fn extra_ip_becomes_an_ip_san_and_is_reused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let extra = ["10.0.0.7".to_owned(), " ".to_owned()];
        let first = ensure_self_signed(tmp.path(), &extra).expect("first");
        let (_, ips) = sans(&read(&first.cert));
        assert_eq!(
            ips,
            vec![IpAddr::from([127, 0, 0, 1]), IpAddr::from([10, 0, 0, 7])]
        );
        assert!(
            ensure_self_signed(tmp.path(), &extra)
                .expect("second")
                .reused
        );
    }

    #[test]
    fn damaged_or_mismatched_files_regenerate() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let files = generate_into(tmp.path());

        fs::write(&files.key, b"garbage").expect("write");
        let again = generate_into(tmp.path());
        assert!(!again.reused);
        CertificateResolver::load(&again.cert, &again.key).expect("regenerated pair loads");

        // A key from another generation does not match tls.crt.
        let other = tempfile::tempdir().expect("tempdir");
        let other = generate_into(other.path());
        fs::copy(&other.key, &files.key).expect("copy");
        assert!(!generate_into(tmp.path()).reused);

        // A serving certificate from another CA does not chain to ca.crt.
        let current_ca = read(&files.ca);
        fs::copy(&other.ca, &files.ca).expect("copy");
        let replaced = generate_into(tmp.path());
        assert!(!replaced.reused);
        assert_ne!(read(&replaced.ca), current_ca);
        assert!(generate_into(tmp.path()).reused);
    }

    #[test]
    fn expiring_serving_cert_regenerates() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let files = generate_into(tmp.path());
        let short = generate(&wanted_names(&[]), unix_now(), 10).expect("generate");
        fs::write(&files.ca, &short.ca).expect("write");
        fs::write(&files.cert, &short.cert).expect("write");
        fs::write(&files.key, &short.key).expect("write");

        let again = generate_into(tmp.path());
        assert!(!again.reused);
        let resolver = CertificateResolver::load(&again.cert, &again.key).expect("load");
        assert!(resolver.not_after() - unix_now() > 300 * DAY);
    }

    #[tokio::test]
    async fn resolver_serves_a_chain_file() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let files = generate_into(tmp.path());
        let chain_path = tmp.path().join("chain.crt");
        let mut chain = read(&files.cert);
        chain.extend_from_slice(&read(&files.ca));
        fs::write(&chain_path, &chain).expect("write");

        let resolver = Arc::new(CertificateResolver::load(&chain_path, &files.key).expect("load"));
        assert_eq!(resolver.current().cert.len(), 2);

        let config = Arc::new(server_config(resolver, None).expect("config"));
        let (presented, _) = handshake(config, &read(&files.ca))
            .await
            .expect("handshake");
        assert_eq!(presented.len(), 2);
        let ca_der = CertificateDer::from_pem_slice(&read(&files.ca)).expect("pem");
        assert_eq!(presented[1].as_ref(), ca_der.as_ref());
    }

    #[tokio::test]
    async fn reload_swaps_pairs_and_keeps_the_old_one_on_failure() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let served = tmp.path().join("served");
        let files = generate_into(&served);
        let resolver = Arc::new(CertificateResolver::load(&files.cert, &files.key).expect("load"));
        let config = Arc::new(server_config(resolver.clone(), None).expect("config"));
        let first_leaf = resolver.current().cert[0].clone();
        let first_not_after = resolver.not_after();
        assert!(first_not_after > unix_now() + 364 * DAY);

        assert!(matches!(resolver.reload_if_changed(), Reload::Unchanged));

        // A new pair from another CA, as cert-manager would write it.
        let next = generate_into(&tmp.path().join("next"));
        fs::copy(&next.cert, &files.cert).expect("copy");
        fs::copy(&next.key, &files.key).expect("copy");
        let reload = resolver.reload_if_changed();
        assert!(matches!(reload, Reload::Reloaded), "{reload:?}");
        let second_leaf = resolver.current().cert[0].clone();
        assert_ne!(second_leaf, first_leaf);
        assert!(resolver.not_after() >= first_not_after);
        assert!(matches!(resolver.reload_if_changed(), Reload::Unchanged));
        // The next handshake presents the new certificate.
        let (presented, _) = handshake(config.clone(), &read(&next.ca))
            .await
            .expect("handshake");
        assert_eq!(presented[0], second_leaf);

        fs::write(&files.cert, b"garbage").expect("write");
        match resolver.reload_if_changed() {
            Reload::Failed(CertError::Parse { path, .. }) => assert_eq!(path, files.cert),
            other => panic!("expected a parse failure, got {other:?}"),
        }
        assert!(!resolver.last_load_ok());
        assert_eq!(resolver.current().cert[0], second_leaf);
        let (presented, _) = handshake(config, &read(&next.ca))
            .await
            .expect("old pair still served");
        assert_eq!(presented[0], second_leaf);
        // Still broken: reported again rather than taken as unchanged.
        assert!(matches!(resolver.reload_if_changed(), Reload::Failed(_)));

        fs::copy(&next.cert, &files.cert).expect("copy");
        assert!(matches!(resolver.reload_if_changed(), Reload::Unchanged));
        assert!(resolver.last_load_ok());
    }

    #[test]
    fn half_updated_pair_fails_then_recovers() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let files = generate_into(&tmp.path().join("served"));
        let resolver = CertificateResolver::load(&files.cert, &files.key).expect("load");
        let next = generate_into(&tmp.path().join("next"));

        fs::copy(&next.cert, &files.cert).expect("copy");
        assert!(matches!(
            resolver.reload_if_changed(),
            Reload::Failed(CertError::KeyMismatch { .. })
        ));
        fs::copy(&next.key, &files.key).expect("copy");
        assert!(matches!(resolver.reload_if_changed(), Reload::Reloaded));
        let expected = CertificateDer::from_pem_slice(&read(&next.cert)).expect("pem");
        assert_eq!(resolver.current().cert[0], expected);
    }

    #[test]
    fn mismatched_key_is_an_error_at_load() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let one = generate_into(&tmp.path().join("one"));
        let two = generate_into(&tmp.path().join("two"));
        let err = CertificateResolver::load(&one.cert, &two.key).expect_err("mismatch");
        assert!(matches!(err, CertError::KeyMismatch { .. }), "{err:?}");
        let message = err.to_string();
        assert!(
            message.contains(&two.key.display().to_string()),
            "{message}"
        );
        assert!(
            message.contains(&one.cert.display().to_string()),
            "{message}"
        );
    }

    #[test]
    fn empty_garbage_or_missing_files_name_the_file() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let files = generate_into(&tmp.path().join("good"));
        let empty = tmp.path().join("empty.pem");
        let garbage = tmp.path().join("garbage.pem");
        let truncated = tmp.path().join("truncated.pem");
        fs::write(&empty, b"").expect("write");
        fs::write(&garbage, b"not a certificate\n").expect("write");
        fs::write(&truncated, b"-----BEGIN CERTIFICATE-----\nMIIB\n").expect("write");

        for bad in [&empty, &garbage, &truncated] {
            let err = CertificateResolver::load(bad, &files.key).expect_err("bad cert");
            assert!(
                matches!(&err, CertError::Parse { path, .. } if path == bad),
                "{err:?}"
            );
            assert!(err.to_string().contains(&bad.display().to_string()));

            let err = CertificateResolver::load(&files.cert, bad).expect_err("bad key");
            assert!(
                matches!(&err, CertError::Parse { path, .. } if path == bad),
                "{err:?}"
            );
        }
        // The certificate file holds a key, not a certificate.
        let err = CertificateResolver::load(&files.key, &files.key).expect_err("key as cert");
        assert!(err.to_string().contains("no CERTIFICATE block"), "{err}");

        let missing = tmp.path().join("missing.pem");
        let err = CertificateResolver::load(&missing, &files.key).expect_err("missing");
        assert!(
            matches!(&err, CertError::Read { path, .. } if *path == missing),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn poller_reports_reloads_but_not_unchanged_polls() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let files = generate_into(&tmp.path().join("served"));
        let resolver = Arc::new(CertificateResolver::load(&files.cert, &files.key).expect("load"));
        let (tx, rx) = mpsc::channel::<String>();
        let tx = Mutex::new(tx);
        let poller = resolver
            .clone()
            .spawn_poller(Duration::from_millis(20), move |reload| {
                let _ = tx.lock().expect("lock").send(format!("{reload:?}"));
            });

        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(rx.try_recv().ok(), None, "unchanged polls are not reported");

        let next = generate_into(&tmp.path().join("next"));
        fs::copy(&next.key, &files.key).expect("copy");
        fs::copy(&next.cert, &files.cert).expect("copy");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while !seen.iter().any(|r: &String| r == "Reloaded") {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no reload seen: {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
            seen.extend(rx.try_iter());
        }
        poller.abort();
        let expected = CertificateDer::from_pem_slice(&read(&next.cert)).expect("pem");
        assert_eq!(resolver.current().cert[0], expected);
    }

    #[test]
    fn debug_shows_paths_not_key_material() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let files = generate_into(tmp.path());
        let resolver = CertificateResolver::load(&files.cert, &files.key).expect("load");
        let debug = format!("{resolver:?}");
        assert!(
            debug.contains("tls.key") && debug.contains("chain_len: 1"),
            "{debug}"
        );
        assert!(!debug.contains("PRIVATE"));
    }
}
