//! Reading and writing certificate files.

use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::CertError;

/// The bytes of `path`; the error names the file.
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
