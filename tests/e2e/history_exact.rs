//! History counts that must be exact: hook events written by the real hook code faster than one
//! per millisecond (through re-scans, a rotated file, uploads and re-uploads), uploads that send
//! only the event lines the server lacks, and entries recompiled in place (every compile kept,
//! matched per time with the hook's compile events).

use crate::common::*;
use crate::upload::{post_raw, server};
use cachelens::upload::{Retry, scan_and_upload, upload_report};
use cachelens::web::{AppState, Config};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Append hook events with the hook's own writer (hook/cachelens_hook/_writer.py), in one
/// process: `hits` hits of `key`, then a miss and a compile when `compile`. Returns the event
/// file. `$CACHELENS_PYTHON` when set, else `python3` (the writer needs no Triton).
fn hook_emit(root: &Path, key: &str, hits: usize, compile: bool) -> PathBuf {
    let hook = Path::new(env!("CARGO_MANIFEST_DIR")).join("hook/cachelens_hook");
    let py = std::env::var_os("CACHELENS_PYTHON").filter(|p| !p.is_empty()).unwrap_or_else(|| "python3".into());
    let script = r#"
import sys
sys.path.insert(0, sys.argv[1])
import _writer
root, key, hits, compile = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
for _ in range(hits):
    assert _writer.emit(root, key, "add_kernel", "hit")
if compile:
    assert _writer.emit(root, key, "add_kernel", "miss")
    assert _writer.emit(root, key, "add_kernel", "compile", 12.5, {"ttir": 4.0, "cubin": 8.5})
"#;
    let out = std::process::Command::new(&py)
        .env_remove("CACHELENS_HOOK_DIR")
        .env_remove("CACHELENS_HOOK_DISABLE")
        .env_remove("CACHELENS_HOOK_MAX_BYTES")
        .args(["-c", script])
        .arg(&hook)
        .arg(root)
        .arg(key)
        .arg(hits.to_string())
        .arg(if compile { "1" } else { "0" })
        .output()
        .unwrap_or_else(|e| panic!("cannot run {py:?}: {e}"));
    assert!(out.status.success(), "hook writer failed: {}", String::from_utf8_lossy(&out.stderr));
    let dir = root.join(".cachelens");
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".jsonl") && !p.to_string_lossy().ends_with(".1.jsonl"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// (hits, misses, compiles, hook_events) summed over `/api/v1/history?{query}`.
async fn totals(state: &AppState, query: &str) -> (i64, i64, i64, i64) {
    let v = get_json(state, &format!("/api/v1/history?{query}&bucket=day&limit=10000")).await;
    let sum = |k: &str| v.as_array().unwrap().iter().map(|p| p[k].as_i64().unwrap()).sum::<i64>();
    (sum("hits"), sum("misses"), sum("compiles"), sum("hook_events"))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// 300 hits of one key in one process, many within the same millisecond: each counts, once,
/// through a re-scan, a rotation of the event file, an upload, a full re-upload and an
/// incremental upload that sends only the lines appended since.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_key_lookups_within_a_millisecond_count_exactly() {
    let (_t, dir) = unpacked("h100-jit-3.6.0");
    let root = dir.join("triton-cache");
    let key = "C".repeat(52);
    let since = format!("from={}", now_ms() - 1000);
    let file = hook_emit(&root, &key, 300, true);
    let written = lines(&file);
    assert_eq!(written.len(), 302);
    assert_eq!(written.iter().map(|l| l["pid"].as_i64()).collect::<BTreeSet<_>>().len(), 1, "one process");
    let ms: BTreeSet<i64> = written.iter().map(|l| (l["ts"].as_f64().unwrap() * 1000.0).round() as i64).collect();
    assert!(ms.len() < 250, "the writer should log several lines per millisecond ({} distinct ms)", ms.len());

    let (_db, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let state = AppState::new(pool.clone(), Config::default());
    let scan = || cachelens::collect::scan_local(&store, &root, "fast");
    assert_eq!(scan().await.unwrap().events, 302);
    let q = format!("machine=fast&{since}");
    assert_eq!(totals(&state, &q).await, (300, 1, 1, 302));
    assert_eq!(scan().await.unwrap().events, 0, "a re-scan adds nothing");
    assert_eq!(totals(&state, &q).await, (300, 1, 1, 302));

    // The hook's rotation: the full file becomes `.1.jsonl` (read anew from its start: its path
    // is new to the scanner) and a new file starts.
    std::fs::rename(&file, file.to_string_lossy().replace(".jsonl", ".1.jsonl")).unwrap();
    hook_emit(&root, &key, 100, true);
    assert_eq!(scan().await.unwrap().events, 102, "only the new file's lines are new");
    assert_eq!(totals(&state, &q).await, (400, 2, 2, 404));

    // Uploads: the server has nothing, so the first sends every line of both files.
    let srv = server(Config::default()).await;
    let sstate = AppState::new(srv.pool.clone(), Config::default());
    let token = cachelens::db::tokens::create(&srv.db, "fast").await.unwrap();
    let retry = Retry::new(2);
    let up = scan_and_upload(&srv.url, &token, &root, "fast", retry).await.unwrap();
    assert_eq!((up.events_sent, up.response.summary.events), (404, 404));
    assert_eq!(totals(&sstate, &q).await, (400, 2, 2, 404));
    // A full re-scan uploaded (every line again, as an older client sends): nothing new.
    let full = cachelens::collect::scan_report(&root, "fast").unwrap();
    assert_eq!(full.events.len(), 404);
    let again = upload_report(&srv.url, &token, full, retry).await.unwrap();
    assert!(again.response.created);
    assert_eq!(again.response.summary.events, 0);
    assert_eq!(totals(&sstate, &q).await, (400, 2, 2, 404));
    // Incremental: nothing appended, nothing sent; 50 appended, 50 sent.
    let none = scan_and_upload(&srv.url, &token, &root, "fast", retry).await.unwrap();
    assert_eq!(none.events_sent, 0);
    hook_emit(&root, &key, 50, false);
    let more = scan_and_upload(&srv.url, &token, &root, "fast", retry).await.unwrap();
    assert_eq!((more.events_sent, more.response.summary.events), (50, 50));
    assert!(more.body_bytes < up.body_bytes, "{} vs {}", more.body_bytes, up.body_bytes);
    assert_eq!(totals(&sstate, &q).await, (450, 2, 2, 454));
    crate::history_agg::assert_history_fresh(&srv.pool).await;
    crate::history_agg::assert_history_fresh(&pool).await;

    // A scan with an event budget reads part of the lines; the next one resumes at its mark.
    let prev = cachelens::scan::Previous { max_event_bytes: Some(10_000), ..Default::default() };
    let part = cachelens::collect::scan_report_from(&root, "fast", &prev).unwrap();
    assert!(!part.events.is_empty() && part.events.len() < 100, "{}", part.events.len());
    let marks = part.event_files.iter().map(|m| (m.path.clone(), (m.inode_sig.clone(), m.offset))).collect();
    let rest = cachelens::scan::Previous { event_marks: marks, ..Default::default() };
    let rest = cachelens::collect::scan_report_from(&root, "fast", &rest).unwrap();
    assert_eq!(part.events.len() + rest.events.len(), 454);
}

/// Uploaded hook events are checked one by one: a bad line is skipped with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_with_bad_hook_events_skip_those_lines() {
    let srv = server(Config::default()).await;
    let token = cachelens::db::tokens::create(&srv.db, "ev").await.unwrap();
    let ts = now_ms();
    let event = json!({"ts": ts, "ts_us": ts * 1000 + 7, "seq": 3, "host": "gpu-1", "pid": 42, "key": "K".repeat(52),
                       "kernel": "add_kernel", "event": "hit", "compile_ms": null, "stages_ms": null});
    let report = |events: Vec<Value>| {
        json!({"format": 1, "client_id": format!("c{}", events.len()), "machine": "ev", "root": "/cache",
               "scanned_at": ts, "duration_ms": 1, "entries": [], "events": events})
    };
    let mut bad = vec![];
    for (field, value) in [
        ("event", json!("lookup")),
        ("ts", json!(5)),
        ("ts_us", json!(ts * 1000 + 5_000_000)),
        ("key", json!("../x")),
        ("host", json!("")),
        ("pid", json!(-1)),
        ("compile_ms", json!(-3.0)),
        ("stages_ms", json!([1, 2])),
    ] {
        let mut e = event.clone();
        e[field] = value;
        bad.push(e);
    }
    for (i, e) in bad.into_iter().enumerate() {
        let mut r = report(vec![e.clone()]);
        r["client_id"] = json!(format!("bad-{i}"));
        let (status, answer) =
            post_raw(&srv.url, "/api/v1/scans", Some(&token), serde_json::to_vec(&r).unwrap(), false).await;
        // the scan is stored; the bad line is skipped with its reason, never the whole scan
        assert_eq!((status, answer["skipped"].as_i64()), (201, Some(1)), "{e} -> {answer}");
        let reasons: Vec<&String> = answer["summary"]["skipped"].as_object().unwrap().keys().collect();
        assert!(
            reasons.iter().all(|r| r.starts_with("hook event") || r.contains("unknown variant `lookup`")),
            "{answer}"
        );
    }
    let stored: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events").fetch_one(&srv.pool).await.unwrap();
    assert_eq!(stored, 0);
    let body = serde_json::to_vec(&report(vec![event.clone()])).unwrap();
    let (status, answer) = post_raw(&srv.url, "/api/v1/scans", Some(&token), body, false).await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["summary"]["events"], 1);

    // The scanner leaves out (with a reason) a line the server would refuse, so that one bad
    // line cannot make every upload of the machine fail.
    let root = tempfile::TempDir::new().unwrap();
    std::fs::create_dir(root.path().join(".cachelens")).unwrap();
    let k = "E".repeat(52);
    let text = hook_line(ts, 0, &k, "hit", None) + &hook_line(5_000, 1, &k, "hit", None);
    std::fs::write(root.path().join(".cachelens/events-gpu-7.jsonl"), text).unwrap();
    let up = scan_and_upload(&srv.url, &token, root.path(), "ev", Retry::new(2)).await.unwrap();
    assert_eq!((up.events_sent, up.response.summary.events), (1, 1));
    let skipped = &up.response.summary.skipped;
    assert!(skipped.keys().any(|r| r.contains("hook event line: time 5000 ms")), "{skipped:?}");
}

/// Rewrite every file of an entry the way Triton stores one (a temp file renamed over it),
/// stamped `at` (unix ms).
fn recompile(entry: &Path, at: i64) {
    for f in std::fs::read_dir(entry).unwrap() {
        let p = f.unwrap().path();
        let tmp = entry.with_extension("tmp");
        std::fs::write(&tmp, std::fs::read(&p).unwrap()).unwrap();
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at as u64);
        std::fs::File::options().write(true).open(&tmp).unwrap().set_modified(t).unwrap();
        std::fs::rename(&tmp, &p).unwrap();
    }
}

fn hook_line(ts_ms: i64, seq: i64, key: &str, event: &str, compile_ms: Option<f64>) -> String {
    let ms = compile_ms.map_or("null".to_string(), |m| m.to_string());
    format!(
        r#"{{"v":1,"ts":{}.{:03}123,"host":"gpu-7","pid":77,"key":"{key}","kernel":"add_kernel","event":"{event}","compile_ms":{ms},"stages_ms":null,"seq":{seq}}}"#,
        ts_ms / 1000,
        ts_ms % 1000
    ) + "\n"
}

/// An entry recompiled in place (TRITON_ALWAYS_COMPILE, or evicted and compiled again) keeps
/// each compile a scan saw; a hook compile event accounts for the compile at its time only.
#[tokio::test]
async fn recompiles_in_place_keep_every_compile() {
    let (_t, dir) = unpacked("h100-jit-3.6.0");
    let root = dir.join("triton-cache");
    let (_db, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let state = AppState::new(pool.clone(), Config::default());
    let scan = || cachelens::collect::scan_local(&store, &root, "rc");
    let add = "machine=rc&kernel=add_kernel&bucket=hour&limit=1000";
    let key = std::fs::read_dir(&root)
        .unwrap()
        .map(|d| d.unwrap().path())
        .find(|p| p.join("add_kernel.json").exists())
        .unwrap();
    let k = key.file_name().unwrap().to_string_lossy().into_owned();
    let h0 = 1_795_316_400_000i64; // the hour of the corpus's compiles
    let series = || async {
        let v = get_json(&state, &format!("/api/v1/history?{add}")).await;
        v.as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let n = |f: &str| p[f].as_i64().unwrap();
                (n("t"), n("compiles"), n("inferred_compiles"), n("misses"), n("hook_events"))
            })
            .collect::<Vec<_>>()
    };
    scan().await.unwrap();
    assert_eq!(series().await, [(h0, 24, 24, 24, 0)]);

    // Recompiled without the hook, 5 h later: both compiles show.
    let t1 = h0 + 5 * 3_600_000 + 600_000;
    recompile(&key, t1);
    assert_eq!(scan().await.unwrap().changed_entries, 1);
    let h5 = h0 + 5 * 3_600_000;
    assert_eq!(series().await, [(h0, 24, 24, 24, 0), (h5, 1, 1, 1, 0)]);
    crate::history_agg::assert_history_fresh(&pool).await;
    let e = get_json(&state, "/api/v1/entries?machine=rc&kernel=add_kernel&limit=100").await;
    let row = e.as_array().unwrap().iter().find(|r| r["key"] == k.as_str()).unwrap();
    assert_eq!(row["created_at"], t1, "the entry shows its latest compile");

    // Recompiled under the hook 1 h later (miss, then compile logged 300 ms after the metadata
    // write): one compile at that time, not two; the earlier compiles of the key still count.
    let t2 = h0 + 6 * 3_600_000 + 60_000;
    recompile(&key, t2);
    let events = root.join(".cachelens/events-gpu-7.jsonl");
    std::fs::create_dir_all(events.parent().unwrap()).unwrap();
    let text = hook_line(t2 - 900, 0, &k, "miss", None) + &hook_line(t2 + 300, 1, &k, "compile", Some(1150.0));
    std::fs::write(&events, text).unwrap();
    scan().await.unwrap();
    let h6 = h0 + 6 * 3_600_000;
    assert_eq!(series().await, [(h0, 24, 24, 24, 0), (h5, 1, 1, 1, 0), (h6, 1, 0, 1, 2)]);
    crate::history_agg::assert_history_fresh(&pool).await;
    // Recompiled again 1 s later without the hook: within the hook event's window, but the
    // event accounts for the nearest compile only, so this one counts too.
    recompile(&key, t2 + 1000);
    scan().await.unwrap();
    assert_eq!(series().await, [(h0, 24, 24, 24, 0), (h5, 1, 1, 1, 0), (h6, 2, 1, 2, 2)]);
    // A rescan with nothing new changes nothing; so does the entry's eviction.
    scan().await.unwrap();
    std::fs::remove_dir_all(&key).unwrap();
    assert_eq!(scan().await.unwrap().removed_entries, 1);
    assert_eq!(series().await, [(h0, 24, 24, 24, 0), (h5, 1, 1, 1, 0), (h6, 2, 1, 2, 2)]);
    crate::history_agg::assert_history_fresh(&pool).await;
}

/// Events stored before migration 0007 know only their millisecond (lookups within one were
/// merged into one row). Their lines read again (a rotated file, an upload of the whole file)
/// claim those rows: the counts become exact, nothing counts twice.
#[tokio::test]
async fn lines_read_again_claim_rows_stored_before_exact_identity() {
    let (_t, dir) = unpacked("h100-jit-3.6.0");
    let root = dir.join("triton-cache");
    let since = format!("machine=old&from={}", now_ms() - 1000);
    hook_emit(&root, &"D".repeat(52), 200, false);
    let (_db, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let state = AppState::new(pool.clone(), Config::default());
    let scan = || cachelens::collect::scan_local(&store, &root, "old");
    assert_eq!(scan().await.unwrap().events, 200);
    // What the old schema kept: one row per (host, pid, key, event, millisecond).
    for sql in [
        "DELETE FROM events WHERE id NOT IN (SELECT MIN(id) FROM events GROUP BY machine_id, host, pid, key, event, ts)",
        "UPDATE events SET legacy = 1, seq = -1, ts_us = ts * 1000",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    let kept = totals(&state, &since).await.0;
    assert!(kept < 200, "{kept}");
    let reread = || async {
        sqlx::query("DELETE FROM event_files").execute(&pool).await.unwrap();
        scan().await.unwrap().events
    };
    assert_eq!(reread().await, 200 - kept);
    assert_eq!(totals(&state, &since).await, (200, 0, 0, 200));
    assert_eq!(reread().await, 0);
    assert_eq!(totals(&state, &since).await, (200, 0, 0, 200));
    let legacy: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE legacy = 1").fetch_one(&pool).await.unwrap();
    assert_eq!(legacy, 0);
}

/// Real Triton (`$CACHELENS_PYTHON`, 3.6.0): the add kernels compiled, then recompiled in place
/// with `TRITON_ALWAYS_COMPILE=1` (Triton replaces every file of the entry), then once more under
/// the hook. Each compile a scan saw counts once; the hook's compiles are not inferred again.
#[tokio::test]
async fn real_triton_recompiles_count_each_compile() {
    let Some(py) = std::env::var_os("CACHELENS_PYTHON").filter(|p| !p.is_empty()) else {
        skip_or_fail("CACHELENS_PYTHON (a python with Triton 3.6.0) is not set");
        return;
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::TempDir::new().unwrap();
    let cache = tmp.path().join("cache");
    let run = |extra: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new(&py);
        cmd.arg(repo.join("scripts/workload.py")).args(["--kernels", "add"]);
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TRITON_") || k.starts_with("CACHELENS_HOOK")) {
            cmd.env_remove(k);
        }
        cmd.env("TRITON_CACHE_DIR", &cache).env("PYTHONPATH", repo.join("hook"));
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "workload failed: {}", String::from_utf8_lossy(&out.stderr));
    };
    let (_db, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let state = AppState::new(pool.clone(), Config::default());
    let scan = || cachelens::collect::scan_local(&store, &cache, "tri");
    let q = "machine=tri&kernel=add_kernel";
    let inferred = || async {
        let v = get_json(&state, &format!("/api/v1/history?{q}&bucket=day")).await;
        v.as_array().unwrap().iter().map(|p| p["inferred_compiles"].as_i64().unwrap()).sum::<i64>()
    };

    run(&[]);
    let n = scan().await.unwrap().new_entries;
    assert!(n >= 6, "{n}");
    assert_eq!((totals(&state, q).await.2, inferred().await), (n, n));

    run(&[("TRITON_ALWAYS_COMPILE", "1")]);
    assert_eq!(scan().await.unwrap().changed_entries, n, "every entry rewritten");
    assert_eq!((totals(&state, q).await.2, inferred().await), (2 * n, 2 * n));

    run(&[("TRITON_ALWAYS_COMPILE", "1"), ("TRITON_CACHE_MANAGER", "cachelens_hook:TrackingCacheManager")]);
    let s = scan().await.unwrap();
    assert_eq!((s.changed_entries, s.events), (n, 2 * n), "a miss and a compile per kernel");
    assert_eq!(totals(&state, q).await, (0, 3 * n, 3 * n, 2 * n));
    assert_eq!(inferred().await, 2 * n, "the hook's compiles are not inferred again");
}
