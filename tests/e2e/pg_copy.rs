//! `cachelens db copy --from FILE --to postgres://…` into a real PostgreSQL (the one
//! `scripts/pg-temp.sh` starts; its URL in `CACHELENS_TEST_PG`), from databases of real corpus
//! caches: every row and value arrives, the target's triggers and sequences work afterwards, and
//! a copy that fails (a value PostgreSQL cannot hold, the process killed before its commit, a
//! target already in use) leaves the target without a row.

use crate::common::*;
use cachelens::db::Store;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Row};
use std::path::Path;
use std::process::Command;

/// A new, empty PostgreSQL database on the test server: its URL and a pool on it. `None` (the
/// test skipped or failed by `skip_or_fail`) when there is no test server.
async fn pg_database() -> Option<(String, PgPool)> {
    let url = new_pg_database("copy").await?;
    let pool = PgPoolOptions::new().max_connections(2).connect(&url).await.unwrap();
    Some((url, pool))
}

/// The tables the PostgreSQL schema fills with one row of its own.
const SEEDED: [&str; 2] = ["page_gen", "blob_totals"];

fn copy_cmd(from: &Path, to: &str) -> Command {
    let mut c = Command::new(bin());
    c.args(["db", "copy", "--json", "--from"]).arg(from).args(["--to", to]);
    c
}

/// Rows of every table of the SQLite database (less sqlx's), by table.
async fn lite_counts(pool: &Store) -> Vec<(String, i64)> {
    let mut out = vec![];
    for t in tables(pool).await {
        let n = count(pool, &format!("SELECT COUNT(*) FROM \"{t}\"")).await;
        out.push((t, n));
    }
    out
}

async fn pg_count(pool: &PgPool, table: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM \"{table}\"")))
        .fetch_one(pool)
        .await
        .unwrap_or_else(|e| panic!("{table}: {e}"))
}

/// What the database says, read the same way from both stores: every live entry as
/// (machine, key, kernel, bytes, relocated), every IR text as (sha256, length, stored bytes),
/// every hook event as (machine, key, event, ts), each sorted.
const SAME: [&str; 3] = [
    "SELECT m.name || '|' || k.key || '|' || COALESCE(f.kernel, '') || '|' || e.bytes || '|' || e.relocated
     FROM entries e JOIN machines m ON m.id = e.machine_id JOIN keys k ON k.id = e.key_id JOIN facts f ON f.id = e.fact_id
     WHERE e.removed_at IS NULL",
    "SELECT sha256 || '|' || bytes || '|' || COALESCE(length(content), -1) || '|' || COALESCE(length(z), -1) FROM blobs",
    "SELECT m.name || '|' || v.key || '|' || v.event || '|' || v.ts FROM events v JOIN machines m ON m.id = v.machine_id",
];

async fn lite_rows(pool: &Store, sql: &str) -> Vec<String> {
    let mut v: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string())).fetch_all(pool).await.unwrap();
    v.sort();
    v
}

async fn pg_rows(pool: &PgPool, sql: &str) -> Vec<String> {
    let mut v: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
        .fetch_all(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    v.sort();
    v
}

/// A database of three real caches (an upgraded A100 cache, an H100 cache with the hook's
/// events, an Inductor cache with autotune results), scanned the way a user's is: an SQLite
/// file whatever the tests' store (the copy's source).
async fn team_db() -> (Vec<crate::common::DbDir>, Store, std::path::PathBuf) {
    let (dbdir, pool) = sqlite_db().await;
    let (_a, a100) = unpacked("a100-upgrade-1-triton-3.4.0");
    let (_h, hook) = unpacked("h100-hook-3.6.0");
    scan(&pool, &a100.join("triton-cache"), "a100").await;
    scan(&pool, &hook.join("triton-cache"), "h100").await;
    let path = dbdir.path().join("test.db");
    (vec![dbdir, _a.into(), _h.into()], pool, path)
}

/// Every row of every table arrives, with its values: each table's row count, and what the
/// database says about entries, IR texts and hook events, read from both stores the same way.
/// Afterwards the target works as a database: no trigger left off, its triggers count a new
/// entry, and a new row's id follows the copied ones. A second copy into it is refused and
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_into_postgresql_holds_every_row_and_its_triggers_go_on_counting() {
    let Some((url, pg)) = pg_database().await else { return };
    let (_keep, pool, path) = team_db().await;
    let counts = lite_counts(&pool).await;
    let total: i64 = counts.iter().map(|c| c.1).sum();
    assert!(count(&pool, "SELECT COUNT(*) FROM events").await > 0, "the hooked cache brings events");
    let out = copy_cmd(&path, &url).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(json["rows"].as_i64(), Some(total), "{json}");
    for (table, n) in &counts {
        assert_eq!(pg_count(&pg, table).await, *n, "{table}");
    }
    for sql in SAME {
        let (l, p) = (lite_rows(&pool, sql).await, pg_rows(&pg, sql).await);
        assert!(!l.is_empty(), "{sql}");
        assert_eq!(l, p, "{sql}");
    }
    // the target's own triggers are back on and keep its counters: a new live entry of a known
    // fact moves its machine's live count and its fact's
    let off: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM pg_trigger WHERE NOT tgisinternal AND tgenabled = 'D'")
        .fetch_one(&pg)
        .await
        .unwrap();
    assert_eq!(off, 0, "triggers left disabled");
    let (mid, fact, live): (i64, i64, i64) = sqlx::query_as(
        "SELECT m.id, l.fact_id, l.live FROM machines m CROSS JOIN fact_live l JOIN facts f ON f.id = l.fact_id
         WHERE m.name = 'h100'
           AND NOT EXISTS (SELECT 1 FROM entries e JOIN keys k ON k.id = e.key_id WHERE e.machine_id = m.id AND k.key = f.key)
         ORDER BY l.fact_id LIMIT 1",
    )
    .fetch_one(&pg)
    .await
    .unwrap();
    let machine_live: i64 = sqlx::query_scalar("SELECT live FROM machine_counts WHERE machine_id = $1")
        .bind(mid)
        .fetch_one(&pg)
        .await
        .unwrap();
    let row = sqlx::query(
        "INSERT INTO entries(machine_id, root_id, key_id, fact_id, sig, bytes, first_scan_id, last_scan_id, first_seen_at, last_seen_at)
         SELECT $1, (SELECT MIN(root_id) FROM entries WHERE machine_id = $1), k.id, f.id, 'x', 1, 1, 1, 0, 0
         FROM facts f JOIN keys k ON k.key = f.key WHERE f.id = $2 RETURNING id",
    )
    .bind(mid)
    .bind(fact)
    .fetch_one(&pg)
    .await
    .unwrap();
    let new_id: i64 = row.get(0);
    let max_copied: i64 = lite_rows(&pool, "SELECT CAST(MAX(id) AS TEXT) FROM entries").await[0].parse().unwrap();
    assert!(new_id > max_copied, "a new entry's id {new_id} follows the copied ones ({max_copied})");
    let (live2,): (i64,) =
        sqlx::query_as("SELECT live FROM fact_live WHERE fact_id = $1").bind(fact).fetch_one(&pg).await.unwrap();
    let machine_live2: i64 = sqlx::query_scalar("SELECT live FROM machine_counts WHERE machine_id = $1")
        .bind(mid)
        .fetch_one(&pg)
        .await
        .unwrap();
    assert_eq!((live2, machine_live2), (live + 1, machine_live + 1));
    // a second copy into a database in use is refused and leaves it as it is
    let entries = pg_count(&pg, "entries").await;
    let out = copy_cmd(&path, &url).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already holds rows"), "{err}");
    assert_eq!(pg_count(&pg, "entries").await, entries);
}

/// A copy that cannot finish leaves no row behind: killed just before its commit (every table
/// sent and compared), or stopped by a value PostgreSQL cannot hold (a NUL byte in a text),
/// which it names. The source is never changed, and a copy run again afterwards succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_that_fails_leaves_the_target_without_a_row() {
    let Some((url, pg)) = pg_database().await else { return };
    let (_keep, pool, path) = team_db().await;
    let before = lite_counts(&pool).await;
    let killed = copy_cmd(&path, &url).env("CACHELENS_FAILPOINT", "db_copy_before_commit").output().unwrap();
    assert!(!killed.status.success());
    assert!(String::from_utf8_lossy(&killed.stderr).contains("failpoint db_copy_before_commit"));
    // (the schema's one-row tables hold their seed row from the start)
    for (table, _) in before.iter().filter(|t| !SEEDED.contains(&t.0.as_str())) {
        assert_eq!(pg_count(&pg, table).await, 0, "{table} after a killed copy");
    }
    // a machine name with a NUL byte (SQLite holds it; PostgreSQL text cannot)
    sqlx::query("INSERT INTO machines(name, created_at) VALUES (CAST(X'610062' AS TEXT), 0)")
        .execute(&pool)
        .await
        .unwrap();
    let refused = copy_cmd(&path, &url).output().unwrap();
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("table machines") && err.contains("column name") && err.contains("NUL"), "{err}");
    for (table, _) in before.iter().filter(|t| !SEEDED.contains(&t.0.as_str())) {
        assert_eq!(pg_count(&pg, table).await, 0, "{table} after a refused copy");
    }
    sqlx::query("DELETE FROM machines WHERE name = CAST(X'610062' AS TEXT)").execute(&pool).await.unwrap();
    assert_eq!(lite_counts(&pool).await, before, "the source is unchanged");
    let ok = copy_cmd(&path, &url).output().unwrap();
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert_eq!(pg_count(&pg, "entries").await, before.iter().find(|t| t.0 == "entries").unwrap().1);
}

/// Arguments that name no database are refused before anything is made: a --from that does not
/// exist (no file is created), a --to that is not a PostgreSQL URL.
#[test]
fn a_copy_needs_an_existing_file_and_a_postgresql_url() {
    let dir = tempfile::TempDir::new().unwrap();
    let missing = dir.path().join("team.db");
    let out = copy_cmd(&missing, "postgres://u@127.0.0.1:1/db").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no SQLite database at"));
    assert!(!missing.exists(), "a copy created its source");
    let db = dir.path().join("real.db");
    std::fs::write(&db, b"").unwrap();
    let out = copy_cmd(&db, "mysql://u@h/db").output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a PostgreSQL URL"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
