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
