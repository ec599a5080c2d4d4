//! Stored invalidation reports (issue 14 item 2) on real corpus caches: after every kind of
//! change (re-scan with added, removed and replaced entries, an upload replacing a scan, a new
//! scan of either side of a stored pair report) the stored report read through the API equals
//! a fresh computation, and the fresh kernel-by-kernel computation equals the whole-set one
//! ([`cachelens::explain::invalidations`] of every entry loaded). Plus the work limits and
//! the paging of every list.

use crate::common::*;
use cachelens::answers::load::{LIMITS, Limits};
use cachelens::answers::stored::{Spec, fresh};
use cachelens::db::explain::{sides_at, sides_now};
use cachelens::db::scans::ScanRef;
use cachelens::web::{AppState, Config};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// Fields of the report that a stored copy must give back exactly.
const FIELDS: &[&str] = &[
    "old_machine",
    "new_machine",
    "from",
    "to",
    "old_entries",
    "new_entries",
    "kept",
    "invalidated",
    "new",
    "removed",
    "by_cause",
    "identical_code",
    "summary",
    "relocated",
    "relocated_consequence",
];

/// The stored report behind `query` (read through the API, every row) equals a fresh one, and
/// the fresh one equals the whole-set computation. Returns the stored report's id.
async fn same_as_fresh(state: &AppState, query: &str, spec: Spec) -> i64 {
    let pool = state.db.pool();
    let store = cachelens::db::Db::from(pool.clone());
    let api = get_json(state, &format!("/api/v1/invalidations?{query}&limit=1000")).await;
    let want = fresh(&store, &spec, LIMITS).await.unwrap();
    let want = serde_json::to_value(&want).unwrap();
    for f in FIELDS {
        assert_eq!(api[f], want[f], "{query}: field {f} of the stored report differs from a fresh one");
    }
    assert_eq!(api["invalidated_total"], want["invalidated"].as_array().unwrap().len());
    // The kernel-by-kernel computation equals the whole sets loaded and matched at once.
    let (old, new) = match &spec {
        Spec::Scans { from, to } => {
            let old = match from {
                Some(f) => sides_at(&store, f).await.unwrap(),
                None => vec![],
            };
            (old, sides_at(&store, to).await.unwrap())
        }
        Spec::Machines { a, b } => (sides_now(&store, a).await.unwrap(), sides_now(&store, b).await.unwrap()),
    };
    let whole = cachelens::explain::invalidations(&old, &new);
    // (every entry counted, those of kernels counted without being read included)
    assert_eq!(
        (want["old_entries"].as_u64(), want["new_entries"].as_u64()),
        (Some(old.len() as u64), Some(new.len() as u64))
    );
    // The view's summary adds the relocation note to the match's.
    assert!(
        want["summary"].as_str().unwrap().starts_with(&whole.summary),
        "{query}: {} / {}",
        want["summary"],
        whole.summary
    );
    assert_eq!(want["kept"], whole.kept.len());
    let pairs = |v: &Value| -> Vec<(String, String, String, String)> {
        arr(v)
            .iter()
            .map(|i| {
                let s = |k: &str| i[k].as_str().unwrap().to_string();
                (s("old_key"), s("new_key"), s("cause"), s("summary"))
            })
            .collect()
    };
    let whole_pairs: Vec<_> = whole
        .invalidated
        .iter()
        .map(|i| (i.old_key.clone(), i.new_key.clone(), i.cause.as_str().to_string(), i.summary.clone()))
        .collect();
    assert_eq!(pairs(&want["invalidated"]), whole_pairs, "{query}");
    let keys = |v: &Value| arr(v).iter().map(|k| k["key"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(keys(&want["new"]), whole.new.iter().map(|k| k.1.clone()).collect::<Vec<_>>());
    assert_eq!(keys(&want["removed"]), whole.removed.iter().map(|k| k.1.clone()).collect::<Vec<_>>());
    report_id(state).await
}

/// The newest stored report's id.
async fn report_id(state: &AppState) -> i64 {
    sqlx::query_scalar("SELECT MAX(id) FROM inv_reports").fetch_one(state.db.pool()).await.unwrap()
}

async fn latest(state: &AppState, machine: &str) -> (Option<ScanRef>, ScanRef) {
    let (from, to, _) = cachelens::answers::load::pick_scans(state.db.pool(), machine, None, None).await.unwrap();
    (from, to)
}

/// Entry (key) dirs of a cache.
fn key_dirs(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(root).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    v.sort();
    v
}

fn copy_dir(from: &Path, to: &Path) {
    let st = std::process::Command::new("cp").arg("-a").arg(from).arg(to).status().unwrap();
    assert!(st.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_reports_equal_fresh_ones_after_every_change() {
    let (_t1, a) = unpacked("a100-upgrade-1-triton-3.4.0");
    let (_t2, b) = unpacked("a100-upgrade-2-triton-3.5.1");
    let (a, b) = (a.join("triton-cache"), b.join("triton-cache"));
    let (_db, pool) = fresh_db().await;
    let state = AppState::new(pool.clone(), Config::default());
    scan(&pool, &a, "m1").await;
    scan(&pool, &b, "m2").await;
    let pair = || Spec::Machines { a: "m1".into(), b: "m2".into() };
    let first = same_as_fresh(&state, "a=m1&b=m2", pair()).await;
    let inv = get_json(&state, "/api/v1/invalidations?a=m1&b=m2").await;
    assert!(inv["invalidated_total"].as_u64().unwrap() > 0, "{inv}");
    // Read again, nothing changed: the stored report is read, not recomputed.
    let again = get_json(&state, "/api/v1/invalidations?a=m1&b=m2").await;
    assert_eq!(inv, again);
    assert_eq!(report_id(&state).await, first, "not recomputed");
    let (from, to) = latest(&state, "m1").await;
    same_as_fresh(&state, "machine=m1", Spec::Scans { from, to }).await;

    // m1 re-scanned: 3 entries added (from m2's cache), 2 removed, 1 replaced in place (its key
    // dir written anew, as Triton writes: a new dir renamed into place, other contents).
    let (old_dirs, new_dirs) = (key_dirs(&a), key_dirs(&b));
    let added: Vec<&PathBuf> = new_dirs.iter().filter(|d| !a.join(d.file_name().unwrap()).exists()).take(3).collect();
    assert_eq!(added.len(), 3);
    for d in &added {
        copy_dir(d, &a.join(d.file_name().unwrap()));
    }
    for d in &old_dirs[..2] {
        std::fs::remove_dir_all(d).unwrap();
    }
    let replaced = &old_dirs[2];
    let staging = a.join("tmp.replace");
    copy_dir(added[0], &staging);
    std::fs::remove_dir_all(replaced).unwrap();
    std::fs::rename(&staging, replaced).unwrap();
    scan(&pool, &a, "m1").await;
    // The pair report stored before the scan is recomputed, and equals a fresh one.
    let after = same_as_fresh(&state, "a=m1&b=m2", pair()).await;
    assert_ne!(after, first, "m1 changed: the pair report was computed again");
    assert_ne!(get_json(&state, "/api/v1/invalidations?a=m1&b=m2").await, inv);
    let (from, to) = latest(&state, "m1").await;
    let rescan = same_as_fresh(&state, "machine=m1", Spec::Scans { from: from.clone(), to: to.clone() }).await;
    let r = get_json(&state, "/api/v1/invalidations?machine=m1&limit=1000").await;
    // The replaced entry keeps its key (kept); the added and the removed ones pair or not.
    assert_eq!(r["new_total"].as_u64().unwrap() + r["invalidated_total"].as_u64().unwrap(), 3, "{r}");
    // (an added entry may replace an old one still on disk: invalidated, nothing removed)
    assert!(r["removed_total"].as_u64().unwrap() <= 2, "{r}");
    // The same scans named explicitly: the same stored report.
    let q = format!("machine=m1&from={}&to={}", from.as_ref().unwrap().id, to.id);
    assert_eq!(same_as_fresh(&state, &q, Spec::Scans { from: from.clone(), to: to.clone() }).await, rescan);
    let m1_spec = format!("scan:{}:{}", to.id, from.as_ref().unwrap().id);
    let spec_id = |name: String| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT id FROM inv_reports WHERE spec = ?")
                .bind(name)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let m1_id = spec_id(m1_spec.clone()).await;

    // The pair's other side changes: m2 loses two entries.
    for d in &new_dirs[new_dirs.len() - 2..] {
        std::fs::remove_dir_all(d).unwrap();
    }
    scan(&pool, &b, "m2").await;
    same_as_fresh(&state, "a=m1&b=m2", pair()).await;
    same_as_fresh(&state, "a=m2&b=m1", Spec::Machines { a: "m2".into(), b: "m1".into() }).await;
    // m1's scan report did not move (m1 did not change): read, not recomputed.
    get_json(&state, "/api/v1/invalidations?machine=m1").await;
    assert_eq!(spec_id(m1_spec).await, m1_id);

    // A machine running mostly the same jobs: m3 holds m1's cache but one entry gone and one
    // of m2's added. Its kernels with the same keys as m1's are counted, not read
    // (db/keysets.rs); the report still equals the whole sets matched at once.
    let t3 = TempDir::new().unwrap();
    let c = t3.path().join("triton-cache");
    copy_dir(&a, &c);
    let dirs3 = key_dirs(&c);
    std::fs::remove_dir_all(&dirs3[0]).unwrap();
    let extra = new_dirs.iter().find(|d| !c.join(d.file_name().unwrap()).exists()).unwrap();
    copy_dir(extra, &c.join(extra.file_name().unwrap()));
    // And a kernel m1 never compiled (from another corpus): a named kernel with no old entry is
    // matched from its keys alone (nothing to pair it with); still the whole-set match, in m3's
    // first scan report (every kernel so) and in the pair's.
    let (_t4, jit) = unpacked("h100-jit-3.6.0");
    let gelu = key_dirs(&jit.join("inductor/triton/0"))
        .into_iter()
        .find(|d| d.join("triton_poi_fused_gelu_0.json").exists())
        .unwrap();
    copy_dir(&gelu, &c.join(gelu.file_name().unwrap()));
    scan(&pool, &c, "m3").await;
    let (from, to) = latest(&state, "m3").await;
    assert!(from.is_none(), "m3's first scan");
    same_as_fresh(&state, "machine=m3", Spec::Scans { from, to }).await;
    let m3 = || Spec::Machines { a: "m1".into(), b: "m3".into() };
    same_as_fresh(&state, "a=m1&b=m3", m3()).await;
    let news = get_json(&state, "/api/v1/invalidations?a=m1&b=m3&limit=1000").await;
    let gelu_key = gelu.file_name().unwrap().to_str().unwrap();
    assert!(arr(&news["new"]).iter().any(|k| k["key"] == gelu_key), "{news}");
    same_as_fresh(&state, "a=m3&b=m1", Spec::Machines { a: "m3".into(), b: "m1".into() }).await;
    let shared =
        "SELECT COUNT(*) FROM kernel_keysets x JOIN kernel_keysets y ON x.kernel = y.kernel AND x.digest = y.digest
                  WHERE x.machine_id = (SELECT id FROM machines WHERE name = 'm1')
                    AND y.machine_id = (SELECT id FROM machines WHERE name = 'm3')";
    let (n_shared, n_m1) = (
        count(&pool, shared).await,
        count(
            &pool,
            "SELECT COUNT(*) FROM kernel_keysets WHERE machine_id = (SELECT id FROM machines WHERE name = 'm1')",
        )
        .await,
    );
    assert!(n_shared > 0 && n_shared < n_m1, "kernels with equal key sets: {n_shared} of {n_m1}");
    let r = get_json(&state, "/api/v1/invalidations?a=m1&b=m3").await;
    assert!(r["kept"].as_u64().unwrap() > 0, "{r}");
    // m3 changes again (another entry gone): its key sets are recomputed at its new generation
    // and the report is again the whole-set match.
    std::fs::remove_dir_all(&dirs3[1]).unwrap();
    scan(&pool, &c, "m3").await;
    same_as_fresh(&state, "a=m1&b=m3", m3()).await;
    let stale = "SELECT COUNT(*) FROM kernel_keysets_gen k JOIN report_gens g ON g.machine_id = k.machine_id
                 WHERE k.gen <> g.gen AND k.machine_id IN (SELECT id FROM machines WHERE name IN ('m1', 'm3'))";
    assert_eq!(count(&pool, stale).await, 0);
    // Key sets are per kernel: a kernel whose keys differ on the two machines is read in full.
    let r2 = get_json(&state, "/api/v1/invalidations?a=m1&b=m3").await;
    assert!(r2["kept"].as_u64().unwrap() < r["kept"].as_u64().unwrap(), "{r2}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_replacing_a_scan_replaces_the_stored_report() {
    let srv = crate::upload::server(Config::default()).await;
    let state = AppState::new(srv.pool.clone(), Config::default());
    let t = TempDir::new().unwrap();
    let cache = t.path().join("cache");
    let staging = t.path().join("staging");
    unpack("mi300-upgrade-1-triton-3.6.0", &staging);
    std::fs::rename(staging.join("mi300-upgrade-1-triton-3.6.0"), &cache).unwrap();
    let root = cache.join("triton-cache");
    let token = cachelens::db::tokens::create(&srv.db, "up").await.unwrap();
    let retry = cachelens::upload::Retry::new(1);
    cachelens::upload::scan_and_upload(&srv.url, &token, &root, "up", retry).await.unwrap();
    let (from, to) = latest(&state, "up").await;
    same_as_fresh(&state, "machine=up", Spec::Scans { from, to }).await;
    let before = get_json(&state, "/api/v1/invalidations?machine=up").await;
    assert_eq!(before["invalidated_total"], 0, "{before}");
    // The same cache upgraded in place (3.6.0 → 3.9.0) and uploaded again.
    std::fs::remove_dir_all(&cache).unwrap();
    unpack("mi300-upgrade-2-triton-3.9.0", &staging);
    std::fs::rename(staging.join("mi300-upgrade-2-triton-3.9.0"), &cache).unwrap();
    cachelens::upload::scan_and_upload(&srv.url, &token, &root, "up", retry).await.unwrap();
    let (from, to) = latest(&state, "up").await;
    same_as_fresh(&state, "machine=up", Spec::Scans { from, to }).await;
    let after = get_json(&state, "/api/v1/invalidations?machine=up").await;
    assert_eq!(after["by_cause"], json!([{"cause": "compiler", "count": 25}]), "{after}");
    assert!(after["summary"].as_str().unwrap().starts_with("25 of 25 entries recompiled after Triton 3.6.0 → 3.9.0"));
}

async fn upgrades(config: Config) -> (Vec<crate::common::DbDir>, AppState) {
    let (keep, pool) = corpus_db(&[
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("a100-1", "a100-upgrade-2-triton-3.5.1", "triton-cache"),
        ("mi300-1", "mi300-upgrade-1-triton-3.6.0", "triton-cache"),
    ])
    .await;
    (keep, AppState::new(pool, config))
}

#[tokio::test]
async fn work_over_the_limits_ends_with_a_clear_error_and_stores_nothing() {
    for (limits, says) in [
        (Limits { pairs: 0, ..LIMITS }, "over 0 entry pairs to analyse"),
        (Limits { rows: 50, ..LIMITS }, "over the limit of 50 a report may list"),
    ] {
        let (_keep, state) = upgrades(Config { report_limits: limits, ..Config::default() }).await;
        // The scans' reports were stored as the scans landed (under the default limits): as if
        // they had not been, this server computes them under its own.
        sqlx::query("DELETE FROM inv_reports").execute(state.db.pool()).await.unwrap();
        let (st, body) = get(&state, "/api/v1/invalidations?machine=a100-1").await;
        assert_eq!(st, 422, "{body}");
        let err: Value = serde_json::from_str(&body).unwrap();
        let msg = err["error"].as_str().unwrap();
        assert!(msg.starts_with("this report is too big to compute: ") && msg.contains(says), "{msg}");
        let (st, page) = get(&state, "/invalidations?machine=a100-1").await;
        assert_eq!(st, 422);
        assert!(page.contains("this report is too big to compute") && page.contains(says), "{page}");
        assert_eq!(count(state.db.pool(), "SELECT COUNT(*) FROM inv_reports").await, 0);
        // Within the limits the same report answers.
        let fine = AppState::new(state.db.pool().clone(), Config::default());
        let r = get_json(&fine, "/api/v1/invalidations?machine=a100-1").await;
        assert_eq!(r["invalidated_total"], 45);
    }
}

/// A kernel over `group_entries` is paired in pieces of that size, not refused: the report
/// equals the one computed with every kernel read at once, and the whole-set match.
#[tokio::test]
async fn a_kernel_over_the_entries_loaded_at_once_is_paired_in_pieces() {
    let (_keep, state) = upgrades(Config::default()).await;
    let whole = get_json(&state, "/api/v1/invalidations?machine=a100-1&limit=1000").await;
    assert_eq!(whole["invalidated_total"], 45);
    for n in [2, 3, 7] {
        let limits = Limits { group_entries: n, ..LIMITS };
        let small = AppState::new(state.db.pool().clone(), Config { report_limits: limits, ..Config::default() });
        sqlx::query("DELETE FROM inv_reports").execute(small.db.pool()).await.unwrap();
        let (from, to) = latest(&small, "a100-1").await;
        let spec = Spec::Scans { from: from.clone(), to: to.clone() };
        let want = fresh(&small.db, &spec, limits).await.unwrap();
        let want = serde_json::to_value(&want).unwrap();
        for f in FIELDS {
            assert_eq!(whole[f], want[f], "group_entries {n}: field {f} differs");
        }
        same_as_fresh(&small, "machine=a100-1", spec).await;
        // Across backends (CUDA's num_stages default against HIP's: no split by num_stages).
        let pair = Spec::Machines { a: "a100-1".into(), b: "mi300-1".into() };
        same_as_fresh(&small, "a=a100-1&b=mi300-1", pair).await;
    }
}

#[tokio::test]
async fn every_list_is_paged() {
    let (_keep, state) = upgrades(Config::default()).await;
    let all = get_json(&state, "/api/v1/invalidations?machine=a100-1&limit=1000").await;
    let rows = arr(&all["invalidated"]);
    assert_eq!((rows.len(), all["invalidated_total"].as_u64()), (45, Some(45)));
    let page = get_json(&state, "/api/v1/invalidations?machine=a100-1&limit=10&offset=40").await;
    assert_eq!(arr(&page["invalidated"]), &rows[40..].to_vec());
    assert_eq!(
        (page["limit"].as_i64(), page["offset"].as_i64(), page["invalidated_total"].as_u64()),
        (Some(10), Some(40), Some(45))
    );
    let capped = get_json(&state, "/api/v1/invalidations?machine=a100-1&limit=5000").await;
    assert_eq!(capped["limit"], 1000, "the page size is bounded");
    let none = get_json(&state, "/api/v1/invalidations?machine=a100-1&cause=env").await;
    assert_eq!((arr(&none["invalidated"]).len(), none["invalidated_total"].as_u64()), (0, Some(0)));
    let (st, body) = get(&state, "/api/v1/invalidations?machine=a100-1&cause=weather").await;
    assert_eq!(st, 400, "{body}");
    // New and Removed, 20 a page: mi300 → a100 (65 a100 entries replace nothing) and back.
    let r = get_json(&state, "/api/v1/invalidations?a=mi300-1&b=a100-1&limit=1000").await;
    let new_n = r["new_total"].as_u64().unwrap() as usize;
    assert!(new_n > 20, "{new_n}");
    assert_eq!(arr(&r["new"]).len(), new_n);
    let (st, html) = get(&state, "/invalidations?a=mi300-1&b=a100-1&new_page=2").await;
    assert_eq!(st, 200);
    let last = new_n.min(40);
    assert!(html.contains(&format!("entries 21–{last} of {new_n}")), "{html}");
    assert!(html.contains("<details id=\"new\" open>"), "the paged list is open");
    let second: Vec<&str> = arr(&r["new"])[20..last].iter().map(|k| k["key"].as_str().unwrap()).collect();
    assert!(second.iter().all(|k| html.contains(k)), "page 2 holds entries 21–{last}");
    let first_key = arr(&r["new"])[0]["key"].as_str().unwrap();
    assert!(!html.contains(first_key), "page 1's rows are not on page 2");
    let back = get_json(&state, "/api/v1/invalidations?a=a100-1&b=mi300-1&limit=1000").await;
    let removed_n = back["removed_total"].as_u64().unwrap() as usize;
    assert!(removed_n > 20, "{removed_n}");
    let last_page = removed_n.div_ceil(20);
    let (_, html) = get(&state, &format!("/invalidations?a=a100-1&b=mi300-1&removed_page={last_page}")).await;
    let first_row = (last_page - 1) * 20 + 1;
    assert!(html.contains(&format!("entries {first_row}–{removed_n} of {removed_n}</span>")), "{html}");
    assert!(html.contains("class=\"prev\"") && html.contains("<details id=\"removed\" open>"), "{html}");
}

/// A page that would wait for a report's computation answers at once instead (here: the
/// server waits 0 ms), 202 with `Retry-After`, the progress and an htmx element that asks again;
/// asked again, it shows the report once stored, the same report the API waits for.
#[tokio::test]
async fn a_report_being_computed_answers_at_once_and_fills_in() {
    let (_keep, state) = upgrades(Config { report_wait: std::time::Duration::ZERO, ..Config::default() }).await;
    let uri = "/invalidations?a=mi300-1&b=a100-1";
    let (st, part, retry) = get_once(&state, uri, &[("HX-Request", "true")]).await;
    assert_eq!((st, retry), (202, true), "{part}");
    assert!(part.contains("Computing this report") && !part.contains("<header"), "a fragment: {part}");
    assert!(part.contains(r#"hx-get="/invalidations?a=mi300-1&#38;b=a100-1""#), "asks again for itself: {part}");
    assert!(part.contains(r##"hx-target="#inv""##), "{part}");
    // The whole page of another pair's first visit: its heading, the same progress.
    let (st, page, _) = get_once(&state, "/invalidations?a=a100-1&b=mi300-1", &[]).await;
    assert_eq!(st, 202, "{page}");
    let heading = r#"Invalidations from <a class="machine" href="/machines/a100-1">a100-1</a> to <a class="machine" href="/machines/mi300-1">mi300-1</a>"#;
    assert!(page.starts_with("<!doctype html>") && page.contains(heading), "{page}");
    assert!(page.contains(r#"<div id="inv">"#) && page.contains("Computing this report"), "{page}");
    // Asked again (as htmx does), the page fills in with the stored report.
    let (st, done) = get(&state, uri).await;
    assert_eq!(st, 200, "{done}");
    let api = get_json(&state, "/api/v1/invalidations?a=mi300-1&b=a100-1").await;
    let summary = api["summary"].as_str().unwrap();
    assert!(done.contains(&format!(r#"id="summary">{summary}"#)), "{summary}\n{done}");
    same_as_fresh(&state, "a=mi300-1&b=a100-1", Spec::Machines { a: "mi300-1".into(), b: "a100-1".into() }).await;
    // An unknown machine is still a 404 at once, not a computation.
    let (st, _, _) = get_once(&state, "/invalidations?a=mi300-1&b=nobody", &[]).await;
    assert_eq!(st, 404);
}

/// When a scan of one side of a visited pair lands on the server, the pair's report is computed
/// again in the background: current when visited next, without a visit computing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_landing_recomputes_the_visited_pair_reports_of_its_machine() {
    let srv = crate::upload::server(Config::default()).await;
    let state = AppState::new(srv.pool.clone(), Config::default());
    let t = TempDir::new().unwrap();
    let (cache, staging) = (t.path().join("cache"), t.path().join("staging"));
    unpack("mi300-upgrade-1-triton-3.6.0", &staging);
    std::fs::rename(staging.join("mi300-upgrade-1-triton-3.6.0"), &cache).unwrap();
    let root = cache.join("triton-cache");
    let retry = cachelens::upload::Retry::new(1);
    for m in ["ref", "up"] {
        let token = cachelens::db::tokens::create(&srv.db, m).await.unwrap();
        cachelens::upload::scan_and_upload(&srv.url, &token, &root, m, retry).await.unwrap();
    }
    let before = get_json(&state, "/api/v1/invalidations?a=ref&b=up").await;
    assert_eq!((before["invalidated_total"].as_u64(), before["kept"].as_u64()), (Some(0), Some(25)), "{before}");
    // "up" upgraded in place (3.6.0 → 3.9.0) and uploaded: nobody visits the pair meanwhile.
    std::fs::remove_dir_all(&cache).unwrap();
    unpack("mi300-upgrade-2-triton-3.9.0", &staging);
    std::fs::rename(staging.join("mi300-upgrade-2-triton-3.9.0"), &cache).unwrap();
    let token = cachelens::db::tokens::create(&srv.db, "up").await.unwrap();
    cachelens::upload::scan_and_upload(&srv.url, &token, &root, "up", retry).await.unwrap();
    let current = "SELECT COUNT(*) FROM inv_reports r
        WHERE r.spec = 'pair:ref' || char(10) || 'up'
          AND r.old_gen = (SELECT g.gen FROM report_gens g JOIN machines m ON m.id = g.machine_id WHERE m.name = 'ref')
          AND r.new_gen = (SELECT g.gen FROM report_gens g JOIN machines m ON m.id = g.machine_id WHERE m.name = 'up')";
    let t0 = std::time::Instant::now();
    while count(&srv.pool, current).await == 0 {
        assert!(t0.elapsed() < std::time::Duration::from_secs(60), "the pair's report was not computed again");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let pair_id = || async {
        let sql = "SELECT id FROM inv_reports WHERE spec = 'pair:ref' || char(10) || 'up'";
        sqlx::query_scalar::<_, i64>(sql).fetch_one(&srv.pool).await.unwrap()
    };
    let id = pair_id().await;
    // The visit reads that report (not computed again), and it is the fresh computation.
    same_as_fresh(&state, "a=ref&b=up", Spec::Machines { a: "ref".into(), b: "up".into() }).await;
    assert_eq!(pair_id().await, id);
    let after = get_json(&state, "/api/v1/invalidations?a=ref&b=up").await;
    assert_eq!(after["by_cause"], json!([{"cause": "compiler", "count": 25}]), "{after}");
}

/// The API waits for a report being computed unless asked not to: `wait=S` answers 202 with
/// the progress after S seconds, and the report once it is stored.
#[tokio::test]
async fn the_api_answers_202_with_the_progress_when_asked_not_to_wait() {
    let (_keep, state) = upgrades(Config::default()).await;
    let uri = "/api/v1/invalidations?a=mi300-1&b=a100-1";
    let (st, body, retry) = get_once(&state, &format!("{uri}&wait=0"), &[]).await;
    assert_eq!((st, retry), (202, true), "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["computing"], true, "{v}");
    assert!(v["done"].as_u64().unwrap() <= v["total"].as_u64().unwrap() && v["seconds"].is_number(), "{v}");
    // Without `wait`, the answer is the report (the computation under way is joined, not redone).
    let r = get_json(&state, uri).await;
    assert!(r["summary"].as_str().unwrap().contains("recompiled") || r["new_total"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(count(state.db.pool(), "SELECT COUNT(*) FROM inv_reports WHERE spec LIKE 'pair:%'").await, 1);
    let again = get_json(&state, &format!("{uri}&wait=0")).await;
    assert_eq!(again["summary"], r["summary"], "stored: answered at once");
    for bad in ["wait=-1", "wait=1e9", "wait=soon"] {
        let (st, body) = get(&state, &format!("{uri}&{bad}")).await;
        assert_eq!(st, 400, "{bad}: {body}");
    }
}

/// A re-scan that changed nothing is counted, not listed (`db::explain::light_same`): its report
/// equals the whole sets matched at once, relocated entries included; a re-scan that changed
/// something is listed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_change_rescan_report_is_counted_and_equals_the_whole_match() {
    let (_t, dir) = unpacked("a100-upgrade-1-triton-3.4.0");
    let cache = dir.join("triton-cache");
    let (_db, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let state = AppState::new(pool.clone(), Config::default());
    scan(&pool, &cache, "m").await;
    scan(&pool, &cache, "m").await;
    let (from, to) = latest(&state, "m").await;
    let f = from.clone().unwrap();
    let counted = cachelens::db::explain::light_same(&pool, &f, &to).await.unwrap();
    let at_to = sides_at(&store, &to).await.unwrap();
    let relocated = at_to.iter().filter(|s| s.relocated).count();
    assert_eq!(counted, Some((at_to.len(), relocated)), "nothing changed: the same entries, counted");
    assert!(at_to.len() > 20, "{} entries", at_to.len());
    same_as_fresh(&state, "machine=m", Spec::Scans { from: from.clone(), to: to.clone() }).await;
    let r = get_json(&state, "/api/v1/invalidations?machine=m").await;
    assert_eq!(
        (r["kept"].as_u64(), r["relocated"].as_u64()),
        (Some(at_to.len() as u64), Some(relocated as u64)),
        "{r}"
    );
    // The scans the other way round are not a re-scan: listed.
    assert_eq!(cachelens::db::explain::light_same(&pool, &to, &f).await.unwrap(), None);
    // One entry gone: the re-scan's sides are listed and matched again.
    std::fs::remove_dir_all(&key_dirs(&cache)[0]).unwrap();
    scan(&pool, &cache, "m").await;
    let (from, to) = latest(&state, "m").await;
    assert_eq!(cachelens::db::explain::light_same(&pool, from.as_ref().unwrap(), &to).await.unwrap(), None);
    same_as_fresh(&state, "machine=m", Spec::Scans { from, to }).await;
    let r = get_json(&state, "/api/v1/invalidations?machine=m").await;
    assert_eq!(r["removed_total"].as_u64().unwrap() + r["invalidated_total"].as_u64().unwrap(), 1, "{r}");
}

/// A machine pair's report reads each side's entries without a kernel name (of the kinds a report
/// reads: here one whose metadata JSON is corrupt, a partial entry) from the facts of such
/// entries, not from every entry of the machine: the same entries as the machine's rows give, and
/// the report equals the whole sets matched.
#[tokio::test]
async fn a_pair_report_reads_the_entries_without_a_kernel_name() {
    let (_t1, a) = unpacked("a100-upgrade-1-triton-3.4.0");
    let (_t2, b) = unpacked("a100-upgrade-1-triton-3.4.0");
    let (a, b) = (a.join("triton-cache"), b.join("triton-cache"));
    let dir = &key_dirs(&b)[0];
    for f in std::fs::read_dir(dir).unwrap().map(|f| f.unwrap().path()) {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".json") && !name.starts_with("__grp__") {
            std::fs::write(&f, "{not json").unwrap();
        }
    }
    let (_db, pool) = fresh_db().await;
    let state = AppState::new(pool.clone(), Config::default());
    scan(&pool, &a, "m1").await;
    scan(&pool, &b, "m2").await;
    let direct = |m: &'static str| {
        let pool = pool.clone();
        async move {
            let n: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM entry_rows WHERE machine_id = (SELECT id FROM machines WHERE name = ?)
                   AND kernel IS NULL AND kind IN ('kernel', 'binary_only', 'partial') AND removed_at IS NULL",
            )
            .bind(m)
            .fetch_one(&pool)
            .await
            .unwrap();
            n
        }
    };
    assert_eq!((direct("m1").await, direct("m2").await), (0, 1), "one entry of m2 has no kernel name");
    for m in ["m1", "m2"] {
        let n = cachelens::db::keysets::unnamed_count(&pool, m).await.unwrap();
        assert_eq!(n, direct(m).await, "{m}");
    }
    for (x, y) in [("m1", "m2"), ("m2", "m1"), ("m2", "m2")] {
        same_as_fresh(&state, &format!("a={x}&b={y}"), Spec::Machines { a: x.into(), b: y.into() }).await;
    }
}
