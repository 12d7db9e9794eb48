//! The serving pair behind rustls' [`ResolvesServerCert`], looked up on
//! every handshake and swapped in place when the files change
//! (cert-manager, Stackable).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::CertError;
use super::files::read;
use super::pki::parse_pair;
use crate::poll::{Polled, poll_bytes};

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
    /// A failed load keeps serving the previous pair and is reported again
    /// on every call until the files are fixed (a half-updated pair fixes
    /// itself on the next call).
    pub fn reload_if_changed(&self) -> Reload {
        match read_pair(&self.cert_path, &self.key_path) {
            Ok((cert, key)) => self.load_if_changed(cert, key),
            Err(err) => self.failed(err),
        }
    }

    /// Swaps in the pair of `cert` and `key` unless it is the one loaded.
    fn load_if_changed(&self, cert: Vec<u8>, key: Vec<u8>) -> Reload {
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        if cert == loaded.cert && key == loaded.key {
            self.last_load_ok.store(true, Ordering::Relaxed);
            return Reload::Unchanged;
        }
        match parse_pair(&cert, &key, &self.cert_path, &self.key_path) {
            Ok(pair) => {
                self.current.store(Arc::new(pair.key));
                self.not_after.store(pair.not_after, Ordering::Relaxed);
                *loaded = LoadedBytes { cert, key };
                self.last_load_ok.store(true, Ordering::Relaxed);
                Reload::Reloaded
            }
            Err(err) => self.failed(err),
        }
    }

    fn failed(&self, err: CertError) -> Reload {
        self.last_load_ok.store(false, Ordering::Relaxed);
        Reload::Failed(err)
    }

    /// `notAfter` of the leaf being served, in unix seconds.
    pub fn not_after(&self) -> i64 {
        self.not_after.load(Ordering::Relaxed)
    }

    /// Whether the last load or reload succeeded (for readiness).
    pub fn last_load_ok(&self) -> bool {
        self.last_load_ok.load(Ordering::Relaxed)
    }

    /// Polls both files every `every` (at least 10 ms) and hands
    /// `on_reload` each `Reloaded` or `Failed`. New bytes that do not load
    /// are reported once; an unreadable file on every poll.
    pub fn spawn_poller(
        self: Arc<Self>,
        every: Duration,
        on_reload: impl Fn(&Reload) + Send + Sync + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let loaded = {
            let loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
            (loaded.cert.clone(), loaded.key.clone())
        };
        let (cert_path, key_path) = (self.cert_path.clone(), self.key_path.clone());
        // Two small files: reading them inline is cheaper than a
        // blocking-pool hop.
        let read = move || read_pair(&cert_path, &key_path);
        tokio::spawn(poll_bytes(every, Some(loaded), read, move |polled| {
            let reload = match polled {
                Polled::Changed((cert, key)) => self.load_if_changed(cert.clone(), key.clone()),
                Polled::Failed(err) => self.failed(err),
            };
            if !matches!(reload, Reload::Unchanged) {
                on_reload(&reload);
            }
        }))
    }

    pub(super) fn current(&self) -> Arc<CertifiedKey> {
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
    Ok((read(cert_path)?, read(key_path)?))
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::sync::mpsc;

    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;

    use super::*;
    use crate::certs::pki::{DAY, unix_now};
    use crate::certs::server_config;
    use crate::certs::testing::{generate_into, handshake, read};

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
