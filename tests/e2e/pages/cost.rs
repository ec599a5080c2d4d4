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

/// The text of an HTML cell as askama wrote it, unescaped.
fn unescape(s: &str) -> String {
    s.replace("&#60;", "<").replace("&#62;", ">").replace("&#34;", "\"").replace("&#39;", "'").replace("&#38;", "&")
}

/// The page's cause groups: (cause, reasons with their counts, kernel rows of 5 cells).
type PageGroup = (String, Vec<(String, i64)>, Vec<Vec<String>>);

fn page_groups(page: &str) -> Vec<PageGroup> {
    let mut out = vec![];
    for sec in page.split("<section class=\"cause-group\" id=\"cause-").skip(1) {
        let sec = &sec[..sec.find("</section>").unwrap_or(sec.len())];
        let cause = sec[..sec.find('"').unwrap()].to_string();
        let whys = sec
            .split("<span class=\"why\">")
            .skip(1)
            .map(|w| {
                let (text, rest) = w.split_once("</span> <span class=\"muted why-n\">(").unwrap();
                let n = rest[..rest.find(' ').unwrap()].parse().unwrap();
                (unescape(text), n)
            })
            .collect();
        let kernels = sec
            .split("<tr class=\"inv-kernel\">")
            .skip(1)
            .map(|row| {
                let row = &row[..row.find("</tr>").unwrap()];
                row.split("<td>").skip(1).map(|c| unescape(c.trim_end_matches("</td>"))).collect()
            })
            .collect();
        out.push((cause, whys, kernels));
    }
    out
}

/// The API's groups as the page shows them.
fn api_groups(inv: &serde_json::Value) -> Vec<PageGroup> {
    let cost = |c: &serde_json::Value| match c["timed"].as_u64().unwrap() {
        0 => "unknown".to_string(),
        _ => cachelens::fmt::duration_ms(c["ms"].as_f64().unwrap()),
    };
    arr(&inv["groups"])
        .iter()
        .map(|g| {
            let whys = arr(&g["reasons"])
                .iter()
                .map(|w| (w["reason"].as_str().unwrap().to_string(), w["entries"].as_i64().unwrap()))
                .collect();
            let kernels = arr(&g["kernels"])
                .iter()
                .map(|k| {
                    let n = |f: &str| k[f].as_i64().unwrap().to_string();
                    vec![
                        k["kernel"].as_str().unwrap().to_string(),
                        n("entries"),
                        n("identical"),
                        n("same_code"),
                        cost(&k["cost"]),
                    ]
                })
                .collect();
            (g["cause"].as_str().unwrap().to_string(), whys, kernels)
        })
        .collect()
}

/// `/api/v1/invalidations` carries the page's groups (each cause's reasons and kernels) and the
/// recompile cost, per report and per cause, equal to the page and to the hook's own times.
#[tokio::test]
async fn the_api_groups_causes_kernels_and_cost_as_the_page_does() {
    let (_keep, pool) = corpus_db(&[
        ("h100-a", "h100-jit-3.6.0", "triton-cache"),
        ("h100-hook", "h100-hook-3.6.0", "triton-cache"),
        ("h100-c", "h100-fpfusion-off-triton-3.6.0", "triton-cache"),
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("a100-1", "a100-upgrade-2-triton-3.5.1", "triton-cache"),
    ])
    .await;
    let s = AppState::new(pool, Config::default());
    let truth = hook_compile_ms();
    for q in ["a=h100-a&b=h100-hook", "a=h100-a&b=h100-c", "machine=a100-1"] {
        let inv = get_json(&s, &format!("/api/v1/invalidations?{q}&limit=1000")).await;
        let groups = api_groups(&inv);
        assert!(!groups.is_empty(), "{q}: {inv}");
        let page = ok(&s, &format!("/invalidations?{q}")).await;
        assert_eq!(page_groups(&page), groups, "{q}: the page and the API group differently");
        // each group's counts add up to the report's, and its cost to its rows' compile times
        let rows = arr(&inv["invalidated"]);
        assert_eq!(rows.len() as u64, inv["invalidated_total"].as_u64().unwrap(), "{q}: one page holds them all");
        let mut all = 0.0;
        for g in arr(&inv["groups"]) {
            let of: Vec<&serde_json::Value> = rows.iter().filter(|r| r["cause"] == g["cause"]).collect();
            assert_eq!(g["entries"].as_u64(), Some(of.len() as u64), "{q}: {g}");
            let timed: Vec<f64> = of.iter().filter_map(|r| r["compile_ms"].as_f64()).collect();
            assert_eq!(g["cost"]["timed"].as_u64(), Some(timed.len() as u64), "{q}: {g}");
            assert!((g["cost"]["ms"].as_f64().unwrap() - timed.iter().sum::<f64>()).abs() < 1e-6, "{q}: {g}");
            let in_kernels: i64 = arr(&g["kernels"]).iter().map(|k| k["entries"].as_i64().unwrap()).sum();
            if g["kernels_total"].as_u64().unwrap() as usize == arr(&g["kernels"]).len() {
                assert_eq!(in_kernels, g["entries"].as_i64().unwrap(), "{q}: {g}");
            }
            all += timed.iter().sum::<f64>();
        }
        assert_eq!(inv["cost"]["of"], inv["invalidated_total"], "{q}");
        assert!((inv["cost"]["ms"].as_f64().unwrap() - all).abs() < 1e-6, "{q}: {}", inv["cost"]);
        if q.ends_with("h100-hook") {
            // the hook's own times, summed
            let want: f64 = rows.iter().map(|r| truth[r["new_key"].as_str().unwrap()]).sum();
            assert!(want > 0.0 && (inv["cost"]["ms"].as_f64().unwrap() - want).abs() < 1e-6, "{}", inv["cost"]);
            assert_eq!(inv["cost"]["timed"], inv["cost"]["of"]);
        }
        // cause=C: that cause's group alone
        let first = &arr(&inv["groups"])[0];
        let one = get_json(&s, &format!("/api/v1/invalidations?{q}&cause={}", first["cause"].as_str().unwrap())).await;
        assert_eq!(arr(&one["groups"]).as_slice(), std::slice::from_ref(first), "{q}");
    }
}
