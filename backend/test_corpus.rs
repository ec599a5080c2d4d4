//! Test fixtures: the real Triton caches of `../shared/corpus` (or `$CACHELENS_CORPUS`), each
//! archive unpacked once per test process into the target dir. A missing archive fails the
//! test that asked for it, with a message saying where it was looked for.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The corpus archives' names (without `.tar.xz`), sorted.
pub(crate) fn archives() -> Vec<String> {
    let dir = corpus_archives();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus dir {} unreadable ({e}): set CACHELENS_CORPUS", dir.display()))
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".tar.xz").map(str::to_string))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no .tar.xz archives in {}", dir.display());
    names
}

/// The dir of the corpus archives.
fn corpus_archives() -> PathBuf {
    std::env::var_os("CACHELENS_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"))
}

/// `<archive>/`, unpacked from `<archive>.tar.xz` once per test process. It goes under the
/// target dir (next to the test binary), keyed by the archive's size and mtime, so that runs
/// reuse it and nothing piles up in /tmp; another process racing on it loses the rename and
/// uses the winner's copy.
pub(crate) fn unpacked(archive: &str) -> PathBuf {
    static DONE: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut done = DONE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = done.get(archive) {
        return p.clone();
    }
    let file = corpus_archives().join(format!("{archive}.tar.xz"));
    let meta = std::fs::metadata(&file).unwrap_or_else(|e| {
        panic!("corpus archive {} missing ({e}): set CACHELENS_CORPUS to the corpus dir", file.display())
    });
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
