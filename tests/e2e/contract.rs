//! Issue 32: the scanner and the server agree (one rule set, `cachelens::rules`), uploads are
//! all or nothing through a server killed at every write step, and an upload of any size goes
//! in bounded parts. Real corpus caches, the real `cachelens` binary, real servers on loopback.

use crate::common::*;
use crate::scan::{entry_dirs, file_names, metadata_file};
use crate::upload::{cli_upload, gz, post_raw, server, text};
use cachelens::web::Config;
use serde_json::{Value, json};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Kernel entry dirs of a cache (metadata, group file, IR and binary).
fn kernel_dirs(cache: &Path) -> Vec<PathBuf> {
    entry_dirs(cache).into_iter().filter(|d| metadata_file(d).is_some() && file_names(d).len() >= 6).collect()
}

fn autotune_files(cache: &Path) -> Vec<PathBuf> {
    entry_dirs(cache)
        .into_iter()
        .flat_map(|d| file_names(&d).into_iter().filter(|n| n.ends_with(".autotune.json")).map(move |n| d.join(n)))
        .collect()
}

fn key_of(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

/// Edit a JSON file as Python wrote it (a failed autotune config timed `Infinity`, kept so).
fn edit_json(p: &Path, f: impl FnOnce(&mut Value)) {
    const INF: &str = "1.5e300";
    let text = std::fs::read_to_string(p).unwrap().replace("Infinity", INF);
    let mut v: Value = serde_json::from_str(&text).unwrap();
    f(&mut v);
    std::fs::write(p, serde_json::to_string(&v).unwrap().replace(INF, "Infinity")).unwrap();
}

/// The odd files of the issue, each on a copy of a real cache. Returns the keys that must be
/// skipped and those that must be stored with their odd file listed.
struct Odd {
    skipped: Vec<String>,
    stored: Vec<String>,
}

fn make_odd(jit: &Path, inductor: &Path) -> Odd {
    let k = kernel_dirs(jit);
    assert!(k.len() >= 6, "the corpus has kernel entries");
    // names the scanner escapes: stored as they are, never a reason to refuse
    std::fs::write(k[0].join(OsStr::from_bytes(b"x\xff.bin")), b"odd").unwrap();
    std::fs::write(k[1].join("back\\slash.txt"), b"odd").unwrap();
    // a metadata file written in 2150
    let meta = metadata_file(&k[2]).unwrap();
    let f = std::fs::File::options().append(true).open(&meta).unwrap();
    f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(5_680_000_000)).unwrap();
    // a sparse 70 GiB file
    std::fs::File::create(k[3].join("huge.bin")).unwrap().set_len(70 << 30).unwrap();
    // num_warps 5000
    edit_json(&metadata_file(&k[4]).unwrap(), |v| v["num_warps"] = json!(5000));
    // a negative timing, and a 17th
    let at = autotune_files(jit);
    assert!(at.len() >= 2, "the corpus has autotune results");
    edit_json(&at[0], |v| v["configs_timings"][0][1] = json!([-1.0, 0.1, 0.2]));
    edit_json(&at[1], |v| v["configs_timings"][0][1] = json!(vec![0.5; 17]));
    // a 100-character Inductor precision (one decision of many)
    let cache = std::fs::read_dir(inductor.join("cache")).unwrap().next().unwrap().unwrap().path();
    let text = std::fs::read_to_string(&cache).unwrap(); // Python's JSON, with `Infinity`
    assert!(text.contains("\"highest\""), "the decisions' precision");
    std::fs::write(&cache, text.replacen("\"highest\"", &format!("\"{}\"", "p".repeat(100)), 1)).unwrap();
    // a .best_config in a dir whose name is not UTF-8
    let best = walk_files(inductor).into_iter().find(|p| p.extension() == Some(OsStr::new("best_config"))).unwrap();
    let odd_dir = inductor.join(OsStr::from_bytes(b"\xff\xfe"));
    std::fs::create_dir_all(&odd_dir).unwrap();
    std::fs::copy(&best, odd_dir.join("odd.best_config")).unwrap();
    Odd {
        skipped: [&k[2], &k[3], &k[4], &at[0].parent().unwrap().to_path_buf(), &at[1].parent().unwrap().to_path_buf()]
            .iter()
            .map(|d| key_of(d))
            .collect(),
        stored: vec![key_of(&k[0]), key_of(&k[1])],
    }
}

fn walk_files(d: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk_files(&p)) } else { out.push(p) }
    }
    out
}

async fn api(url: &str, path: &str) -> Value {
    crate::upload::get_json_at(&format!("{url}{path}")).await
}

/// Every odd file of the issue, through the real CLI into a real server: the upload succeeds,
/// the odd entries are listed as skipped with their reason, the others are stored; and a local
/// scan of the same caches stores exactly what the server stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_files_never_freeze_a_node() {
    let (_t1, jit) = unpacked("h100-jit-3.6.0");
    let (_t2, ind) = unpacked("h100-inductor-autotune-triton-3.6.0");
    let (jit, ind) = (jit.join("triton-cache"), ind);
    let odd = make_odd(&jit, &ind);
    let srv = server(Config::default()).await;
    let token = cachelens::db::tokens::create(&srv.db, "odd-node").await.unwrap();
    let out = cli_upload(&srv.url, &token, "odd-node", &jit, &[ind.to_str().unwrap()]).await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for why in ["created_at", "bytes = 7516", "num_warps = 5000", "timings_ms", "precision"] {
        assert!(stdout.contains(why), "the summary names {why:?}: {stdout}");
    }
    let entries = api(&srv.url, "/api/v1/entries?machine=odd-node&limit=10000").await;
    let keys: Vec<&str> = arr(&entries).iter().map(|e| e["key"].as_str().unwrap()).collect();
    for k in &odd.skipped {
        assert!(!keys.contains(&k.as_str()), "{k} skipped");
    }
    for k in &odd.stored {
        assert!(keys.contains(&k.as_str()), "{k} stored");
    }
    let names: Vec<&str> =
        arr(&entries).iter().flat_map(|e| arr(&e["artifacts"]).iter().map(|a| a["name"].as_str().unwrap())).collect();
    assert!(names.contains(&"x\\xff.bin") && names.contains(&"back\\\\slash.txt"), "odd names listed");
    // the machine page says what was skipped, and why
    let page = cachelens::upload::client().unwrap().get(format!("{}/machines/odd-node", srv.url)).send().await.unwrap();
    let page = page.text().await.unwrap();
    assert!(page.contains("Skipped by the latest scans") && page.contains("num_warps = 5000"), "machine page");
    // the other decisions and the odd dir's best config arrived (the backslashes literal: PostgreSQL's
    // LIKE escapes with one unless told another)
    let decisions = count(&srv.pool, "SELECT COUNT(*) FROM inductor_autotune").await;
    let odd_best =
        count(&srv.pool, "SELECT COUNT(*) FROM best_configs WHERE path LIKE '%\\xff\\xfe/odd.best_config' ESCAPE '!'")
            .await;
    assert!(decisions > 1 && odd_best == 1, "decisions {decisions}, odd best config {odd_best}");
    // the local path applies the same rules: the same entries, the same decisions
    let (_db, dbf) = fresh_db_at().await;
    let local = std::process::Command::new(bin())
        .args(["scan", "--json", "--machine", "odd-node", "--db"])
        .arg(&dbf)
        .args([&jit, &ind])
        .output()
        .unwrap();
    assert!(local.status.success(), "{}", String::from_utf8_lossy(&local.stderr));
    let pool = cachelens::db::open(&dbf).await.unwrap();
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM entry_rows").await, keys.len() as i64);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM inductor_autotune").await, decisions);
    let skipped = count(&srv.pool, "SELECT SUM(skipped) FROM scans").await;
    assert_eq!(count(&pool, "SELECT SUM(skipped) FROM scans").await, skipped);
}

/// An entry of a report body, as a client of any version may send it.
fn entry(key: &str) -> Value {
    json!({"key": key, "dir": key, "kind": "kernel", "kernel": "k", "backend": "cuda", "arch": "sm_90",
           "warp_size": 32, "num_warps": 4, "num_stages": 3, "num_ctas": 1, "triton_version": "3.6.0",
           "meta_hash": null, "signature": null, "shapes": null, "created_at": 1_763_000_000_000i64, "bytes": 10,
           "registers": null, "spills": null, "shared_bytes": null, "resources": null, "metadata": {"name": "k"},
           "group": null, "partial": null, "artifacts": [], "autotune": null, "sig": "s"})
}

/// The server screens every record itself (a client of another version, or a hostile one):
/// bad records are skipped with their reason (201 and the skipped count), the rest stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_skips_bad_records_and_stores_the_rest() {
    let srv = server(Config::default()).await;
    let token = cachelens::db::tokens::create(&srv.db, "m1").await.unwrap();
    let mut bad_bytes = entry("B1");
    bad_bytes["bytes"] = json!(-1);
    let mut bad_warps = entry("B2");
    bad_warps["num_warps"] = json!(5000);
    let mut zeros = entry("B3");
    zeros["metadata"] = json!(vec![0; 300_000]);
    let mut wrong_type = entry("B4");
    wrong_type["bytes"] = json!("ten");
    let body = json!({"format": 1, "client_id": "c1", "machine": "m1", "root": "/r", "scanned_at": 1_763_000_000_000i64,
        "duration_ms": 5, "entries": [entry("G1"), bad_bytes, bad_warps, zeros, wrong_type, entry("G2")],
        "events": [{"ts": 1_763_000_000_000i64, "host": "h", "pid": 1, "key": "G1", "kernel": "k", "event": "evicted",
                    "compile_ms": null, "stages_ms": null}],
        "inductor_autotune": [{"path": "cache/x", "op": "mm", "key": "k", "precision": "q".repeat(100),
                               "choices": [{"name": "a", "ms": -1.0}]}],
        "beside": [{"tool": "t", "path": "/p", "files": 1, "bytes": i64::MAX, "complete": true}]});
    let (status, ans) = post_raw(&srv.url, "/api/v1/scans", Some(&token), gz(body.to_string().as_bytes()), true).await;
    assert_eq!(status, 201, "{ans}");
    assert_eq!(ans["skipped"], 7, "{ans}");
    let reasons = ans["summary"]["skipped"].as_object().unwrap();
    let all: String = reasons.keys().cloned().collect::<Vec<_>>().join("\n");
    for why in
        ["bytes = -1", "num_warps = 5000", "JSON values", "not a valid record", "evicted", "precision", "beside bytes"]
    {
        assert!(all.contains(why), "{why:?} in {all}");
    }
    let keys: Vec<String> =
        sqlx::query_scalar("SELECT key FROM entry_rows ORDER BY key").fetch_all(&srv.pool).await.unwrap();
    assert_eq!(keys, ["G1", "G2"]);
    // the same through a staged upload's part
    let begin =
        json!({"format": 2, "client_id": "c2", "machine": "m1", "root": "/r2", "scanned_at": 1_763_000_000_000i64});
    let (status, s) = post_raw(&srv.url, "/api/v1/uploads", Some(&token), gz(begin.to_string().as_bytes()), true).await;
    assert_eq!(status, 200, "{s}");
    let id = s["upload_id"].as_i64().unwrap();
    let mut bad = entry("B5");
    bad["created_at"] = json!(5_680_000_000_000i64);
    let part = json!({"entries": [entry("G3"), bad]});
    let (status, p) =
        put_raw(&srv.url, &format!("/api/v1/uploads/{id}/parts/0"), &token, gz(part.to_string().as_bytes())).await;
    assert_eq!((status, p["entries"].as_i64(), p["skipped"].as_i64()), (200, Some(1), Some(1)), "{p}");
    let commit = json!({"parts": 1, "duration_ms": 3});
    let (status, c) = post_raw(
        &srv.url,
        &format!("/api/v1/uploads/{id}/commit"),
        Some(&token),
        gz(commit.to_string().as_bytes()),
        true,
    )
    .await;
    assert_eq!((status, c["skipped"].as_i64()), (201, Some(1)), "{c}");
    assert!(c["summary"]["skipped"].as_object().unwrap().keys().any(|r| r.contains("created_at")), "{c}");
    let live: i64 = count(&srv.pool, "SELECT COUNT(*) FROM entry_rows WHERE root = '/r2'").await;
    assert_eq!(live, 1);
}

pub async fn put_raw(url: &str, path: &str, token: &str, body: Vec<u8>) -> (u16, Value) {
    let resp = cachelens::upload::client()
        .unwrap()
        .put(format!("{url}{path}"))
        .bearer_auth(token)
        .header("content-encoding", "gzip")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|_| json!({ "raw": text })))
}

/// A root that fails (here: a failpoint) never stops the node's other roots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_root_does_not_stop_the_others() {
    let (_t1, a) = unpacked("h100-jit-3.6.0");
    let (_t2, b) = unpacked("mi300-upgrade-1-triton-3.6.0");
    let (a, b) = (a.join("triton-cache"), b.join("triton-cache"));
    let srv = server(Config::default()).await;
    let token = cachelens::db::tokens::create(&srv.db, "two").await.unwrap();
    // the first root fails for good (`failpoint::root` stands in for a full disk or a refused upload)
    let out = tokio::process::Command::new(bin())
        .arg("scan")
        .args([&a, &b])
        .args(["--server", &srv.url, "--token", &token, "--machine", "two", "--retries", "1"])
        .env("CACHELENS_FAIL_ROOT", a.to_str().unwrap())
        .env_remove("CACHELENS_DB")
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "a failed root is an error in the end");
    assert!(stderr.contains("1 of 2 cache roots failed") && stderr.contains(a.to_str().unwrap()), "{stderr}");
    assert!(stdout.contains(&format!("of {} on two", b.display())), "the other root was uploaded: {stdout}");
    let roots: Vec<String> = sqlx::query_scalar("SELECT DISTINCT root FROM scans").fetch_all(&srv.pool).await.unwrap();
    assert_eq!(roots, [b.display().to_string()]);
}

/// The database's answers that an upload changes, with ids and times left out.
async fn answers(url: &str, machine: &str) -> Vec<Value> {
    let mut out = vec![];
    for path in [
        format!("/api/v1/entries?machine={machine}&limit=10000"),
        format!("/api/v1/autotune?machine={machine}&limit=10000"),
        format!("/api/v1/history?machine={machine}&bucket=day"),
    ] {
        out.push(api(url, &path).await);
    }
    let scans = api(url, &format!("/api/v1/scans?machine={machine}")).await;
    out.push(json!(arr(&scans).iter().map(|s| (s["entries"].clone(), s["bytes"].clone())).collect::<Vec<_>>()));
    let mut v = json!(out);
    strip(&mut v);
    out = vec![v];
    out
}

/// Times and ids differ between two databases made of the same scan.
fn strip(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.ends_with("_at") && k != "id" && k != "scan_id" && k != "last_scan" && k != "t");
            m.values_mut().for_each(strip);
        }
        Value::Array(a) => a.iter_mut().for_each(strip),
        _ => {}
    }
}

fn serve(db: &Path, failpoint: Option<&str>) -> (Served, String) {
    let mut cmd = std::process::Command::new(bin());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--db"]).arg(db);
    if let Some(f) = failpoint {
        cmd.env("CACHELENS_FAILPOINT", f);
    }
    spawn_served(cmd, 60)
}

/// Killed (abort, as kill -9) at every write step of an upload, restarted, the upload retried
/// with the same scan: the database answers exactly as one made without the kill. The scan
/// carries Inductor's autotune decisions and what sits beside the root, which used to be
/// written after the scan's commit and lost for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_killed_at_every_write_step_is_stored_whole_by_its_retry() {
    let (_t, ind) = unpacked("h100-inductor-autotune-triton-3.6.0");
    let mut report = cachelens::collect::scan_report(&ind, "kill-node").unwrap();
    report.beside = vec![cachelens::model::ToolSize {
        tool: "inductor-fxgraph".into(),
        path: ind.join("fxgraph").display().to_string(),
        files: 3,
        bytes: 1234,
        complete: true,
        ..Default::default()
    }];
    assert!(report.inductor_autotune.len() >= 4, "the corpus has decisions");
    let retry = cachelens::upload::Retry::new(1);
    // the reference: the same scan, never interrupted
    let (_ref_dir, ref_db) = fresh_db_at().await;
    let (reference, ref_url) = serve(&ref_db, None);
    let token = token_for(&ref_db, "kill-node").await;
    cachelens::upload::upload_report(&ref_url, &token, report.clone(), retry).await.unwrap();
    let want = answers(&ref_url, "kill-node").await;
    drop(reference);
    for step in [
        "upload-begun",
        "blob-stored",
        "part-stored",
        "commit-begun",
        "commit-entries",
        "commit-records",
        "commit-finish",
        "commit-done",
    ] {
        let (_dir, db) = fresh_db_at().await;
        let token = token_for(&db, "kill-node").await;
        let (killed, url) = serve(&db, Some(step));
        let first = cachelens::upload::upload_report(&url, &token, report.clone(), retry).await;
        assert!(first.is_err(), "{step}: the server died under the upload");
        drop(killed);
        let (_again, url) = serve(&db, None);
        let up = cachelens::upload::upload_report(&url, &token, report.clone(), retry).await.unwrap();
        assert_eq!(up.response.created, step != "commit-done", "{step}: {:?}", up.response);
        assert_eq!(answers(&url, "kill-node").await, want, "{step}: the retry stored the scan whole");
        let staged = count(&cachelens::db::open(&db).await.unwrap(), "SELECT COUNT(*) FROM uploads").await;
        assert_eq!(staged, 0, "{step}: nothing left staged");
    }
}

/// A local scan killed before its commit stores nothing; the next scan stores it whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_scan_killed_before_its_commit_stores_nothing() {
    let (_t, ind) = unpacked("h100-inductor-autotune-triton-3.6.0");
    let scan = |db: &Path, failpoint: Option<&str>| {
        let mut cmd = std::process::Command::new(bin());
        cmd.args(["scan", "--machine", "local", "--db"]).arg(db).arg(&ind).env_remove("CACHELENS_DB");
        if let Some(f) = failpoint {
            cmd.env("CACHELENS_FAILPOINT", f);
        }
        cmd.output().unwrap()
    };
    let ((_r, ref_db), (_k, db)) = (fresh_db_at().await, fresh_db_at().await);
    assert!(scan(&ref_db, None).status.success());
    assert!(!scan(&db, Some("commit-finish")).status.success());
    let pool = cachelens::db::open(&db).await.unwrap();
    for t in ["scans", "entries", "inductor_autotune"] {
        assert_eq!(count(&pool, &format!("SELECT COUNT(*) FROM {t}")).await, 0, "{t} after the kill");
    }
    assert!(scan(&db, None).status.success());
    let ref_pool = cachelens::db::open(&ref_db).await.unwrap();
    for t in ["entries", "artifacts", "inductor_autotune", "inductor_choices", "best_configs"] {
        let sql = format!("SELECT COUNT(*) FROM {t}");
        assert_eq!(count(&pool, &sql).await, count(&ref_pool, &sql).await, "{t}");
    }
    let beside = "SELECT beside_json FROM scans";
    let (a, b): (String, String) = (
        sqlx::query_scalar(beside).fetch_one(&pool).await.unwrap(),
        sqlx::query_scalar(beside).fetch_one(&ref_pool).await.unwrap(),
    );
    assert_eq!(a, b);
}

/// Any cache can be uploaded, whatever its size against the server's limit: it goes in parts
/// below the limit (here 1 MiB against a 2.5 MiB gzip scan, which used to be a final 413), and
/// IR text over the limit is listed as skipped with its reason, its entry stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_bigger_than_the_servers_limit_is_uploaded_in_parts() {
    let (_t, jit) = unpacked("h100-jit-3.6.0");
    let cache = jit.join("triton-cache");
    let srv = server(Config { max_upload_bytes: 1 << 20, ..Config::default() }).await;
    let token = cachelens::db::tokens::create(&srv.db, "parts").await.unwrap();
    let out = cli_upload(&srv.url, &token, "parts", &cache, &["--json"]).await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let local = cachelens::collect::scan_report(&cache, "parts").unwrap();
    let stored = count(&srv.pool, "SELECT COUNT(*) FROM entry_rows").await;
    assert_eq!(stored as usize, local.entries.len(), "every entry stored");
    let parts = count(&srv.pool, "SELECT COUNT(*) FROM uploads").await;
    assert_eq!(parts, 0, "nothing left staged");
    let big = local.blobs.values().filter(|t| t.len() > 1 << 20).count();
    let blobs = count(&srv.pool, "SELECT COUNT(*) FROM blobs").await as usize;
    assert_eq!(blobs, local.blobs.len() - big, "every IR text under the limit stored");
    if big > 0 {
        assert!(stdout.contains("IR text over the server's limit"), "{stdout}");
    }
}
