//! The serving pair behind rustls' [`ResolvesServerCert`], looked up on
//! every handshake and swapped in place when the files change
//! (cert-manager, Stackable).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
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
            Err(err) => Reload::Failed(err),
        }
    }

    /// Swaps in the pair of `cert` and `key` unless it is the one loaded.
    fn load_if_changed(&self, cert: Vec<u8>, key: Vec<u8>) -> Reload {
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        if cert == loaded.cert && key == loaded.key {
            return Reload::Unchanged;
        }
        match parse_pair(&cert, &key, &self.cert_path, &self.key_path) {
            Ok(pair) => {
                self.current.store(Arc::new(pair.key));
                self.not_after.store(pair.not_after, Ordering::Relaxed);
                *loaded = LoadedBytes { cert, key };
                Reload::Reloaded
            }
            Err(err) => Reload::Failed(err),
        }
    }

    /// `notAfter` of the leaf being served, in unix seconds.
    pub fn not_after(&self) -> i64 {
        self.not_after.load(Ordering::Relaxed)
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
                Polled::Failed(err) => Reload::Failed(err),
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
            .finish_non_exhaustive()
    }
}

fn read_pair(cert_path: &Path, key_path: &Path) -> Result<(Vec<u8>, Vec<u8>), CertError> {
    Ok((read(cert_path)?, read(key_path)?))
}

#[cfg(test)]
mod tests;
