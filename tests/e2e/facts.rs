//! An upload sends what the server lacks: the facts of an entry the server holds from another
//! machine are not sent again (`present` records), and an unchanged node re-reads nothing
//! (`previous`). Real servers on 127.0.0.1, the real `cachelens` binary as the client, real
//! corpus caches; what the server stores is compared row by row with a local scan of the same
//! dirs, which reads every entry whole.

use crate::common::*;
use crate::upload::{cli_upload, server, text};
use cachelens::web::{AppState, Config};
use sqlx::SqlitePool;
use std::path::Path;

/// What a machine's rows say, as one JSON value a key (ids, scan numbers, scan times and dir
/// stamps left out: those differ between any two databases): the entry row with its texts
/// (kept once per fact), its files, its class and its compile times.
async fn rows_of(pool: &SqlitePool, machine: &str) -> Vec<(String, String)> {
    sqlx::query_as(
        "SELECT e.key, json_array(e.root, e.dir, e.kind, e.kernel, e.backend, e.arch, e.warp_size, e.num_warps,
                e.num_stages, e.num_ctas, e.triton_version, e.meta_hash, e.signature, e.shapes, e.created_at,
                e.bytes, e.registers, e.spills, e.shared_bytes, COALESCE(e.resources_json, t.resources_json),
                COALESCE(e.metadata_json, t.metadata_json), COALESCE(e.group_json, t.group_json),
                e.relocated, e.partial, e.binary_sha256, e.sig, e.fact, e.removed_at IS NULL,
                (SELECT json_group_array(json_array(a.name, a.ext, a.bytes, a.sha256))
                   FROM (SELECT * FROM entry_files WHERE entry_id = e.id ORDER BY name) a),
                (SELECT json_array(c.kernel, hex(c.class), c.key, c.kind) FROM entry_classes c WHERE c.entry_id = e.id),
                (SELECT json_group_array(compiled_at)
                   FROM (SELECT compiled_at FROM entry_compiles WHERE entry_id = e.id ORDER BY 1)),
                (SELECT COUNT(*) FROM autotune WHERE entry_id = e.id))
         FROM entries e JOIN machines m ON m.id = e.machine_id
           LEFT JOIN fact_texts t ON t.fact = e.fact AND t.relocated = e.relocated
         WHERE m.name = ? ORDER BY e.key",
    )
    .bind(machine)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// (entries sent whole, entries sent as present, KiB on the wire) from the upload's line.
fn sent(stdout: &str) -> (usize, usize, f64) {
    let line = stdout.lines().find(|l| l.starts_with("uploaded ")).unwrap_or_else(|| panic!("{stdout}"));
    let num = |after: &str| -> f64 {
        let rest = &line[line.find(after).unwrap_or_else(|| panic!("{after:?} in {line}")) + after.len()..];
        rest.split(|c: char| !(c.is_ascii_digit() || c == '.')).next().unwrap().parse().unwrap()
    };
    let whole = line.split("): ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    let present = line.split("whole, ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    (whole, present, num("uploaded "))
}

async fn upload(url: &str, pool: &SqlitePool, machine: &str, dir: &Path) -> String {
    let token = cachelens::db::tokens::create(pool, machine).await.unwrap();
    let out = cli_upload(url, &token, machine, dir, &[]).await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_entries_the_server_holds_sends_only_its_own_part_and_is_stored_exactly() {
    let srv = server(Config::default()).await;
    // Three nodes with the same cache (a fleet running the same jobs), each its own copy.
    let copies: Vec<_> = (0..3).map(|_| unpacked("h100-jit-3.6.0")).collect();
    let dirs: Vec<_> = copies.iter().map(|(_, p)| p.join("triton-cache")).collect();
    let first = upload(&srv.url, &srv.pool, "node-a", &dirs[0]).await;
    let (whole_a, present_a, kib_a) = sent(&first);
    assert_eq!(present_a, 0, "the first node's facts are new to the server: {first}");
    let second = upload(&srv.url, &srv.pool, "node-b", &dirs[1]).await;
    let (whole_b, present_b, kib_b) = sent(&second);
    let report = cachelens::collect::scan_report(&dirs[1], "x").unwrap();
    let content = report.entries.iter().filter(|e| e.facts_are_content()).count();
    assert_eq!(whole_a, report.entries.len());
    assert!(content > 100, "{content}");
    assert_eq!((present_b, whole_b), (content, report.entries.len() - content), "{second}");
    assert!(kib_b * 20.0 < kib_a, "the second node sent {kib_b} KiB, the first {kib_a} KiB");
    println!("first node {kib_a:.1} KiB, second node {kib_b:.1} KiB ({present_b} of {whole_a} entries as present)");

    // The same dirs scanned locally, every entry read whole: the same rows, every column.
    let (_db, local) = fresh_db().await;
    for (m, d) in [("node-a", &dirs[0]), ("node-b", &dirs[1])] {
        scan(&local, d, m).await;
    }
    for m in ["node-a", "node-b"] {
        let (up, loc) = (rows_of(&srv.pool, m).await, rows_of(&local, m).await);
        assert_eq!(up.len(), report.entries.len());
        for (u, l) in up.iter().zip(&loc) {
            assert_eq!(u, l, "{m}: the uploaded row differs from the local scan's");
        }
    }
    // And the API says the same of the node as of the node uploaded whole.
    let api = |url: String| async move { get_json_at_sorted(&url).await };
    let of_b = api(format!("{}/api/v1/entries?machine=node-b&limit=10000", srv.url)).await;
    let of_a = api(format!("{}/api/v1/entries?machine=node-a&limit=10000", srv.url)).await;
    let strip = |v: &serde_json::Value| {
        let mut v = v.clone();
        for e in v.as_array_mut().unwrap() {
            for f in ["machine", "root"] {
                e.as_object_mut().unwrap().remove(f);
            }
        }
        v
    };
    assert_eq!(strip(&of_a), strip(&of_b), "node-b's entries read as node-a's");

    // Unchanged: nothing is read again, a few dozen bytes an entry go out.
    let again = upload(&srv.url, &srv.pool, "node-b", &dirs[1]).await;
    let (whole, present, kib) = sent(&again);
    assert_eq!((whole, present), (0, 0), "{again}");
    assert!(again.contains(&format!("0 new, 0 changed, {} unchanged, 0 removed", report.entries.len())), "{again}");
    let per_entry = kib * 1024.0 / report.entries.len() as f64;
    assert!(per_entry < 100.0, "{per_entry:.0} bytes an unchanged entry: {again}");
    println!("unchanged re-upload: {per_entry:.0} bytes an entry");

    // One entry's files touched (same bytes, new mtime): its facts the server holds go as
    // present; one entry's IR changed: sent whole, and stored as changed.
    let kernels: Vec<&cachelens::model::Entry> =
        report.entries.iter().filter(|e| e.facts_are_content() && e.kernel.is_some()).collect();
    let touched = dirs[2].join(&kernels[0].dir).join(&kernels[0].artifacts[0].name);
    let t = std::fs::metadata(&touched).unwrap().modified().unwrap() + std::time::Duration::from_secs(60);
    std::fs::File::options().write(true).open(&touched).unwrap().set_modified(t).unwrap();
    let ttir = kernels[1].artifacts.iter().find(|a| a.name.ends_with(".ttir")).unwrap();
    let edited = dirs[2].join(&kernels[1].dir).join(&ttir.name);
    let mut ir = std::fs::read_to_string(&edited).unwrap();
    ir.push_str("\n// edited\n");
    std::fs::write(&edited, ir).unwrap();
    let third = upload(&srv.url, &srv.pool, "node-c", &dirs[2]).await;
    let (whole_c, present_c, _) = sent(&third);
    assert_eq!((present_c, whole_c), (content - 1, report.entries.len() - content + 1), "{third}");
    scan(&local, &dirs[2], "node-c").await;
    let (up, loc) = (rows_of(&srv.pool, "node-c").await, rows_of(&local, "node-c").await);
    assert_eq!(up, loc, "node-c: the uploaded rows differ from the local scan's");
}

/// An API list, its rows sorted by key (two databases break ties in their own row order).
async fn get_json_at_sorted(url: &str) -> serde_json::Value {
    let mut v = crate::upload::get_json_at(url).await;
    v.as_array_mut().unwrap().sort_by(|a, b| a["key"].as_str().cmp(&b["key"].as_str()));
    v
}

/// Turn a database into what the release before migration 0032 made: each row's texts in its
/// own columns and its files in `artifacts`, no `fact` column, no `fact_texts` nor
/// `fact_files`, and 0032-0034 not applied (the next open applies them).
async fn back_to_rows_with_their_texts(pool: &SqlitePool) {
    let mut tx = pool.begin().await.unwrap();
    sqlx::raw_sql(
        "UPDATE entries SET
           metadata_json = COALESCE(metadata_json, (SELECT t.metadata_json FROM fact_texts t
                                                    WHERE t.fact = entries.fact AND t.relocated = entries.relocated)),
           resources_json = COALESCE(resources_json, (SELECT t.resources_json FROM fact_texts t
                                                      WHERE t.fact = entries.fact AND t.relocated = entries.relocated)),
           group_json = COALESCE(group_json, (SELECT t.group_json FROM fact_texts t
                                              WHERE t.fact = entries.fact AND t.relocated = entries.relocated));
         INSERT INTO artifacts(entry_id, name, ext, bytes, sha256)
           SELECT e.id, f.name, f.ext, f.bytes, f.sha256 FROM entries e JOIN fact_files f ON f.fact = e.fact;
         DROP VIEW entry_files;
         DROP TABLE fact_files;
         DROP TABLE fact_texts;
         DROP INDEX entries_fact;
         ALTER TABLE entries DROP COLUMN fact;
         DELETE FROM _sqlx_migrations WHERE version IN (32, 33, 34);",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn a_database_made_before_facts_answers_the_same_after_its_migration() {
    let (db, _work, pool) = crate::blobs::demo_db().await;
    // Every answer about the demo as this release stores it (texts once per fact)...
    let now = AppState::new(pool.clone(), Config::default());
    // (the summaries built first: the entry page's "and N more" reads them without waiting)
    now.db.fresh_summaries().await.unwrap();
    let mut before = crate::blobs::answers(&now, &pool).await;
    let machines: Vec<String> =
        sqlx::query_scalar("SELECT name FROM machines ORDER BY name").fetch_all(&pool).await.unwrap();
    let extra = |ms: &[String]| {
        let mut u: Vec<String> = vec!["/api/v1/machines".into(), "/api/v1/kernels".into(), "/kernels".into()];
        for m in ms {
            u.push(format!("/api/v1/entries?machine={m}&limit=10000"));
            u.push(format!("/machines/{m}"));
        }
        u
    };
    for u in extra(&machines) {
        before.push((u.clone(), get(&now, &u).await.1));
    }
    assert!(count(&pool, "SELECT COUNT(*) FROM entries WHERE metadata_json IS NOT NULL").await == 0);
    // ...and the same data as the release before 0032 stored it, migrated on open.
    back_to_rows_with_their_texts(&pool).await;
    pool.close().await;
    let pool = cachelens::db::open(&db.path().join("test.db")).await.unwrap();
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM entries WHERE fact IS NOT NULL").await, 0);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM fact_files").await, 0);
    let state = AppState::new(pool.clone(), Config::default());
    state.db.fresh_summaries().await.unwrap();
    let mut after = crate::blobs::answers(&state, &pool).await;
    for u in extra(&machines) {
        after.push((u.clone(), get(&state, &u).await.1));
    }
    assert_eq!(before.len(), after.len());
    for ((u, a), (v, b)) in before.iter().zip(&after) {
        assert_eq!(u, v);
        assert!(a == b, "{u}: the answer changed with the migration");
    }
    // A later scan of the same caches stores facts and keeps the texts once per fact: every
    // answer about it reads as before.
    let (_t, cache) = unpacked("h100-jit-3.6.0");
    scan(&pool, &cache.join("triton-cache"), "late").await;
    let facts = count(&pool, "SELECT COUNT(*) FROM entries e JOIN machines m ON m.id = e.machine_id WHERE m.name = 'late' AND e.fact IS NOT NULL AND e.metadata_json IS NULL").await;
    assert!(facts > 100, "{facts}");
    let by_key = |v: serde_json::Value| -> std::collections::BTreeMap<String, serde_json::Value> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let mut e = e.clone();
                let o = e.as_object_mut().unwrap();
                o.remove("machine");
                o.remove("root");
                (o["key"].as_str().unwrap().to_string(), e)
            })
            .collect()
    };
    let late = by_key(get_json(&state, "/api/v1/entries?machine=late&limit=10000").await);
    let old_rows = by_key(get_json(&state, "/api/v1/entries?machine=h100-a&limit=10000").await);
    assert!(late.len() > 100);
    for (k, e) in &late {
        assert_eq!(Some(e), old_rows.get(k), "{k}: read through fact_texts, not as the old row says");
    }
    let (_, a) = get(&state, &format!("/entries/late/{}", late.keys().next().unwrap())).await;
    let (_, b) = get(&state, &format!("/entries/h100-a/{}", late.keys().next().unwrap())).await;
    let meta = |p: &str| p.split("Metadata").nth(1).map(|s| s.chars().take(3000).collect::<String>());
    assert!(meta(&a).is_some() && meta(&a) == meta(&b), "the entry page's metadata differs");
}
