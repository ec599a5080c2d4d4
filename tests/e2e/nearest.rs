//! Nearest neighbours (`/api/v1/nearest`, `/entries/M/KEY/nearest`) read tier by tier through
//! the variant index (`db/nearest.rs`, `explain::load::nearest_of`: the variant columns bound
//! the differing components, tiers that cannot place a neighbour are not analysed) give the very
//! answers of the plain computation over every live entry of the kernel
//! (`db::explain::kernel_sides` + `explain::nearest`), for entries of real corpora: the same cache on two machines (every key twice), the same kernels under
//! another fp-fusion setting, an upgrade pair, the hook machine.

use crate::common::*;
use cachelens::db::explain::{kernel_sides, load};
use cachelens::explain::{load::nearest_of, nearest};

#[tokio::test]
async fn nearest_by_variant_classes_equals_the_plain_computation() {
    let (_keep, pool) = corpus_db(&[
        ("h100-a", "h100-jit-3.6.0", "triton-cache"),
        ("h100-z", "h100-jit-3.6.0", "triton-cache"),
        ("h100-c", "h100-fpfusion-off-triton-3.6.0", "triton-cache"),
        ("h100-hook", "h100-hook-3.6.0", "triton-cache"),
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("a100-1", "a100-upgrade-2-triton-3.5.1", "triton-cache"),
    ])
    .await;
    let ids: Vec<(String, String)> = sqlx::query_as(
        "SELECT m.name, e.key FROM entries e JOIN machines m ON m.id = e.machine_id
         WHERE e.kind IN ('kernel', 'binary_only', 'partial') AND e.removed_at IS NULL ORDER BY m.name, e.key",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(ids.len() > 200, "{}", ids.len());
    let mut compared = 0;
    let mut per_kernel: std::collections::HashMap<String, usize> = Default::default();
    for (m, k) in &ids {
        let of = load(&pool, m, k).await.unwrap().unwrap();
        let Some(kernel) = of.side.kernel_name() else { continue };
        // every kernel, at most 6 entries of each (a debug build analyses slowly)
        let seen = per_kernel.entry(kernel.to_string()).or_default();
        *seen += 1;
        if *seen > 6 {
            continue;
        }
        let mut cands = kernel_sides(&pool, kernel).await.unwrap();
        cands.retain(|c| !(c.machine == *m && c.key == *k));
        // 3: later tiers are skipped once three neighbours rank below them; 20: most are read
        for limit in [3, 20] {
            let want: Vec<(String, String, usize, usize)> = nearest(&of.side, &cands, limit)
                .into_iter()
                .map(|n| (cands[n.index].machine.clone(), cands[n.index].key.clone(), n.components, n.differing))
                .collect();
            let (_, got) = nearest_of(&pool, &format!("{m}:{k}"), limit).await.unwrap();
            let got: Vec<(String, String, usize, usize)> =
                got.into_iter().map(|n| (n.machine, n.key, n.components, n.differing)).collect();
            assert_eq!(got, want, "{m}:{k} limit {limit}");
        }
        compared += 1;
    }
    assert!(compared >= 20, "{compared}"); // 24 with the corpus of 2026-11-23
    // The same key on the other machine is the nearest (0 components differ).
    let (m, k) = ids.iter().find(|(m, _)| m == "h100-a").unwrap();
    let v = get_json(
        &cachelens::web::AppState::new(pool.clone(), cachelens::web::Config::default()),
        &format!("/api/v1/nearest?entry={m}:{k}&limit=1"),
    )
    .await;
    assert_eq!(v["neighbours"][0]["id"], format!("h100-z:{k}"), "{v}");
}

/// The server's nearest answers (`explain::load::nearest_cached`: candidates' classes and sides
/// kept in a `db::nearest::Cache` across requests while the database's stamp stays) equal a
/// fresh computation, on first asking, when asked again from what was kept, and after each kind
/// of change: an entry rewritten in place the way Triton writes (a file written apart and
/// `os.replace`d into the key dir) and another removed, then re-scanned; hook events recorded
/// (the key parts that are part of a class); a new machine.
#[tokio::test]
async fn nearest_kept_across_requests_equals_a_fresh_computation_after_every_change() {
    use cachelens::db::nearest::Cache;
    use cachelens::explain::load::nearest_cached;
    let (_d, pool) = fresh_db().await;
    let (_ta, a) = unpacked("h100-jit-3.6.0");
    let (_tz, z) = unpacked("h100-jit-3.6.0");
    let (_tc, c) = unpacked("h100-fpfusion-off-triton-3.6.0");
    let (za, zz, zc) = (a.join("triton-cache"), z.join("triton-cache"), c.join("triton-cache"));
    scan(&pool, &za, "h100-a").await;
    scan(&pool, &zz, "h100-z").await;
    scan(&pool, &zc, "h100-c").await;
    // Two entries of every kernel of h100-a and of h100-c (a debug build analyses slowly).
    let ids: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT m.name, e.key, e.kernel FROM entries e JOIN machines m ON m.id = e.machine_id
         WHERE e.kind IN ('kernel', 'binary_only', 'partial') AND e.kernel IS NOT NULL
           AND m.name IN ('h100-a', 'h100-c') ORDER BY m.name, e.kernel, e.key",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut per: std::collections::HashMap<(String, String), usize> = Default::default();
    let sample: Vec<String> = ids
        .into_iter()
        .filter(|(m, _, k)| {
            let n = per.entry((m.clone(), k.clone())).or_default();
            *n += 1;
            *n <= 2
        })
        .map(|(m, k, _)| format!("{m}:{k}"))
        .collect();
    assert!(sample.len() >= 10, "{}", sample.len());
    let cache = Cache::default();
    let check = |label: &'static str| {
        let (pool, cache, sample) = (&pool, &cache, &sample);
        async move {
            let mut listed = 0;
            for id in sample {
                let (_, fresh) = nearest_of(pool, id, 20).await.unwrap();
                let (_, kept) = nearest_cached(pool, cache, id, 20).await.unwrap();
                assert_eq!(
                    serde_json::to_value(&kept).unwrap(),
                    serde_json::to_value(&fresh).unwrap(),
                    "{label}: {id}"
                );
                listed += fresh.len();
            }
            assert!(listed > 0, "{label}: no neighbours at all");
        }
    };
    check("first asking").await;
    let (rows, sides) = cache.kept();
    assert!(rows > 0 && sides > 0, "nothing kept: {rows} rows, {sides} sides");
    check("asked again, from what was kept").await;

    // h100-z: add_kernel's metadata rewritten in place, matmul's entry removed; re-scanned.
    let add = zz.join("PCAKESAG2CDRMLNOCOHPDVI7H76SIIJLMUHS335BUQHLBK7ABHEA");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(add.join("add_kernel.json")).unwrap()).unwrap();
    meta["debug"] = serde_json::Value::Bool(true);
    let tmp = z.join("tmp.write");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("add_kernel.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
    std::fs::rename(tmp.join("add_kernel.json"), add.join("add_kernel.json")).unwrap();
    std::fs::remove_dir_all(zz.join("D2QODRMCQ7ZQSFIEYHQQ2TD5TJUYE5SQFPUJXLX3A5IUXEAUBGYA")).unwrap();
    let s = scan(&pool, &zz, "h100-z").await;
    assert_eq!((s.changed_entries, s.removed_entries), (1, 1), "{s:?}");
    check("after an entry rewritten in place and one removed").await;

    // Hook events: a compile of add_kernel's key on h100-z recorded with its key parts (the
    // hook's line format, `hook/cachelens_hook/_writer.py`): the same stored inputs as on
    // h100-a, other recorded parts, so no longer one class; re-scanned.
    let key = "PCAKESAG2CDRMLNOCOHPDVI7H76SIIJLMUHS335BUQHLBK7ABHEA";
    let parts = serde_json::json!({"triton_key": "a".repeat(64), "source_hash": "b".repeat(64),
        "backend_hash": "c".repeat(64), "options_hash": "d".repeat(64), "env_vars": {}, "python": "3.12.7",
        "triton_dir": "/opt/triton"});
    let line = serde_json::json!({"v": 1, "ts": 1795322367.1, "host": "z", "pid": 7, "seq": 0, "key": key,
        "kernel": "add_kernel", "event": "compile", "compile_ms": 50.0, "stages_ms": null, "parts": parts});
    std::fs::create_dir_all(zz.join(".cachelens")).unwrap();
    std::fs::write(zz.join(".cachelens/events-z.jsonl"), format!("{line}\n")).unwrap();
    scan(&pool, &zz, "h100-z").await;
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM events WHERE parts_json IS NOT NULL").await, 1);
    check("after hook events with key parts").await;

    // A new machine (the hook corpus).
    scan(&pool, &corpus_read_only("h100-hook-3.6.0").join("triton-cache"), "h100-hook").await;
    check("after a new machine").await;
}

/// The classes of a tier cut at `n` (`db::nearest::classes_of_ids`: candidates placed by
/// (machine, key) first, only those of the first `n` keys read in full) are the first `n` of the
/// uncut list, members on every machine included, and `more` says whether the uncut list was
/// longer; also when some candidates were kept by the cache before (from a cut or an uncut
/// request) and others not.
#[tokio::test]
async fn a_cut_tier_holds_the_first_classes_of_the_whole_tier() {
    use cachelens::db::nearest::{Cache, Classes, Open, classes_of_ids, kernel_variants};
    let (_keep, pool) = corpus_db(&[
        ("h100-a", "h100-jit-3.6.0", "triton-cache"),
        ("h100-z", "h100-jit-3.6.0", "triton-cache"),
        ("h100-c", "h100-fpfusion-off-triton-3.6.0", "triton-cache"),
    ])
    .await;
    // the entry of h100-a whose kernel has the most candidates
    let keys: Vec<String> = sqlx::query_scalar(
        "SELECT e.key FROM entries e JOIN machines m ON m.id = e.machine_id
         WHERE m.name = 'h100-a' AND e.kind = 'kernel' AND e.removed_at IS NULL",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut best: Option<Vec<i64>> = None;
    for k in &keys {
        let (_, tiers) = kernel_variants(&pool, "h100-a", k, &Open::none()).await.unwrap().unwrap();
        let ids: Vec<i64> = tiers.concat();
        if best.as_ref().is_none_or(|b| ids.len() > b.len()) {
            best = Some(ids);
        }
    }
    let ids = best.unwrap();
    // (the class side's machine and key, its members) in order
    type Shown = Vec<((String, String), Vec<(String, String)>)>;
    let shown = |c: &Classes| -> Shown {
        c.classes
            .iter()
            .map(|(side, members)| {
                let mut m: Vec<(String, String)> =
                    members.iter().map(|&i| (c.candidates[i].machine.clone(), c.candidates[i].key.clone())).collect();
                m.sort();
                ((side.machine.clone(), side.key.clone()), m)
            })
            .collect()
    };
    let whole = classes_of_ids(&pool, &ids, usize::MAX, &Open::none()).await.unwrap();
    let all = shown(&whole);
    assert!(!whole.more);
    assert!(all.len() >= 6, "{} classes of {} candidates", all.len(), ids.len());
    assert!(all.iter().any(|(_, m)| m.len() > 1), "no class on two machines: {all:?}");
    for n in [1, 2, 3, all.len() / 2, all.len() - 1, all.len()] {
        let want = &all[..n];
        let cut = classes_of_ids(&pool, &ids, n, &Open::none()).await.unwrap();
        assert_eq!(shown(&cut), want, "cut at {n}");
        assert_eq!(cut.more, n < all.len(), "cut at {n}");
        // half the candidates kept by an earlier uncut request, then cut
        let cache = Cache::default();
        let open = cache.open(&pool).await.unwrap();
        classes_of_ids(&pool, &ids[..ids.len() / 2], usize::MAX, &open).await.unwrap();
        let cut = classes_of_ids(&pool, &ids, n, &open).await.unwrap();
        assert_eq!(shown(&cut), want, "cut at {n}, half kept");
        assert_eq!(cut.more, n < all.len(), "cut at {n}, half kept");
        // kept from the cut request, then asked uncut
        let again = classes_of_ids(&pool, &ids, usize::MAX, &open).await.unwrap();
        assert_eq!(shown(&again), all, "uncut after a cut at {n}");
    }
}
