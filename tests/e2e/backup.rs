//! `cachelens db backup --db team.db --to FILE`: an SQLite database backed up while a real server
//! serves it and a scan writes into it; the backup answers as the database did.

use crate::common::*;
use cachelens::web::{AppState, Config};
use std::path::Path;
use std::process::Command;

/// The read API's answers that name what a database holds (times left as they are: a backup is
/// the same rows).
async fn answers(path: &Path) -> Vec<serde_json::Value> {
    let pool = cachelens::db::open(path).await.unwrap();
    let state = AppState::new(pool.clone(), Config::default());
    let mut out = vec![];
    for uri in
        ["/api/v1/machines", "/api/v1/kernels?limit=1000", "/api/v1/entries?limit=1000", "/api/v1/history?bucket=day"]
    {
        out.push(get_json(&state, uri).await);
    }
    pool.close().await;
    out
}

/// Backed up while served: the backup answers the read API exactly as the database does. Backed
/// up while a scan of another cache lands: the backup is whole (integrity checked) and holds the
/// database either before or after that scan, never a part of it. A backup never overwrites a
/// file, and one of a missing database makes none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_serving_answers_as_the_database_does() {
    // an SQLite file whatever the tests' store: `db backup` copies the file
    let (dir, pool) = sqlite_db().await;
    let db = dir.path().join("test.db");
    let (_a, a100) = unpacked("a100-upgrade-1-triton-3.4.0");
    let (_h, hook) = unpacked("h100-hook-3.6.0");
    scan(&pool, &a100.join("triton-cache"), "a100").await;
    pool.close().await;
    let mut serve = Command::new(bin());
    serve.args(["serve", "--listen", "127.0.0.1:0", "--db"]).arg(&db);
    let (_served, _url) = spawn_served(serve, 60);

    let first = dir.path().join("first.db");
    let out = backup_cmd(&db, &first).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("integrity ok"));
    assert_eq!(answers(&first).await, answers(&db).await);

    // a backup while a scan of another cache writes into the served database
    let before = count(&cachelens::db::open(&first).await.unwrap(), "SELECT COUNT(*) FROM entries").await;
    let mut scanning = Command::new(bin())
        .args(["scan", "--quiet", "--machine", "h100", "--db"])
        .arg(&db)
        .arg(hook.join("triton-cache"))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let during = dir.path().join("during.db");
    let out = backup_cmd(&db, &during).output().unwrap();
    assert!(scanning.wait().unwrap().success());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after = count(&cachelens::db::open(&db).await.unwrap(), "SELECT COUNT(*) FROM entries").await;
    let got = count(&cachelens::db::open(&during).await.unwrap(), "SELECT COUNT(*) FROM entries").await;
    assert!(after > before, "the scan added entries");
    assert!(got == before || got == after, "a backup holds {got} entries: neither {before} nor {after}");

    // never over a file, never of a missing database
    let out = backup_cmd(&db, &first).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("exists"));
    let none = dir.path().join("none.db");
    let out = backup_cmd(&none, &dir.path().join("x.db")).output().unwrap();
    assert!(!out.status.success());
    assert!(!none.exists() && !dir.path().join("x.db").exists());
}
