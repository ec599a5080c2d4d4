//! Hit/miss history (`/api/v1/history`, `/history`): compiles inferred from real entry mtimes
//! checked against what really happened, and hook event files ingested exactly once.
//! The real-workload round trip (Triton + hook + `cachelens` binary) is scripts/history-ci.sh.

use crate::common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

/// Split ascending times (ms) into runs wherever two follow each other more than `gap` apart.
fn runs(times: &[(i64, i64)], gap: i64) -> Vec<i64> {
    let mut out: Vec<i64> = vec![];
    let mut last = None;
    for &(t, n) in times {
        match last {
            Some(l) if t - l <= gap => *out.last_mut().unwrap() += n,
            _ => out.push(n),
        }
        last = Some(t);
    }
    out
}

fn int(v: &Value, k: &str) -> i64 {
    v[k].as_i64().unwrap_or_else(|| panic!("{k} not an integer in {v}"))
}

/// h100-jit-3.6.0 has no hook events: every compile is inferred from its entry's metadata mtime.
/// The ground truth (a compilation listener during the five runs) says which kernels each run
/// compiled; the history must show the same compiles, run by run.
#[tokio::test]
async fn compiles_inferred_from_mtimes_match_ground_truth() {
    let (_keep, pool) = corpus_db(&[("h100-a", "h100-jit-3.6.0", "triton-cache")]).await;
    let state = cachelens::web::AppState::new(pool, cachelens::web::Config::default());

    // Ground truth: compiles (cache_hit false) into this triton-cache (not the Inductor dir).
    let (_t, dir) = unpacked("h100-jit-3.6.0");
    let text = std::fs::read_to_string(dir.join("ground-truth-events.jsonl")).unwrap();
    let compiles: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["cache_hit"] == false && e["cache_dir"].as_str().unwrap().ends_with("/triton-cache"))
        .collect();
    assert_eq!(compiles.len(), 113);
    let want_keys: BTreeSet<String> = compiles.iter().map(|e| hex_to_b32(e["hash"].as_str().unwrap())).collect();
    assert_eq!(want_keys.len(), 113, "every compile made a distinct entry");
    let mut ts: Vec<(i64, &str)> =
        compiles.iter().map(|e| ((e["ts"].as_f64().unwrap() * 1000.0) as i64, e["phase"].as_str().unwrap())).collect();
    ts.sort();
    let truth_runs = runs(&ts.iter().map(|(t, _)| (*t, 1)).collect::<Vec<_>>(), 3000);
    // cold: all 45; warm: all hits (none); debug: 15 + the 2 matmul configs it launched;
    // edit: the 6 add kernels; line-info off: all 45 again.
    assert_eq!(truth_runs, [45, 17, 6, 45]);

    // The compiled entries are exactly the ground truth's compiles.
    let entries = get_json(&state, "/api/v1/entries?machine=h100-a&include_removed=true&limit=10000").await;
    let kernel_keys: BTreeSet<String> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "kernel")
        .map(|e| e["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kernel_keys, want_keys);

    // Per hour (the five runs took two minutes): one bucket, all inferred, hits unknown.
    let hours = get_json(&state, "/api/v1/history?machine=h100-a&bucket=hour").await;
    let hour_start = ts[0].0 / 3_600_000 * 3_600_000;
    assert_eq!(
        hours,
        serde_json::json!([{"t": hour_start, "hits": 0, "misses": 113, "compiles": 113, "inferred_compiles": 113,
                            "compile_ms": null, "hook_events": 0, "saved_ms": null, "saved_hits": 0,
                            "hit_rate": null}])
    );
    // Per second, clustered by gaps as a person reading the chart would: the same four runs
    // with compiles, each with exactly the ground truth's count.
    let secs = get_json(&state, "/api/v1/history?machine=h100-a&bucket=second&limit=10000").await;
    let per_sec: Vec<(i64, i64)> = secs.as_array().unwrap().iter().map(|p| (int(p, "t"), int(p, "compiles"))).collect();
    assert!(secs.as_array().unwrap().iter().all(|p| p["inferred_compiles"] == p["compiles"] && p["hits"] == 0));
    assert_eq!(runs(&per_sec, 3000), truth_runs);
    // and per kernel, per run: the debug run recompiled matmul twice, the edit run only add.
    let mut per_kernel = BTreeMap::new();
    for k in ["add_kernel", "softmax_kernel", "layernorm_kernel", "matmul_kernel"] {
        let s = get_json(&state, &format!("/api/v1/history?machine=h100-a&kernel={k}&bucket=second&limit=10000")).await;
        let v: Vec<(i64, i64)> = s.as_array().unwrap().iter().map(|p| (int(p, "t"), int(p, "compiles"))).collect();
        let total: i64 = v.iter().map(|x| x.1).sum();
        let truth = compiles.iter().filter(|e| e["name"] == k).count() as i64;
        assert_eq!(total, truth, "{k}");
        per_kernel.insert(k, total);
    }
    assert_eq!(per_kernel["add_kernel"], 24);
    assert_eq!(per_kernel["matmul_kernel"], 62);
    // A day bucket holds the same, and another machine's filter holds nothing.
    let days = get_json(&state, "/api/v1/history?machine=h100-a&bucket=day").await;
    assert_eq!(int(&days[0], "compiles"), 113);
    assert_eq!(get_json(&state, "/api/v1/history?machine=nope").await, serde_json::json!([]));
    let (status, body) = get(&state, "/api/v1/history?bucket=week").await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("bucket"));
}

/// One line exactly as the hook writes it (hook/cachelens_hook/_writer.py `format_line`).
fn hook_line(ts: f64, pid: i64, key: &str, kernel: &str, event: &str, compile_ms: Option<f64>) -> String {
    let ms = compile_ms.map(|m| format!("{m}")).unwrap_or_else(|| "null".into());
    let stages = if compile_ms.is_some() { r#"{"ir_init":1.5,"ttir":2.25,"cubin":3.0}"# } else { "null" };
    format!(
        r#"{{"v":1,"ts":{ts},"host":"gpu-7","pid":{pid},"key":"{key}","kernel":"{kernel}","event":"{event}","compile_ms":{ms},"stages_ms":{stages}}}"#
    ) + "\n"
}

/// Key dirs of `root` holding `<kernel>.json`, sorted.
fn keys_of(root: &Path, kernel: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|p| p.join(format!("{kernel}.json")).exists())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn append(path: &Path, text: &str) {
    std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap().write_all(text.as_bytes()).unwrap();
}

/// (hits, misses, compiles, inferred_compiles, compile_ms, hook_events) of the bucket at `t`.
async fn bucket(state: &cachelens::web::AppState, query: &str, t: i64) -> (i64, i64, i64, i64, Option<f64>, i64) {
    let v = get_json(state, &format!("/api/v1/history?{query}")).await;
    let p = v.as_array().unwrap().iter().find(|p| int(p, "t") == t).unwrap_or_else(|| panic!("no bucket {t} in {v}"));
    let c = (int(p, "hits"), int(p, "misses"), int(p, "compiles"), int(p, "inferred_compiles"));
    (c.0, c.1, c.2, c.3, p["compile_ms"].as_f64(), int(p, "hook_events"))
}

/// Hook event files in a copy of a real cache: scanned, appended to, re-scanned. Each event
/// counts once; a half-written line waits for its end; hook compiles hours after an entry's
/// metadata mtime are other compiles than the one the mtime records (both count; the matching of
/// the two sources is `recompiles_in_place_keep_every_compile`); removed entries keep their compile.
#[tokio::test]
async fn hook_events_count_exactly_once_across_rescans() {
    let (_t, dir) = unpacked("h100-jit-3.6.0");
    let root = dir.join("triton-cache");
    let (_db, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let state = cachelens::web::AppState::new(pool.clone(), cachelens::web::Config::default());
    let scan = || cachelens::collect::scan_local(&store, &root, "hooked");

    let add = keys_of(&root, "add_kernel");
    let (k1, k2) = (&add[0], &add[1]);
    let k3 = &keys_of(&root, "softmax_kernel")[0];
    let k4 = &keys_of(&root, "layernorm_kernel")[0];
    let (gone, new) = ("A".repeat(52), "B".repeat(52)); // keys not in the cache
    let h0 = 1_795_316_400_000i64; // the hour of the corpus's compiles (metadata mtimes)
    let (h1, h2) = (h0 + 4 * 3_600_000, h0 + 5 * 3_600_000);
    let (t1, t2) = (h1 as f64 / 1000.0, h2 as f64 / 1000.0);

    let events = root.join(".cachelens").join("events-gpu-7.jsonl");
    std::fs::create_dir_all(events.parent().unwrap()).unwrap();
    let mut a = String::new();
    a += &hook_line(t1 + 1.000001, 100, k1, "add_kernel", "miss", None);
    a += &hook_line(t1 + 1.5, 100, k1, "add_kernel", "compile", Some(100.5));
    a += &hook_line(t1 + 2.0, 100, k2, "add_kernel", "miss", None);
    a += &hook_line(t1 + 2.5, 100, k2, "add_kernel", "compile", Some(200.25));
    a += &hook_line(t1 + 3.0, 100, k3, "softmax_kernel", "miss", None);
    a += &hook_line(t1 + 3.5, 100, k3, "softmax_kernel", "compile", Some(300.0));
    for (i, k) in [k1, k2, k3, k1].iter().enumerate() {
        a += &hook_line(
            t1 + 10.0 + i as f64,
            100,
            k,
            if *k == k3 { "softmax_kernel" } else { "add_kernel" },
            "hit",
            None,
        );
    }
    a += &hook_line(t1 + 14.0, 101, k2, "add_kernel", "hit", None);
    // TRITON_ALWAYS_COMPILE: the entry was found, recompiled, logged as a compile alone.
    a += &hook_line(t1 + 20.0, 102, k4, "layernorm_kernel", "compile", Some(50.0));
    // A miss whose compile never finished.
    a += &hook_line(t1 + 30.0, 103, &gone, "add_kernel", "miss", None);
    let partial = hook_line(t1 + 40.0, 100, k3, "softmax_kernel", "hit", None);
    let (head, tail) = partial.split_at(60);
    a += head;
    append(&events, &a);

    let s1 = scan().await.unwrap();
    assert_eq!(s1.events, 13, "13 whole lines; the half-written one waits");
    let all = "machine=hooked&bucket=hour&limit=10000";
    // hits 5; misses: 3 miss events, the lone ALWAYS_COMPILE compile, the unfinished one.
    assert_eq!(bucket(&state, all, h1).await, (5, 5, 4, 0, Some(650.75), 13));
    // 113 compiled entries, each inferred at its mtime (the hook's compiles are 4 h later).
    assert_eq!(bucket(&state, all, h0).await, (0, 113, 113, 113, None, 0));

    append(&events, tail);
    let mut b = String::new();
    b += &hook_line(t2 + 1.0, 200, k1, "add_kernel", "hit", None);
    b += &hook_line(t2 + 2.0, 200, k4, "layernorm_kernel", "hit", None);
    b += &hook_line(t2 + 3.0, 200, &new, "add_kernel", "miss", None);
    b += &hook_line(t2 + 4.0, 200, &new, "add_kernel", "compile", Some(10.0));
    append(&events, &b);

    let check = || async {
        assert_eq!(bucket(&state, all, h0).await, (0, 113, 113, 113, None, 0));
        assert_eq!(bucket(&state, all, h1).await, (6, 5, 4, 0, Some(650.75), 14));
        assert_eq!(bucket(&state, all, h2).await, (2, 1, 1, 0, Some(10.0), 4));
        let v = get_json(&state, &format!("/api/v1/history?{all}")).await;
        assert_eq!(v.as_array().unwrap().len(), 3);
        assert_eq!(v[1]["hit_rate"], 6.0 / 11.0);
        // Per kernel: add_kernel has 24 entries.
        let add = "machine=hooked&kernel=add_kernel&bucket=hour";
        assert_eq!(bucket(&state, add, h0).await, (0, 24, 24, 24, None, 0));
        assert_eq!(bucket(&state, add, h1).await, (4, 3, 2, 0, Some(300.75), 9));
        assert_eq!(bucket(&state, add, h2).await, (1, 1, 1, 0, Some(10.0), 3));
        // Per day: everything in one bucket.
        let day = h0 / 86_400_000 * 86_400_000;
        assert_eq!(bucket(&state, "machine=hooked&bucket=day", day).await, (8, 119, 118, 113, Some(660.75), 18));
        crate::history_agg::assert_history_fresh(&pool).await;
    };
    let s2 = scan().await.unwrap();
    assert_eq!(s2.events, 5, "the completed line and the four appended");
    check().await;
    let s3 = scan().await.unwrap();
    assert_eq!(s3.events, 0, "nothing new");
    check().await;

    // An evicted entry keeps its compile in the history.
    let evicted = keys_of(&root, "matmul_kernel")[0].clone();
    std::fs::remove_dir_all(root.join(&evicted)).unwrap();
    let s4 = scan().await.unwrap();
    assert_eq!(s4.removed_entries, 1);
    check().await;

    // Per kernel (the page's "top missing kernels"), as JSON: matmul misses most (62 compiles).
    let per_kernel = get_json(&state, "/api/v1/history/kernels?machine=hooked").await;
    assert_eq!(per_kernel[0]["name"], "matmul_kernel");
    assert_eq!(per_kernel[0]["misses"], 62);
    let add = per_kernel.as_array().unwrap().iter().find(|k| k["name"] == "add_kernel").unwrap();
    assert_eq!(
        *add,
        serde_json::json!({"name": "add_kernel", "hits": 5, "misses": 28, "compiles": 27, "inferred_compiles": 24,
                           "compile_ms": 310.75, "hook_events": 12,
                           // each hit at its key's compile time: k1 (100.5) three times, k2 (200.25) twice
                           "saved_ms": 702.0, "saved_hits": 5,
                           // over the hook's lookups only: 5 hits, 28 - 24 inferred = 4 misses
                           "hit_rate": 5.0 / 9.0})
    );
    let one = get_json(&state, "/api/v1/history/kernels?machine=hooked&limit=1&offset=1").await;
    assert_eq!(one.as_array().unwrap().len(), 1);
    assert_eq!(one[0]["name"], per_kernel[1]["name"]);

    // The page: full, and the htmx partial for a filter change.
    let (status, html) = get(&state, "/history?machine=hooked&bucket=hour").await;
    assert_eq!(status, 200);
    assert!(html.contains("<html") && html.contains("id=\"history-chart\""), "{html}");
    // misses are the hook's 6: 119 compiles less the 113 inferred from mtimes, which are no lookups
    assert!(html.contains("<b id=\"total-hits\">8</b>") && html.contains("<b id=\"total-misses\">6</b>"), "{html}");
    assert!(html.contains("<b id=\"total-compiles\">"), "{html}");
    // 8 hits over the hook's 8 + 6 lookups (the 113 compiles inferred from mtimes are no lookups)
    assert!(html.contains("<b id=\"total-hit-rate\">57.1%</b>"), "{html}");
    let top = html.split("id=\"top-kernels\"").nth(1).unwrap();
    assert!(top.find("matmul_kernel").unwrap() < top.find("add_kernel").unwrap(), "matmul misses most (62)");
    let (status, partial) = get_hx(&state, "/history?machine=hooked&kernel=add_kernel&bucket=day").await;
    assert_eq!(status, 200);
    assert!(!partial.contains("<html") && partial.contains("<b id=\"total-misses\">4</b>"), "{partial}");
}
