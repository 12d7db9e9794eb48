//! The serving pair behind rustls' [`ResolvesServerCert`], looked up on
//! every handshake and swapped in place when the files change
//! (cert-manager, Stackable).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::CertError;
use super::files::{Reload, Reloading, read, spawn_poller};
use super::pki::parse_pair;

type PairBytes = (Vec<u8>, Vec<u8>);

pub struct CertificateResolver {
    cert_path: PathBuf,
    key_path: PathBuf,
    pair: Reloading<PairBytes, (Arc<CertifiedKey>, i64)>,
}

impl CertificateResolver {
    /// Key PKCS#8, PKCS#1 or SEC1.
    pub fn load(cert_path: &Path, key_path: &Path) -> Result<Self, CertError> {
        let bytes = read_pair(cert_path, key_path)?;
        let pair = parse_pair(&bytes.0, &bytes.1, cert_path, key_path)?;
        Ok(Self {
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
            pair: Reloading::new(bytes, (Arc::new(pair.key), pair.not_after), false),
        })
    }

    /// A failed load keeps serving the previous pair and is reported again
    /// on every call until the files are fixed (a half-updated pair fixes
    /// itself on the next call).
    pub fn reload_if_changed(&self) -> Reload {
        match read_pair(&self.cert_path, &self.key_path) {
            Ok(bytes) => self.load_if_changed(&bytes),
            Err(err) => Reload::Failed(err),
        }
    }

    fn load_if_changed(&self, bytes: &PairBytes) -> Reload {
        self.pair.load_if_changed(bytes, |(cert, key)| {
            let pair = parse_pair(cert, key, &self.cert_path, &self.key_path)?;
            Ok((Arc::new(pair.key), pair.not_after))
        })
    }

    /// Unix seconds.
    pub fn not_after(&self) -> i64 {
        self.pair.current().1
    }

    /// Every `every` (at least 10 ms). New bytes that do not load are
    /// reported once; an unreadable file on every poll.
    pub fn spawn_poller(
        self: Arc<Self>,
        every: Duration,
        on_reload: impl Fn(&Reload) + Send + Sync + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let (cert_path, key_path) = (self.cert_path.clone(), self.key_path.clone());
        // Two small files: reading them inline is cheaper than a
        // blocking-pool hop.
        let read = move || read_pair(&cert_path, &key_path);
        let loaded = self.pair.loaded_bytes();
        spawn_poller(every, loaded, read, move |bytes| self.load_if_changed(bytes), on_reload)
    }

    pub(super) fn current(&self) -> Arc<CertifiedKey> {
        Arc::clone(&self.pair.current().0)
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
            .field("chain_len", &self.current().cert.len())
            .field("not_after", &self.not_after())
            .finish_non_exhaustive()
    }
}

fn read_pair(cert_path: &Path, key_path: &Path) -> Result<PairBytes, CertError> {
    Ok((read(cert_path)?, read(key_path)?))
}

#[cfg(test)]
mod tests;
