//! History aggregates (migration 0015, `db/history_agg.rs`) against the reference computation
//! from the raw events and compile times (`db::history::fresh`), after every kind of change: a
//! scan of the real h100-hook corpus (real hook events), a re-scan with new events (another
//! run's lines appended), a re-scan with nothing new, a removed entry, an upload, a re-upload of
//! the very same report, and the migration's backfill of a database written before 0015.

use crate::common::*;
use crate::upload::server;
use cachelens::db::Store;
use cachelens::db::history::{Bucket, Counts, GroupBy, HistoryFilter, fresh};
use cachelens::db::history_agg::{Source, grouped};
use cachelens::upload::{Retry, scan_and_upload, upload_report};
use cachelens::web::Config;
use std::collections::BTreeMap;
use std::path::Path;

fn same(a: &Counts, b: &Counts) -> bool {
    let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => (x - y).abs() <= 1e-6 * x.abs().max(1.0),
        _ => false,
    };
    close(a.compile_ms, b.compile_ms)
        && close(a.saved_ms, b.saved_ms)
        && Counts { compile_ms: None, saved_ms: None, ..*a } == Counts { compile_ms: None, saved_ms: None, ..*b }
}

fn compare<K: Ord + std::fmt::Debug>(what: &str, agg: BTreeMap<K, Counts>, reference: BTreeMap<K, Counts>) {
    assert_eq!(agg.keys().collect::<Vec<_>>(), reference.keys().collect::<Vec<_>>(), "{what}: groups");
    for (k, c) in &reference {
        assert!(same(&agg[k], c), "{what} {k:?}: aggregates {:?} != fresh {c:?}", agg[k]);
    }
}

/// Every filter (none, each machine, each kernel, each machine and kernel) grouped every way,
/// from the hour tables and from the counted rows, equals the reference. Returns the total.
pub async fn assert_history_fresh(pool: &Store) -> Counts {
    let machines: Vec<String> = sqlx::query_scalar("SELECT name FROM machines").fetch_all(pool).await.unwrap();
    let kernels: Vec<String> = sqlx::query_scalar(
        "SELECT kernel FROM events WHERE kernel IS NOT NULL UNION SELECT kernel FROM entry_rows WHERE kernel IS NOT NULL",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(!kernels.is_empty());
    let mut filters = vec![HistoryFilter::default()];
    for m in &machines {
        filters.push(HistoryFilter { machine: Some(m.clone()), ..Default::default() });
        for k in kernels.iter().take(4) {
            filters.push(HistoryFilter { machine: Some(m.clone()), kernel: Some(k.clone()), ..Default::default() });
        }
    }
    for k in &kernels {
        filters.push(HistoryFilter { kernel: Some(k.clone()), ..Default::default() });
    }
    for f in filters {
        for bucket in [Bucket::Hour, Bucket::Day, Bucket::Minute, Bucket::Second] {
            let by = GroupBy::Bucket(bucket);
            let what = format!("{f:?} per {}", bucket.as_str());
            compare(&what, grouped::<i64>(pool, &f, by).await.unwrap(), fresh::<i64>(pool, &f, by).await.unwrap());
        }
        for by in [GroupBy::Machine, GroupBy::Kernel] {
            compare(
                &format!("{f:?} {by:?}"),
                grouped::<String>(pool, &f, by).await.unwrap(),
                fresh(pool, &f, by).await.unwrap(),
            );
            // a range that cuts hours: the counted rows
            let cut = HistoryFilter { from: Some(1_000), to: Some(4_000_000_000_000), ..f.clone() };
            assert_eq!(Source::of(&cut, None), Source::Rows);
            compare(
                &format!("{cut:?} {by:?}"),
                grouped::<String>(pool, &cut, by).await.unwrap(),
                fresh(pool, &cut, by).await.unwrap(),
            );
        }
        for g in [f.clone(), HistoryFilter { from: Some(1_000), to: Some(4_000_000_000_000), ..f.clone() }] {
            assert_kernel_pages(pool, &g).await;
        }
    }
    assert_rollups_sum_hours(pool).await;
    let all = grouped::<String>(pool, &HistoryFilter::default(), GroupBy::Machine).await.unwrap();
    cachelens::db::history::total(all.values())
}

/// Each roll-up of migration 0024 (the fleet per hour, each machine, each machine and kernel)
/// holds exactly the sums of its `history_hours` rows, no group more or less: what the readers
/// that skip the hours rely on.
async fn assert_rollups_sum_hours(pool: &Store) {
    const SUMS: &str = "SUM(hits), SUM(misses), SUM(compiles), SUM(inferred), SUM(timed), SUM(hook_events), \
                        SUM(saved), TOTAL(compile_ms), TOTAL(saved_ms)";
    const COLS: &str = "hits, misses, compiles, inferred, timed, hook_events, saved, compile_ms, saved_ms";
    for (table, keys) in [
        ("history_fleet_hours", "hour"),
        ("history_machines", "machine_id"),
        ("history_machine_kernels", "machine_id, kernel"),
    ] {
        let rows = |sql: String| async move {
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(pool).await.unwrap();
            rows.iter()
                .map(|r| {
                    use sqlx::Row;
                    let n = r.len();
                    let key: Vec<String> = (0..n - 9)
                        .map(|i| r.try_get::<i64, _>(i).map(|v| v.to_string()).unwrap_or_else(|_| r.get(i)))
                        .collect();
                    let ints: Vec<i64> = (n - 9..n - 2).map(|i| r.get(i)).collect();
                    (key, (ints, [r.get::<f64, _>(n - 2), r.get::<f64, _>(n - 1)]))
                })
                .collect::<BTreeMap<_, _>>()
        };
        let kept = rows(format!("SELECT {keys}, {COLS} FROM {table}")).await;
        let want = rows(format!("SELECT {keys}, {SUMS} FROM history_hours GROUP BY {keys}")).await;
        assert_eq!(kept.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{table}: groups");
        for (k, (ints, sums)) in &want {
            let (got_ints, got_sums) = &kept[k];
            assert_eq!(got_ints, ints, "{table} {k:?}");
            for (got_ms, ms) in got_sums.iter().zip(sums) {
                assert!((got_ms - ms).abs() <= 1e-6 * ms.abs().max(1.0), "{table} {k:?}: {got_ms} != {ms}");
            }
        }
    }
}

/// The kernel table paged in SQL (`by_kernel_page`) is `by_kernel`'s order, page by page, with
/// its count (all kernels, or those with a miss).
async fn assert_kernel_pages(pool: &Store, f: &HistoryFilter) {
    let all = cachelens::db::history::by_kernel(pool, f).await.unwrap();
    for missing in [false, true] {
        let want: Vec<_> = all.iter().filter(|n| !missing || n.counts.misses > 0).collect();
        for offset in (0..=want.len() as i64).step_by(2) {
            let page = cachelens::db::Page { limit: 2, offset };
            let (got, n) = cachelens::db::history::by_kernel_page(pool, f, missing, page).await.unwrap();
            assert_eq!(n as usize, want.len(), "{f:?} missing={missing}: count");
            let expected = &want[(offset as usize).min(want.len())..(offset as usize + 2).min(want.len())];
            let names = |v: &mut dyn Iterator<Item = &String>| v.cloned().collect::<Vec<_>>();
            assert_eq!(
                names(&mut got.iter().map(|n| &n.name)),
                names(&mut expected.iter().map(|n| &n.name)),
                "{f:?} missing={missing} offset {offset}"
            );
            for (a, b) in got.iter().zip(expected) {
                assert!(same(&a.counts, &b.counts), "{f:?} {}: {:?} != {:?}", a.name, a.counts, b.counts);
            }
        }
    }
}

fn shifted_run(events: &Path, hours: i64, pid_offset: i64) -> String {
    // another run of the same jobs: the real lines, later, in other processes
    let mut out = String::new();
    for l in std::fs::read_to_string(events).unwrap().lines() {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        v["ts"] = (v["ts"].as_f64().unwrap() + (hours * 3600) as f64).into();
        v["pid"] = (v["pid"].as_i64().unwrap() + pid_offset).into();
        out += &format!("{v}\n");
    }
    out
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    std::fs::OpenOptions::new().append(true).open(path).unwrap().write_all(text.as_bytes()).unwrap();
}

/// The hook's events file of a cache (`.cachelens/*.jsonl`).
fn hook_events_file(root: &Path) -> std::path::PathBuf {
    std::fs::read_dir(root.join(".cachelens"))
        .unwrap()
        .map(|d| d.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap()
}

/// The real h100-hook corpus (16 misses with compile times, then 16 hits), scanned, grown,
/// uploaded, re-uploaded and migrated: the aggregates equal the reference after every step.
#[tokio::test]
async fn aggregates_equal_fresh_after_every_change() {
    let (_t, dir) = unpacked("h100-hook-3.6.0");
    let root = dir.join("triton-cache");
    let events = hook_events_file(&root);
    let original = std::fs::read_to_string(&events).unwrap();
    let (db_dir, mut pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let scan = || cachelens::collect::scan_local(&store, &root, "hook");

    let s1 = scan().await.unwrap();
    assert_eq!(s1.events, 48);
    let t1 = assert_history_fresh(&pool).await;
    assert_eq!((t1.hits, t1.hook_events), (16, 48), "{t1:?}");
    assert!(t1.compile_ms.is_some());

    // Another run an hour later (its lines appended) and one that crosses a day.
    append(&events, &shifted_run(&events, 1, 100_000));
    assert_eq!(scan().await.unwrap().events, 48);
    let t2 = assert_history_fresh(&pool).await;
    assert_eq!(t2.hook_events, 96);
    assert_eq!(scan().await.unwrap().events, 0, "nothing new");
    assert_eq!(assert_history_fresh(&pool).await, t2);

    // An entry recompiled in place (its metadata mtime moves: a compile the hook did not see),
    // then one removed: history keeps every compile.
    let metadata = |dir: &Path| {
        std::fs::read_dir(dir).ok()?.map(|d| d.unwrap().path()).find(|p| {
            p.extension().is_some_and(|e| e == "json") && !p.file_name().unwrap().to_string_lossy().starts_with("__grp")
        })
    };
    let (key, meta) = std::fs::read_dir(&root)
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .find_map(|p| Some((p.clone(), metadata(&p)?)))
        .unwrap();
    let later = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options().write(true).open(&meta).unwrap().set_modified(later).unwrap();
    let s = cachelens::collect::scan_local_with(&store, &root, "hook", true).await.unwrap();
    assert_eq!(s.changed_entries, 1);
    let t3 = assert_history_fresh(&pool).await;
    assert_eq!((t3.compiles, t3.inferred_compiles), (t2.compiles + 1, t2.inferred_compiles + 1));
    std::fs::remove_dir_all(&key).unwrap();
    assert_eq!(scan().await.unwrap().removed_entries, 1);
    assert_eq!(assert_history_fresh(&pool).await, t3);

    // Uploads: the same cache into a server, then the very same report again.
    let srv = server(Config::default()).await;
    let token = cachelens::db::tokens::create(&srv.db, "hook").await.unwrap();
    std::fs::write(&events, &original).unwrap();
    let up = scan_and_upload(&srv.url, &token, &root, "hook", Retry::new(2)).await.unwrap();
    assert_eq!(up.response.summary.events, 48);
    let u1 = assert_history_fresh(&srv.pool).await;
    let report = cachelens::collect::scan_report(&root, "hook").unwrap();
    let again = upload_report(&srv.url, &token, report.clone(), Retry::new(2)).await.unwrap();
    assert_eq!(again.response.summary.events, 0);
    assert_eq!(assert_history_fresh(&srv.pool).await, u1, "a re-upload counts nothing twice");
    append(&events, &shifted_run(&events, 30, 200_000));
    let more = scan_and_upload(&srv.url, &token, &root, "hook", Retry::new(2)).await.unwrap();
    assert_eq!(more.response.summary.events, 48);
    let u2 = assert_history_fresh(&srv.pool).await;
    assert_eq!(u2.hook_events, 96);

    // A database written before migrations 0037 and 0024 (its hour tables kept by the ingest),
    // then one written before 0015: their backfills count the same, hits' saved time included.
    // (SQLite's alone: PostgreSQL's schema starts past them, migrations-pg.)
    drop(srv);
    if crate::common::on_postgres() {
        return;
    }
    for before_0015 in [false, true] {
        downgrade(&pool, before_0015).await;
        pool.close().await;
        pool = cachelens::db::open(&db_dir.path().join("test.db")).await.unwrap();
        crate::common::restore_presence(&pool).await;
        assert!(same(&assert_history_fresh(&pool).await, &t3), "the backfill counts as the ingest did");
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM history_machine_kernels").fetch_one(&pool).await.unwrap();
        assert!(n > 2, "{n}");
    }
}

/// Undo migrations 0037 and 0024, and 0015 too when `before_0015` (what a database written by an
/// earlier release holds).
async fn downgrade(pool: &Store, before_0015: bool) {
    // 0037 first: the hits' saved compile time and its sums
    let mut undo_0037 =
        vec!["DROP INDEX history_machine_hours_recent".to_string(), "ALTER TABLE events DROP COLUMN saved_ms".into()];
    for t in [
        "history_hours",
        "history_machine_hours",
        "history_kernel_hours",
        "history_kernels",
        "history_fleet_hours",
        "history_machines",
        "history_machine_kernels",
    ] {
        undo_0037.push(format!("ALTER TABLE {t} DROP COLUMN saved_ms"));
        undo_0037.push(format!("ALTER TABLE {t} DROP COLUMN saved"));
    }
    undo_0037.push("DELETE FROM _sqlx_migrations WHERE version = 37".into());
    for sql in undo_0037 {
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(pool).await.unwrap();
    }
    for sql in [
        "DROP TABLE history_fleet_hours",
        "DROP TABLE history_machines",
        "DROP TABLE history_machine_kernels",
        "ALTER TABLE page_variant_cells DROP COLUMN sample_min_ref",
        "ALTER TABLE page_variant_cells DROP COLUMN sample_max_ref",
        "DELETE FROM _sqlx_migrations WHERE version = 24",
    ] {
        sqlx::query(sql).execute(pool).await.unwrap();
    }
    if before_0015 {
        undo_0015(pool).await;
    }
    crate::common::stand_in_wide_entries(pool).await;
}

/// Undo migration 0015.
async fn undo_0015(pool: &Store) {
    for sql in [
        "DROP TABLE history_hours",
        "DROP TABLE history_machine_hours",
        "DROP TABLE history_kernel_hours",
        "DROP TABLE history_kernels",
        "DROP INDEX entry_compiles_inferred",
        "ALTER TABLE events DROP COLUMN counted_miss",
        "ALTER TABLE entry_compiles DROP COLUMN inferred_kernel",
        "DELETE FROM _sqlx_migrations WHERE version = 15",
    ] {
        sqlx::query(sql).execute(pool).await.unwrap();
    }
}

/// The history page and API are memoised per database stamp (db/memo.rs): what they answer is
/// always what the aggregates say now. Read twice, then after hook events land on another
/// machine (a local scan, not through this server), then after one more event line on the
/// first machine: each answer equals a fresh read of the aggregates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memoised_history_follows_every_landing() {
    let (_t, dir) = unpacked("h100-hook-3.6.0");
    let root = dir.join("triton-cache");
    let (_t2, dir2) = unpacked("h100-hook-3.6.0");
    let root2 = dir2.join("triton-cache");
    let (_db, pool) = fresh_db().await;
    let state = cachelens::web::AppState::new(pool.clone(), Config::default());
    // a local scan, in another process: its own handle on the database
    let store = cachelens::db::Db::from(pool.clone());
    let want = |pool: Store| async move {
        let f = HistoryFilter::default();
        serde_json::to_value(cachelens::db::history::series(&pool, &f, Bucket::Day).await.unwrap()).unwrap()
    };
    cachelens::collect::scan_local(&store, &root, "hook").await.unwrap();
    let a = get_json(&state, "/api/v1/history?bucket=day").await;
    assert_eq!(a, want(pool.clone()).await);
    assert_eq!(get_json(&state, "/api/v1/history?bucket=day").await, a, "read again");
    let page_a = get(&state, "/history?bucket=day").await.1;
    // Another machine lands: its 16 misses and 16 hits show at once.
    cachelens::collect::scan_local(&store, &root2, "hook-2").await.unwrap();
    let b = get_json(&state, "/api/v1/history?bucket=day").await;
    assert_ne!(b, a);
    assert_eq!(b, want(pool.clone()).await);
    let page_b = get(&state, "/history?bucket=day").await.1;
    assert_ne!(page_b, page_a);
    assert!(page_b.contains("hook-2"), "the new machine is on the page");
    // One more event line on the first machine (a hit, its key already known).
    let events = hook_events_file(&root);
    let text = std::fs::read_to_string(&events).unwrap();
    let last = text.lines().rfind(|l| l.contains("\"hit\"")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(last).unwrap();
    v["ts"] = serde_json::json!(v["ts"].as_f64().unwrap() + 1.0);
    append(&events, &format!("{v}\n"));
    let before = counts_of(&get_json(&state, "/api/v1/history?bucket=day").await);
    cachelens::collect::scan_local(&store, &root, "hook").await.unwrap();
    let c = get_json(&state, "/api/v1/history?bucket=day").await;
    assert_eq!(c, want(pool.clone()).await);
    assert_eq!(counts_of(&c), before + 1, "one more hit");
}

/// Hits over every bucket of an API answer.
fn counts_of(v: &serde_json::Value) -> i64 {
    arr(v).iter().map(|p| p["hits"].as_i64().unwrap_or(0)).sum()
}
