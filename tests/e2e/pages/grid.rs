//! The kernel page's variants grid keeps autotune timings in the grid they were measured in;
//! every HTML view says `Vary: HX-Request`.

use super::ok;
use crate::common::*;
use cachelens::web::{AppState, Config};

/// (title, body) of each `<section class="variant-group">` of a kernel page.
fn grids(page: &str) -> Vec<(String, String)> {
    page.split("<section class=\"variant-group\">")
        .skip(1)
        .map(|s| {
            let body = &s[..s.find("</section>").unwrap()];
            let t = &body[body.find("<h2>").unwrap() + 4..];
            (t[..t.find("</h2>").unwrap()].to_string(), body.to_string())
        })
        .collect()
}

/// The times shown with a winner badge in a grid.
fn winner_times(grid: &str) -> Vec<String> {
    grid.split("<span class=\"badge win\">winner</span> ")
        .skip(1)
        .map(|x| x[..x.find(" ms").unwrap()].to_string())
        .collect()
}

/// An H100 that autotuned matmul_kernel (JIT, Triton 3.6.0) and an A100 that compiled the same
/// configs ahead of time with 3.4.0 and then 3.5.1, without autotuning.
#[tokio::test]
async fn autotune_timings_stay_in_the_grid_they_were_measured_in() {
    let (_keep, pool) = corpus_db(&[
        ("h100-a", "h100-jit-3.6.0", "triton-cache"),
        ("h100-c", "h100-fpfusion-off-triton-3.6.0", "triton-cache"),
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("a100-1", "a100-upgrade-2-triton-3.5.1", "triton-cache"),
    ])
    .await;
    let s = AppState::new(pool.clone(), Config::default());
    let page = ok(&s, "/kernels/matmul_kernel").await;
    let all = grids(&page);
    let (a100, h100): (Vec<_>, Vec<_>) = all.iter().partition(|(t, _)| t.contains("sm_80"));
    assert!(a100.iter().any(|(t, _)| t.contains("3.4.0")) && a100.iter().any(|(t, _)| t.contains("3.5.1")), "{all:?}");
    assert!(!h100.is_empty() && h100.iter().all(|(t, _)| t == "cuda / sm_90 · Triton 3.6.0"), "{all:?}");
    // the A100 never autotuned: its grids show no timing and no winner, though its cells have
    // the very configs (warps, stages, block shapes) the H100 timed
    for (t, g) in &a100 {
        assert!(g.contains("cell-count"), "{t} has cells");
        assert!(!g.contains("class=\"kwargs\"") && !g.contains("badge win"), "{t} shows H100 timings: {g}");
    }
    // the H100 grids show the H100's own winners, every one of them
    let winners: Vec<f64> = sqlx::query_scalar(
        "SELECT a.best_ms FROM fact_autotune a JOIN entry_rows e ON e.fact_id = a.fact_id WHERE a.winner = 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(winners.len(), 4, "one winner per H100 autotune run (cold, debug, edit, line info)");
    // a cell shows a config's best time over the runs that measured it, marked if it won any
    let best: Vec<f64> = sqlx::query_scalar(
        "SELECT MIN(a.best_ms) FROM fact_autotune a JOIN entry_rows e ON e.fact_id = a.fact_id
             GROUP BY a.config_json HAVING SUM(a.winner) > 0",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let want: std::collections::BTreeSet<String> = best.iter().map(|m| format!("{m:.4}")).collect();
    let shown: std::collections::BTreeSet<String> = h100.iter().flat_map(|(_, g)| winner_times(g)).collect();
    assert_eq!(shown, want, "the H100 grids mark the H100 winners");
    // h100-c compiled sm_90 3.6.0 too (with fp fusion off) and never autotuned: cells holding only
    // its entries show no timing
    let mut only_c = 0;
    for (_, g) in &h100 {
        for td in g.split("<td class=\"").skip(1) {
            let td = &td[..td.find("</td>").unwrap()];
            if td.contains("</span> on h100-c</div>") {
                only_c += 1;
                assert!(!td.contains("class=\"kwargs\""), "an h100-c cell shows h100-a's timings: {td}");
            }
        }
    }
    assert!(only_c > 0, "the corpus has cells with h100-c entries only");
    for (_, g) in &h100 {
        assert!(
            g.split("<div class=\"kwargs\" title=\"")
                .skip(1)
                .all(|x| x.starts_with("measured in") && x.contains(" on h100-a\"")),
            "every timing in the H100 grid was measured on h100-a"
        );
    }
    // BM=64 BN=128 and BM=128 BN=64 use the same block sizes: each timing sits in the grid whose
    // TTIR has its BM x BN accumulator tile, so each winner shows once, not in both grids
    for (_, g) in &h100 {
        let shapes = &g[g.find("shapes <code>").expect("grid shapes") + 13..];
        let shapes = &shapes[..shapes.find("</code>").unwrap()];
        for k in g.split("<div class=\"kwargs\"").skip(1) {
            let k = &k[..k.find("</div>").unwrap()];
            let val = |n: &str| k.split(&format!(" {n}=")).nth(1).and_then(|v| v.split(' ').next()).map(str::to_string);
            let (bm, bn) = (val("BM").expect("BM"), val("BN").expect("BN"));
            assert!(shapes.split(',').any(|t| t == format!("{bm}x{bn}")), "BM={bm} BN={bn} timing in grid {shapes}");
        }
    }
    let per_grid: Vec<String> = h100.iter().flat_map(|(_, g)| winner_times(g)).collect();
    assert_eq!(per_grid.len(), want.len(), "each winning config shows in one cell: {per_grid:?}");
    // the full list says where each config was measured
    let table = &page[page.find("id=\"autotune\"").unwrap()..];
    assert_eq!(table.matches("<td>cuda / sm_90 · Triton 3.6.0</td>").count(), 30, "30 configs, all measured on sm_90");
    assert!(!table.contains("sm_80"));
}

/// Pages answer a fragment or a whole page depending on HX-Request: caches must know.
#[tokio::test]
async fn html_views_vary_on_hx_request() {
    let (_keep, pool) = corpus_db(&[("mi300-1", "mi300-upgrade-1-triton-3.6.0", "triton-cache")]).await;
    let s = AppState::new(pool, Config::default());
    let key: String =
        sqlx::query_scalar("SELECT key FROM entry_rows WHERE kind = 'kernel' AND kernel = 'softmax_kernel' LIMIT 1")
            .fetch_one(s.db.pool())
            .await
            .unwrap();
    let vary = |uri: String, hx: bool| {
        let s = s.clone();
        async move {
            use tower::ServiceExt;
            let mut req = axum::http::Request::builder().uri(&uri);
            if hx {
                req = req.header("HX-Request", "true");
            }
            let resp = cachelens::web::app(s).oneshot(req.body(axum::body::Body::empty()).unwrap()).await.unwrap();
            assert_eq!(resp.status(), 200, "{uri}");
            resp.headers()
                .get_all("vary")
                .iter()
                .map(|v| v.to_str().unwrap().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    for uri in [
        "/".to_string(),
        "/machines/mi300-1".into(),
        "/kernels".into(),
        "/kernels?q=soft".into(),
        "/kernels/softmax_kernel".into(),
        format!("/entries/mi300-1/{key}"),
        format!("/entries/mi300-1/{key}?ir=ttir"),
        format!("/entries/mi300-1/{key}/nearest"),
        "/history?machine=mi300-1".into(),
        "/invalidations".into(),
    ] {
        for hx in [false, true] {
            let v = vary(uri.clone(), hx).await;
            assert!(v.split(',').any(|x| x.trim().eq_ignore_ascii_case("HX-Request")), "{uri} (hx {hx}): Vary {v:?}");
        }
    }
    // JSON and raw text do not depend on it
    assert_eq!(vary("/api/v1/machines".into(), false).await, "");
    assert!(!vary(format!("/entries/mi300-1/{key}/raw/softmax_kernel.ttir"), false).await.contains("HX-Request"));
    // (and the fragment really differs from the page)
    assert!(!get_hx(&s, "/kernels?q=soft").await.1.contains("<html"));
}
