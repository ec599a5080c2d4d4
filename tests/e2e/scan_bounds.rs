//! Issue 32, the scanner's bounds: a sparse 2 TiB file hashed only in part, a time budget that
//! leaves the entries it did not reach as they were, hard links to another owner's files, and
//! hook events credited by their host on a cache shared by two nodes. Each on a copy of a real
//! corpus cache, through the real CLI.

use crate::common::*;
use crate::scan::{entry_dirs, file_names};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `cachelens scan --json --db DB ROOT` with `args` and `env`, asserting success; the summary.
fn cli_scan(root: &Path, db: &Path, args: &[&str], env: &[(&str, &str)]) -> Value {
    let mut cmd = Command::new(bin());
    cmd.args(["scan", "--json", "--quiet", "--db"]).arg(db).args(args).arg(root);
    cmd.env_remove("CACHELENS_HOSTNAME").env_remove("CACHELENS_HOOK_HOSTS").env_remove("CACHELENS_TIME_BUDGET");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "scan failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["scans"][0].clone()
}

fn kernel_dirs(cache: &Path) -> Vec<PathBuf> {
    entry_dirs(cache).into_iter().filter(|d| file_names(d).len() == 8).collect()
}

fn key(d: &Path) -> String {
    d.file_name().unwrap().to_string_lossy().into_owned()
}

/// One column of `sql` (one `?`, bound to `bind`) over the database `db`.
fn query<T>(db: &Path, sql: &str, bind: &str) -> Vec<T>
where
    T: Send + Unpin + 'static + for<'r> sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any>,
{
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let pool = cachelens::db::open(db).await.unwrap();
        let r = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string())).bind(bind).fetch_all(&pool).await.unwrap();
        pool.close().await;
        r
    })
}

/// A sparse 32 GiB file in an entry (a few KB on disk): hashing all of it took minutes (16 TiB:
/// ~13 h). Now its first 256 MiB are hashed with its size, the entry is partial with the reason,
/// the file is counted among the skips, and the scan goes on. A sparse 2 TiB file is hashed as
/// fast, and its entry, over the contract's 64 GiB bound on an entry's bytes (`rules`), is
/// skipped with that reason and kept as it was.
#[test]
fn a_sparse_32_gib_file_is_hashed_in_part() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let cache = root.join("triton-cache");
    let n = entry_dirs(&cache).len() as i64;
    let d = &kernel_dirs(&cache)[0];
    let size: u64 = 32 << 30;
    std::fs::File::create(d.join("huge.bin")).unwrap().set_len(size).unwrap();
    let d2 = &kernel_dirs(&cache)[1];
    std::fs::File::create(d2.join("huger.bin")).unwrap().set_len(2 << 40).unwrap();
    let (_dbdir, db) = fresh_db_at_blocking();
    let started = std::time::Instant::now();
    let s = cli_scan(&cache, &db, &["--machine", "sparse"], &[]);
    println!("scan with sparse 32 GiB and 2 TiB files: {:?}", started.elapsed());
    let why = "file of 32 GiB: hashed its first 256 MiB";
    assert_eq!(s["skipped"][why], 1, "{s}");
    assert_eq!(s["skipped"]["file of 2 TiB: hashed its first 256 MiB"], 1, "{s}");
    let bound =
        s["skipped"].as_object().unwrap().keys().find(|r| r.contains("bytes = 2199") && r.contains("out of range"));
    assert!(bound.is_some(), "{s}");
    assert_eq!(s["entries"], n - 1, "{s}");
    assert!(query::<i64>(&db, "SELECT id FROM entry_rows WHERE key = ?", &key(d2)).is_empty());
    let partial = query::<Option<String>>(&db, "SELECT partial FROM entry_rows WHERE key = ?", &key(d));
    assert_eq!(partial[0].as_deref(), Some(format!("huge.bin: {why}").as_str()));
    // sha256 over the first 256 MiB (zeros) followed by the size, 8 bytes little-endian
    let want = {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..256 {
            h.update(&zeros);
        }
        h.update(size.to_le_bytes());
        hex::encode(h.finalize())
    };
    let got = query::<String>(
        &db,
        "SELECT a.sha256 || ' ' || a.bytes FROM entry_files a JOIN entry_rows e ON e.id = a.entry_id
         WHERE e.key = ? AND a.name = 'huge.bin'",
        &key(d),
    );
    assert_eq!(got, [format!("{want} {size}")]);
}

/// `--time-budget 0`: no entry is read, and none is marked removed: each is counted as skipped
/// ("time budget reached") and keeps its row as it was. An entry deleted meanwhile is still
/// seen to be gone (the listing says so). The next scan without a budget finds the rest
/// unchanged. The same through an upload's report and the server's ingest.
#[test]
fn a_spent_time_budget_leaves_the_unread_entries_live() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let cache = root.join("triton-cache");
    let n = entry_dirs(&cache).len() as i64;
    let (_dbdir, db) = fresh_db_at_blocking();
    let s1 = cli_scan(&cache, &db, &["--machine", "tb"], &[]);
    assert_eq!(s1["entries"], n, "{s1}");
    let gone = &kernel_dirs(&cache)[0];
    std::fs::remove_dir_all(gone).unwrap();
    let reason = "time budget reached: entry dir not read (kept as it was)";

    let s2 = cli_scan(&cache, &db, &["--machine", "tb", "--time-budget", "0"], &[]);
    assert_eq!(s2["skipped"][reason], n - 1, "every entry dir left is counted: {s2}");
    assert_eq!((s2["removed_entries"].as_i64(), s2["new_entries"].as_i64()), (Some(1), Some(0)), "{s2}");
    assert_eq!(s2["entries"], n - 1, "{s2}");
    let live = query::<i64>(
        &db,
        "SELECT COUNT(*) FROM entry_rows e JOIN machines m ON m.id = e.machine_id WHERE m.name = ? AND removed_at IS NULL",
        "tb",
    );
    assert_eq!(live, [n - 1]);

    let s3 = cli_scan(&cache, &db, &["--machine", "tb", "--time-budget", "none"], &[]);
    assert_eq!((s3["unchanged_entries"].as_i64(), s3["removed_entries"].as_i64()), (Some(n - 1), Some(0)), "{s3}");
    assert!(s3["skipped"].get(reason).is_none(), "{s3}");

    // An upload's report: the entries not reached are sent as skipped, which the ingest keeps.
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let pool = cachelens::db::open(&db).await.unwrap();
        let store = cachelens::db::Db::from(pool.clone());
        let prev = cachelens::scan::Previous { deadline: Some(std::time::Instant::now()), ..Default::default() };
        let report = cachelens::collect::scan_report_from(&cache, "tb", &prev).unwrap();
        assert!(report.entries.is_empty());
        assert_eq!(report.skipped.iter().filter(|s| s.reason == reason).count() as i64, n - 1);
        let (s, _) = cachelens::collect::ingest_report(&store, &report, "upload").await.unwrap();
        assert_eq!((s.entries, s.removed_entries), (n - 1, 0), "{s:?}");
        pool.close().await;
    });
}

const SECRET: &str = "CACHELENS-HARDLINK-SECRET-51c9";

/// A file of another owner (uid 12345, mode 0600: root's `/etc/shadow` in the issue) hard-linked
/// into an entry and as a `.best_config` is not read by a root scan: each is counted ("hard link
/// to a file owned by uid 12345"), on a re-scan too, and nothing of it reaches the database. A
/// hard link to a file of the cache's own owner is read as any file.
#[test]
fn hard_links_to_another_owners_files_are_not_read() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let cache = root.join("triton-cache");
    let owner = std::fs::metadata(&cache).unwrap().uid();
    let secret = root.join("secret.ttgir"); // outside the cache, on its file system
    std::fs::write(&secret, format!("module {{ // {SECRET}\n}}\n")).unwrap();
    let secret_json = root.join("secret.json");
    std::fs::write(&secret_json, format!(r#"{{"num_warps": 4, "triton_cache_hash": "{SECRET}"}}"#)).unwrap();
    for f in [&secret, &secret_json] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o600)).unwrap();
        if std::os::unix::fs::chown(f, Some(12345), Some(12345)).is_err() {
            return skip_or_fail("not root: cannot make a file of another owner (chown)");
        }
    }
    assert_ne!(owner, 12345);
    let dirs = kernel_dirs(&cache);
    std::fs::hard_link(&secret, dirs[0].join("x.ttgir")).unwrap();
    std::fs::hard_link(&secret_json, cache.join("abc.best_config")).unwrap();
    // the cache owner's own file linked into another entry: read
    let mine = dirs[1].join(file_names(&dirs[1]).into_iter().find(|n| n.ends_with(".ttir")).unwrap());
    std::fs::hard_link(&mine, dirs[2].join("copy.ttir")).unwrap();

    let (_dbdir, db) = fresh_db_at_blocking();
    let why = "hard link to a file owned by uid 12345";
    for round in ["first scan", "re-scan"] {
        let s = cli_scan(&cache, &db, &["--machine", "links"], &[]);
        assert_eq!(s["skipped"][why], 2, "{round}: {s}");
        assert_eq!(s["best_configs"], 0, "{round}: {s}");
    }
    let held = tokio::runtime::Runtime::new().unwrap().block_on(db_holds(&db, SECRET));
    assert!(!held, "the linked file reached the database");
    let arts = |d: &Path| {
        query::<String>(
            &db,
            "SELECT a.name FROM entry_files a JOIN entry_rows e ON e.id = a.entry_id WHERE e.key = ?",
            &key(d),
        )
    };
    assert!(!arts(&dirs[0]).contains(&"x.ttgir".to_string()), "{:?}", arts(&dirs[0]));
    assert!(arts(&dirs[2]).contains(&"copy.ttir".to_string()), "a same-owner hard link is read: {:?}", arts(&dirs[2]));
    let partial = query::<Option<String>>(&db, "SELECT partial FROM entry_rows WHERE key = ?", &key(&dirs[0]));
    assert!(partial[0].as_deref().unwrap_or("").contains(why), "{partial:?}");
}

fn hook_line(host: &str, seq: usize, event: &str) -> String {
    let ts = 1_795_320_000.0 + seq as f64;
    format!(
        r#"{{"v":1,"ts":{ts:.6},"host":"{host}","pid":7,"key":"{}","kernel":"add_kernel","event":"{event}","compile_ms":null,"stages_ms":null,"seq":{seq}}}"#,
        "K".repeat(52)
    ) + "\n"
}

fn append(p: &Path, text: &str) {
    use std::io::Write;
    std::fs::OpenOptions::new().create(true).append(true).open(p).unwrap().write_all(text.as_bytes()).unwrap();
}

/// One cache shared by two nodes (NFS), each node's hook writing its own event file: scanned as
/// machine A (hostname node-a) and as machine B (its --machine name node-b, the hostname
/// another), each credits only its own lines; the other's file is not read (counted, its mark
/// left), the other's lines in a file of both are passed over. The machines' counts add up to
/// the lines written, on re-scans too.
#[test]
fn hook_events_of_a_shared_cache_are_credited_by_host() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let cache = root.join("triton-cache");
    let ev = cache.join(".cachelens");
    std::fs::create_dir(&ev).unwrap();
    let lines =
        |host: &str, from: usize, n: usize| (from..from + n).map(|i| hook_line(host, i, "hit")).collect::<String>();
    append(&ev.join("events-node-a.jsonl"), &lines("node-a", 0, 5));
    append(&ev.join("events-node-a.1.jsonl"), &lines("node-a", 100, 2)); // rotated
    append(&ev.join("events-node-b.jsonl"), &lines("node-b", 200, 3));
    // a file of both, not named the hook's way: sorted line by line
    append(&ev.join("both.jsonl"), &(hook_line("node-a", 300, "miss") + &hook_line("node-b", 301, "miss")));
    let (_dbdir, db) = fresh_db_at_blocking();
    let as_a = || cli_scan(&cache, &db, &["--machine", "machine-a"], &[("CACHELENS_HOSTNAME", "node-a")]);
    let as_b = || cli_scan(&cache, &db, &["--machine", "node-b"], &[("CACHELENS_HOSTNAME", "container-9f2")]);
    let events_of = |m: &str| {
        query::<i64>(&db, "SELECT COUNT(*) FROM events e JOIN machines m ON m.id = e.machine_id WHERE m.name = ?", m)[0]
    };
    let of_host = |h: &str| format!("hook events of host {h}: credited when {h} scans this cache");

    let a = as_a();
    assert_eq!(a["events"], 5 + 2 + 1, "{a}");
    assert_eq!(a["skipped"][of_host("node-b")], 2, "one file not read, one line passed over: {a}");
    let b = as_b();
    assert_eq!(b["events"], 3 + 1, "{b}");
    assert_eq!(b["skipped"][of_host("node-a")], 3, "two files not read, one line passed over: {b}");
    assert_eq!((events_of("machine-a"), events_of("node-b")), (8, 4));
    assert_eq!(events_of("machine-a") + events_of("node-b"), 12, "every line written, credited once");

    // More lines from both nodes: each machine's next scan takes its own, from its own marks.
    append(&ev.join("events-node-a.jsonl"), &lines("node-a", 10, 2));
    append(&ev.join("events-node-b.jsonl"), &lines("node-b", 210, 4));
    let b = as_b();
    assert_eq!(b["events"], 4, "{b}");
    let a = as_a();
    assert_eq!(a["events"], 2, "{a}");
    assert_eq!((events_of("machine-a"), events_of("node-b")), (10, 8));
    // The marks of the file another node owns were never advanced by this machine's scan.
    let marks = query::<String>(
        &db,
        "SELECT f.path FROM event_files f JOIN machines m ON m.id = f.machine_id WHERE m.name = ? ORDER BY f.path",
        "machine-a",
    );
    assert!(marks.iter().all(|p| !p.ends_with("events-node-b.jsonl")), "{marks:?}");
    assert_eq!(marks.len(), 3, "{marks:?}");

    // `--hook-host '*'`: a cache this machine alone writes, whatever its jobs' hostnames.
    let (_dbdir2, db2) = fresh_db_at_blocking();
    let all = cli_scan(&cache, &db2, &["--machine", "solo", "--hook-host", "*"], &[]);
    assert_eq!(all["events"], 5 + 2 + 3 + 2 + 2 + 4, "{all}");
}
