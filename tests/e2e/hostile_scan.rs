//! Issue 10, hostile cache contents: symlinks out of the cache, huge (sparse) files, names that
//! are not UTF-8, garbage binaries, control characters in cache text, bad machine names. Each
//! on a copy of a real corpus cache, through the real CLI.

use crate::common::*;
use crate::scan::{entry_dirs, file_names, metadata_file, rows};
use serde_json::Value;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cli(args: &[&OsStr]) -> Output {
    Command::new(bin()).args(args).output().unwrap()
}

/// `cachelens scan --json --machine M --db DB ROOT`, asserting success; the summary.
fn cli_scan(root: &Path, db: &Path, machine: &str) -> Value {
    let out = cli(&["scan", "--json", "--machine", machine, "--db"]
        .map(OsStr::new)
        .iter()
        .copied()
        .chain([db.as_os_str(), root.as_os_str()])
        .collect::<Vec<_>>());
    assert!(out.status.success(), "scan failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["scans"][0].clone()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for n in file_names(from) {
        std::fs::copy(from.join(&n), to.join(&n)).unwrap();
    }
}

fn kernel_dirs(cache: &Path) -> Vec<PathBuf> {
    entry_dirs(cache).into_iter().filter(|d| file_names(d).len() == 8).collect()
}

fn find(d: &Path, ext: &str) -> PathBuf {
    d.join(file_names(d).into_iter().find(|n| n.ends_with(ext) && !n.starts_with("__grp__")).unwrap())
}

const SECRET: &str = "CACHELENS-SECRET-7f3a9c1e";

/// Links to files and dirs outside the root (and to `/`) are skipped as "symlink out of the
/// cache" and counted; nothing of what they point to reaches the database. The root itself may
/// be given through a symlink.
#[test]
fn symlinks_never_lead_out_of_the_cache() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let cache = root.join("triton-cache");
    let dirs = kernel_dirs(&cache);
    let n_before = entry_dirs(&cache).len();
    // Outside the root: a secret file, and a copy of a real entry with the secret in its IR.
    let outside = tempfile::TempDir::new().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, format!("{SECRET}\n")).unwrap();
    let other = outside.path().join("other-entry");
    copy_dir(&dirs[1], &other);
    std::fs::write(find(&other, ".ttir"), format!("module {{ // {SECRET}\n}}\n")).unwrap();
    let best = outside.path().join("x.best_config");
    std::fs::write(&best, format!(r#"{{"num_warps": 4, "triton_cache_hash": "{SECRET}"}}"#)).unwrap();
    let events = outside.path().join("events.jsonl");
    let line =
        format!(r#"{{"ts": 1763900000.5, "host": "h", "pid": 1, "key": "k", "kernel": "{SECRET}", "event": "hit"}}"#);
    std::fs::write(&events, format!("{line}\n")).unwrap();

    // an entry file that is a link (a new one, and one of its real files replaced by one)
    symlink(&secret, dirs[0].join("x.ttgir")).unwrap();
    let ptx = find(&dirs[2], ".ptx");
    std::fs::remove_file(&ptx).unwrap();
    symlink(&secret, &ptx).unwrap();
    // key-named dirs pointing outside and to /
    symlink(&other, cache.join("OTHERKEYOTHERKEYOTHERKEYOTHERKEYOTHERKEYOTHERKEY2345")).unwrap();
    symlink("/", cache.join("ROOTKEYROOTKEYROOTKEYROOTKEYROOTKEYROOTKEYROOTKEY2345")).unwrap();
    // an Inductor best_config and a hook event file that are links
    symlink(&best, cache.join("abc.best_config")).unwrap();
    std::fs::create_dir(cache.join(".cachelens")).unwrap();
    symlink(&events, cache.join(".cachelens/events-evil.jsonl")).unwrap();

    // the root given as a symlink
    let link = root.join("cache-link");
    symlink(&cache, &link).unwrap();
    let (_dbdir, db) = fresh_db_at_blocking();
    let s = cli_scan(&link, &db, "hostile");

    assert_eq!(s["root"], cache.canonicalize().unwrap().display().to_string(), "the root is resolved once");
    assert_eq!(s["skipped"]["symlink out of the cache"], 6, "every link out is counted: {s}");
    assert_eq!(s["entries"], n_before as i64, "entries behind links are not read: {s}");
    let held = tokio::runtime::Runtime::new().unwrap().block_on(db_holds(&db, SECRET));
    assert!(!held, "the target's content reached the database");
    let pool = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let pool = cachelens::db::open(&db).await.unwrap();
        let r = rows(&pool, "hostile").await;
        pool.close().await;
        r
    });
    let key = |d: &Path| d.file_name().unwrap().to_string_lossy().into_owned();
    for d in [&dirs[0], &dirs[2]] {
        let p = pool[&key(d)].partial.clone().unwrap_or_default();
        assert!(p.contains("symlink out of the cache"), "an entry with a link is flagged: {p}");
    }
    assert!(!pool.keys().any(|k| k.starts_with("OTHERKEY") || k.starts_with("ROOTKEY")));
    assert_eq!(s["events"], 0);
    assert_eq!(s["best_configs"], 0);
}

/// Sparse 2 GiB files of every kind cost no memory: peak RSS of the whole `cachelens scan`
/// stays under 300 MB, and the summary says what was not read and why.
#[test]
fn huge_files_keep_memory_bounded() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let src = root.join("triton-cache");
    let dirs = kernel_dirs(&src);
    let cache = root.join("huge");
    std::fs::create_dir(&cache).unwrap();
    let huge = |p: &Path| {
        let st = Command::new("truncate").args(["-s", "2G"]).arg(p).status().unwrap();
        assert!(st.success());
    };
    let kinds = [".ttir", ".cubin", "meta", "__grp__"];
    let mut copied = vec![];
    for (i, kind) in kinds.iter().enumerate() {
        let d = cache.join(dirs[i].file_name().unwrap());
        copy_dir(&dirs[i], &d);
        let f = match *kind {
            "meta" => metadata_file(&d).unwrap(),
            "__grp__" => d.join(file_names(&d).into_iter().find(|n| n.starts_with("__grp__")).unwrap()),
            ext => find(&d, ext),
        };
        huge(&f);
        copied.push(d);
    }
    huge(&cache.join("abc.best_config"));
    std::fs::create_dir(cache.join(".cachelens")).unwrap();
    huge(&cache.join(".cachelens/events-huge.jsonl")); // this machine's (--machine huge)

    let (_dbdir, db) = fresh_db_at_blocking();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "maxrss_kb=%M"])
        .arg(bin())
        .args(["scan", "--json", "--machine", "huge", "--db"])
        .arg(&db)
        .arg(&cache)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let kb: u64 = stderr.rsplit("maxrss_kb=").next().unwrap().trim().parse().unwrap();
    println!("peak RSS of the scan: {} MB", kb / 1024);
    assert!(kb < 300 * 1024, "peak RSS {} MB", kb / 1024);
    let s = serde_json::from_slice::<Value>(&out.stdout).unwrap()["scans"][0].clone();
    let sk = &s["skipped"];
    assert_eq!(sk["IR text over the 16 MiB size cap: not read"], 1, "{s}");
    assert_eq!(sk["cubin over the 32 MiB size cap: not read"], 1, "{s}");
    assert_eq!(sk["metadata file over the 4 MiB size cap: not read"], 1, "{s}");
    assert_eq!(sk["group file over the 4 MiB size cap: not read"], 1, "{s}");
    assert_eq!(sk["best_config over the 1 MiB size cap: not read"], 1, "{s}");
    assert_eq!(sk["malformed hook event line (too long)"], 1, "{s}");
    assert_eq!(s["entries"], 4);
    // each 2 GiB file is over the 256 MiB hash budget as well: hashed in part, its entry partial
    assert_eq!(sk["file of 2 GiB: hashed its first 256 MiB"], 4, "{s}");
    assert_eq!(s["partial"], 4, "{s}");
    // the 2 GiB file is listed with its size and the hash of its first 256 MiB and its size
    let ttir = find(&copied[0], ".ttir");
    let whole = {
        use sha2::{Digest, Sha256};
        use std::io::Read;
        let (mut h, mut block) = (Sha256::new(), vec![0u8; 1 << 20]);
        let mut f = std::fs::File::open(&ttir).unwrap().take(256 << 20);
        loop {
            match f.read(&mut block).unwrap() {
                0 => break,
                n => h.update(&block[..n]),
            }
        }
        h.update((2u64 << 30).to_le_bytes());
        hex::encode(h.finalize())
    };
    let name = ttir.file_name().unwrap().to_string_lossy().into_owned();
    let got: (i64, String) = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let pool = cachelens::db::open(&db).await.unwrap();
        sqlx::query_as(
            "SELECT a.bytes, a.sha256 FROM entry_files a JOIN entry_rows e ON e.id = a.entry_id WHERE e.key = ? AND a.name = ?",
        )
        .bind(copied[0].file_name().unwrap().to_str().unwrap())
        .bind(&name)
        .fetch_one(&pool)
        .await
        .unwrap()
    });
    assert_eq!(got, (2 << 30, whole));
    // a re-scan does not read the events file again from the start
    let out = Command::new(bin()).args(["scan", "--json", "--machine", "huge", "--db"]).arg(&db).arg(&cache).output();
    let s2 = serde_json::from_slice::<Value>(&out.unwrap().stdout).unwrap()["scans"][0].clone();
    assert!(s2["skipped"].get("malformed hook event line (too long)").is_none(), "{s2}");
}

/// A file whose name is not UTF-8 does not make its entry vanish: the entry is read, the file
/// listed under an escaped name, and a re-scan finds it unchanged.
#[test]
fn non_utf8_file_names_keep_their_entry() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let cache = root.join("triton-cache");
    let d = &kernel_dirs(&cache)[0];
    let n = entry_dirs(&cache).len() as i64;
    let name = OsStr::from_bytes(b"extra\xff\xfe.ttgir");
    std::fs::write(d.join(name), "module {}\n").unwrap();
    let (_dbdir, db) = fresh_db_at_blocking();
    let s = cli_scan(&cache, &db, "utf");
    assert_eq!(s["entries"], n, "{s}");
    assert!(s["skipped"].as_object().unwrap().is_empty(), "{s}");
    let names: Vec<String> = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let pool = cachelens::db::open(&db).await.unwrap();
        sqlx::query_scalar("SELECT a.name FROM entry_files a JOIN entry_rows e ON e.id = a.entry_id WHERE e.key = ?")
            .bind(d.file_name().unwrap().to_str().unwrap())
            .fetch_all(&pool)
            .await
            .unwrap()
    });
    assert!(names.contains(&"extra\\xff\\xfe.ttgir".to_string()), "{names:?}");
    let s = cli_scan(&cache, &db, "utf");
    assert_eq!((s["removed_entries"].as_i64(), s["unchanged_entries"].as_i64()), (Some(0), Some(n)), "{s}");
}

/// A garbage `.amdgcn` is flagged (partial, with the reason) instead of giving no resources.
#[test]
fn garbage_amdgcn_is_flagged() {
    let (_t, root) = unpacked("mi300-upgrade-1-triton-3.6.0");
    let cache = root.join("triton-cache");
    let d = entry_dirs(&cache).into_iter().find(|d| file_names(d).iter().any(|n| n.ends_with(".amdgcn"))).unwrap();
    std::fs::write(find(&d, ".amdgcn"), "this is not assembly\n\x00\x01garbage\n").unwrap();
    let (_dbdir, db) = fresh_db_at_blocking();
    let s = cli_scan(&cache, &db, "amd");
    let r = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let pool = cachelens::db::open(&db).await.unwrap();
        rows(&pool, "amd").await
    });
    let row = &r[d.file_name().unwrap().to_str().unwrap()];
    assert_eq!(row.kind, "partial");
    assert!(row.partial.as_deref().unwrap_or("").contains("unreadable amdgcn: no kernel"), "{:?}", row.partial);
    assert!(s["partial"].as_i64().unwrap() >= 1);
    // the other AMD entries of the corpus are not flagged
    assert!(
        r.values().filter(|x| x.dir != row.dir).all(|x| x.partial.as_deref().is_none_or(|p| !p.contains("amdgcn")))
    );
}

/// `scan --machine` refuses a name the server would refuse, before touching anything.
#[test]
fn scan_refuses_bad_machine_names() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let (_dbdir, db) = fresh_db_at_blocking();
    for bad in ["../etc", "a/b", ".hidden", "", "x y", &"m".repeat(65)] {
        let out = Command::new(bin())
            .args(["scan", "--machine", bad, "--db"])
            .arg(&db)
            .arg(root.join("triton-cache"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("invalid machine name"), "{bad:?}");
    }
    assert!(tokio::runtime::Runtime::new().unwrap().block_on(untouched(&db)), "nothing was written");
}

/// `cachelens explain` prints cache text with its control characters and line breaks escaped.
#[tokio::test]
async fn explain_strips_control_characters() {
    let t = tempfile::TempDir::new().unwrap();
    let (_d, db) = fresh_db_at().await;
    let pool = cachelens::db::open(&db).await.unwrap();
    let store = cachelens::db::Db::from(pool.clone());
    for (i, archive) in ["a100-upgrade-1-triton-3.4.0", "a100-upgrade-2-triton-3.5.1"].iter().enumerate() {
        // both scans of one root (an in-place upgrade), the second's metadata carrying escapes
        let dir = t.path().join(format!("u{i}"));
        unpack(archive, &dir);
        let cache = t.path().join("cache");
        let _ = std::fs::remove_dir_all(&cache);
        std::fs::rename(dir.join(archive).join("triton-cache"), &cache).unwrap();
        if i == 1 {
            for d in entry_dirs(&cache) {
                let Some(m) = metadata_file(&d) else { continue };
                let mut v: Value = serde_json::from_slice(&std::fs::read(&m).unwrap()).unwrap();
                // the upgrade's cache holds the old release's entries too: the value differs by release
                let version = v["triton_version"].as_str().unwrap_or("").to_string();
                v["debug_note"] = Value::from(format!("\u{1b}]0;pwned\u{7}\u{1b}[2J\r\u{9b}31m\n::error::x {version}"));
                std::fs::write(&m, serde_json::to_vec(&v).unwrap()).unwrap();
            }
        }
        cachelens::collect::scan_local(&store, &cache, "a100-1").await.unwrap();
    }
    let state = cachelens::web::AppState::new(pool, cachelens::web::Config::default());
    let inv = get_json(&state, "/api/v1/invalidations?machine=a100-1").await;
    let i = &inv["invalidated"][0];
    let (a, b) = (i["a"].as_str().unwrap(), i["b"].as_str().unwrap());
    let out = Command::new(bin()).args(["explain", a, b, "--diff", "--db"]).arg(&db).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("debug_note"), "the differing field is shown: {text}");
    assert!(text.contains("\\x1b]0;pwned\\x07\\x1b[2J\\r\\u{9b}31m\\n::error::x"), "shown escaped: {text}");
    assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "control characters: {text:?}");
    assert!(!text.lines().any(|l| l.trim_start().starts_with("::")), "a line of the note's own: {text}");
}

/// `cachelens scan` prints root paths (the dirs found below the path given, which whoever
/// writes there names) with their control characters and line breaks escaped.
#[test]
fn scan_escapes_dir_names() {
    let t = tempfile::TempDir::new().unwrap();
    let archive = "a100-upgrade-1-triton-3.4.0";
    unpack(archive, t.path());
    let evil = "c\u{1b}[31mred\n::error title=x::boom\u{202e}";
    let dir = t.path().join("jobs").join(evil);
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    std::fs::rename(t.path().join(archive).join("triton-cache"), &dir).unwrap();
    let (_d, db) = fresh_db_at_blocking();
    let out = Command::new(bin())
        .args(["scan", "--machine", "m", "--db"])
        .arg(&db)
        .arg(t.path().join("jobs"))
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    for text in [&stdout, &stderr] {
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "control characters: {text:?}");
        assert!(!text.lines().any(|l| l.trim_start().starts_with("::")), "{text}");
        assert!(!text.contains('\u{202e}'), "{text}");
    }
    let shown = "c\\x1b[31mred\\n::error title=x::boom\\u{202e}";
    assert!(stdout.contains("found Triton cache: ") && stdout.matches(shown).count() >= 2, "{stdout}");
    assert!(stdout.contains(&format!("{shown} on m: 45 entries")), "the summary names the root escaped: {stdout}");
}
