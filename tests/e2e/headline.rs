//! What misses cost (`/api/v1/headline`, the overview's and machine pages' headline): the real
//! h100-hook run moved to three days ago plus its hits again an hour ago, beside a machine
//! without the hook and one with Inductor artifacts. Each window's figures are the hook's own
//! lines counted by hand, equal to `/api/v1/history` over the same hours, and the pages show them.

use crate::common::*;
use serde_json::Value;
use std::path::Path;

const HOUR_S: f64 = 3600.0;

/// The hook's lines of `events` moved by `shift_s` seconds (and to other pids), `hits_only`: only
/// the `hit` lines.
fn moved(events: &Path, shift_s: f64, pid_offset: i64, hits_only: bool) -> (String, Vec<Value>) {
    let mut text = String::new();
    let mut lines = vec![];
    for l in std::fs::read_to_string(events).unwrap().lines() {
        let mut v: Value = serde_json::from_str(l).unwrap();
        if hits_only && v["event"] != "hit" {
            continue;
        }
        v["ts"] = (v["ts"].as_f64().unwrap() + shift_s).into();
        v["pid"] = (v["pid"].as_i64().unwrap() + pid_offset).into();
        text += &format!("{v}\n");
        lines.push(v);
    }
    (text, lines)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

#[tokio::test]
async fn headline_counts_the_hooks_lookups_over_a_day_a_week_and_all_time() {
    let (_t, dir) = unpacked("h100-hook-3.6.0");
    let root = dir.join("triton-cache");
    let events = std::fs::read_dir(root.join(".cachelens"))
        .unwrap()
        .map(|d| d.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let now_s = cachelens::db::now_ms() as f64 / 1000.0;
    let first = f(
        &serde_json::from_str::<Value>(std::fs::read_to_string(&events).unwrap().lines().next().unwrap()).unwrap()["ts"]
    );
    // the real run (16 misses, 16 timed compiles, 16 hits) three days ago, its hits again an hour ago
    let (old, old_lines) = moved(&events, now_s - 72.0 * HOUR_S - first, 0, false);
    let (new, new_lines) = moved(&events, now_s - 1.0 * HOUR_S - first, 5000, true);
    std::fs::write(&events, old + &new).unwrap();
    let compile_ms: std::collections::BTreeMap<String, f64> = old_lines
        .iter()
        .filter(|v| v["event"] == "compile")
        .map(|v| (v["key"].as_str().unwrap().to_string(), f(&v["compile_ms"])))
        .collect();
    let miss_ms: f64 = compile_ms.values().sum();
    let count = |lines: &[Value], e: &str| lines.iter().filter(|v| v["event"] == e).count() as i64;
    let saved = |lines: &[Value]| -> f64 {
        lines.iter().filter(|v| v["event"] == "hit").map(|v| compile_ms[v["key"].as_str().unwrap()]).sum()
    };
    assert_eq!((count(&old_lines, "miss"), count(&old_lines, "hit"), count(&new_lines, "hit")), (16, 16, 16));

    let (_db, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    cachelens::collect::scan_local(&store, &root, "hooked").await.unwrap();
    let (_t2, plain) = unpacked("h100-fpfusion-off-triton-3.6.0");
    cachelens::collect::scan_local(&store, &plain.join("triton-cache"), "no-hook").await.unwrap();
    let (_t3, jit) = unpacked("h100-jit-3.6.0");
    cachelens::collect::scan_local(&store, &jit.join("inductor"), "inductor").await.unwrap();
    let state = cachelens::web::AppState::new(pool.clone(), cachelens::web::Config::default());

    let h = get_json(&state, "/api/v1/headline").await;
    let (day, week, all) = (&h["day"], &h["week"], &h["all"]);
    assert_eq!((day["hits"].as_i64(), day["misses"].as_i64()), (Some(16), Some(0)), "{day}");
    assert_eq!(day["hit_rate"], 1.0);
    assert_eq!(day["miss_ms"], Value::Null, "no compile in the last day");
    assert!(close(f(&day["saved_ms"]), saved(&new_lines)), "{day}");
    assert_eq!(
        (week["hits"].as_i64(), week["misses"].as_i64(), week["saved_hits"].as_i64()),
        (Some(32), Some(16), Some(32))
    );
    assert_eq!(week["hit_rate"], 32.0 / 48.0, "inferred compiles of the same entries are no lookups");
    assert!(close(f(&week["miss_ms"]), miss_ms));
    assert!(close(f(&week["saved_ms"]), saved(&old_lines) + saved(&new_lines)));
    assert!(close(f(&week["saved_ms"]), 2.0 * miss_ms), "every key compiled once, hit twice");
    assert_eq!(all["hits"], week["hits"]);
    assert_eq!(all["misses"], week["misses"]);

    // The same hours through /api/v1/history: the hook's misses are misses less inferred compiles.
    for w in [day, week] {
        let from = w["from"].as_i64().unwrap();
        let rows = get_json(&state, &format!("/api/v1/history?from={from}&bucket=hour&limit=10000")).await;
        let sum = |k: &str| arr(&rows).iter().map(|r| r[k].as_i64().unwrap_or(0)).sum::<i64>();
        assert_eq!(sum("hits"), w["hits"].as_i64().unwrap());
        assert_eq!(sum("misses") - sum("inferred_compiles"), w["misses"].as_i64().unwrap());
        let saved: f64 = arr(&rows).iter().map(|r| r["saved_ms"].as_f64().unwrap_or(0.0)).sum();
        assert!(close(saved, w["saved_ms"].as_f64().unwrap_or(0.0)));
    }

    // Machines: the hook's first; the others named, no hit rate (unknown, not 0%).
    let machines = arr(&h["machines"]);
    let names: Vec<(&str, bool)> =
        machines.iter().map(|m| (m["name"].as_str().unwrap(), m["hook"].as_bool().unwrap())).collect();
    assert_eq!(names, [("hooked", true), ("inductor", false), ("no-hook", false)]);
    assert_eq!(machines[2]["all"]["hit_rate"], Value::Null);
    assert_eq!(h["artifacts"], serde_json::json!(["inductor"]), "its .best_config files are Inductor's");
    let one = get_json(&state, "/api/v1/headline?machine=hooked").await;
    assert_eq!(one["week"], h["week"]);
    assert_eq!(one["machines"], serde_json::json!([]));
    let (st, _) = get(&state, "/api/v1/headline?machine=nope").await;
    assert_eq!(st, 404);

    // /history over all machines: the hit rate of the hook's lookups, whatever the others compiled.
    let (st, page) = get(&state, "/history?bucket=day").await;
    assert_eq!(st, 200);
    assert!(page.contains(r#"<b id="total-hit-rate">66.7%</b>"#), "{}", &page[..page.len().min(3000)]);

    // The pages: the figures, the machines without the hook named, what the figures count.
    let (_, overview) = get(&state, "/").await;
    assert!(overview.contains(
        r#"<tr data-window="week"><td>last 7 days</td>
<td class="n hl-rate"><strong>66.7%</strong></td><td class="n hl-hits">32</td><td class="n hl-misses">16</td>"#
    ));
    assert!(overview.contains(
        r#"<tr data-window="day"><td>last 24 hours</td>
<td class="n hl-rate"><strong>100.0%</strong></td><td class="n hl-hits">16</td><td class="n hl-misses">0</td>"#
    ));
    let without = overview.split(r#"id="hl-without-hook""#).nth(1).unwrap().split("</p>").next().unwrap();
    assert!(without.contains(r#"<a href="/machines/no-hook">no-hook</a>"#) && !without.contains("hooked"), "{without}");
    assert!(overview.contains("count the Triton cache lookups the hook saw"));
    assert!(overview.contains(r#"id="hl-artifacts""#) && overview.contains("static CUDA launcher"));
    let (_, m) = get(&state, "/machines/hooked").await;
    assert!(m.contains(r#"data-scope="hooked""#) && m.contains("<strong>66.7%</strong>"));
    assert!(!m.contains(r#"id="hl-artifacts""#));
    let (_, m) = get(&state, "/machines/no-hook").await;
    assert!(m.contains(r#"id="hl-no-hook""#) && !m.contains("hl-rate"));
    let (_, m) = get(&state, "/machines/inductor").await;
    assert!(m.contains(r#"id="hl-artifacts""#) && m.contains("This machine's caches hold Inductor or vLLM artifacts"));
}
