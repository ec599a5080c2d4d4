//! Where compile time goes, and a Python change on the timeline, from the real hook under a real
//! `pip install triton` (3.6.0): the add kernels compiled with `TRITON_CACHE_MANAGER` set, into
//! one cache, under `CACHELENS_PYTHON` and then `CACHELENS_PYTHON_OTHER` (another Python minor).
//! The entry page lists each compile's stage times as the hook's event file holds them; the kernel
//! page sums them per stage; the timeline tells the Python change; the history page leads from
//! each miss of the second run to the key its variant had before and their comparison.

use crate::common::*;
use crate::explain_exact::{compile, python, workload};
use cachelens::web::{AppState, Config};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The compile lines of the hook's event files under `cache`.
fn compiles(cache: &Path) -> Vec<Value> {
    let mut out = vec![];
    for f in std::fs::read_dir(cache.join(".cachelens")).unwrap() {
        let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
        out.extend(text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).filter(|v| v["event"] == "compile"));
    }
    out
}

/// Stage → (summed ms, compiles) of `lines`.
fn sums(lines: &[&Value]) -> BTreeMap<String, (f64, i64)> {
    let mut s: BTreeMap<String, (f64, i64)> = BTreeMap::new();
    for l in lines {
        for (k, v) in l["stages_ms"].as_object().unwrap() {
            let x = s.entry(k.clone()).or_default();
            x.0 += v.as_f64().unwrap();
            x.1 += 1;
        }
    }
    s
}

fn stage_rows(page: &str) -> BTreeMap<String, (String, i64)> {
    let section = page.split("id=\"stages\"").nth(1).unwrap().split("</section>").next().unwrap();
    section
        .split("<tr data-stage=\"")
        .skip(1)
        .map(|r| {
            let stage = r.split('"').next().unwrap().to_string();
            let ms = r.split("class=\"n stage-ms\">").nth(1).unwrap().split('<').next().unwrap().to_string();
            let n = r.rsplit("<td class=\"n\">").next().unwrap().split('<').next().unwrap().parse().unwrap();
            (stage, (ms, n))
        })
        .collect()
}

#[tokio::test]
async fn hooked_compiles_show_where_compile_time_goes() {
    let (Some(py), Some(other)) = (python("CACHELENS_PYTHON"), python("CACHELENS_PYTHON_OTHER")) else { return };
    let hook = Path::new(env!("CARGO_MANIFEST_DIR")).join("hook");
    let hooked =
        [("TRITON_CACHE_MANAGER", "cachelens_hook:TrackingCacheManager"), ("PYTHONPATH", hook.to_str().unwrap())];
    let tmp = tempfile::TempDir::new().unwrap();
    let cache = tmp.path().join("cache");
    let (_db, pool) = fresh_db().await;
    compile(&py, &workload(), &cache, "add", &hooked);
    scan(&pool, &cache, "gpu-1").await;
    let first = compiles(&cache);
    assert_eq!(first.len(), 6, "six add variants compiled once each");
    assert!(
        first
            .iter()
            .all(|l| l["stages_ms"].as_object().is_some_and(|o| o.contains_key("ttir") && o.contains_key("cubin")))
    );
    let state = AppState::new(pool.clone(), Config::default());

    // The entry page: the compile's stages, as the hook recorded them, in pipeline order.
    let l = &first[0];
    let key = l["key"].as_str().unwrap();
    let (status, page) = get(&state, &format!("/entries/gpu-1/{key}")).await;
    assert_eq!(status, 200);
    let section = page.split("id=\"compile-stages\"").nth(1).unwrap().split("</section>").next().unwrap();
    assert_eq!(section.matches("class=\"compile-row\"").count(), 1, "{section}");
    let heads: Vec<&str> = section.split("<th class=\"n\">").skip(2).map(|h| h.split('<').next().unwrap()).collect();
    let order = cachelens::db::stages::ORDER;
    let mut want: Vec<&str> = l["stages_ms"].as_object().unwrap().keys().map(String::as_str).collect();
    want.sort_by_key(|k| order.iter().position(|o| o == k).unwrap_or(order.len()));
    assert_eq!(heads, want);
    for k in &want {
        assert!(section.contains(&cachelens::fmt::ms(l["stages_ms"][k].as_f64().unwrap())), "{k}: {section}");
    }
    assert!(section.contains(&cachelens::fmt::ms(l["compile_ms"].as_f64().unwrap())));

    // The same kernels under another Python, into the same cache: every key changes (libtriton
    // is per Python ABI), so six more compiles; the timeline says the Python changed.
    compile(&other, &workload(), &cache, "add", &hooked);
    scan(&pool, &cache, "gpu-1").await;
    let all = compiles(&cache);
    assert_eq!(all.len(), 12);
    let pythons: Vec<String> = {
        let mut p: Vec<(f64, String)> = all
            .iter()
            .map(|l| (l["ts"].as_f64().unwrap(), l["parts"]["python"].as_str().unwrap().to_string()))
            .collect();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        vec![p[0].1.clone(), p[11].1.clone()]
    };
    assert_ne!(pythons[0], pythons[1]);
    let tl = get_json(&state, "/api/v1/timeline").await;
    let py_events: Vec<&Value> = arr(&tl).iter().filter(|e| e["kind"] == "python").collect();
    assert_eq!(py_events.len(), 1, "{tl}");
    assert_eq!(py_events[0]["text"], format!("Python {} → {}", pythons[0], pythons[1]));
    assert!(arr(&tl).iter().all(|e| e["kind"] != "triton"), "one Triton release: {tl}");

    // The history page, from a miss to why it missed: the second run's six misses (newest
    // first) each name the key it compiled and its variant's key from the first run; their
    // comparison says another compiler build (the Python, recorded by the hook). The first run's
    // misses had no earlier key.
    let (_, page) = get(&state, "/history?machine=gpu-1").await;
    let rows = miss_rows(&page);
    assert_eq!(rows.len(), 10, "{rows:?}");
    let first_keys: Vec<&str> = first.iter().map(|l| l["key"].as_str().unwrap()).collect();
    for (m, k, earlier, why) in &rows[..6] {
        assert!(m == "gpu-1" && !first_keys.contains(&k.as_str()), "{k}");
        let (em, ek) = earlier.clone().expect("an earlier key of the variant");
        assert!(em == "gpu-1" && first_keys.contains(&ek.as_str()), "{ek}");
        let variant = "SELECT kernel || signature || shapes || num_warps || num_stages FROM entry_rows WHERE key = ?";
        let v = |key: String| {
            let pool = pool.clone();
            async move { sqlx::query_scalar::<_, String>(variant).bind(key).fetch_one(&pool).await.unwrap() }
        };
        assert_eq!(v(k.clone()).await, v(ek.clone()).await);
        let why = why.clone().unwrap();
        assert_eq!(why, format!("/compare?a=gpu-1:{ek}&b=gpu-1:{k}"));
        let (status, _) = get(&state, &why).await;
        assert_eq!(status, 200);
        let cmp = get_json(&state, &format!("/api/v1/compare?a=gpu-1:{ek}&b=gpu-1:{k}")).await;
        assert_eq!((cmp["cause"].as_str(), cmp["evidence"].as_str()), (Some("compiler"), Some("recorded")), "{cmp}");
    }
    assert!(rows[6..].iter().all(|r| first_keys.contains(&r.1.as_str()) && r.2.is_none()), "{rows:?}");

    // Another machine, hooked too: the kernel page sums every compile of both, or one machine's.
    let other_cache = tmp.path().join("cache2");
    compile(&py, &workload(), &other_cache, "add", &hooked);
    scan(&pool, &other_cache, "gpu-2").await;
    let two = compiles(&other_cache);
    let every: Vec<&Value> = all.iter().chain(two.iter()).collect();
    for (uri, lines) in
        [("/kernels/add_kernel", every.clone()), ("/kernels/add_kernel?machine=gpu-2", two.iter().collect())]
    {
        let (status, page) = get(&state, uri).await;
        assert_eq!(status, 200, "{uri}");
        let shown = stage_rows(&page);
        let want = sums(&lines);
        assert_eq!(shown.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{uri}");
        for (k, (ms, n)) in &want {
            assert_eq!(shown[k], (cachelens::fmt::ms(*ms), *n), "{uri} {k}");
        }
        let total: f64 = want.values().map(|x| x.0).sum();
        assert!(page.contains(&format!("<strong id=\"stages-total\">{}</strong>", cachelens::fmt::ms(total))), "{uri}");
    }
    // A rescan reads no line twice: the sums stay.
    scan(&pool, &cache, "gpu-1").await;
    let (_, page) = get(&state, "/kernels/add_kernel").await;
    assert_eq!(stage_rows(&page).values().map(|x| x.1).max(), Some(18));
}

/// The history page's latest misses as (machine, key compiled, earlier (machine, key), compare
/// href), from the hrefs of each row.
type MissRow = (String, String, Option<(String, String)>, Option<String>);

fn miss_rows(page: &str) -> Vec<MissRow> {
    let Some(table) = page.split("<table id=\"latest-misses\">").nth(1) else { return vec![] };
    let table = table.split("</table>").next().unwrap();
    let entry = |h: &str| {
        let mut p = h.trim_start_matches("/entries/").splitn(2, '/');
        (p.next().unwrap().to_string(), p.next().unwrap().to_string())
    };
    table
        .split("<tr class=\"miss-row\">")
        .skip(1)
        .map(|r| {
            let href = |class: &str| {
                let cell = r.split(&format!("class=\"{class}")).nth(1)?;
                let h = cell.split("href=\"").nth(1)?.split('"').next()?;
                Some(h.replace("&#38;", "&").replace("&amp;", "&"))
            };
            let (m, k) = entry(&href("mono miss-key").expect("the key's entry is linked"));
            let earlier = href("mono miss-earlier").map(|h| entry(&h));
            let why = r
                .split("class=\"miss-why\" href=\"")
                .nth(1)
                .map(|h| h.split('"').next().unwrap().replace("&#38;", "&"));
            (m, k, earlier, why)
        })
        .collect()
}

/// On the real h100-hook cache (16 misses of 16 variants, each its variant's first compile): the
/// latest ten, newest first, each linking to the entry it compiled; the kernel filter keeps its own.
#[tokio::test]
async fn history_lists_the_latest_misses() {
    let (_keep, pool) = corpus_db(&[("h100-hook", "h100-hook-3.6.0", "triton-cache")]).await;
    let state = AppState::new(pool.clone(), Config::default());
    let want: Vec<String> = sqlx::query_scalar("SELECT key FROM events WHERE event = 'miss' ORDER BY ts DESC LIMIT 10")
        .fetch_all(&pool)
        .await
        .unwrap();
    let (_, page) = get(&state, "/history").await;
    let rows = miss_rows(&page);
    assert_eq!(rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>(), want);
    assert!(rows.iter().all(|r| r.0 == "h100-hook" && r.2.is_none()), "{rows:?}");
    assert_eq!(page.matches("none: the variant's first compile").count(), 10);
    for (_, k, _, _) in &rows {
        let (status, _) = get(&state, &format!("/entries/h100-hook/{k}")).await;
        assert_eq!(status, 200);
    }
    let (_, page) = get(&state, "/history?kernel=softmax_kernel").await;
    let rows = miss_rows(&page);
    let soft: Vec<String> = sqlx::query_scalar(
        "SELECT key FROM events WHERE event = 'miss' AND kernel = 'softmax_kernel' ORDER BY ts DESC",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>(), soft);
    assert_eq!(soft.len(), 2);
    let (_, page) = get(&state, "/history?machine=nobody").await;
    assert!(miss_rows(&page).is_empty() && page.contains("The hook recorded no miss here."));
}
