//! One `scan` of a cache root into one destination (a database file, or a server) at a time:
//! cron runs that overlap (a slow server, a big cache) stop at once, or wait a bounded time,
//! instead of piling up. The lock is an exclusive `flock` on a file in cachelens' own data dir
//! (`<data dir>/locks/<16 hex of the sha256 of the root's canonical path and the
//! destination>.lock`, beside the default database), never in the cache; the kernel drops it
//! when the process ends, however it ends. The file says who holds it, for the one turned away.

use sha2::Digest;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Exit status of a `scan` that found a root being scanned by another (1 is any other error).
pub const EXIT_LOCKED: u8 = 3;

/// Another process holds a root's lock.
#[derive(Debug, thiserror::Error)]
#[error("{root} is being scanned by another cachelens scan ({holder}): not scanning it again{waited}")]
pub struct Locked {
    pub root: String,
    pub holder: String,
    waited: String,
}

/// A root's lock, held until dropped.
#[derive(Debug)]
pub struct RootLock {
    _file: std::fs::File,
}

/// Where the lock files live: `locks/` beside the default database.
pub fn dir() -> PathBuf {
    crate::db::default_path().with_file_name("locks")
}

/// The lock file of `root` (by its canonical path) scanned into `dest` (a database file's
/// canonical path, or a server's URL).
pub fn file_of(root: &Path, dest: &str) -> PathBuf {
    let canon = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut h = sha2::Sha256::new();
    h.update(canon.as_os_str().as_encoded_bytes());
    h.update([0]);
    h.update(dest.as_bytes());
    let digest = h.finalize();
    dir().join(format!("{}.lock", &hex::encode(digest)[..16]))
}

/// Take the lock of `root` into `dest`, waiting up to `wait` for another scan to finish with
/// it; a [`Locked`] error when it does not.
pub async fn lock(root: &Path, dest: &str, wait: Duration) -> anyhow::Result<RootLock> {
    let path = file_of(root, dest);
    std::fs::create_dir_all(dir()).map_err(|e| anyhow::anyhow!("creating {}: {e}", dir().display()))?;
    // not truncated on open: the holder's line stays readable until this one holds the lock
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("opening the lock file {}: {e}", path.display()))?;
    let started = std::time::Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < wait => {
                tokio::time::sleep(Duration::from_millis(100).min(wait)).await;
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = match holder.trim() {
                    "" => "its lock file is ".to_string() + &path.display().to_string(),
                    h => h.to_string(),
                };
                let waited = if wait.is_zero() {
                    " (--wait-lock DURATION waits for it)".to_string()
                } else {
                    format!(" (waited {:.0} s)", wait.as_secs_f64())
                };
                return Err(Locked { root: root.display().to_string(), holder, waited }.into());
            }
            Err(std::fs::TryLockError::Error(e)) => anyhow::bail!("locking {}: {e}", path.display()),
        }
    }
    let now = crate::fmt::stamp(crate::db::now_ms(), "%Y-%m-%d %H:%M:%S UTC");
    let line = format!("pid {}, since {now}", std::process::id());
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(line.as_bytes())?;
    Ok(RootLock { _file: file })
}
