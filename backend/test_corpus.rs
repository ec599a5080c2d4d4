//! Test fixtures: the real Triton caches in `demo/*.tar.xz` (what each holds: demo/CORPUS.md).
//! Each archive is unpacked once per test process into the target dir and shared read-only
//! ([`unpacked`]); a test that changes its cache takes its own copy ([`copy_into`]).
//!
//! One file serves every test: the unit tests compile it as `crate::test_corpus`
//! (`#[cfg(test)]` in lib.rs), the integration tests and the benches through
//! `#[path = ".../backend/test_corpus.rs"]`. It needs nothing beside the checkout.
#![allow(dead_code)] // each user takes a part

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The dir of the corpus archives: `demo/` in the checkout.
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("demo")
}

/// The corpus archives' names (without `.tar.xz`), sorted.
pub fn archives() -> Vec<String> {
    let dir = corpus_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus dir {} unreadable: {e}", dir.display()))
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".tar.xz").map(str::to_string))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no .tar.xz archives in {}", dir.display());
    names
}

/// `<archive>/`, unpacked from `demo/<archive>.tar.xz` once per test process: read it, never
/// change it (see [`copy_into`]). It goes under the target dir (next to the test binary),
/// keyed by the archive's size and mtime, so that runs reuse it and nothing piles up in /tmp;
/// another process racing on it loses the rename and uses the winner's copy.
pub fn unpacked(archive: &str) -> PathBuf {
    static DONE: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut done = DONE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = done.get(archive) {
        return p.clone();
    }
    let file = corpus_dir().join(format!("{archive}.tar.xz"));
    let meta = std::fs::metadata(&file).unwrap_or_else(|e| panic!("corpus archive {} missing: {e}", file.display()));
    let mtime = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).unwrap_or_default();
    let exe = std::env::current_exe().unwrap();
    let root = exe.ancestors().nth(2).unwrap().join("test-corpus");
    let dest = root.join(format!("{archive}-{}-{}", meta.len(), mtime.as_secs()));
    if !dest.is_dir() {
        let tmp = root.join(format!("tmp-{archive}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let st = std::process::Command::new("tar").arg("xJf").arg(&file).arg("-C").arg(&tmp).status().unwrap();
        assert!(st.success(), "tar xJf {} failed", file.display());
        if std::fs::rename(tmp.join(archive), &dest).is_err() {
            assert!(dest.is_dir(), "could not move the unpacked {archive} to {}", dest.display());
        }
        let _ = std::fs::remove_dir_all(&tmp);
    }
    done.insert(archive.to_string(), dest.clone());
    dest
}

/// A copy of [`unpacked`]`(archive)` at `dest/<archive>` (which must not exist yet; `dest` is
/// created), for a test to change. `cp -a` keeps the files' mtimes (the compile times the
/// scanner reads) and modes, as unpacking the archive there would.
pub fn copy_into(archive: &str, dest: &Path) -> PathBuf {
    let src = unpacked(archive);
    let to = dest.join(archive);
    assert!(!to.exists(), "{} exists already", to.display());
    std::fs::create_dir_all(dest).unwrap();
    let st = std::process::Command::new("cp").arg("-a").arg(&src).arg(&to).status().unwrap();
    assert!(st.success(), "cp -a {} {} failed", src.display(), to.display());
    to
}
