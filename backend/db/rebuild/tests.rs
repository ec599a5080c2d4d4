//! The rebuild's statements and its per-database state, on real temp-file databases.

use super::*;
use crate::model::{REPORT_FORMAT, ScanReport};

#[test]
fn rebuild_statements_write_staging_tables_only() {
    for sql in REBUILD {
        // (the cells of kernels summed by their counters start from their kept cells)
        let reads = sql.replace("CROSS JOIN page_variant_cells c INDEXED BY page_variant_cells_kernel", "");
        assert!(!reads.contains("page_"), "a rebuild statement touches a live summary table: {sql}");
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
    crate::collect::ingest_report(db, r, "upload").await.unwrap();
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
    assert!(current(&b).await);
    assert!(b.summaries.running.try_lock().is_ok(), "B's rebuild is done");
}

async fn current(db: &Db) -> bool {
    let mut conn = db.pool().acquire().await.unwrap();
    standing(&mut conn).await.unwrap() == (true, false)
}

/// A landing starts the rebuild itself: the tables become current with no page asking, and
/// landings while one is queued add no second one.
#[tokio::test]
async fn rebuild_soon_makes_the_tables_current_without_a_page() {
    let dir = tempfile::TempDir::new().unwrap();
    let db = Db::open(&dir.path().join("a.db")).await.unwrap();
    ingest(&db, &report("node-a", "a1", &["aa01", "aa02"], 100)).await;
    assert!(!current(&db).await);
    let held = db.summaries.running.lock().await; // a rebuild under way: the next one queues
    db.rebuild_soon();
    db.rebuild_soon();
    assert!(db.summaries.queued.load(Ordering::Acquire));
    drop(held);
    for _ in 0..200 {
        if current(&db).await {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(current(&db).await, "the background rebuild made the tables current");
    assert_eq!(live_entries(&db).await, 2);
    assert!(!db.summaries.queued.load(Ordering::Acquire));
}

/// The first build of a large database does not hold a page: after the wait the page gets
/// `Building` (a 503 naming the entries), and once the build is done pages read the figures.
#[tokio::test]
async fn first_build_of_a_large_database_answers_building_instead_of_hanging() {
    let dir = tempfile::TempDir::new().unwrap();
    let db = Db::open(&dir.path().join("a.db")).await.unwrap();
    ingest(&db, &report("node-a", "a1", &["aa01", "aa02"], 100)).await;
    // The size of a first build is the highest entry id: make it one of a large database.
    sqlx::query("UPDATE entries SET id = id + ?").bind(SMALL_DATA).execute(db.pool()).await.unwrap();
    let held = db.summaries.running.lock().await; // the first build under way
    let t = std::time::Instant::now();
    let e = db.fresh_summaries().await.unwrap_err();
    assert!(t.elapsed() >= WAIT_FOR_REBUILD && t.elapsed() < WAIT_FOR_REBUILD * 3, "{:?}", t.elapsed());
    match &e {
        SummaryError::Building { entries, .. } => assert_eq!(*entries, SMALL_DATA + 2),
        other => panic!("{other:?}"),
    }
    let web: crate::web::error::AppError = e.into();
    assert_eq!(web.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
    assert!(web.to_string().contains("being built"), "{web}");
    drop(held);
    db.fresh_summaries().await.unwrap();
    assert!(current(&db).await);
    assert_eq!(live_entries(&db).await, 2);
}
