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
    let check = |pool: cachelens::db::Store| async move {
        let rows: Vec<(i64, Option<String>, i64, Option<String>)> =
            sqlx::query_as("SELECT sample_min, sample_min_ref, sample_max, sample_max_ref FROM page_variant_cells")
                .fetch_all(&pool)
                .await
                .unwrap();
        assert!(rows.len() > 50, "{}", rows.len());
        for (a, ra, b, rb) in rows {
            for (id, r) in [(a, ra), (b, rb)] {
                let want: String = sqlx::query_scalar(
                    "SELECT m.name || char(9) || e.key FROM entry_rows e JOIN machines m ON m.id = e.machine_id WHERE e.id = ?",
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
    if crate::common::on_postgres() {
        // PostgreSQL's schema starts past 0024 (migrations-pg): no database of it was built before
        return;
    }
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
    crate::common::stand_in_wide_entries(&pool).await;
    pool.close().await;
    let pool = cachelens::db::open(&keep[0].path().join("test.db")).await.unwrap();
    crate::common::restore_presence(&pool).await;
    check(pool).await;
}

/// Every summary table as sorted rows of quoted values (a comma-separated `machines` sorted:
/// its order is the query plan's, and the pages sort it).
pub(crate) async fn summary_rows(pool: &cachelens::db::Store) -> std::collections::BTreeMap<String, Vec<String>> {
    let tables: Vec<String> = crate::common::tables(pool)
        .await
        .into_iter()
        .filter(|t| t.starts_with("page_"))
        .filter(|t| {
            !["page_stats_version", "page_gen", "page_dirty_machines", "page_dirty_kernels"].contains(&t.as_str())
        })
        .collect();
    let mut out = std::collections::BTreeMap::new();
    for t in tables {
        let cols: Vec<String> = crate::common::columns(pool, &t)
            .await
            .iter()
            .map(|c| match c.as_str() {
                "machines" => crate::common::quoted(
                    pool,
                    "(SELECT group_concat(value, ',' ORDER BY value) FROM json_each('[\"' || \
                     replace(CAST(machines AS TEXT), ',', '\",\"') || '\"]'))",
                ),
                c => crate::common::quoted(pool, c),
            })
            .collect();
        let sql = format!("SELECT {} FROM {t}", cols.join(" || '|' || "));
        let mut rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).fetch_all(pool).await.unwrap();
        rows.sort();
        out.insert(t, rows);
    }
    out
}

/// (row identity, row) of `table`'s rows of `machine` (see [`crate::common::row_identity`]).
async fn rows_of(pool: &cachelens::db::Store, table: &str, machine: &str) -> Vec<(String, i64, i64)> {
    let (id, order) = crate::common::row_identity(pool);
    let sql = format!(
        "SELECT {id}, entries, bytes FROM {table}
         WHERE machine_id = (SELECT id FROM machines WHERE name = ?) ORDER BY {order}"
    );
    sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(machine).fetch_all(pool).await.unwrap()
}

/// The grid's totals (entries, entries an Inductor best config names, entries sharing a binary,
/// entries sharing machine code with another key of their kernel) as its cells sum them, and as
/// the live entries give them counted one by one.
async fn cell_totals(pool: &cachelens::db::Store) -> ([i64; 4], [i64; 4]) {
    let cells: (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT SUM(entries), SUM(best_config), SUM(shared_binary), SUM(shared_code) FROM page_variant_cells",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    let code = "json_extract(COALESCE(e.resources_json, (SELECT t.resources_json FROM fact_texts t
                                                         WHERE t.fact = e.fact AND t.relocated = e.relocated)),
                             '$.code_sha256')";
    let direct: (i64, i64, i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "WITH live AS (SELECT e.*, {code} AS code FROM entry_rows e WHERE e.removed_at IS NULL AND e.kernel IS NOT NULL)
         SELECT COUNT(*),
                SUM(CASE WHEN EXISTS (SELECT 1 FROM best_configs b
                                      WHERE b.triton_cache_hash = l.key AND b.machine_id = l.machine_id)
                         THEN 1 ELSE 0 END),
                SUM(CASE WHEN l.binary_sha256 IN (SELECT binary_sha256 FROM live o WHERE o.kernel = l.kernel
                                                  GROUP BY binary_sha256 HAVING COUNT(DISTINCT key) > 1)
                         THEN 1 ELSE 0 END),
                SUM(CASE WHEN l.code IN (SELECT code FROM live o WHERE o.kernel = l.kernel
                                         GROUP BY code HAVING COUNT(DISTINCT key) > 1)
                         THEN 1 ELSE 0 END)
         FROM live l"
    )))
    .fetch_one(pool)
    .await
    .unwrap();
    ([cells.0, cells.1, cells.2, cells.3], [direct.0, direct.1, direct.2, direct.3])
}

/// Every kernel's cells on each machine (`kernel_cells_on`, read per request with the shared
/// binaries and code the update keeps per kernel) sum over the machines to its fleet cells.
async fn assert_machine_cells_sum_to_the_fleet(pool: &cachelens::db::Store) {
    let kernels: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT kernel FROM page_variant_cells ORDER BY 1").fetch_all(pool).await.unwrap();
    let machines: Vec<String> = sqlx::query_scalar("SELECT name FROM machines").fetch_all(pool).await.unwrap();
    let sums = |cells: &[cachelens::db::summaries::VariantCell]| {
        cells.iter().fold([0i64; 4], |a, c| {
            [a[0] + c.entries, a[1] + c.best_config, a[2] + c.shared_binary, a[3] + c.shared_code]
        })
    };
    let mut shared = [0i64; 2];
    for k in &kernels {
        let fleet = sums(&cachelens::db::summaries::kernel_cells(pool, k).await.unwrap());
        let mut on = [0i64; 4];
        for m in &machines {
            let s = sums(&cachelens::db::summaries::kernel_cells_on(pool, k, m).await.unwrap());
            on = [on[0] + s[0], on[1] + s[1], on[2] + s[2], on[3] + s[3]];
        }
        assert_eq!(on, fleet, "{k}: its cells on each machine vs the fleet's");
        shared = [shared[0] + fleet[2], shared[1] + fleet[3]];
    }
    assert!(shared[0] > 0 && shared[1] > 0, "shared binaries and code are exercised: {shared:?}");
}

/// Summaries kept as data arrives (0045): after a new machine's upload only its rows and its
/// kernels' fleet rows are written (the other machines' rows keep their rowids), and after that
/// upload, a re-scan that lost entries and a machine retired, every summary table holds exactly
/// what the whole build from the data makes. (Each update waited for to its end: a page waits
/// for one at most 2 s, and not at all once an update took over 300 ms, as on a loaded machine.)
#[tokio::test]
async fn summaries_follow_landings_by_machine_and_equal_the_whole_build() {
    let (keep, pool) = crate::common::fleet_db().await;
    let db = cachelens::db::Db::new(pool.clone());
    db.fresh_summaries().await.unwrap();
    let state = AppState::new(pool.clone(), Config::default());
    let tables = ["page_kernel_stats", "page_machine_kernels", "page_machine_versions"];
    let mut before = vec![];
    for t in tables {
        before.push(rows_of(&pool, t, "a100-1").await);
    }
    assert!(before.iter().all(|r| !r.is_empty()));
    let (id, order) = crate::common::row_identity(&pool);
    let cells = format!("SELECT {id}, kernel, entries FROM page_variant_cells ORDER BY {order}");
    let cells_before: Vec<(String, String, i64)> =
        sqlx::query_as(sqlx::AssertSqlSafe(cells.clone())).fetch_all(&pool).await.unwrap();

    // a new machine uploads the same cache as h100-a (the same keys), and an autotuned one
    let (_c1, jit) = crate::common::unpacked("h100-jit-3.6.0");
    let r = cachelens::collect::scan_report(&jit.join("triton-cache"), "h100-d").unwrap();
    cachelens::collect::ingest_report(&db, &r, "upload").await.unwrap();
    // keys the fleet holds: its kernels' live facts stay the same, so only their counts are marked
    let marks: (i64, i64) = sqlx::query_as("SELECT COUNT(*), COALESCE(SUM(whole), 0) FROM page_dirty_kernels")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(marks.0 > 0 && marks.1 == 0, "kernels marked (all, whole): {marks:?}");
    let (_c2, tuned) = crate::common::unpacked("h100-inductor-autotune-triton-3.6.0");
    let r = cachelens::collect::scan_report(&tuned, "h100-e").unwrap();
    cachelens::collect::ingest_report(&db, &r, "upload").await.unwrap();
    let marked: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM page_dirty_machines").fetch_one(&pool).await.unwrap();
    assert_eq!(marked, 2, "the landings marked their two machines");
    db.update_summaries().await.unwrap();
    let (summed, direct) = cell_totals(&pool).await;
    assert_eq!(summed, direct, "grid cells (from counters) vs the live entries counted one by one");
    assert!(direct.iter().all(|n| *n > 0), "every figure is exercised: {direct:?}");
    assert_machine_cells_sum_to_the_fleet(&pool).await;
    for (t, rows) in tables.iter().zip(&before) {
        assert_eq!(&rows_of(&pool, t, "a100-1").await, rows, "{t}: a100-1's rows were not written again");
        assert!(!rows_of(&pool, t, "h100-d").await.is_empty(), "{t}: h100-d's rows are in");
    }
    // grid cells of the kernels the new machines do not have
    let theirs: std::collections::HashSet<String> = sqlx::query_scalar(
        "SELECT DISTINCT e.kernel FROM entry_rows e JOIN machines m ON m.id = e.machine_id
         WHERE m.name IN ('h100-d', 'h100-e') AND e.kernel IS NOT NULL",
    )
    .fetch_all(&pool)
    .await
    .unwrap()
    .into_iter()
    .collect();
    let untouched = |cells: Vec<(String, String, i64)>| -> Vec<_> {
        cells.into_iter().filter(|c| !theirs.contains(&c.1)).collect()
    };
    let cells_before = untouched(cells_before);
    assert!(!cells_before.is_empty());
    let cells_after = untouched(sqlx::query_as(sqlx::AssertSqlSafe(cells)).fetch_all(&pool).await.unwrap());
    assert_eq!(cells_after, cells_before, "grid cells of kernels the landing did not touch were not written");
    let machines: Vec<(String, i64)> = sqlx::query_as(
        "SELECT m.name, s.entries FROM page_machine_stats s JOIN machines m ON m.id = s.machine_id
         WHERE m.name IN ('h100-a', 'h100-d') ORDER BY m.name",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(machines[0].1, machines[1].1, "the same cache counts the same: {machines:?}");

    // the Inductor cache again on another machine (its best configs naming its entries): its
    // kernels' counts only, best configs too (as on h100-b)
    let (_c3, inductor) = crate::common::unpacked("h100-inductor-3.6.0");
    let r = cachelens::collect::scan_report(&inductor.join("inductor"), "h100-f").unwrap();
    cachelens::collect::ingest_report(&db, &r, "upload").await.unwrap();
    let marks: (i64, i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), COALESCE(SUM(whole), 0),
                COUNT(*) FILTER (WHERE kernel IN (SELECT kernel FROM entry_rows e JOIN best_configs b
                                                  ON b.machine_id = e.machine_id AND b.triton_cache_hash = e.key))
         FROM page_dirty_kernels",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(marks.0 > 0 && marks.1 == 0 && marks.2 > 0, "kernels marked (all, whole, with best configs): {marks:?}");
    db.update_summaries().await.unwrap();
    let (summed_f, direct_f) = cell_totals(&pool).await;
    assert_eq!(summed_f, direct_f, "grid cells summed by their counters vs the live entries counted one by one");
    assert!(direct_f[1] > direct[1], "h100-f's best configs are counted: {direct_f:?} after {direct:?}");
    // h100-c loses entries (a re-scan after a prune), h100-b is retired
    let cache = keep[3].path().join("cache/triton-cache");
    let mut dirs: Vec<_> = std::fs::read_dir(&cache).unwrap().map(|d| d.unwrap().path()).collect();
    dirs.sort();
    for d in dirs.iter().filter(|d| d.is_dir()).take(3) {
        std::fs::remove_dir_all(d).unwrap();
    }
    let s = cachelens::collect::scan_local(&db, &cache, "h100-c").await.unwrap();
    assert!(s.removed_entries >= 3, "{s:?}");
    cachelens::db::retention::retire(&db, "h100-b").await.unwrap();
    assert_eq!(crate::common::live_counter_faults(&pool).await, [0; 4], "live counters after removals and a retire");
    db.update_summaries().await.unwrap();
    let kept = summary_rows(&pool).await;
    let api = |state: AppState| async move {
        let mut out = vec![];
        for uri in ["/api/v1/machines", "/api/v1/kernels?sort=size", "/api/v1/kernels?machine=h100-c"] {
            out.push(crate::common::get_json(&state, uri).await);
        }
        out
    };
    let api_kept = api(state.clone()).await;

    // the whole build from the data (the first build and the repair path)
    sqlx::query("DELETE FROM page_stats_version").execute(&pool).await.unwrap();
    db.fresh_summaries().await.unwrap();
    let whole = summary_rows(&pool).await;
    assert_eq!(kept.keys().collect::<Vec<_>>(), whole.keys().collect::<Vec<_>>());
    for (t, rows) in &whole {
        assert!(!rows.is_empty() || t == "page_kernel_identical", "{t} is empty");
        assert_eq!(&kept[t], rows, "{t}: kept as data arrived vs the whole build");
    }
    assert_eq!(api(state).await, api_kept);
    let left: i64 = sqlx::query_scalar(
        "SELECT (SELECT COUNT(*) FROM page_dirty_machines) + (SELECT COUNT(*) FROM page_dirty_kernels)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(left, 0, "no change is left marked");
}
