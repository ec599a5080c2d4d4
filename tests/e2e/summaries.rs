//! Summary figures that a hostile or broken client cannot break: sizes are summed without
//! integer overflow (SQLite's SUM() fails on it, and every page that showed a sum answered 500).

use crate::common::{get, get_json, unpacked};
use cachelens::web::{AppState, Config};

/// Two entries (and two files) of one machine claiming `i64::MAX` bytes each, ingested the way
/// an upload is (the server's bounds on uploaded numbers are checked elsewhere).
#[tokio::test]
async fn sizes_summing_past_i64_keep_every_page_answering() {
    let (_cache, root) = unpacked("h100-jit-3.6.0");
    let mut r = cachelens::collect::scan_report(&root.join("triton-cache"), "huge").unwrap();
    let mut kernels = r.entries.iter_mut().filter(|e| e.kernel.is_some() && !e.artifacts.is_empty());
    let (e1, e2) = (kernels.next().unwrap(), kernels.next().unwrap());
    for e in [e1, e2] {
        e.bytes = i64::MAX;
        e.artifacts[0].bytes = i64::MAX;
    }
    let kernel = r.entries.iter().find(|e| e.bytes == i64::MAX).unwrap().kernel.clone().unwrap();
    let (_db, pool) = crate::common::fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    cachelens::collect::ingest_report(&store, &r, "upload").await.unwrap();
    let state = AppState::new(pool, Config::default());

    for uri in ["/", "/kernels", "/kernels?machine=huge", "/machines/huge", &format!("/kernels/{kernel}")] {
        let (status, body) = get(&state, uri).await;
        assert_eq!(status, 200, "GET {uri}: {body}");
    }
    // The sums saturate at i64::MAX instead of failing.
    let machines = get_json(&state, "/api/v1/machines").await;
    assert_eq!(machines[0]["name"], "huge");
    assert_eq!(machines[0]["bytes"], i64::MAX);
    for uri in ["/api/v1/kernels?sort=size", "/api/v1/kernels?machine=huge&sort=size"] {
        let kernels = get_json(&state, uri).await;
        assert_eq!(kernels[0]["name"], kernel.as_str(), "{uri}");
        assert_eq!(kernels[0]["bytes"], i64::MAX, "{uri}");
    }
    let scans = get_json(&state, "/api/v1/scans").await;
    assert_eq!(scans[0]["bytes"], i64::MAX);
}

/// The kernel page names its sample entries from the cell (`sample_min_ref`, `sample_max_ref`,
/// migration 0024) instead of reading the entries by id: after a rebuild, and after the
/// migration's backfill of tables built before it, each names exactly the entry of its id.
#[tokio::test]
async fn variant_cells_name_their_samples() {
    let (keep, pool) = crate::common::fleet_db().await;
    let db = cachelens::db::Db::new(pool.clone());
    db.fresh_summaries().await.unwrap();
    let check = |pool: sqlx::SqlitePool| async move {
        let rows: Vec<(i64, Option<String>, i64, Option<String>)> =
            sqlx::query_as("SELECT sample_min, sample_min_ref, sample_max, sample_max_ref FROM page_variant_cells")
                .fetch_all(&pool)
                .await
                .unwrap();
        assert!(rows.len() > 50, "{}", rows.len());
        for (a, ra, b, rb) in rows {
            for (id, r) in [(a, ra), (b, rb)] {
                let want: String = sqlx::query_scalar(
                    "SELECT m.name || char(9) || e.key FROM entries e JOIN machines m ON m.id = e.machine_id WHERE e.id = ?",
                )
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap();
                assert_eq!(r.as_deref(), Some(want.as_str()), "entry {id}");
            }
        }
    };
    check(pool.clone()).await;
    // a database whose summary tables were built before 0024: the migration fills them
    for sql in [
        "DROP TABLE history_fleet_hours",
        "DROP TABLE history_machines",
        "DROP TABLE history_machine_kernels",
        "ALTER TABLE page_variant_cells DROP COLUMN sample_min_ref",
        "ALTER TABLE page_variant_cells DROP COLUMN sample_max_ref",
        "DELETE FROM _sqlx_migrations WHERE version = 24",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    pool.close().await;
    let pool = cachelens::db::open(&keep[0].path().join("test.db")).await.unwrap();
    check(pool).await;
}
