//! Issue 14 item 5, the re-scan dir stamp: a re-scan skips the files of a key dir whose inode,
//! mtime and ctime are unchanged. Pinned here on a copy of a corpus cache, through the real CLI:
//! every change written the way Triton writes (a temp dir inside the key dir, the file renamed
//! into place) is seen by the fast path; an in-place rewrite (never Triton's way) is seen only
//! by `scan --full` — the known limit (docs/ARCHITECTURE.md, "The re-scan dir stamp").

use crate::common::*;
use crate::scan::{entry_dirs, file_names};
use cachelens::db::Store;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::Path;
use std::process::Command;

fn cli_scan(cache: &Path, db: &Path, full: bool) -> Value {
    let mut cmd = Command::new(bin());
    cmd.args(["scan", "--machine", "m", "--json", "--db"]).arg(db).arg(cache);
    if full {
        cmd.arg("--full");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["scans"][0].clone()
}

/// (new, changed, unchanged, removed, entries) of a scan summary.
fn counts(s: &Value) -> (i64, i64, i64, i64, i64) {
    let n = |k: &str| s[k].as_i64().unwrap();
    (n("new_entries"), n("changed_entries"), n("unchanged_entries"), n("removed_entries"), n("entries"))
}

/// Store one file as Triton's `FileCacheManager.put` does: `<KEY>/tmp.pid_<pid>_<uuid>/`, the
/// file written there, `os.replace` into `<KEY>/`, the temp dir removed.
fn put_like_triton(key_dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(key_dir).unwrap();
    let tmp = key_dir.join(format!("tmp.pid_{}_{:x}", std::process::id(), rand::random::<u64>()));
    std::fs::create_dir(&tmp).unwrap();
    std::fs::write(tmp.join(name), bytes).unwrap();
    std::fs::rename(tmp.join(name), key_dir.join(name)).unwrap();
    std::fs::remove_dir(&tmp).unwrap();
}

/// Rewrite a file's bytes in place, same size (no rename: the dir does not change).
fn rewrite_in_place(f: &Path) -> String {
    let old = std::fs::read(f).unwrap();
    let new: Vec<u8> = old.iter().map(|b| if *b == b' ' { b'\t' } else { *b }).collect();
    assert_ne!(old, new);
    std::fs::File::options().write(true).open(f).unwrap().write_all(&new).unwrap();
    hex::encode(Sha256::digest(&new))
}

async fn sha_of(pool: &Store, dir: &Path, name: &str) -> Option<String> {
    sqlx::query_scalar(
        "SELECT a.sha256 FROM entry_files a JOIN entry_rows e ON e.id = a.entry_id WHERE e.key = ? AND a.name = ?",
    )
    .bind(dir.file_name().unwrap().to_str().unwrap())
    .bind(name)
    .fetch_optional(pool)
    .await
    .unwrap()
}

fn ending(dir: &Path, ext: &str) -> String {
    file_names(dir).into_iter().find(|n| n.ends_with(ext)).unwrap()
}

#[tokio::test]
async fn dir_stamp_rescan_sees_triton_writes_and_full_sees_in_place_rewrites() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let (cache, ind) = (root.join("triton-cache"), root.join("inductor"));
    // the copy just made every ctime "now": stamps are trusted once older than the settle time
    std::thread::sleep(std::time::Duration::from_nanos(cachelens::scan::SETTLE_NS as u64 + 200_000_000));
    let (_db, db) = fresh_db_at().await;
    assert_eq!(counts(&cli_scan(&cache, &db, false)), (122, 0, 0, 0, 122));
    let pool = cachelens::db::open(&db).await.unwrap();
    let stamps: i64 = sqlx::query_scalar("SELECT COUNT(stamp) FROM entries").fetch_one(&pool).await.unwrap();
    assert_eq!(stamps, 122, "every key dir's stamp stored by the cold scan");
    assert_eq!(counts(&cli_scan(&cache, &db, false)), (0, 0, 122, 0, 122));

    let dirs = entry_dirs(&cache);
    let kernels: Vec<_> = dirs.iter().filter(|d| file_names(d).iter().any(|n| n.ends_with(".ttgir"))).collect();
    let (a, b, c, e, f) = (kernels[0], kernels[1], kernels[2], kernels[3], kernels[4]);
    // (a) a file added the way Triton writes it
    put_like_triton(a, "added.ptx", b"// added\n");
    // (b) a file removed
    let b_llir = ending(b, ".llir");
    std::fs::remove_file(b.join(&b_llir)).unwrap();
    // (c) a file replaced by rename with new content (same size)
    let c_ttgir = ending(c, ".ttgir");
    let old = std::fs::read(c.join(&c_ttgir)).unwrap();
    let new: Vec<u8> = old.iter().map(|x| if *x == b' ' { b'\t' } else { *x }).collect();
    put_like_triton(c, &c_ttgir, &new);
    let c_sha = hex::encode(Sha256::digest(&new));
    // (d) a new key dir, written file by file as Triton does
    let d = cache.join(hex_to_b32(&hex::encode(Sha256::digest(b"new entry"))));
    for n in file_names(kernels[5]) {
        put_like_triton(&d, &n, &std::fs::read(kernels[5].join(&n)).unwrap());
    }
    // (e) a key dir removed
    std::fs::remove_dir_all(e).unwrap();
    // the known limit: a same-size rewrite in place (not Triton's way) leaves the dir as it was
    let f_ttgir = ending(f, ".ttgir");
    let f_old = sha_of(&pool, f, &f_ttgir).await.unwrap();
    let f_new = rewrite_in_place(&f.join(&f_ttgir));

    let s = cli_scan(&cache, &db, false);
    assert_eq!(counts(&s), (1, 3, 118, 1, 122), "{s}");
    assert!(sha_of(&pool, a, "added.ptx").await.is_some(), "(a) the added file is stored");
    assert_eq!(sha_of(&pool, b, &b_llir).await, None, "(b) the removed file is gone");
    assert_eq!(sha_of(&pool, c, &c_ttgir).await.as_deref(), Some(c_sha.as_str()), "(c) the new content");
    assert!(sha_of(&pool, &d, &ending(&d, ".ttgir")).await.is_some(), "(d) the new entry is stored");
    let r = crate::scan::rows(&pool, "m").await;
    assert!(r[e.file_name().unwrap().to_str().unwrap()].removed_at.is_some(), "(e) marked removed");
    assert_eq!(sha_of(&pool, f, &f_ttgir).await, Some(f_old), "the fast path does not see an in-place rewrite");

    // --full checks every file: the rewrite is seen (its mtime moved)
    let s = cli_scan(&cache, &db, true);
    assert_eq!(counts(&s), (0, 1, 121, 0, 122), "{s}");
    assert_eq!(sha_of(&pool, f, &f_ttgir).await, Some(f_new));
    assert_eq!(counts(&cli_scan(&cache, &db, false)), (0, 0, 122, 0, 122));

    // an Inductor cache (`triton/<dev>/<KEY>/`): the key dirs are stat'ed below their device dir
    assert_eq!(counts(&cli_scan(&ind, &db, false)).0, 3);
    let g = &entry_dirs(&ind).into_iter().find(|d| file_names(d).iter().any(|n| n.ends_with(".ttgir"))).unwrap();
    let g_file = ending(g, ".ttgir");
    let g_new = rewrite_in_place(&g.join(&g_file));
    assert_eq!(counts(&cli_scan(&ind, &db, false)), (0, 0, 3, 0, 3));
    assert_eq!(counts(&cli_scan(&ind, &db, true)), (0, 1, 2, 0, 3));
    assert_eq!(sha_of(&pool, g, &g_file).await, Some(g_new));
}
