//! The fleet timeline (`/api/v1/timeline`, the overview's "Fleet timeline"): on the demo fleet
//! (two in-place upgrades among five machines) a new-machine event per machine, the two Triton
//! upgrades and their mass invalidations, newest first, each linking to a page that tells it;
//! on the real h100-hook cache, a Python change the hook recorded between two scans.

use crate::common::*;
use serde_json::Value;

fn of<'a>(tl: &'a [Value], machine: &str, kind: &str) -> Vec<&'a Value> {
    tl.iter().filter(|e| e["machine"] == machine && e["kind"] == kind).collect()
}

#[tokio::test]
async fn timeline_tells_upgrades_invalidations_and_new_machines() {
    let (_keep, state) = fleet().await;
    let tl = get_json(&state, "/api/v1/timeline").await;
    let tl = arr(&tl);
    let pool = state.db.pool();
    let store = cachelens::db::Db::from(pool.clone());
    // One new machine per machine, at its first scan.
    let machines = count(pool, "SELECT COUNT(*) FROM machines").await;
    assert_eq!(tl.iter().filter(|e| e["kind"] == "new_machine").count() as i64, machines);
    for e in tl.iter().filter(|e| e["kind"] == "new_machine") {
        let first: i64 =
            sqlx::query_scalar("SELECT MIN(s.id) FROM scans s JOIN machines m ON m.id = s.machine_id WHERE m.name = ?")
                .bind(e["machine"].as_str().unwrap())
                .fetch_one(pool)
                .await
                .unwrap();
        assert_eq!(e["scan"], first, "{e}");
    }
    // The two in-place upgrades (demo/CORPUS.md): each root's Triton version before and after,
    // measured against the scan before, and the mass invalidation that came with it.
    for (m, before, after, n) in [("a100-1", "3.4.0", "3.5.1", 45), ("mi300-1", "3.6.0", "3.9.0", 25)] {
        let up = of(tl, m, "triton");
        assert_eq!(up.len(), 1, "{m}: {tl:?}");
        assert_eq!((up[0]["before"].as_str(), up[0]["after"].as_str()), (Some(before), Some(after)));
        assert_eq!(up[0]["text"], format!("Triton {before} → {after}"));
        let scans: Vec<i64> = sqlx::query_scalar(
            "SELECT s.id FROM scans s JOIN machines m ON m.id = s.machine_id WHERE m.name = ? ORDER BY s.id",
        )
        .bind(m)
        .fetch_all(pool)
        .await
        .unwrap();
        assert_eq!((up[0]["from_scan"].as_i64(), up[0]["scan"].as_i64()), (Some(scans[0]), Some(scans[1])));
        let inv = of(tl, m, "invalidation");
        assert_eq!(inv.len(), 1, "{m}: {tl:?}");
        assert_eq!(
            (inv[0]["count"].as_i64(), inv[0]["base"].as_i64(), inv[0]["after"].as_str()),
            (Some(n), Some(n), Some("compiler"))
        );
        // The link is the report of that scan against the one before, and it says the same count.
        let href = inv[0]["href"].as_str().unwrap();
        assert_eq!(href, format!("/invalidations?machine={m}&from={}&to={}", scans[0], scans[1]));
        assert_eq!(up[0]["href"], href);
        let (status, page) = get(&state, href).await;
        assert_eq!(status, 200, "{page}");
        let api =
            get_json(&state, &format!("/api/v1/invalidations?machine={m}&from={}&to={}&limit=1", scans[0], scans[1]))
                .await;
        assert_eq!((api["invalidated_total"].as_i64(), api["old_entries"].as_i64()), (Some(n), Some(n)), "{api}");
    }
    // Nothing else happened: same-version machines have no version or invalidation events.
    assert_eq!(tl.len() as i64, machines + 4, "{tl:?}");
    // Newest first, and a page of it is the same rows.
    let at: Vec<i64> = tl.iter().map(|e| e["at"].as_i64().unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] >= w[1]), "{at:?}");
    let two = get_json(&state, "/api/v1/timeline?limit=2&offset=1").await;
    assert_eq!(arr(&two)[..], tl[1..3]);
    // The overview lists the same events, in the same order, with the same links.
    let (_, html) = get(&state, "/").await;
    let rows: Vec<(String, String)> = html
        .split("<tr data-kind=\"")
        .skip(1)
        .map(|r| {
            let kind = r.split('"').next().unwrap().to_string();
            let href = r
                .split("<a href=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .replace("&#38;", "&")
                .replace("&amp;", "&");
            (kind, href)
        })
        .collect();
    let api: Vec<(String, String)> =
        tl.iter().map(|e| (e["kind"].as_str().unwrap().to_string(), e["href"].as_str().unwrap().to_string())).collect();
    assert_eq!(rows, api);
    // A machine retired takes its events along.
    cachelens::db::retention::retire(&store, "a100-1").await.unwrap();
    let after = get_json(&state, "/api/v1/timeline").await;
    assert!(arr(&after).iter().all(|e| e["machine"] != "a100-1") && arr(&after).len() == tl.len() - 3);
}

#[tokio::test]
async fn a_python_change_the_hook_recorded_is_an_event() {
    let (_t, root) = unpacked("h100-hook-3.6.0");
    let cache = root.join("triton-cache");
    let (_d, pool) = fresh_db().await;
    // The hook's line format with the key parts (hook/cachelens_hook/_keyparts.py): a compile
    // under Python 3.11.9, scanned; then one under 3.12.7, scanned again.
    let line = |ts: f64, seq: i64, python: &str| {
        let parts = serde_json::json!({"triton_key": "a".repeat(64), "source_hash": "b".repeat(64),
            "backend_hash": "c".repeat(64), "options_hash": "d".repeat(64), "env_vars": {}, "python": python,
            "triton_dir": "/opt/triton"});
        serde_json::json!({"v": 1, "ts": ts, "host": "z", "pid": 7, "seq": seq,
            "key": "PCAKESAG2CDRMLNOCOHPDVI7H76SIIJLMUHS335BUQHLBK7ABHEA", "kernel": "add_kernel",
            "event": "compile", "compile_ms": 50.0, "stages_ms": null, "parts": parts})
    };
    let file = cache.join(".cachelens/events-z.jsonl");
    std::fs::write(&file, format!("{}\n", line(1795322367.1, 0, "3.11.9"))).unwrap();
    scan(&pool, &cache, "h100-z").await;
    let state = cachelens::web::AppState::new(pool.clone(), cachelens::web::Config::default());
    let tl = get_json(&state, "/api/v1/timeline").await;
    assert!(of(arr(&tl), "h100-z", "python").is_empty(), "{tl}");
    // Nothing new: the Python is carried, no event.
    scan(&pool, &cache, "h100-z").await;
    let tl = get_json(&state, "/api/v1/timeline").await;
    assert!(of(arr(&tl), "h100-z", "python").is_empty(), "{tl}");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text += &format!("{}\n", line(1795322399.5, 1, "3.12.7"));
    std::fs::write(&file, text).unwrap();
    scan(&pool, &cache, "h100-z").await;
    let tl = get_json(&state, "/api/v1/timeline").await;
    let py = of(arr(&tl), "h100-z", "python");
    assert_eq!(py.len(), 1, "{tl}");
    assert_eq!(py[0]["text"], "Python 3.11.9 → 3.12.7");
    // The Triton version did not change (one 3.6.0 cache), nor did anything get invalidated.
    assert!(of(arr(&tl), "h100-z", "triton").is_empty() && of(arr(&tl), "h100-z", "invalidation").is_empty());
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM scans WHERE triton_version = '3.6.0'").await, 3);
}
