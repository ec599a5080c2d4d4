//! What a change costs: the invalidations page and API give each recompiled entry the compile
//! time the hook measured (the new key's compile on the new machine, else the old key's on the
//! old one), checked against the hook's own event file of the h100-hook corpus.

use super::ok;
use crate::common::*;
use cachelens::web::{AppState, Config};
use std::collections::HashMap;

/// key → compile_ms of the `compile` lines of the corpus' hook event file (the last one wins).
fn hook_compile_ms() -> HashMap<String, f64> {
    let (_t, dir) = unpacked("h100-hook-3.6.0");
    let text = std::fs::read_to_string(dir.join("triton-cache/.cachelens/events-vm.jsonl")).unwrap();
    let mut out = HashMap::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["event"] == "compile" {
            out.insert(v["key"].as_str().unwrap().to_string(), v["compile_ms"].as_f64().unwrap());
        }
    }
    out
}

#[tokio::test]
async fn recompiles_carry_the_compile_time_the_hook_measured() {
    let (_keep, pool) =
        corpus_db(&[("h100-a", "h100-jit-3.6.0", "triton-cache"), ("h100-hook", "h100-hook-3.6.0", "triton-cache")])
            .await;
    let s = AppState::new(pool, Config::default());
    let truth = hook_compile_ms();
    assert_eq!(truth.len(), 16, "the corpus' hook saw 16 compiles");
    // h100-a → h100-hook: the new keys were compiled under the hook.
    let fwd = get_json(&s, "/api/v1/invalidations?a=h100-a&b=h100-hook").await;
    let rows = fwd["invalidated"].as_array().unwrap();
    assert!(!rows.is_empty(), "{fwd}");
    let mut total = 0.0;
    for r in rows {
        let want = truth[r["new_key"].as_str().unwrap()];
        assert_eq!(r["compile_ms"].as_f64(), Some(want), "{r}");
        total += want;
    }
    // The other way round, the old keys are the hook's: the same kernels' compile times.
    let back = get_json(&s, "/api/v1/invalidations?a=h100-hook&b=h100-a").await;
    for r in back["invalidated"].as_array().unwrap() {
        assert_eq!(r["compile_ms"].as_f64(), Some(truth[r["old_key"].as_str().unwrap()]), "{r}");
    }
    // The page sums them, per cause and per kernel.
    let page = ok(&s, "/invalidations?a=h100-a&b=h100-hook").await;
    let shown = cachelens::fmt::duration_ms(total);
    assert!(
        page.contains(&format!(
            "Recompile cost: <b>{shown}</b> of compile time for the {n} of {n} recompiled",
            n = rows.len()
        )),
        "{shown}: {page}"
    );
    // Without the hook the cost is unknown, and says why.
    let (_k, pool) = corpus_db(&[
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("a100-1", "a100-upgrade-2-triton-3.5.1", "triton-cache"),
    ])
    .await;
    let a100 = AppState::new(pool, Config::default());
    let inv = get_json(&a100, "/api/v1/invalidations?machine=a100-1").await;
    assert!(inv["invalidated"].as_array().unwrap().iter().all(|r| r["compile_ms"].is_null()));
    let page = ok(&a100, "/invalidations?machine=a100-1").await;
    assert!(page.contains("Recompile cost: <b>unknown</b>") && page.contains("45 entries have no compile time"));
}
