//! What leaves the database: a machine retired by name (`cachelens machine retire`), and removed
//! entries and stored reports older than `serve --keep-removed`. Real corpus caches, the real
//! binary, a real server.

use crate::common::*;
use cachelens::db::Store;
use cachelens::web::{AppState, Config};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// An answer with what differs between any two databases of the same caches left out: times
/// (scans ran at other moments) and row ids.
fn timeless(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !(k.ends_with("_at") || *k == "id" || k.ends_with("_id") || *k == "scanned"))
                .map(|(k, v)| (k.clone(), timeless(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(timeless).collect()),
        v => v.clone(),
    }
}

/// The read API's answers about the whole fleet and each machine in it.
async fn fleet_answers(pool: &Store) -> Vec<(String, Value)> {
    let state = AppState::new(pool.clone(), Config::default());
    let mut out = vec![];
    for uri in [
        "/api/v1/machines",
        "/api/v1/kernels?limit=1000",
        "/api/v1/entries?limit=1000",
        "/api/v1/autotune?limit=1000",
        "/api/v1/history?bucket=day",
        "/api/v1/history?bucket=hour",
        "/api/v1/history/kernels",
        "/api/v1/history?machine=a100&bucket=day",
        "/api/v1/invalidations?a=a100&b=fp",
    ] {
        out.push((uri.to_string(), timeless(&get_json(&state, uri).await)));
    }
    out
}

async fn scan_all(pool: &Store, caches: &[(&str, &Path)]) {
    for (machine, root) in caches {
        scan(pool, root, machine).await;
    }
}

/// Retiring a machine leaves the database answering exactly as one that never had it: every
/// read answer (machines, kernels, entries, autotune, history by day, hour and kernel, an
/// invalidation report) equals that of a database of the other machines alone, and no table
/// holds a row of the machine or of its entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retired_machine_leaves_the_answers_of_a_database_that_never_had_it() {
    let (_h, hook) = unpacked("h100-hook-3.6.0");
    let (_a, a100) = unpacked("a100-upgrade-1-triton-3.4.0");
    let (_f, fp) = unpacked("h100-fpfusion-off-triton-3.6.0");
    let (a100, fp) = (a100.join("triton-cache"), fp.join("triton-cache"));
    let (_db_dir, with) = fresh_db().await;
    let with_db = cachelens::db::Db::from(with.clone());
    scan_all(&with, &[("hook", &hook.join("triton-cache")), ("a100", &a100), ("fp", &fp)]).await;
    let (_w, without) = fresh_db().await;
    scan_all(&without, &[("a100", &a100), ("fp", &fp)]).await;
    let hook_id = count(&with, "SELECT id FROM machines WHERE name = 'hook'").await;
    let hook_entries = count(
        &with,
        "SELECT COUNT(*) FROM entry_rows WHERE machine_id = (SELECT id FROM machines WHERE name = 'hook')",
    )
    .await;
    assert!(hook_entries >= 20, "{hook_entries}");
    // the facts only the hook machine holds go with it; those others hold stay
    let hook_only = count(
        &with,
        &format!(
            "SELECT COUNT(*) FROM facts f WHERE EXISTS (SELECT 1 FROM entries e WHERE e.fact_id = f.id AND e.machine_id = {hook_id})
               AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.fact_id = f.id AND e.machine_id <> {hook_id})"
        ),
    )
    .await;
    assert!(hook_only >= 20, "{hook_only}");
    assert!(count(&with, "SELECT COUNT(*) FROM events").await > 0, "the hook's events are in");
    let tokens = [
        cachelens::db::tokens::create(&with_db, "hook").await.unwrap(),
        cachelens::db::tokens::create(&with_db, "fp").await.unwrap(),
    ];
    let before = fleet_answers(&with).await;
    assert_ne!(before, fleet_answers(&without).await, "the retired machine shows before");
    let path = db_at(&with).await;
    with.close().await;

    let out = Command::new(bin()).args(["machine", "retire", "hook", "--json", "--db"]).arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(said["machine"], "hook");
    assert_eq!(said["entries"], hook_entries);
    assert_eq!(said["facts"], hook_only);
    assert_eq!(said["tokens_revoked"], 1);

    let with = cachelens::db::open(&path).await.unwrap();
    let after = fleet_answers(&with).await;
    for ((uri, a), (_, b)) in after.iter().zip(fleet_answers(&without).await.iter()) {
        assert_eq!(a, b, "{uri} after retiring differs from a database that never had the machine");
    }
    // no row of the machine anywhere (report generations only move forward: their row stays)
    let mut tables = vec![];
    for t in crate::common::tables(&with).await.into_iter().filter(|t| t != "report_gens") {
        if columns(&with, &t).await.iter().any(|c| c == "machine_id") {
            tables.push(t);
        }
    }
    assert!(tables.len() >= 20, "{tables:?}");
    for t in tables {
        let n = count(&with, &format!("SELECT COUNT(*) FROM {t} WHERE machine_id = {hook_id}")).await;
        assert_eq!(n, 0, "{t} still holds rows of the retired machine");
    }
    for t in ["artifacts", "entry_compiles", "entry_classes_pending"] {
        let n =
            count(&with, &format!("SELECT COUNT(*) FROM {t} WHERE entry_id NOT IN (SELECT id FROM entry_rows)")).await;
        assert_eq!(n, 0, "{t} holds rows of deleted entries");
    }
    for (what, sql) in [
        (
            "facts no entry holds",
            "SELECT COUNT(*) FROM facts f WHERE NOT EXISTS (SELECT 1 FROM entries e WHERE e.fact_id = f.id)",
        ),
        (
            "keys no entry holds",
            "SELECT COUNT(*) FROM keys k WHERE NOT EXISTS (SELECT 1 FROM entry_rows e WHERE e.key = k.key)",
        ),
        ("autotune rows of no fact", "SELECT COUNT(*) FROM fact_autotune WHERE fact_id NOT IN (SELECT id FROM facts)"),
        ("module links of no fact", "SELECT COUNT(*) FROM fact_modules WHERE fact_id NOT IN (SELECT id FROM facts)"),
        (
            "texts of no fact",
            "SELECT COUNT(*) FROM fact_texts WHERE fact NOT IN (SELECT fact FROM facts WHERE fact IS NOT NULL)",
        ),
        (
            "files of no fact",
            "SELECT COUNT(*) FROM fact_files WHERE fact NOT IN (SELECT fact FROM facts WHERE fact IS NOT NULL)",
        ),
        ("classes of no fact", "SELECT COUNT(*) FROM fact_classes WHERE fact_id NOT IN (SELECT id FROM facts)"),
        (
            "grid cells of no fact",
            "SELECT COUNT(*) FROM variants v WHERE NOT EXISTS (SELECT 1 FROM fact_live l WHERE l.variant_id = v.id)",
        ),
    ] {
        assert_eq!(count(&with, sql).await, 0, "{what} after retiring");
    }
    assert_eq!(crate::common::live_counter_faults(&with).await, [0; 4], "live counters after retiring");
    assert!(count(&with, "SELECT COUNT(*) FROM fact_files").await > 0, "the other machines' files stay");
    // its token no longer uploads; the other machine's still does
    use cachelens::db::tokens::{Check, check};
    assert_eq!(check(&with, &tokens[0]).await.unwrap(), Check::Revoked);
    assert_eq!(check(&with, &tokens[1]).await.unwrap(), Check::Machine("fp".into()));

    // an unknown name is refused, saying which machines there are
    let out = Command::new(bin()).args(["machine", "retire", "hook", "--db"]).arg(&path).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no machine named \"hook\"") && err.contains("a100, fp"), "{err}");
}

/// `serve --keep-removed 1d` deletes the entries removed more than a day ago and the reports
/// computed before then, and keeps live entries and those removed since.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_ages_out_removed_entries_and_reports_past_the_window() {
    let (_j, jit) = unpacked("h100-jit-3.6.0");
    let (_f, fp) = unpacked("h100-fpfusion-off-triton-3.6.0");
    let root = jit.join("triton-cache");
    let (_db_dir, pool) = fresh_db().await;
    scan(&pool, &root, "jit").await;
    scan(&pool, &fp.join("triton-cache"), "fp").await;
    // three entries leave the cache
    let gone: Vec<(String, String)> =
        sqlx::query_as("SELECT dir, root FROM entry_rows WHERE kind = 'kernel' AND machine_id = (SELECT id FROM machines WHERE name = 'jit') ORDER BY key LIMIT 3")
            .fetch_all(&pool)
            .await
            .unwrap();
    for (dir, at) in &gone {
        std::fs::remove_dir_all(Path::new(at).join(dir)).unwrap();
    }
    let s = scan(&pool, &root, "jit").await;
    assert_eq!(s.removed_entries, 3);
    let state = AppState::new(pool.clone(), Config::default());
    assert_eq!(get(&state, "/api/v1/invalidations?a=jit&b=fp").await.0, 200);
    assert!(count(&pool, "SELECT COUNT(*) FROM inv_reports").await >= 1);
    let live = count(&pool, "SELECT COUNT(*) FROM entry_rows WHERE removed_at IS NULL").await;
    // two of them went two days ago, and so was the report computed
    let two_days = 2 * 86_400_000;
    sqlx::query(
        "UPDATE entries SET removed_at = removed_at - ? WHERE id IN (SELECT id FROM entry_rows WHERE dir IN (?, ?))",
    )
    .bind(two_days)
    .bind(&gone[0].0)
    .bind(&gone[1].0)
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("UPDATE inv_reports SET computed_at = computed_at - ?").bind(two_days).execute(&pool).await.unwrap();
    let path = db_at(&pool).await;
    pool.close().await;

    let mut cmd = Command::new(bin());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--keep-removed", "1d", "--db"]).arg(&path);
    let (_server, _url) = spawn_served(cmd, 60);
    let pool = cachelens::db::open(&path).await.unwrap();
    let t = std::time::Instant::now();
    while count(&pool, "SELECT COUNT(*) FROM entry_rows WHERE removed_at IS NOT NULL").await > 1 {
        assert!(t.elapsed().as_secs() < 60, "the removed entries were not aged out");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let kept: Vec<(String, String)> =
        sqlx::query_as("SELECT dir, root FROM entry_rows WHERE removed_at IS NOT NULL").fetch_all(&pool).await.unwrap();
    assert_eq!(kept, vec![gone[2].clone()], "the entry removed within the window stays");
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM entry_rows WHERE removed_at IS NULL").await, live);
    while count(&pool, "SELECT COUNT(*) FROM inv_reports").await > 0 {
        assert!(t.elapsed().as_secs() < 60, "the old report was not aged out");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(
        count(&pool, "SELECT COUNT(*) FROM keys k WHERE NOT EXISTS (SELECT 1 FROM entry_rows e WHERE e.key = k.key)")
            .await,
        0,
        "keys of no entry are forgotten with their facts"
    );
}

/// A window shorter than an hour, or not a duration, is refused before anything is served.
#[test]
fn a_keep_removed_that_is_no_window_is_refused() {
    for (arg, says) in [("10m", "at least 1h"), ("soon", "give a duration such as 90d")] {
        let out =
            Command::new(bin()).args(["serve", "--listen", "127.0.0.1:0", "--keep-removed", arg]).output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{arg}: {err}");
    }
}
