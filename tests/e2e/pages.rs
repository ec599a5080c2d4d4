//! The HTML dashboard on the whole corpus: every page and fragment, 404s, empty states, escaping.

mod autotune;
mod cost;
mod demo;
mod grid;
mod htmx;
mod snapshots;
mod views;

use crate::common::*;
use cachelens::web::{AppState, Config};

pub(crate) async fn ok(state: &AppState, uri: &str) -> String {
    let (status, body) = get(state, uri).await;
    assert_eq!(status, 200, "GET {uri}: {body}");
    assert!(body.starts_with("<!doctype html>"), "GET {uri} is a full page");
    body
}

pub(crate) async fn ok_hx(state: &AppState, uri: &str) -> String {
    let (status, body) = get_hx(state, uri).await;
    assert_eq!(status, 200, "GET {uri} (htmx): {body}");
    assert!(!body.contains("<html") && !body.contains("<header"), "GET {uri} (htmx) is a fragment: {body}");
    body
}

/// The `<div id="{id}">…` block of a full page (the part htmx swaps).
pub(crate) fn inner<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page.find(&format!("<div id=\"{id}\">")).unwrap_or_else(|| panic!("no #{id}")) + id.len() + 11;
    &page[start..]
}

async fn first_entry(state: &AppState, machine: &str, kernel: &str) -> String {
    let v = get_json(state, &format!("/api/v1/entries?machine={machine}&kernel={kernel}&limit=1000")).await;
    let e = v.as_array().unwrap().iter().find(|e| e["kind"] == "kernel").expect("a kernel entry");
    e["key"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn every_page_and_partial_on_the_fleet() {
    let (_keep, s) = fleet().await;

    // overview
    let o = ok(&s, "/").await;
    for m in ["a100-1", "h100-a", "h100-b", "h100-c", "mi300-1"] {
        assert!(o.contains(&format!("href=\"/machines/{m}\"")), "overview links {m}");
    }
    assert!(o.contains("3.4.0, 3.5.1"), "a100-1 versions");
    assert!(o.contains("Recent scans") && o.contains("Relocated") && o.contains("Skipped"));
    assert!(o.contains("TRITON_STORE_BINARY_ONLY=1") && o.contains("id=\"binary-only-saving\""));
    // the artifact-type table: snapshots.rs
    assert!(o.contains("/static/vendor/htmx-2.0.11.min.js"));
    let oh = ok_hx(&s, "/").await;
    assert!(oh.contains("href=\"/machines/a100-1\""));

    // machine
    let m = ok(&s, "/machines/a100-1").await;
    // the Triton versions table: snapshots.rs
    assert!(m.contains("href=\"/history?machine=a100-1\""));
    assert!(
        m.contains("<svg class=\"chart\"")
            && m.contains("Entries (all cache dirs)")
            && m.contains("Entries compiled per day")
    );
    assert!(
        m.contains("id=\"relocated-warning\"")
            && m.contains("Triton will miss on them here — a copied or moved cache is silently useless")
    );
    assert!(m.contains("Biggest kernels") && m.contains("href=\"/kernels/"));
    let mh = ok_hx(&s, "/machines/a100-1").await;
    assert!(mh.contains("Entries (all cache dirs)"));

    // kernel list: full page, search partial, filters, same list on a full load
    let k = ok(&s, "/kernels").await;
    assert!(k.contains("hx-trigger=\"input changed delay:200ms, search\"") && k.contains("hx-push-url=\"true\""));
    assert!(k.contains("href=\"/kernels/matmul_kernel\""));
    let kh = ok_hx(&s, "/kernels?q=soft").await;
    assert!(!kh.contains("<form"), "the search partial is the results only");
    let names: Vec<&str> =
        kh.split("class=\"kernel-link\" href=\"/kernels/").skip(1).map(|x| &x[..x.find('"').unwrap()]).collect();
    assert!(!names.is_empty() && names.iter().all(|n| n.contains("soft")), "{names:?}");
    let full = ok(&s, "/kernels?q=soft").await;
    assert!(inner(&full, "results").starts_with(kh.as_str()), "a full load renders the same list as the partial");
    assert!(full.contains("value=\"soft\""), "the search box keeps the query");
    let hip = ok_hx(&s, "/kernels?backend=hip&sort=name").await;
    assert!(hip.contains("/kernels/softmax_kernel") && !hip.contains("triton_poi_"), "hip filter: only mi300 kernels");
    let by_ver = ok(&s, "/kernels?machine=a100-1&triton_version=3.4.0").await;
    assert!(by_ver.contains("<option value=\"3.4.0\" selected>"));
    let api = get_json(&s, "/api/v1/kernels?machine=a100-1&triton_version=3.4.0").await;
    assert_eq!(inner(&by_ver, "results").matches("class=\"kernel-link\"").count(), api.as_array().unwrap().len());
    let all = get_json(&s, "/api/v1/kernels?limit=10000").await.as_array().unwrap().len();
    let p2 = ok_hx(&s, "/kernels?sort=name&page=2").await;
    if all > 50 {
        assert!(p2.contains("kernels 51–") && p2.contains("← previous"));
    } else {
        assert!(p2.contains("No kernel matches"));
    }
    assert!(ok_hx(&s, "/kernels?q=no-such-kernel-xyz").await.contains("No kernel matches"));

    // kernel page: variants grid with autotune winner and kwargs
    let mk = ok(&s, "/kernels/matmul_kernel").await;
    assert!(mk.contains("num_warps=4") && mk.contains("num_stages=3"), "warps across, stages down");
    assert!(mk.contains("badge win\">winner") && mk.contains("BM=128"), "autotune winner and kwargs shown");
    assert!(mk.contains("h100-a") && mk.contains("href=\"/history?kernel=matmul_kernel\""));
    assert!(mk.contains("registers "), "cell resources");
    // the grid's counts come from the summary tables: they add up to the live entries
    let live: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM entry_rows WHERE kernel = 'matmul_kernel' AND removed_at IS NULL")
            .fetch_one(s.db.pool())
            .await
            .unwrap();
    assert!(
        mk.contains(&format!("<p><span id=\"kernel-count\">{live}</span> live entries.")),
        "kernel page counts {live} live entries"
    );
    let cells: i64 = mk
        .split("<span class=\"cell-count\">")
        .skip(1)
        .map(|x| x[..x.find(' ').unwrap()].parse::<i64>().unwrap())
        .sum();
    let others: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM entry_rows WHERE kernel = 'matmul_kernel' AND removed_at IS NULL AND num_warps IS NULL AND num_stages IS NULL",
    )
    .fetch_one(s.db.pool())
    .await
    .unwrap();
    assert_eq!(cells + others, live, "grid cells plus other entries = live entries");
    // entries whose binary another key of the kernel also has (counted here in Rust)
    let rows: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT key, binary_sha256 FROM entry_rows WHERE kernel = 'matmul_kernel' AND removed_at IS NULL",
    )
    .fetch_all(s.db.pool())
    .await
    .unwrap();
    let mut keys_of: std::collections::HashMap<&str, std::collections::HashSet<&str>> = Default::default();
    for (k, sha) in &rows {
        if let Some(sha) = sha {
            keys_of.entry(sha).or_default().insert(k);
        }
    }
    let churn = rows.iter().filter(|(_, sha)| sha.as_deref().is_some_and(|h| keys_of[h].len() > 1)).count();
    assert!(churn > 0, "the corpus has matmul variants with identical binaries");
    assert!(
        mk.contains(&format!("{churn} entries compiled to the same bytes as another key of this kernel")),
        "kernel page counts {churn} entries sharing a binary"
    );
    // It says what that is (options that changed nothing in the code), not a recompile.
    let notice = &mk[mk.find("id=\"same-binary\"").unwrap()..];
    let notice = &notice[..notice.find("</p>").unwrap()];
    assert!(
        notice.contains("num_stages 3, 4 and 5") && !notice.contains("churn") && !notice.contains("recompile"),
        "{notice}"
    );
    let marked: usize = mk
        .split("title=\"")
        .filter(|x| x.contains("entries of this cell have a binary"))
        .map(|x| x[..x.find(' ').unwrap()].parse::<usize>().unwrap())
        .sum();
    assert_eq!(marked, churn, "the cells' same-binary marks add up");
    assert!(ok_hx(&s, "/kernels/matmul_kernel").await.contains("class=\"variants\""));
    // an Inductor kernel whose entry a .best_config names
    let b = ok(&s, "/kernels?machine=h100-b&sort=name").await;
    let inductor: Vec<String> =
        b.split("class=\"kernel-link\" href=\"").skip(1).map(|x| x[..x.find('"').unwrap()].to_string()).collect();
    let mut best = 0;
    for h in &inductor {
        best += ok(&s, h).await.matches("badge ok\">best config").count();
    }
    assert!(best > 0, "Inductor best configs are marked on their entries");

    // entry page: an mi300 entry shows VGPRs and the amdgcn tab
    let key = first_entry(&s, "mi300-1", "softmax_kernel").await;
    let url = format!("/entries/mi300-1/{key}");
    let e = ok(&s, &url).await;
    assert!(e.contains("VGPRs") && e.contains("vgpr_count"), "AMD resources");
    assert!(e.contains("Nearest neighbours / compare") && e.contains(&format!("href=\"{url}/nearest\"")));
    assert!(e.contains(">amdgcn</a>") && e.contains("class=\"gutter\""));
    assert!(e.contains("Other variants of this kernel") && e.contains("Artifacts") && e.contains("Group file"));
    assert!(e.contains("Triton will miss on it here — a copied or moved cache is silently useless"));
    let ir = ok_hx(&s, &format!("{url}?ir=amdgcn")).await;
    assert!(ir.contains("ir-tab active\">amdgcn") && ir.contains("data-file=\"softmax_kernel.amdgcn\""));
    let full_ir = ok(&s, &format!("{url}?ir=ttir")).await;
    assert!(full_ir.contains("ir-tab active\">ttir"), "the tab is in the URL");
    let (st, raw) = get(&s, &format!("{url}/raw/softmax_kernel.ttir")).await;
    assert_eq!(st, 200);
    assert!(raw.contains("tt.func"));
    let cuda = first_entry(&s, "h100-a", "matmul_kernel").await;
    let c = ok(&s, &format!("/entries/h100-a/{cuda}")).await;
    assert!(c.contains(">ptx</a>") && c.contains(".cubin"));

    // errors are HTML pages with the right status
    for uri in ["/machines/nope", "/kernels/nope", "/entries/a100-1/NOPE", "/nope", &format!("{url}/raw/nope.ttir")] {
        let (st, body) = get(&s, uri).await;
        assert_eq!(st, 404, "{uri}");
        assert!(body.contains("<!doctype html>") && body.contains("404"), "{uri}: {body}");
    }
    let (st, _) = get(&s, &format!("{url}/raw/softmax_kernel.hsaco")).await;
    assert_eq!(st, 404, "binaries have no text");

    // static files
    let (st, js) = get(&s, "/static/vendor/htmx-2.0.11.min.js").await;
    assert!(st == 200 && js.contains("htmx"));
    assert_eq!(get(&s, "/static/style.css").await.0, 200);
}

#[tokio::test]
async fn a_fresh_database_shows_empty_states() {
    let (_t, pool) = fresh_db().await;
    let s = AppState::new(pool, Config::default());
    assert!(ok(&s, "/").await.contains("No scans yet — run <code>cachelens scan</code>"));
    assert!(ok(&s, "/kernels").await.contains("No scans yet"));
    assert!(ok_hx(&s, "/kernels?q=x").await.contains("No kernel matches"));
}

/// A machine, a scan and one entry named `<script>` with a huge TTIR, inserted directly.
async fn hostile(pool: &cachelens::db::Store) {
    let ir: String = (0..25_000).map(|i| format!("<script>alert({i})</script>\n")).collect();
    let sha = "ab".repeat(32);
    for sql in [
        "INSERT INTO machines(id, name, created_at) VALUES (1, 'm<b>1', 0)",
        "INSERT INTO scans(id, machine_id, client_id, scanned_at, root, entries, new_entries, changed_entries, removed_entries, bytes, skipped, skipped_json, relocated, source)
         VALUES (1, 1, 'c', 1700000000000, '/cache', 1, 1, 0, 0, 10, 0, '{}', 0, 'local')",
        "INSERT INTO roots(id, path) VALUES (1, '/cache')",
        "INSERT INTO facts(id, key, kind, kernel, backend, arch, num_warps, num_stages, triton_version)
         VALUES (1, 'KEY1', 'kernel', '<script>alert(1)</script>', 'cuda', 'sm_90', 4, 3, '3.6.0')",
        "INSERT INTO keys(id, key) VALUES (1, 'KEY1')",
        "INSERT INTO entries(id, machine_id, root_id, key_id, fact_id, created_at, bytes, sig, first_scan_id, last_scan_id, first_seen_at, last_seen_at)
         VALUES (1, 1, 1, 1, 1, 1700000000000, 10, 's', 1, 1, 0, 0)",
    ] {
        sqlx::query(sql).execute(pool).await.unwrap();
    }
    sqlx::query("INSERT INTO artifacts(entry_id, name, ext, bytes, sha256) VALUES (1, 'k.ttir', 'ttir', ?, ?)")
        .bind(ir.len() as i64)
        .bind(&sha)
        .execute(pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO blobs(sha256, bytes, content) VALUES (?, ?, ?)")
        .bind(&sha)
        .bind(ir.len() as i64)
        .bind(&ir)
        .execute(pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn names_and_ir_render_as_text_and_huge_ir_is_capped() {
    let (_t, pool) = fresh_db().await;
    hostile(&pool).await;
    let s = AppState::new(pool, Config::default());
    let name = "%3Cscript%3Ealert%281%29%3C%2Fscript%3E";
    for uri in [
        "/".to_string(),
        "/kernels".into(),
        "/kernels?q=script".into(),
        format!("/kernels/{name}"),
        "/machines/m%3Cb%3E1".into(),
        "/entries/m%3Cb%3E1/KEY1".into(),
    ] {
        let body = ok(&s, &uri).await;
        assert!(!body.contains("<script>alert") && !body.contains("m<b>1"), "{uri} escapes names");
    }
    let k = ok(&s, "/kernels").await;
    assert!(
        k.contains("&#60;script&#62;alert(1)&#60;/script&#62;") || k.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{k}"
    );
    assert!(k.contains(&format!("href=\"/kernels/{name}\"")));
    let e = ok(&s, "/entries/m%3Cb%3E1/KEY1").await;
    assert!(e.contains("Showing the first 20000 of 25000 lines") && e.contains("/entries/m%3Cb%3E1/KEY1/raw/k.ttir"));
    assert!(!e.contains("alert(20000)"), "lines past the cap are not rendered");
    let (st, raw) = get(&s, "/entries/m%3Cb%3E1/KEY1/raw/k.ttir").await;
    assert_eq!(st, 200);
    assert_eq!(raw.lines().count(), 25_000, "the raw text is whole");
}

/// The summary tables follow new scans: a page after an in-place upgrade shows the new figures
/// (a small database rebuilds well within the page's wait), and a re-scan that changed nothing
/// leaves them as they were (no rebuild).
#[tokio::test]
async fn pages_follow_new_scans() {
    let (keep, pool) = corpus_db(&[("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache")]).await;
    let store = cachelens::db::Db::from(pool.clone());
    let s = AppState::new(pool.clone(), Config::default());
    // the machine's row on the overview: its versions come from the summary tables
    let row = |page: String| {
        let page = &page[page.find("<h2>Machines</h2>").expect("the machines table")..];
        let from = page.find("href=\"/machines/a100-1\"").expect("a100-1 listed");
        page[from..from + page[from..].find("</tr>").unwrap()].to_string()
    };
    let before = row(ok(&s, "/").await);
    assert!(before.contains("3.4.0") && !before.contains("3.5.1"), "{before}");
    let built: i64 = sqlx::query_scalar("SELECT built_at FROM page_stats_version").fetch_one(&pool).await.unwrap();

    // a re-scan that finds nothing new: the tables are current, nothing is rebuilt
    let dir = keep.last().unwrap().path().to_path_buf();
    cachelens::collect::scan_local(&store, &dir.join("cache/triton-cache"), "a100-1").await.unwrap();
    ok(&s, "/").await;
    let again: i64 = sqlx::query_scalar("SELECT built_at FROM page_stats_version").fetch_one(&pool).await.unwrap();
    assert_eq!(again, built, "a no-change re-scan does not rebuild the summaries");

    // the in-place upgrade: the same path now holds Triton 3.5.1's cache
    std::fs::remove_dir_all(dir.join("cache")).unwrap();
    unpack("a100-upgrade-2-triton-3.5.1", &dir.join("staging2"));
    std::fs::rename(dir.join("staging2/a100-upgrade-2-triton-3.5.1"), dir.join("cache")).unwrap();
    cachelens::collect::scan_local(&store, &dir.join("cache/triton-cache"), "a100-1").await.unwrap();
    let after = row(ok(&s, "/").await);
    // (Triton keeps the old entries: the upgraded cache holds both versions)
    let live: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM entry_rows WHERE removed_at IS NULL").fetch_one(&pool).await.unwrap();
    assert!(live > 45, "{live}");
    assert!(
        after.contains("3.4.0, 3.5.1") && after.contains(&format!("<td class=\"n\">{live}</td>")),
        "the overview shows the upgrade: {after}"
    );
    let m = ok(&s, "/machines/a100-1").await;
    assert!(m.contains("3.5.1"), "the machine page too");
}
