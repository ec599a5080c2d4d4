//! Issue #2, bad input: a damaged copy of a real cache (corrupt JSON, missing children,
//! unreadable dirs and files, symlink loops, temp dirs, empty key dirs) and a cache being
//! written during the scan. The scan never fails as a whole, counts every skip with its reason,
//! keeps what it can, and never writes into the cache dir.

use crate::common::*;
use crate::scan::{entry_dirs, file_names, rows};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Everything about a tree that a scan could change: per path (not following links) its type,
/// mode, size, mtime (ns), link target, and content hash.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    fn go(p: &Path, out: &mut BTreeMap<PathBuf, String>) {
        let md = std::fs::symlink_metadata(p).unwrap();
        let ft = md.file_type();
        let mut s = format!("mode={:o} mtime={}.{} ", md.mode(), md.mtime(), md.mtime_nsec());
        if ft.is_symlink() {
            s += &format!("link={}", std::fs::read_link(p).unwrap().display());
        } else if ft.is_dir() {
            s += "dir";
            for d in std::fs::read_dir(p).unwrap() {
                go(&d.unwrap().path(), out);
            }
        } else {
            // the test runs with full rights: a chmod-000 file is still readable here as root;
            // as another user its mode/size/mtime are what can be checked.
            let content =
                std::fs::read(p).map(|b| hex::encode(Sha256::digest(b))).unwrap_or_else(|_| "unreadable".into());
            s += &format!("size={} sha={content}", md.len());
        }
        out.insert(p.to_path_buf(), s);
    }
    let mut out = BTreeMap::new();
    go(root, &mut out);
    out
}

fn euid() -> u32 {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// How to run the CLI so that mode 000 really blocks reads: as root, drop the capabilities
/// that bypass file permissions (setpriv); `None` when that cannot be done.
fn permission_runner() -> Result<Vec<String>, String> {
    if euid() != 0 {
        return Ok(vec![]);
    }
    let probe = tempfile::TempDir::new().unwrap();
    let f = probe.path().join("x");
    std::fs::write(&f, "x").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o000)).unwrap();
    let pre = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"].map(String::from).to_vec();
    let blocked = Command::new(&pre[0]).args(&pre[1..]).arg("cat").arg(&f).output();
    match blocked {
        Ok(o) if !o.status.success() => Ok(pre),
        Ok(_) => {
            Err("running as root and setpriv could not drop CAP_DAC_OVERRIDE: chmod 000 does not block reads".into())
        }
        Err(e) => Err(format!("running as root (chmod 000 does not block reads) and no setpriv: {e}")),
    }
}

fn cli_scan(pre: &[String], root: &Path, db: &Path, machine: &str) -> Value {
    let mut cmd = if pre.is_empty() { Command::new(bin()) } else { Command::new(&pre[0]) };
    if !pre.is_empty() {
        cmd.args(&pre[1..]).arg(bin());
    }
    let out = cmd.args(["scan", "--json", "--machine", machine, "--db"]).arg(db).arg(root).output().unwrap();
    assert!(out.status.success(), "scan failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["scans"][0].clone()
}

fn kernel_dirs(cache: &Path) -> Vec<PathBuf> {
    entry_dirs(cache).into_iter().filter(|d| file_names(d).len() == 8).collect()
}

/// A damaged copy of h100-jit: each kind of damage is counted with its reason, the rest is
/// scanned, and the cache dir is byte-for-byte (and mtime-for-mtime) unchanged.
#[tokio::test]
async fn damaged_cache_counts_every_skip_and_is_left_untouched() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let cache = root.join("triton-cache");
    let dirs = kernel_dirs(&cache);
    let name = |d: &Path| d.file_name().unwrap().to_string_lossy().into_owned();
    let find = |d: &Path, ext: &str| {
        file_names(d).into_iter().find(|n| n.ends_with(ext) && !n.starts_with("__grp__")).unwrap()
    };
    let perm = |p: &Path, mode: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();

    // A: truncated metadata JSON
    let a = &dirs[0];
    let meta = a.join(find(a, ".json"));
    let bytes = std::fs::read(&meta).unwrap();
    std::fs::write(&meta, &bytes[..bytes.len() / 2]).unwrap();
    // B: a missing child (the .cubin deleted)
    let b = &dirs[1];
    std::fs::remove_file(b.join(find(b, ".cubin"))).unwrap();
    // C: an entry dir with mode 000; D: one file with mode 000
    let c = &dirs[2];
    let d = &dirs[3];
    let d_file = d.join(find(d, ".ptx"));
    // E: a symlink loop inside an entry; a dir symlink to the parent inside another
    let e = &dirs[4];
    symlink("loop", e.join("loop")).unwrap();
    let f = &dirs[5];
    symlink("..", f.join("up")).unwrap();
    // at the top: a symlink loop, a dir symlink to the parent, a temp dir, an empty key dir,
    // a dangling symlink named like a key
    symlink("loop", cache.join("loop")).unwrap();
    symlink("..", cache.join("parent")).unwrap();
    let tmpdir = cache.join("tmp.pid_123_abc");
    std::fs::create_dir(&tmpdir).unwrap();
    for n in file_names(&dirs[6]) {
        std::fs::copy(dirs[6].join(&n), tmpdir.join(&n)).unwrap();
    }
    let empty = cache.join("EMPTYKEYEMPTYKEYEMPTYKEYEMPTYKEYEMPTYKEYEMPTYKEY2345");
    std::fs::create_dir(&empty).unwrap();
    let dangling = "DANGLINGDANGLINGDANGLINGDANGLINGDANGLINGDANGLING2345";
    symlink("/nonexistent/cachelens", cache.join(dangling)).unwrap();

    let runner = permission_runner();
    if let Err(why) = &runner {
        skip_or_fail(&format!("chmod 000 part: {why}"));
    }
    let pre = runner.clone().unwrap_or_default();
    if runner.is_ok() {
        perm(c, 0o000);
        perm(&d_file, 0o000);
    }

    let before = snapshot(&root);
    let (_dbdir, db) = fresh_db_at().await;
    let s = cli_scan(&pre, &cache, &db, "damaged");
    let after = snapshot(&root);
    assert_eq!(before, after, "the scan must not write into the cache dir");

    let skipped: BTreeMap<String, i64> = serde_json::from_value(s["skipped"].clone()).unwrap();
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    // links are never followed: each one met is counted (the loop inside entry E too)
    want.insert("symlink loop".into(), 2);
    want.insert("symlink out of the cache".into(), 1);
    want.insert("symlink inside the cache (not followed)".into(), 1);
    want.insert("temp dir (write in progress)".into(), 1);
    want.insert("empty entry dir (Triton creates one on every lookup)".into(), 1);
    want.insert("dangling symlink".into(), 1);
    if runner.is_ok() {
        want.insert("permission denied".into(), 1);
    }
    assert_eq!(skipped, want, "every skip with its reason: {s}");

    let pool = cachelens::db::open(&db).await.unwrap();
    let r = rows(&pool, "damaged").await;
    let n_c = usize::from(runner.is_ok());
    assert_eq!(r.len(), 122 - n_c, "everything else is scanned");
    assert_eq!(s["entries"], 122 - n_c as i64);
    let partial = |d: &Path| r[&name(d)].partial.clone().unwrap_or_else(|| panic!("{} not partial", name(d)));
    assert!(partial(a).contains("corrupt metadata JSON"), "{}", partial(a));
    assert_eq!(r[&name(a)].kind, "partial");
    assert!(partial(b).contains("missing children") && partial(b).contains(".cubin"), "{}", partial(b));
    assert!(partial(e).contains("loop: symlink loop"), "{}", partial(e));
    assert!(r[&name(f)].partial.is_none(), "a dir symlink inside an entry is not one of its files");
    assert_eq!(r[&name(f)].kind, "kernel");
    if runner.is_ok() {
        assert!(!r.contains_key(&name(c)));
        assert!(partial(d).contains("permission denied"), "{}", partial(d));
        assert_eq!(s["partial"], 4);
    } else {
        assert_eq!(s["partial"], 3);
    }
    // the damaged entries are the only ones not read as they were
    let kernels = r.values().filter(|x| x.kind == "kernel" && x.partial.is_none()).count();
    assert_eq!(kernels, 113 - 4 - n_c);
    assert!(!r.keys().any(|k| k.starts_with("tmp.")));
    let recorded: (i64, String) =
        sqlx::query_as("SELECT skipped, skipped_json FROM scans").fetch_one(&pool).await.unwrap();
    assert_eq!(recorded.0, want.values().sum::<i64>(), "the scan row records the skips");
    assert_eq!(serde_json::from_str::<BTreeMap<String, i64>>(&recorded.1).unwrap(), want);

    if runner.is_ok() {
        // C readable again: scanned; then unreadable again: skipped, but NOT marked removed
        perm(c, 0o755);
        let s2 = cli_scan(&pre, &cache, &db, "damaged");
        assert_eq!(s2["new_entries"], 1);
        perm(c, 0o000);
        let s3 = cli_scan(&pre, &cache, &db, "damaged");
        assert_eq!(s3["skipped"]["permission denied"], 1);
        assert_eq!(s3["removed_entries"], 0, "an unreadable entry is still there: {s3}");
        let r = rows(&pool, "damaged").await;
        assert!(r[&name(c)].removed_at.is_none());
        perm(c, 0o755);
        perm(&d_file, 0o644);
    }
}

/// A cache being written during the scan: one thread keeps creating entries (as Triton does:
/// a temp dir renamed into place) and deleting others. The scan completes; every entry that
/// was there before is either stored or counted as vanished; untouched entries are intact.
#[tokio::test]
async fn cache_written_during_scan() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let cache = root.join("triton-cache");
    let src = kernel_dirs(&cache);
    // grow to ~1600 entries (hard links) so that the scan takes a while
    let key = |i: usize, tag: &str| hex_to_b32(&hex::encode(Sha256::digest(format!("{tag}-{i}").as_bytes())));
    let mut victims = vec![];
    for i in 0..1500 {
        let d = cache.join(key(i, "clone"));
        std::fs::create_dir(&d).unwrap();
        let s = &src[i % src.len()];
        for n in file_names(s) {
            std::fs::hard_link(s.join(&n), d.join(&n)).unwrap();
        }
        if i % 2 == 0 {
            victims.push(d);
        }
    }
    let before: BTreeSet<String> =
        entry_dirs(&cache).iter().map(|d| d.file_name().unwrap().to_string_lossy().into_owned()).collect();
    let victim_names: BTreeSet<String> =
        victims.iter().map(|d| d.file_name().unwrap().to_string_lossy().into_owned()).collect();

    let stop = Arc::new(AtomicBool::new(false));
    let (created, deleted) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let writer = {
        let (stop, created, deleted, cache) = (stop.clone(), created.clone(), deleted.clone(), cache.clone());
        let src = src.clone();
        std::thread::spawn(move || {
            let mut i = 0;
            let mut victims = victims.into_iter();
            while !stop.load(Ordering::Relaxed) {
                // create one, Triton's way (FileCacheManager.put): each file written into
                // <KEY>/tmp.pid_<pid>_<uuid>/, renamed into <KEY>/, the temp dir removed
                let s = &src[i % src.len()];
                write_like_triton(s, &cache.join(key(i, "new")), usize::MAX);
                created.fetch_add(1, Ordering::Relaxed);
                // delete one, file by file (as rm -rf does)
                if let Some(v) = victims.next() {
                    std::fs::remove_dir_all(&v).unwrap();
                    deleted.fetch_add(1, Ordering::Relaxed);
                }
                i += 1;
            }
        })
    };
    let (_d, pool) = fresh_db().await;
    std::thread::sleep(std::time::Duration::from_millis(20));
    let at_start = (created.load(Ordering::Relaxed), deleted.load(Ordering::Relaxed));
    let s = scan(&pool, &cache, "busy").await;
    let at_end = (created.load(Ordering::Relaxed), deleted.load(Ordering::Relaxed));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    println!(
        "during the scan: {} created, {} deleted; summary {:?}",
        at_end.0 - at_start.0,
        at_end.1 - at_start.1,
        s.skipped
    );
    assert!(at_end.1 - at_start.1 >= 5, "the writer was busy during the scan");

    for reason in s.skipped.keys() {
        assert!(
            // (an entry being deleted file by file is an empty dir for a moment)
            [
                "vanished during scan",
                "write in progress (temp dir inside)",
                "file changed during scan",
                "empty entry dir (Triton creates one on every lookup)"
            ]
            .contains(&reason.as_str()),
            "unexpected skip reason: {reason}"
        );
    }
    let r = rows(&pool, "busy").await;
    let mid_write =
        r.values().filter(|e| e.partial.as_deref().is_some_and(|p| p.contains("write in progress"))).count();
    println!("{mid_write} entries stored mid-write (partial)");
    // untouched entries: all stored, intact
    for k in before.difference(&victim_names) {
        let e = r.get(k).unwrap_or_else(|| panic!("untouched entry {k} missing"));
        assert!(e.partial.is_none() && e.removed_at.is_none(), "{k}: {:?}", e.partial);
    }
    // victims: stored (read before deletion; possibly partial if caught mid-delete) or vanished
    let stored_victims = victim_names.iter().filter(|k| r.contains_key(*k)).count() as i64;
    let vanished = s.skipped.get("vanished during scan").copied().unwrap_or(0);
    println!("victims: {stored_victims} stored, {vanished} vanished during the scan");
    if at_end.1 - at_start.1 >= 20 {
        assert!(vanished >= 1, "entries deleted after the walk listed them are counted as vanished");
    }
    assert_eq!(s.entries as usize, r.len());

    // quiet now: a re-scan agrees with the disk exactly
    let s2 = scan(&pool, &cache, "busy").await;
    assert!(s2.skipped.is_empty(), "{:?}", s2.skipped);
    let on_disk: BTreeSet<String> =
        entry_dirs(&cache).iter().map(|d| d.file_name().unwrap().to_string_lossy().into_owned()).collect();
    let r = rows(&pool, "busy").await;
    let live: BTreeSet<String> = r.values().filter(|e| e.removed_at.is_none()).map(|e| e.key.clone()).collect();
    assert_eq!(live, on_disk);
    assert!(
        r.values().filter(|e| e.removed_at.is_none()).all(|e| e.partial.is_none()),
        "no partial entry left once quiet"
    );
    assert_eq!(s2.entries as usize, on_disk.len());
}

/// Triton's file order: IR and binary, then `<name>.json`, then the group file last.
fn triton_order(src: &Path) -> Vec<String> {
    let mut names = file_names(src);
    let rank = |n: &str| match n {
        n if n.starts_with("__grp__") => 2,
        n if n.ends_with(".json") => 1,
        _ => 0,
    };
    names.sort_by_key(|n| rank(n));
    names
}

/// Copy the entry `src` to `dest` as Triton's FileCacheManager.put writes it, one file at a
/// time: into `dest/tmp.pid_<pid>_<n>/`, renamed into `dest/`, the temp dir removed. Stops with
/// the temp dir holding file number `stop` (not yet renamed); returns that temp dir.
fn write_like_triton(src: &Path, dest: &Path, stop: usize) -> Option<PathBuf> {
    std::fs::create_dir_all(dest).unwrap();
    for (i, n) in triton_order(src).iter().enumerate() {
        let tmp = dest.join(format!("tmp.pid_{}_{i}", std::process::id()));
        std::fs::create_dir(&tmp).unwrap();
        std::fs::copy(src.join(n), tmp.join(n)).unwrap();
        if i == stop {
            return Some(tmp);
        }
        std::fs::rename(tmp.join(n), dest.join(n)).unwrap();
        std::fs::remove_dir(&tmp).unwrap();
    }
    None
}

/// Entries Triton did not finish: IR files only, IR and binary without metadata, metadata and
/// binary without the group file (Triton looks entries up through it: a miss), and entries
/// being written right now (Triton's temp dir inside the key dir). All kept, flagged partial
/// with the reason, counted; files inside a temp dir are never read as artifacts.
#[tokio::test]
async fn unfinished_entries_are_kept_and_flagged() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let cache = root.join("triton-cache");
    let dirs = kernel_dirs(&cache);
    let name = |d: &Path| d.file_name().unwrap().to_string_lossy().into_owned();
    let rm = |d: &Path, pred: &dyn Fn(&str) -> bool| {
        for n in file_names(d).into_iter().filter(|n| pred(n)) {
            std::fs::remove_file(d.join(n)).unwrap();
        }
    };
    let (no_grp, no_meta, ir_only) = (&dirs[0], &dirs[1], &dirs[2]);
    rm(no_grp, &|n| n.starts_with("__grp__"));
    rm(no_meta, &|n| n.ends_with(".json"));
    rm(ir_only, &|n| !n.ends_with(".ttir") && !n.ends_with(".ttgir"));
    // a new entry stopped with its 4th file (of 8) in the temp dir; another with its first
    let src = &dirs[3];
    let writing = cache.join(hex_to_b32(&hex::encode(Sha256::digest(b"writing"))));
    let tmp = write_like_triton(src, &writing, 3).unwrap();
    let first = cache.join(hex_to_b32(&hex::encode(Sha256::digest(b"first"))));
    write_like_triton(src, &first, 0).unwrap();

    let (_d, pool) = fresh_db().await;
    let s = scan(&pool, &cache, "m").await;
    assert_eq!(s.entries, 123, "all kept, the one being written too: {s:?}");
    assert_eq!(s.partial, 4);
    assert_eq!(s.skipped.get(cachelens::scan::entry::WRITING), Some(&1), "only a temp dir: {:?}", s.skipped);
    let r = rows(&pool, "m").await;
    let why = |d: &Path| r[&name(d)].partial.clone().unwrap_or_else(|| panic!("{} not partial", name(d)));
    assert_eq!(why(no_grp), "no group file: Triton will recompile");
    assert!(why(no_meta).contains("no metadata file"), "{}", why(no_meta));
    assert_eq!(why(ir_only), "no metadata file");
    assert!(why(&writing).starts_with("write in progress (temp dir inside): tmp.pid_"), "{}", why(&writing));
    assert!(r.values().all(|e| e.partial.is_none() || e.kind == "partial"));
    let arts: Vec<String> =
        sqlx::query_scalar("SELECT a.name FROM entry_files a JOIN entry_rows e ON e.id = a.entry_id WHERE e.key = ?")
            .bind(name(&writing))
            .fetch_all(&pool)
            .await
            .unwrap();
    let renamed = &triton_order(src)[..3];
    assert_eq!(arts.iter().collect::<BTreeSet<_>>(), renamed.iter().collect(), "the temp dir's file is not read");

    // the write finishes: both entries re-read, now whole kernels
    let n = file_names(&tmp).pop().unwrap();
    std::fs::rename(tmp.join(&n), writing.join(&n)).unwrap();
    std::fs::remove_dir(&tmp).unwrap();
    for f in &triton_order(src)[4..] {
        std::fs::copy(src.join(f), writing.join(f)).unwrap();
    }
    std::fs::remove_dir_all(&first).unwrap();
    write_like_triton(src, &first, usize::MAX);
    let s2 = scan(&pool, &cache, "m").await;
    assert_eq!((s2.entries, s2.new_entries, s2.changed_entries, s2.removed_entries), (124, 1, 1, 0), "{s2:?}");
    assert_eq!(s2.partial, 3);
    assert!(s2.skipped.is_empty(), "{:?}", s2.skipped);
    let r = rows(&pool, "m").await;
    for d in [&writing, &first] {
        assert_eq!((r[&name(d)].kind.as_str(), r[&name(d)].partial.as_deref()), ("kernel", None));
    }
}

/// Inductor keeps one Triton cache per device: a multi-GPU node holds the same key in
/// `triton/0/` and `triton/1/` (and a key can sit under two scanned roots). One row per
/// (machine, key): the first copy (root scanned first, then path order) is read, the others
/// are counted as duplicates; re-scans read nothing again, count nothing new or changed, move
/// no row and mark nothing removed.
#[tokio::test]
async fn same_key_in_two_device_dirs_and_two_roots() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let dirs = kernel_dirs(&root.join("triton-cache"));
    let name = |d: &Path| d.file_name().unwrap().to_string_lossy().into_owned();
    let copy = |src: &Path, dest: &Path| {
        std::fs::create_dir_all(dest).unwrap();
        for n in file_names(src) {
            std::fs::copy(src.join(&n), dest.join(&n)).unwrap(); // new mtimes: another signature
        }
    };
    let (k, k2, k3) = (&dirs[0], &dirs[1], &dirs[2]);
    let ind = root.join("ind");
    copy(k, &ind.join("triton/0").join(name(k)));
    copy(k, &ind.join("triton/1").join(name(k)));
    copy(k2, &ind.join("triton/1").join(name(k2)));
    let other = root.join("other");
    copy(k, &other.join(name(k)));
    copy(k3, &other.join(name(k3)));
    let ind_c = ind.canonicalize().unwrap().display().to_string();
    let counts = |s: &cachelens::model::ScanSummary| {
        (s.entries, s.new_entries, s.changed_entries, s.unchanged_entries, s.removed_entries)
    };

    let (_d, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let s = scan(&pool, &ind, "m").await;
    assert_eq!(counts(&s), (2, 2, 0, 0, 0));
    let dup0 = BTreeMap::from([("duplicate key (also in triton/0/)".to_string(), 1)]);
    assert_eq!(s.skipped, dup0);
    let dup_ind = BTreeMap::from([(format!("duplicate key (also in {ind_c})"), 1)]);
    let s = scan(&pool, &other, "m").await;
    assert_eq!((counts(&s), &s.skipped), ((1, 1, 0, 0, 0), &dup_ind));
    for _ in 0..2 {
        let s = scan(&pool, &ind, "m").await;
        assert_eq!((counts(&s), &s.skipped), ((2, 0, 0, 2, 0), &dup0), "settled");
        let s = scan(&pool, &other, "m").await;
        assert_eq!((counts(&s), &s.skipped), ((1, 0, 0, 1, 0), &dup_ind), "settled");
    }
    // an upload of the second root: the client cannot know, the server counts the duplicate
    let report = cachelens::collect::scan_report(&other, "m").unwrap();
    assert_eq!(report.entries.len(), 2);
    let (s, created) = cachelens::collect::ingest_report(&store, &report, "upload").await.unwrap();
    assert!(created);
    assert_eq!((counts(&s), &s.skipped), ((1, 0, 0, 1, 0), &dup_ind), "uploaded");
    let r = rows(&pool, "m").await;
    let row = r.values().find(|e| e.key == name(k)).unwrap();
    assert_eq!(row.dir, format!("triton/0/{}", name(k)), "first copy in path order");
    assert_eq!(r.len(), 3);
    assert!(r.values().all(|e| e.removed_at.is_none()));

    // the kept copy goes: the next one takes over (not removed)
    std::fs::remove_dir_all(ind.join("triton/0").join(name(k))).unwrap();
    let s = scan(&pool, &ind, "m").await;
    assert_eq!((counts(&s), s.skipped.len()), ((2, 0, 1, 1, 0), 0));
    let r = rows(&pool, "m").await;
    assert!(r.contains_key(&format!("triton/1/{}", name(k))) && r.values().all(|e| e.removed_at.is_none()));

    // `<inductor>/triton` given itself: its device dirs are the caches
    let s = scan(&pool, &ind.join("triton"), "n").await;
    assert_eq!((s.entries, s.new_entries), (2, 2), "{s:?}");
    let r = rows(&pool, "n").await;
    assert_eq!(r.keys().cloned().collect::<Vec<_>>(), [format!("1/{}", name(k)), format!("1/{}", name(k2))]);
}

/// A root (or an Inductor `triton/<dev>/`) that cannot be listed loses nothing: its entries
/// keep their rows (not marked removed) and the summary says the dir was unreadable.
#[tokio::test]
async fn unreadable_root_marks_nothing_removed() {
    let pre = match permission_runner() {
        Ok(pre) => pre,
        Err(why) => return skip_or_fail(&why),
    };
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let perm = |p: &Path, mode: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    let (_dbdir, db) = fresh_db_at().await;
    let (cache, ind) = (root.join("triton-cache"), root.join("inductor"));
    for (dir, locked, entries, reason) in [
        (&cache, cache.clone(), 122, "cache dir unreadable (its entries kept as they were): permission denied"),
        (&ind, ind.join("triton/0"), 3, "dir unreadable (its entries kept as they were): permission denied"),
    ] {
        let s1 = cli_scan(&pre, dir, &db, "u");
        assert_eq!((s1["entries"].as_i64(), s1["removed_entries"].as_i64()), (Some(entries), Some(0)));
        perm(&locked, 0o000);
        let s2 = cli_scan(&pre, dir, &db, "u");
        perm(&locked, 0o755);
        assert_eq!(s2["skipped"], serde_json::json!({ reason: 1 }), "{s2}");
        assert_eq!((s2["entries"].as_i64(), s2["removed_entries"].as_i64()), (Some(entries), Some(0)), "{s2}");
        let s3 = cli_scan(&pre, dir, &db, "u");
        assert_eq!((s3["new_entries"].as_i64(), s3["unchanged_entries"].as_i64()), (Some(0), Some(entries)));
    }
    let pool = cachelens::db::open(&db).await.unwrap();
    let r = rows(&pool, "u").await;
    assert_eq!(r.len(), 125);
    assert!(r.values().all(|e| e.removed_at.is_none()), "nothing marked removed");
}
