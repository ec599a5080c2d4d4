//! The rebuild's statements and its per-database state, on real temp-file databases.

use super::*;
use crate::model::{REPORT_FORMAT, ScanReport};

#[test]
fn rebuild_statements_write_staging_tables_only() {
    for sql in REBUILD {
        assert!(!sql.contains("page_"), "a rebuild statement touches a live summary table: {sql}");
    }
    for (_, staged) in TABLES {
        let insert = format!("INSERT INTO temp.{staged}(");
        assert!(REBUILD.iter().any(|s| s.contains(&insert)), "nothing fills {staged}");
    }
}

/// A report of `keys` entries of one kernel (`bytes` each) on `machine`.
fn report(machine: &str, client_id: &str, keys: &[&str], bytes: i64) -> ScanReport {
    let entries = keys
        .iter()
        .map(|k| {
            let e = serde_json::json!({"key": k, "dir": k, "kind": "kernel", "kernel": "add_kernel",
                                       "triton_version": "3.6.0", "bytes": bytes, "artifacts": [], "sig": k});
            serde_json::from_value(e).unwrap()
        })
        .collect();
    ScanReport {
        format: REPORT_FORMAT,
        client_id: client_id.into(),
        machine: machine.into(),
        root: "/cache".into(),
        scanned_at: 1_763_000_000_000,
        entries,
        ..Default::default()
    }
}

async fn ingest(db: &Db, r: &ScanReport) {
    crate::collect::ingest_report(db.pool(), r, "upload").await.unwrap();
}

async fn live_entries(db: &Db) -> i64 {
    sqlx::query_scalar("SELECT COALESCE(SUM(entries), 0) FROM page_machine_stats").fetch_one(db.pool()).await.unwrap()
}

/// A rebuild under way in one database, or a slow last rebuild there, must not keep another
/// database's pages from waiting for their own rebuild (the state was process-wide once).
#[tokio::test]
async fn two_databases_do_not_share_rebuild_state() {
    let dir = tempfile::TempDir::new().unwrap();
    let a = Db::open(&dir.path().join("a.db")).await.unwrap();
    let b = Db::open(&dir.path().join("b.db")).await.unwrap();
    ingest(&a, &report("node-a", "a1", &["aa01", "aa02"], 100)).await;
    ingest(&b, &report("node-b", "b1", &["bb01"], 100)).await;
    a.fresh_summaries().await.unwrap();
    b.fresh_summaries().await.unwrap();
    assert_eq!((live_entries(&a).await, live_entries(&b).await), (2, 1));

    // A is rebuilding (its lock is held) and its last rebuild was slow; B gets new entries.
    let _a_rebuilding = a.summaries.running.lock().await;
    a.summaries.last_ms.store(60_000, Ordering::Relaxed);
    ingest(&b, &report("node-b", "b2", &["bb01", "bb02", "bb03"], 100)).await;
    b.fresh_summaries().await.unwrap();
    assert_eq!(live_entries(&b).await, 3, "B's page waited for B's own rebuild");
    let mut conn = b.pool().acquire().await.unwrap();
    assert_eq!(built_version(&mut conn).await.unwrap(), Some(data_version(&mut conn).await.unwrap()));
    assert!(b.summaries.running.try_lock().is_ok(), "B's rebuild is done");
}
