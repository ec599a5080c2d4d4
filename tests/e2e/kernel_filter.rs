//! The kernel page's filter (`?machine=&triton_version=&backend=`) on the demo fleet, whose
//! add_kernel lives on CUDA and ROCm machines under four Triton versions: the grids, their cells
//! and the count hold exactly the live entries the filter picks, as the database has them.

use crate::common::*;

fn cell_counts(page: &str) -> i64 {
    page.split("<span class=\"cell-count\">")
        .skip(1)
        .map(|c| c.split(' ').next().unwrap().parse::<i64>().unwrap())
        .sum()
}

fn grid_titles(page: &str) -> Vec<String> {
    page.split("<section class=\"variant-group\">\n<h2>")
        .skip(1)
        .map(|s| s.split("</h2>").next().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn kernel_page_filters_by_machine_version_and_backend() {
    let (_keep, state) = fleet().await;
    let pool = state.db.pool();
    let live = |filter: &'static str| {
        let pool = pool.clone();
        async move {
            count(
                &pool,
                &format!(
                    "SELECT COUNT(*) FROM entry_rows e JOIN machines m ON m.id = e.machine_id
                     WHERE e.kernel = 'add_kernel' AND e.removed_at IS NULL AND e.num_warps IS NOT NULL {filter}"
                ),
            )
            .await
        }
    };
    let (_, all) = get(&state, "/kernels/add_kernel").await;
    let total = live("").await;
    assert!(all.contains(&format!("<span id=\"kernel-count\">{total}</span> live entries.")), "unfiltered");
    assert_eq!(cell_counts(&all), total);
    // The form offers what the kernel's entries have.
    for m in ["a100-1", "h100-a", "h100-c", "mi300-1"] {
        assert!(all.contains(&format!("<option value=\"{m}\">{m}</option>")), "{m}");
    }
    for v in ["3.4.0", "3.5.1", "3.6.0", "3.9.0"] {
        assert!(all.contains(&format!("<option value=\"{v}\">{v}</option>")), "{v}");
    }
    for (uri, filter, title) in [
        ("/kernels/add_kernel?machine=a100-1", "AND m.name = 'a100-1'", "cuda / sm_80"),
        ("/kernels/add_kernel?triton_version=3.5.1", "AND e.triton_version = '3.5.1'", "Triton 3.5.1"),
        ("/kernels/add_kernel?backend=hip", "AND e.backend = 'hip'", "hip / gfx942"),
        (
            "/kernels/add_kernel?machine=mi300-1&triton_version=3.9.0&backend=",
            "AND m.name = 'mi300-1' AND e.triton_version = '3.9.0'",
            "hip / gfx942 · Triton 3.9.0",
        ),
    ] {
        let (status, page) = get(&state, uri).await;
        assert_eq!(status, 200, "{uri}");
        let n = live(filter).await;
        assert!(n > 0 && n < total, "{uri}: {n} of {total}");
        assert!(
            page.contains(&format!("<span id=\"kernel-count\">{n}</span> live entries of {total} (filtered)")),
            "{uri}"
        );
        assert_eq!(cell_counts(&page), n, "{uri}");
        let titles = grid_titles(&page);
        assert!(!titles.is_empty() && titles.iter().all(|t| t.contains(title)), "{uri}: {titles:?}");
    }
    // One machine's cells name that machine alone, and its picked option is selected.
    let (_, page) = get(&state, "/kernels/add_kernel?machine=h100-a").await;
    assert!(page.contains("<option value=\"h100-a\" selected>h100-a</option>"));
    let ons: Vec<&str> = page
        .split("entries</span> on ")
        .skip(1)
        .chain(page.split("entry</span> on ").skip(1))
        .map(|s| s.split('<').next().unwrap())
        .collect();
    assert!(!ons.is_empty() && ons.iter().all(|m| *m == "h100-a"), "{ons:?}");
    // Nothing matches: said, not a 404.
    let (status, page) = get(&state, "/kernels/add_kernel?machine=h100-a&backend=hip").await;
    assert_eq!(status, 200);
    assert!(page.contains("id=\"kernel-none\"") && cell_counts(&page) == 0);
}
