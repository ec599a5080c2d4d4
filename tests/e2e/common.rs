//! Shared fixtures: the real Triton caches in ../shared/corpus, unpacked into temp dirs and
//! scanned into temp-file SQLite databases.
#![allow(dead_code)]

use cachelens::web::{AppState, Config};
use sqlx::SqlitePool;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// The corpus dir: `$CACHELENS_CORPUS` or `../shared/corpus` next to the repo.
pub fn corpus_dir() -> PathBuf {
    std::env::var_os("CACHELENS_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"))
}

/// Unpack `<name>.tar.xz` from the corpus into `dest` (giving `dest/<name>/...`), keeping mtimes.
pub fn unpack(name: &str, dest: &Path) {
    let archive = corpus_dir().join(format!("{name}.tar.xz"));
    assert!(archive.exists(), "corpus archive missing: {}", archive.display());
    std::fs::create_dir_all(dest).unwrap();
    let st = std::process::Command::new("tar").arg("xJf").arg(&archive).arg("-C").arg(dest).status().unwrap();
    assert!(st.success(), "tar failed for {}", archive.display());
}

/// A temp dir with one corpus archive unpacked; returns (tempdir, path to `<name>/`).
pub fn unpacked(name: &str) -> (TempDir, PathBuf) {
    let t = TempDir::new().unwrap();
    unpack(name, t.path());
    let p = t.path().join(name);
    (t, p)
}

/// A fresh temp-file database.
pub async fn fresh_db() -> (TempDir, SqlitePool) {
    let t = TempDir::new().unwrap();
    let pool = cachelens::db::open(&t.path().join("test.db")).await.unwrap();
    (t, pool)
}

/// Scan `(machine, archive, subdir)` triples into one fresh database. Archives of the same
/// machine listed one after another are unpacked into the same path (an in-place upgrade).
pub async fn corpus_db(plan: &[(&str, &str, &str)]) -> (Vec<TempDir>, SqlitePool) {
    let (dbdir, pool) = fresh_db().await;
    let mut keep = vec![dbdir];
    let mut slot: Option<(String, TempDir)> = None;
    for (machine, archive, sub) in plan {
        let t = match slot.take() {
            Some((m, t)) if m == *machine => t,
            Some((_, t)) => {
                keep.push(t);
                TempDir::new().unwrap()
            }
            None => TempDir::new().unwrap(),
        };
        let fixed = t.path().join("cache");
        let _ = std::fs::remove_dir_all(&fixed);
        let staging = t.path().join("staging");
        let _ = std::fs::remove_dir_all(&staging);
        unpack(archive, &staging);
        std::fs::rename(staging.join(archive), &fixed).unwrap();
        cachelens::collect::scan_local(&pool, &fixed.join(sub), machine).await.unwrap();
        slot = Some((machine.to_string(), t));
    }
    if let Some((_, t)) = slot {
        keep.push(t);
    }
    (keep, pool)
}

/// The standard fleet used by page and API tests: every corpus archive, as the demo loads it.
pub async fn fleet() -> (Vec<TempDir>, AppState) {
    let (keep, pool) = corpus_db(&[
        ("h100-a", "h100-jit-3.6.0", "triton-cache"),
        ("h100-b", "h100-inductor-3.6.0", "inductor"),
        ("h100-c", "h100-fpfusion-off-triton-3.6.0", "triton-cache"),
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("a100-1", "a100-upgrade-2-triton-3.5.1", "triton-cache"),
        ("mi300-1", "mi300-upgrade-1-triton-3.6.0", "triton-cache"),
        ("mi300-1", "mi300-upgrade-2-triton-3.9.0", "triton-cache"),
    ])
    .await;
    (keep, AppState::new(pool, Config::default()))
}

/// GET `uri` through `app(state).oneshot`; returns (status, body text).
pub async fn get(state: &AppState, uri: &str) -> (u16, String) {
    use tower::ServiceExt;
    let req = axum::http::Request::builder().uri(uri).body(axum::body::Body::empty()).unwrap();
    let resp = cachelens::web::app(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// GET a JSON endpoint, asserting 200.
pub async fn get_json(state: &AppState, uri: &str) -> serde_json::Value {
    let (status, body) = get(state, uri).await;
    assert_eq!(status, 200, "GET {uri}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {uri}: not JSON ({e}): {body}"))
}

/// The cachelens binary built for this test run.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cachelens"))
}
