//! Reading and writing certificate files, and [`Reloading`]: what the
//! serving pair and the client CAs share of reloading theirs.

use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::{ArcSwap, Guard};

use super::CertError;
use crate::poll::{Polled, poll_bytes};

#[derive(Debug)]
pub enum Reload {
    /// The files hold the bytes last loaded.
    Unchanged,
    /// New contents were loaded and are in force from the next handshake on.
    Reloaded,
    /// The files changed but could not be loaded; the previous contents
    /// stay in force.
    Failed(CertError),
}

/// A value parsed from files, swapped in place when their bytes change;
/// bytes that do not load leave the previous value in force.
pub(super) struct Reloading<B, T> {
    current: ArcSwap<T>,
    /// The bytes behind `current`, and whether the last load was refused;
    /// also serialises reloads.
    loaded: Mutex<(B, bool)>,
    /// Bytes put back as they were after a refusal are reported as
    /// reloaded (the file is good again), not as unchanged.
    restored_reloads: bool,
}

impl<B: PartialEq + Clone, T> Reloading<B, T> {
    pub(super) fn new(bytes: B, value: T, restored_reloads: bool) -> Self {
        Self {
            current: ArcSwap::from_pointee(value),
            loaded: Mutex::new((bytes, false)),
            restored_reloads,
        }
    }

    pub(super) fn current(&self) -> Guard<Arc<T>> {
        self.current.load()
    }

    pub(super) fn loaded_bytes(&self) -> B {
        self.loaded.lock().unwrap_or_else(PoisonError::into_inner).0.clone()
    }

    pub(super) fn load_if_changed(
        &self,
        bytes: &B,
        parse: impl FnOnce(&B) -> Result<T, CertError>,
    ) -> Reload {
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        if *bytes == loaded.0 {
            let restored = std::mem::replace(&mut loaded.1, false);
            return if restored && self.restored_reloads {
                Reload::Reloaded
            } else {
                Reload::Unchanged
            };
        }
        match parse(bytes) {
            Ok(value) => {
                self.current.store(Arc::new(value));
                *loaded = (bytes.clone(), false);
                Reload::Reloaded
            }
            Err(err) => {
                loaded.1 = true;
                Reload::Failed(err)
            }
        }
    }
}

/// Reads the files with `read` every `every` (at least 10 ms), as
/// [`poll_bytes`] does, from the `loaded` bytes on, hands new bytes to
/// `load`, and `on_reload` each `Reloaded` or `Failed`. New bytes that do
/// not load are reported once; files that cannot be read, on every poll.
pub(super) fn spawn_poller<B: PartialEq + Send + 'static>(
    every: Duration,
    loaded: B,
    read: impl FnMut() -> Result<B, CertError> + Send + 'static,
    load: impl Fn(&B) -> Reload + Send + 'static,
    on_reload: impl Fn(&Reload) + Send + Sync + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(poll_bytes(every, Some(loaded), read, move |polled| {
        let reload = match polled {
            Polled::Changed(bytes) => load(bytes),
            Polled::Failed(err) => Reload::Failed(err),
        };
        if !matches!(reload, Reload::Unchanged) {
            on_reload(&reload);
        }
    }))
}

pub(super) fn read(path: &Path) -> Result<Vec<u8>, CertError> {
    fs::read(path).map_err(|source| CertError::Read { path: path.to_path_buf(), source })
}

pub(super) fn create_dir(dir: &Path) -> Result<(), CertError> {
    fs::create_dir_all(dir).map_err(|source| CertError::Write { path: dir.to_path_buf(), source })
}

/// Writes `bytes` to a temporary file next to `path` and renames it over
/// `path`, so a reader sees the old file or the new one, never a part.
/// `private` files get mode 0600 on unix.
pub(super) fn write_atomically(path: &Path, bytes: &[u8], private: bool) -> Result<(), CertError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let file_name =
        path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
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
    if let Err(source) = result {
        let _ = fs::remove_file(&tmp);
        return Err(CertError::Write { path: path.to_path_buf(), source });
    }
    Ok(())
}
